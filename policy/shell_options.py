"""Option allow-lists for "safe" shell commands, read the way the command itself reads its options.

A command is auto-allowed only when every option it is given is on its allow-list (`CommandSpec`):
flags without a value, options with a value (plain text, or a path that is then checked like any
other path), long options with an optional `=value`. Options are parsed like GNU getopt_long:

- short flags bundle (`-la`); a short option that takes a value takes the rest of its word
  (`-f/abs/path`, `-k2`) or else the next word;
- long options take `--opt=value` or `--opt value`, and may be abbreviated to a unique prefix
  (`--compr` is `--compress-program`); a prefix that is ambiguous or unknown is not allowed;
- options may follow operands (GNU permutes), and `--` ends the options.

A command with its own reader says so (`style`): "separate" is tree's: a value never shares its option's
word, and each value option of a bundle takes the next unused word in turn (`tree -Lo 1 FILE` is `-L 1
-o FILE`); long options take `=value` or the next word and are never abbreviated. "clap" is ripgrep's (Rust's
clap): getopt's, but an attached short value drops one leading `=` (`rg -f=/etc/x` reads /etc/x), and long
options are never abbreviated.

Anything not on the list makes the command "not safe" (it asks); the result names the option and,
when a risky option is known (`risky`), what it does. Pure functions, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

Operands = Literal["paths", "text", "none"]
Style = Literal["getopt", "separate", "clap", "find", "words"]
_NUMERIC = re.compile(r"-\d+")


@dataclass(frozen=True)
class CommandSpec:
    """The allow-list of one command (or sub-command such as "git log")."""

    name: str
    flags: frozenset[str] = frozenset()  # options without a value: "-l", "--all"
    values: frozenset[str] = frozenset()  # options with a value that is not a path: "-n", "--lines"
    paths: frozenset[str] = frozenset()  # options whose value is a path: "-f", "--exclude-from"
    optional: frozenset[str] = frozenset()  # options with an optional attached value: "--color[=WHEN]"
    risky: Mapping[str, str] = field(default_factory=dict)  # known options that are not allowed -> why (also
    # listed in values/paths when it takes a value: read that way, its path still checked, then refused)
    operands: Operands = "paths"  # what non-option words are: paths (checked), text, or not allowed
    numeric: bool = False  # "-5" is allowed (head -5, git log -3)
    subcommands: bool = False  # the first operand names a sub-spec ("git" -> "git status")
    style: Style = "getopt"  # "separate": tree's; "clap": ripgrep's; "find": predicates; "words": no options

    def known(self) -> frozenset[str]:
        return self._known

    @cached_property
    def _known(self) -> frozenset[str]:  # every option of the spec, built once (looked up per option word)
        return self.flags | self.values | self.paths | self.optional | frozenset(self.risky)


@dataclass
class Parsed:
    """The outcome of reading one argv against a spec."""

    ok: bool = True
    note: str = ""  # why not, when not ok ("--compr is --compress-program: runs a program")
    operands: list[str] = field(default_factory=list)  # words to check as paths (spec.operands == "paths")
    paths: list[str] = field(default_factory=list)  # values of path options
    spec: CommandSpec | None = None  # the (sub-)command spec that was applied last

    def refuse(self, note: str) -> Parsed:
        self.ok, self.note = False, self.note or note
        return self


def check(name: str, args: list[str], specs: Mapping[str, CommandSpec]) -> Parsed:
    """Read `args` of command `name` against its allow-list (and its sub-commands' lists)."""
    spec = specs.get(name)
    if spec is None:
        return Parsed(ok=False, note=f"{name} is not on the allow-list")
    out = Parsed(spec=spec)
    rest = _read(spec, args, out)
    while out.ok and rest is not None and spec.subcommands:
        sub = specs.get(f"{spec.name} {rest[0]}")
        if sub is None:
            return out.refuse(f"`{spec.name} {rest[0]}` is not on the allow-list")
        spec = out.spec = sub
        rest = _read(sub, rest[1:], out)
    if out.ok and rest is None and spec.subcommands and " " in spec.name:  # `git stash` alone is `git stash push`
        return out.refuse(f"`{spec.name}` without a listed sub-command is not on the allow-list")
    return out


def _read(spec: CommandSpec, args: list[str], out: Parsed) -> list[str] | None:
    """Read options and operands; for a spec with sub-commands, return the words from the first operand."""
    if spec.style == "words":
        _operands(spec, [a for a in args if not a.startswith("-")], out)
        return None
    if spec.style == "find":
        _read_find(spec, args, out)
        return None
    i, operands = 0, []
    while i < len(args) and out.ok:
        word = args[i]
        if word == "--":
            operands += args[i + 1 :]
            break
        if not word.startswith("-") or word == "-":
            if spec.subcommands:
                return args[i:]
            operands.append(word)
            i += 1
            continue
        i = _option(spec, args, i, out)
    if out.ok:
        _operands(spec, operands, out)
    return None


def _operands(spec: CommandSpec, operands: list[str], out: Parsed) -> None:
    if spec.operands == "none" and operands:
        out.refuse(f"{spec.name} takes no operands here ({operands[0]!r})")
    elif spec.operands == "paths":
        out.operands += operands


def _option(spec: CommandSpec, args: list[str], i: int, out: Parsed) -> int:
    """Read the option at args[i]; return the index of the next word."""
    word = args[i]
    if word.startswith("--"):
        return _long(spec, args, i, out)
    if spec.numeric and _NUMERIC.fullmatch(word):
        return i + 1
    if spec.style == "separate":
        return _separate_bundle(spec, args, i, out)
    for j in range(1, len(word)):
        opt = "-" + word[j]
        attached = word[j + 1 :]
        if opt in spec.flags:
            continue
        if opt in spec.optional:
            return i + 1
        if opt in spec.values or opt in spec.paths:
            if attached:
                _value(spec, opt, attached[1:] if spec.style == "clap" and attached[0] == "=" else attached, out)
                return i + 1
            return _next_value(spec, opt, args, i, out)
        out.refuse(_unknown(spec, opt, word))
        return i + 1
    return i + 1


def _separate_bundle(spec: CommandSpec, args: list[str], i: int, out: Parsed) -> int:
    """tree's short options: every value option of the bundle takes the next unused word, in turn."""
    nxt = i + 1
    for letter in args[i][1:]:
        opt = "-" + letter
        if opt in spec.flags:
            continue
        if opt not in spec.values and opt not in spec.paths:
            out.refuse(_unknown(spec, opt, args[i]))
            return nxt
        if nxt >= len(args):
            out.refuse(f"{spec.name} {opt} needs a value")
            return nxt
        _value(spec, opt, args[nxt], out)
        nxt += 1
    return nxt


def _long(spec: CommandSpec, args: list[str], i: int, out: Parsed) -> int:
    word = args[i]
    given, eq, value = word.partition("=")
    opt = resolve_long(spec, given)
    if opt is None:
        out.refuse(_unknown(spec, given, word))
        return i + 1
    if opt in spec.flags:
        if eq:
            out.refuse(f"{spec.name} {opt} takes no value")
        return i + 1
    if opt in spec.optional:
        return i + 1
    if opt in spec.values or opt in spec.paths:
        if eq:
            _value(spec, opt, value, out)
            return i + 1
        return _next_value(spec, opt, args, i, out)
    out.refuse(_risky_note(spec, opt, given))
    return i + 1


def leading(spec: CommandSpec, args: list[str]) -> tuple[Parsed, int]:
    """Read the options in front of the first operand, as a wrapper reads its own (`timeout -s KILL 5 cmd`,
    `time -o f cmd`: getopt stopping at the first non-option word). Returns the reading and the index of
    the first operand (the wrapped command, or the wrapper's own operand such as timeout's duration)."""
    out = Parsed(spec=spec)
    i = 0
    while i < len(args) and out.ok:
        word = args[i]
        if word == "--":
            return out, i + 1
        if not word.startswith("-") or word == "-":
            return out, i
        i = _option(spec, args, i, out)
    return out, i


def resolve_long(spec: CommandSpec, given: str) -> str | None:
    """The long option `given` stands for: an exact name, else the one option it is a prefix of
    (GNU getopt_long abbreviations); None when unknown or ambiguous."""
    known = spec.known()
    if given in known:
        return given
    if spec.style in ("separate", "clap"):  # tree, ripgrep: exact names only
        return None
    matches = [o for o in known if o.startswith("--") and o.startswith(given) and len(given) > 2]
    return matches[0] if len(matches) == 1 else None


def _next_value(spec: CommandSpec, opt: str, args: list[str], i: int, out: Parsed) -> int:
    if i + 1 >= len(args):
        out.refuse(f"{spec.name} {opt} needs a value")
        return i + 1
    _value(spec, opt, args[i + 1], out)
    return i + 2


def _value(spec: CommandSpec, opt: str, value: str, out: Parsed) -> None:
    if opt in spec.paths:
        out.paths.append(value)
    if opt in spec.risky:  # a risky option that takes a value (its path is still checked for secrets)
        out.refuse(_risky_note(spec, opt, opt))


def _unknown(spec: CommandSpec, opt: str, word: str) -> str:
    if opt in spec.risky:
        return _risky_note(spec, opt, opt)
    if opt.startswith("--"):
        prefixed = sorted(o for o in spec.known() if o.startswith(opt))
        if len(prefixed) > 1:
            return f"{spec.name} {opt} is ambiguous ({', '.join(prefixed[:4])})"
    return f"{spec.name} option {word!r} is not on the allow-list"


def _risky_note(spec: CommandSpec, opt: str, given: str) -> str:
    why = spec.risky.get(opt, "not on the allow-list")
    shown = opt if given == opt else f"{given} (= {opt})"
    return f"{spec.name} {shown}: {why}"


# -- find ------------------------------------------------------------------------------------


def _read_find(spec: CommandSpec, args: list[str], out: Parsed) -> None:
    """find [-H|-L|-P] [start ...] [expression]: start points are paths; every predicate must be
    allowed (flags: no value; values/paths: one value word)."""
    i = 0
    while i < len(args) and args[i] in ("-H", "-L", "-P") and args[i] in spec.flags:
        i += 1
    while i < len(args) and not _starts_expression(args[i]):
        out.operands.append(args[i])
        i += 1
    while i < len(args) and out.ok:
        word = args[i]
        if word in spec.flags:
            i += 1
        elif word in spec.values or word in spec.paths:
            if i + 1 >= len(args):
                out.refuse(f"find {word} needs a value")
                break
            _value(spec, word, args[i + 1], out)
            i += 2
        else:
            out.refuse(_risky_note(spec, word, word) if word in spec.risky
                       else f"find {word!r} is not on the allow-list")


def _starts_expression(word: str) -> bool:
    return (word.startswith("-") and word != "-") or word in ("(", "!", ")", ",")


__all__ = ["CommandSpec", "Parsed", "check", "leading", "resolve_long"]
