"""Approval rules as data: the shipped defaults plus the user's TOML file, validated and compiled.

`load_rules(user_file)` is called once at start-up. Both files use one schema (see README,
"Approval rules"); the user's entries are appended to the defaults, so a user file can add
deny/ask/allow rules, risk patterns, secret paths and safe commands, and can switch off a
default risk pattern by id (`disable_patterns`), but cannot remove the built-in checkers.
The returned `Rules` is immutable (frozen dataclasses, tuples, read-only mappings) and holds
every pattern compiled, so `decide` does no parsing.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

from foundation.calls import OriginKind
from foundation.errors import SettingsError
from policy.matchers import USER_PATTERN_TIMEOUT, Matcher, MatcherSet
from policy.model import Action, Risk
from policy.shell_options import CommandSpec

RISKS: tuple[str, ...] = ("low", "medium", "high", "critical")
DEFAULT_RULES_FILE = "default_rules.toml"

_TOOL_GLOB = re.compile(r"[A-Za-z0-9_.*?\-\[\]!]+")
_RULE = re.compile(r"(?P<tool>[^()\s]+)(?:\((?P<arg>.*)\))?", re.S)
_KEY_FORM = re.compile(r"(?P<key>[A-Za-z_][A-Za-z0-9_]*)=(?P<glob>.*)", re.S)
_PATTERN_ID = re.compile(r"[a-z0-9_]+")


@dataclass(frozen=True, eq=False)
class PermissionRule:
    """One `Tool` / `Tool(glob)` / `Tool(key=glob)` entry of permissions.allow/ask/deny."""

    action: Action
    text: str
    rule_id: str
    tool_re: re.Pattern[str]
    arg_re: re.Pattern[str] | None = None
    key: str | None = None
    caller: OriginKind | None = None  # only for calls from this caller ([permissions.subagent]); None: any


@dataclass(frozen=True, eq=False)
class RiskPattern:
    """A regex searched in every string of a call's arguments (global or for some tools)."""

    rule_id: str
    matcher: Matcher
    risk: Risk
    action: Action
    reason: str
    tools: tuple[re.Pattern[str], ...] = ()  # empty: every tool
    include_read_only: bool = True

    def applies_to(self, tool: str, read_only: bool) -> bool:
        if read_only and not self.include_read_only:
            return False
        return not self.tools or any(t.fullmatch(tool) for t in self.tools)


@dataclass(frozen=True, eq=False)
class ShellRules:
    tools: Mapping[str, str]  # tool name -> argument holding the command line
    commands: Mapping[str, CommandSpec]  # option allow-lists of the safe commands ("ls", "git log")
    safe_commands: tuple[re.Pattern[str], ...]  # extra whole-command globs from a user file
    safe_sources: tuple[str, ...]
    no_path_commands: frozenset[str]
    forbidden_options: Mapping[str, tuple[str, ...]]


@dataclass(frozen=True, eq=False)
class Rules:
    """The effective rules (defaults + user file). Build with `load_rules`; never mutated."""

    permissions: tuple[PermissionRule, ...]
    patterns: tuple[RiskPattern, ...]
    shell: ShellRules
    path_keys: tuple[str, ...]
    write_tools: Mapping[str, tuple[str, ...]]
    ask_write: MatcherSet
    deny_write: MatcherSet
    secret_ask: MatcherSet
    secret_deny: MatcherSet
    sources: tuple[Path, ...] = ()


# -- globs -----------------------------------------------------------------------------------


def glob_to_regex(glob: str) -> str:
    """Claude-Code-style argument glob: `*` matches anything (spaces and `/` too), `?` one
    character, `[abc]` a class; a trailing `:*` means "this prefix as a whole word, then anything"
    (`git status:*` matches `git status` and `git status -s`, not `git statusx`)."""
    suffix = ""
    if glob.endswith(":*"):
        glob, suffix = glob[:-2], r"(?: .*)?"
    out: list[str] = []
    i = 0
    while i < len(glob):
        c = glob[i]
        if c == "*":
            out.append(".*")
        elif c == "?":
            out.append(".")
        elif c == "[" and (end := glob.find("]", i + 2)) > 0:
            body = glob[i + 1 : end]
            body = "^" + body[1:] if body.startswith("!") else body
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end
        else:
            out.append(re.escape(c))
        i += 1
    return "(?s:" + "".join(out) + suffix + ")"


def compile_glob(glob: str) -> re.Pattern[str]:
    return re.compile(glob_to_regex(glob))


# -- loading ---------------------------------------------------------------------------------


def default_rules_text() -> str:
    return resources.files("policy").joinpath(DEFAULT_RULES_FILE).read_text(encoding="utf-8")


def load_rules(user_file: Path | None) -> Rules:
    """Shipped defaults plus `user_file` (TOML). Raises SettingsError naming the file, line and key."""
    shipped = default_rules_text()
    docs: list[_Doc] = [_Doc(_parsed_shipped(shipped), shipped, "default_rules.toml (shipped)", "default", None)]
    if user_file is not None:
        path = Path(user_file)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise SettingsError(
                f"Approval rules file {path} does not exist. Create it, or unset GENERALAGENT_POLICY_FILE."
            ) from None
        except IsADirectoryError:
            raise SettingsError(
                f"Approval rules file {path} is a folder, not a file. Point GENERALAGENT_POLICY_FILE at a TOML "
                "file, or unset it."
            ) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise SettingsError(f"Cannot read approval rules file {path}: {exc}. Fix its permissions/encoding.") from None
        docs.append(_Doc(_parse(text, str(path)), text, str(path), "user", path))
    return _build(docs)


@dataclass
class _Doc:
    data: dict[str, Any]
    text: str
    name: str
    origin: str  # "default" | "user"
    path: Path | None


@cache  # the shipped patterns only (a fixed set): re's own cache holds 512 of every kind
def _shipped_regex(source: str) -> re.Pattern[str]:
    return re.compile(source)


@lru_cache(maxsize=4096)  # the same lists come back at every load of the rules
def _option_words(value: str | tuple[str, ...]) -> frozenset[str] | None:
    """The options a command's entry lists (one string, or a list of strings), or None when a word is not one."""
    words = value.split() if isinstance(value, str) else value
    return frozenset(words) if all(_OPTION.fullmatch(w) for w in words) else None


@lru_cache(maxsize=2)
def _parsed_shipped(text: str) -> dict[str, Any]:
    """The shipped rules' TOML, parsed once (the loader only reads it)."""
    return _parse(text, "default_rules.toml (shipped)")


def _parse(text: str, name: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"{name}: invalid TOML: {exc}. Fix the file (see README, 'Approval rules').") from None


_TOP_KEYS = {"version", "permissions", "tools", "patterns", "disable_patterns", "shell", "files", "secrets"}
_SECTION_KEYS = {
    "permissions": {"allow", "ask", "deny", "subagent"},
    "shell": {"tools", "commands", "safe_commands", "no_path_commands", "forbidden_options"},
    "files": {"path_keys", "write_tools", "ask_write", "deny_write"},
    "secrets": {"ask", "deny"},
}
_COMMAND_KEYS = {"flags", "values", "paths", "optional", "risky", "operands", "numeric", "subcommands", "style"}
_COMMAND_CHOICES = {"operands": ("paths", "text", "none"), "style": ("getopt", "separate", "clap", "find", "words")}
_OPTION = re.compile(r"--?[^\s=]+|[!(),]")
_PATTERN_KEYS = {"id", "pattern", "risk", "action", "reason", "tools", "include_read_only"}
_TOOL_KEYS = {"high_risk", "medium_risk"}


class _Builder:
    """Accumulates validated entries of all documents, then freezes them into Rules."""

    def __init__(self) -> None:
        self.permissions: list[PermissionRule] = []
        self.patterns: list[RiskPattern] = []
        self.disabled: set[str] = set()
        self.shell_tools: dict[str, str] = {}
        self.commands: dict[str, dict[str, Any]] = {}
        self.safe_sources: list[str] = []
        self.no_path: set[str] = set()
        self.forbidden: dict[str, list[str]] = {}
        self.path_keys: list[str] = []
        self.write_tools: dict[str, list[str]] = {}
        self.ask_write: list[Matcher] = []
        self.deny_write: list[Matcher] = []
        self.secret_ask: list[Matcher] = []
        self.secret_deny: list[Matcher] = []


def _build(docs: list[_Doc]) -> Rules:
    builder = _Builder()
    for doc in docs:
        _Loader(builder, doc).load()
    patterns = tuple(p for p in builder.patterns if p.rule_id.split(".", 1)[-1] not in builder.disabled)
    shell = ShellRules(
        tools=MappingProxyType(dict(builder.shell_tools)),
        commands=MappingProxyType({name: _spec(name, entry) for name, entry in builder.commands.items()}),
        safe_commands=tuple(compile_glob(g) for g in builder.safe_sources),
        safe_sources=tuple(builder.safe_sources),
        no_path_commands=frozenset(builder.no_path),
        forbidden_options=MappingProxyType({k: tuple(v) for k, v in builder.forbidden.items()}),
    )
    return Rules(
        permissions=tuple(builder.permissions),
        patterns=patterns,
        shell=shell,
        path_keys=tuple(dict.fromkeys(builder.path_keys)),
        write_tools=MappingProxyType({k: tuple(v) for k, v in builder.write_tools.items()}),
        ask_write=MatcherSet(builder.ask_write),
        deny_write=MatcherSet(builder.deny_write),
        secret_ask=MatcherSet(builder.secret_ask),
        secret_deny=MatcherSet(builder.secret_deny),
        sources=tuple(d.path for d in docs if d.path is not None),
    )


class _Loader:
    """Validates one document and adds its entries to the builder."""

    def __init__(self, builder: _Builder, doc: _Doc) -> None:
        self.b = builder
        self.doc = doc
        self.prefix = doc.origin  # rule ids: "default.deny[0]", "user.deny[2]"

    def fail(self, key: str, problem: str) -> SettingsError:
        line = _locate(self.doc.text, key)
        where = f"{self.doc.name}" + (f" line {line}" if line else "")
        return SettingsError(f"{where}, key {key}: {problem} (see README, 'Approval rules').")

    def load(self) -> None:
        data = self.doc.data
        self._keys(data, _TOP_KEYS, "")
        version = data.get("version", 1)
        if version != 1:
            raise self.fail("version", f"unsupported version {version!r}; use 1")
        for section, allowed in _SECTION_KEYS.items():
            self._keys(self._table(data, section), allowed, section + ".")
        self._shell(self._table(data, "shell"))
        self._permissions(self._table(data, "permissions"))
        self._patterns(data.get("patterns", []))
        self._tools(self._table(data, "tools"))
        self.b.disabled.update(self._strings(data, "disable_patterns", ""))
        self._files(self._table(data, "files"))
        secrets = self._table(data, "secrets")
        self.b.secret_ask += self._regexes(secrets, "ask", "secrets.")
        self.b.secret_deny += self._regexes(secrets, "deny", "secrets.")

    # -- generic validators

    def _keys(self, table: Mapping[str, Any], allowed: set[str], prefix: str) -> None:
        for key in table:
            if key not in allowed:
                raise self.fail(prefix + key, f"unknown key; allowed here: {', '.join(sorted(allowed))}")

    def _table(self, data: Mapping[str, Any], key: str, prefix: str = "") -> dict[str, Any]:
        value = data.get(key, {})
        if not isinstance(value, dict):
            raise self.fail(prefix + key, f"must be a table ([{prefix + key}]), not {type(value).__name__}")
        return value

    def _strings(self, table: Mapping[str, Any], key: str, prefix: str) -> list[str]:
        value = table.get(key, [])
        if not isinstance(value, list):
            raise self.fail(prefix + key, "must be a list of strings")
        for i, item in enumerate(value):
            if not isinstance(item, str) or not item.strip():
                raise self.fail(f"{prefix}{key}[{i}]", f"must be a non-empty string, not {item!r}")
        return [item.strip() for item in value]

    def _regex(self, source: str, key: str) -> Matcher:
        if self.doc.origin == "default":
            try:
                return Matcher(source, _shipped_regex(source), None)
            except re.error as exc:
                raise self.fail(key, f"invalid regular expression {source!r}: {exc}") from None
        import regex

        try:
            return Matcher(source, regex.compile(source, regex.V0), USER_PATTERN_TIMEOUT)
        except regex.error as exc:
            raise self.fail(key, f"invalid regular expression {source!r}: {exc}") from None

    def _regexes(self, table: Mapping[str, Any], key: str, prefix: str) -> list[Matcher]:
        return [self._regex(s, f"{prefix}{key}[{i}]") for i, s in enumerate(self._strings(table, key, prefix))]

    # -- sections

    def _shell(self, shell: Mapping[str, Any]) -> None:
        tools = self._table(shell, "tools", "shell.")
        for name, arg in tools.items():
            if not isinstance(arg, str) or not _TOOL_GLOB.fullmatch(name):
                raise self.fail(f"shell.tools.{name}", 'must map a tool name to its command argument, e.g. run_bash_command = "command"')
            self.b.shell_tools[name] = arg
        commands = self._table(shell, "commands", "shell.")
        for name, entry in commands.items():
            self._command(name, entry)
        self.b.safe_sources += self._strings(shell, "safe_commands", "shell.")
        self.b.no_path.update(self._strings(shell, "no_path_commands", "shell."))
        forbidden = self._table(shell, "forbidden_options", "shell.")
        for command in forbidden:
            opts = self._strings(forbidden, command, "shell.forbidden_options.")
            self.b.forbidden.setdefault(command, []).extend(opts)

    def _command(self, name: str, entry: Any) -> None:
        """One [shell.commands."<name>"] table; a later document adds options to an earlier one's."""
        key = f"shell.commands.{name}"
        if not isinstance(entry, dict) or not re.fullmatch(r"[\w.+\[-]+( [\w.-]+)*", name):
            raise self.fail(key, 'must be a table [shell.commands."<command>"] with flags/values/paths lists')
        self._keys(entry, _COMMAND_KEYS, key + ".")
        merged = self.b.commands.setdefault(name, {"risky": {}})
        for part in ("flags", "values", "paths", "optional"):
            options = self._options(entry, part, key)
            merged[part] = merged.get(part, frozenset()) | options
        risky = entry.get("risky", {})
        if not isinstance(risky, dict) or not all(isinstance(v, str) for v in risky.values()):
            raise self.fail(key + ".risky", 'must map options to what they do, e.g. { "-o" = "writes a file" }')
        merged["risky"].update(risky)
        for flag in ("numeric", "subcommands"):
            if flag in entry:
                if not isinstance(entry[flag], bool):
                    raise self.fail(f"{key}.{flag}", "must be true or false")
                merged[flag] = entry[flag]
        for choice, allowed in _COMMAND_CHOICES.items():
            if choice in entry:
                merged[choice] = self._choice(entry, choice, allowed, allowed[0], key)

    def _options(self, entry: Mapping[str, Any], part: str, key: str) -> frozenset[str]:
        value = entry.get(part, "")
        if isinstance(value, list) and all(isinstance(w, str) for w in value):
            value = tuple(value)
        options = _option_words(value) if isinstance(value, str | tuple) else None
        if options is None:
            raise self.fail(f"{key}.{part}", 'must list options like "-l --all" (a string or a list of strings)')
        return options

    def _permissions(self, perms: Mapping[str, Any]) -> None:
        subagent = self._table(perms, "subagent", "permissions.")
        self._keys(subagent, {"allow", "ask", "deny"}, "permissions.subagent.")
        callers: tuple[tuple[Mapping[str, Any], str, OriginKind | None], ...] = (
            (perms, "", None), (subagent, "subagent.", "subagent"))
        for table, part, caller in callers:
            for action in ("deny", "ask", "allow"):
                for i, text in enumerate(self._strings(table, action, f"permissions.{part}")):
                    key = f"permissions.{part}{action}[{i}]"
                    rule = self._rule(text, action, f"{self.prefix}.{part}{action}[{i}]", key)
                    self.b.permissions.append(replace(rule, caller=caller))

    def _rule(self, text: str, action: Any, rule_id: str, key: str) -> PermissionRule:
        m = _RULE.fullmatch(text)
        if not m or not _TOOL_GLOB.fullmatch(m["tool"]):
            raise self.fail(key, f"bad rule {text!r}; write Tool, Tool(glob) or Tool(key=glob), e.g. 'run_bash_command(git status:*)'")
        tool_re = compile_glob(m["tool"])
        arg = m["arg"]
        if arg is None:
            return PermissionRule(action, text, rule_id, tool_re)
        if not arg.strip():
            raise self.fail(key, f"empty argument glob in {text!r}; use {m['tool']} to match any arguments")
        shellish = any(tool_re.fullmatch(name) for name in self.b.shell_tools)
        km = None if shellish else _KEY_FORM.fullmatch(arg)
        if km:
            return PermissionRule(action, text, rule_id, tool_re, compile_glob(km["glob"]), km["key"])
        return PermissionRule(action, text, rule_id, tool_re, compile_glob(arg.strip()))

    def _patterns(self, entries: Any) -> None:
        if not isinstance(entries, list):
            raise self.fail("patterns", "must be an array of tables ([[patterns]])")
        for i, entry in enumerate(entries):
            key = f"patterns[{i}]"
            if not isinstance(entry, dict):
                raise self.fail(key, "must be a table with id, pattern, risk, action, reason")
            self._keys(entry, _PATTERN_KEYS, key + ".")
            pid = entry.get("id")
            if not isinstance(pid, str) or not _PATTERN_ID.fullmatch(pid):
                raise self.fail(key + ".id", "must be a lowercase id like 'private_key'")
            if any(p.rule_id == f"global.{pid}" for p in self.b.patterns):
                raise self.fail(key + ".id", f"duplicate pattern id {pid!r}; pick another id")
            source = entry.get("pattern")
            if not isinstance(source, str) or not source:
                raise self.fail(key + ".pattern", "must be a non-empty regular expression string")
            tools = tuple(compile_glob(t) for t in self._strings(entry, "tools", key + "."))
            include_ro = entry.get("include_read_only", True)
            if not isinstance(include_ro, bool):
                raise self.fail(key + ".include_read_only", "must be true or false")
            self.b.patterns.append(
                RiskPattern(
                    rule_id=f"global.{pid}",
                    matcher=self._regex(source, key + ".pattern"),
                    risk=self._choice(entry, "risk", RISKS, "high", key),
                    action=self._choice(entry, "action", ("ask", "deny"), "ask", key),
                    reason=self._reason(entry, key, f"matches risk pattern {pid}"),
                    tools=tools,
                    include_read_only=include_ro,
                )
            )

    def _choice(self, entry: Mapping[str, Any], name: str, allowed: tuple[str, ...], default: str, key: str) -> Any:
        value = entry.get(name, default)
        if value not in allowed:
            raise self.fail(f"{key}.{name}", f"must be one of {', '.join(allowed)}, not {value!r}")
        return value

    def _reason(self, entry: Mapping[str, Any], key: str, default: str) -> str:
        value = entry.get("reason", default)
        if not isinstance(value, str) or not value.strip():
            raise self.fail(key + ".reason", "must be a non-empty string")
        return value.strip()

    def _tools(self, tools: Mapping[str, Any]) -> None:
        for name, table in tools.items():
            key = f"tools.{name}"
            if not _TOOL_GLOB.fullmatch(name) or not isinstance(table, dict):
                raise self.fail(key, "must be a table [tools.<tool name>] with high_risk / medium_risk lists")
            self._keys(table, _TOOL_KEYS, key + ".")
            for level in ("high_risk", "medium_risk"):
                for i, source in enumerate(self._strings(table, level, key + ".")):
                    risk: Risk = "high" if level == "high_risk" else "medium"
                    self.b.patterns.append(
                        RiskPattern(
                            rule_id=f"{self.prefix}.tools.{name}.{level}[{i}]",
                            matcher=self._regex(source, f"{key}.{level}[{i}]"),
                            risk=risk,
                            action="ask",
                            reason=f"{name} arguments match {level.replace('_', ' ')} pattern {source!r}",
                            tools=(compile_glob(name),),
                            include_read_only=True,
                        )
                    )

    def _files(self, files: Mapping[str, Any]) -> None:
        self.b.path_keys += self._strings(files, "path_keys", "files.")
        writes = self._table(files, "write_tools", "files.")
        for name in writes:
            if not _TOOL_GLOB.fullmatch(name):
                raise self.fail(f"files.write_tools.{name}", "must be a tool name")
            self.b.write_tools.setdefault(name, []).extend(self._strings(writes, name, "files.write_tools."))
        self.b.ask_write += self._regexes(files, "ask_write", "files.")
        self.b.deny_write += self._regexes(files, "deny_write", "files.")


def _spec(name: str, entry: Mapping[str, Any]) -> CommandSpec:
    return CommandSpec(name=name, flags=entry.get("flags", frozenset()), values=entry.get("values", frozenset()),
                       paths=entry.get("paths", frozenset()), optional=entry.get("optional", frozenset()),
                       risky=MappingProxyType(dict(entry["risky"])), operands=entry.get("operands", "paths"),
                       numeric=entry.get("numeric", False), subcommands=entry.get("subcommands", False),
                       style=entry.get("style", "getopt"))


def _locate(text: str, dotted: str) -> int | None:
    """Best-effort line number (1-based) of a dotted key like `permissions.allow[2]` in TOML text."""
    lines = text.splitlines()
    start = 0
    parts = [p for p in re.split(r"\.|\[(\d+)\]", dotted) if p]
    line_no: int | None = None
    for idx, part in enumerate(parts):
        if part.isdigit():
            nxt = _array_table(lines, parts[idx - 1], int(part)) if idx > 0 else None
            if nxt is not None:
                start, line_no = nxt, nxt + 1
            continue
        found = _find_key(lines, part, start)
        if found is None:
            return line_no
        start, line_no = found, found + 1
    return line_no


def _find_key(lines: list[str], key: str, start: int) -> int | None:
    pattern = re.compile(r'^\s*(\[\[?\s*)?([\w.\-"]*\.)?"?' + re.escape(key) + r'"?\s*(=|\]|\.)')
    return next((i for i in range(start, len(lines)) if pattern.search(lines[i])), None)


def _array_table(lines: list[str], name: str, index: int) -> int | None:
    pattern = re.compile(r"^\s*\[\[\s*" + re.escape(name) + r"\s*\]\]")
    hits = [i for i, line in enumerate(lines) if pattern.search(line)]
    return hits[index] if index < len(hits) else None


def describe(rules: Rules) -> dict[str, Any]:
    """A JSON-friendly view of the effective rules (for `policy show`)."""
    show: Callable[[MatcherSet], list[str]] = lambda ms: list(ms.sources)  # noqa: E731
    return {
        "rules_files": [str(p) for p in rules.sources],
        "permissions": [{"id": r.rule_id, "action": r.action, "rule": r.text} | ({"caller": r.caller} if r.caller else {})
                        for r in rules.permissions],
        "patterns": [
            {"id": p.rule_id, "pattern": p.matcher.source, "risk": p.risk, "action": p.action, "reason": p.reason}
            for p in rules.patterns
        ],
        "shell": {
            "tools": dict(rules.shell.tools),
            "commands": {name: _describe_spec(spec) for name, spec in rules.shell.commands.items()},
            "safe_commands": list(rules.shell.safe_sources),
            "forbidden_options": {k: list(v) for k, v in rules.shell.forbidden_options.items()},
        },
        "files_rules": {
            "path_keys": list(rules.path_keys),
            "write_tools": {k: list(v) for k, v in rules.write_tools.items()},
            "ask_write": show(rules.ask_write),
            "deny_write": show(rules.deny_write),
        },
        "secrets": {"ask": show(rules.secret_ask), "deny": show(rules.secret_deny)},
    }


def _describe_spec(spec: CommandSpec) -> dict[str, Any]:
    view: dict[str, Any] = {part: sorted(getattr(spec, part)) for part in ("flags", "values", "paths", "optional")
                            if getattr(spec, part)}
    return view | {"operands": spec.operands} | ({"subcommands": True} if spec.subcommands else {})
