"""`decide(tool, args, context)`: the one pure approval decision, applied at the dispatch point.

Four layers produce candidate decisions; across all of them the first deny wins, else the
first ask, else the first allow; with no match at all the call asks.

1. Built-in checkers (code): the shell-command analyser (`bash.py`) for shell tools, and path
   checks for every tool (writes outside the roots or to protected files, secret reads).
2. Global risk patterns over every string in the arguments (`rules.patterns`, ids `global.*`).
3. Per-tool rules from the config: permissions allow/ask/deny with argument globs (`[permissions.subagent]`:
   for sub-agents' calls only), and per-tool high/medium risk patterns. The shipped asks are a lower tier:
   an allow rule of the user's that names the call lifts them (other servers' tools, a sub-agent's web).
4. Defaults: read-only tools and the shell's safe commands are allowed; anything else asks.

Around the layers, the guards over the call as a whole (once the gate's own rules): first, a state-changing call that
could approve a pending call or names the approval state is refused (no rule lifts that); then a call whose
path arguments lead through symlinks is decided as what they lead to as well (the stricter wins); last,
enabling tools that change things asks.

`decide` never raises and does no I/O of its own (what it needs of the file system comes from the edge
in the context: git tops, resolved path arguments, live approval ids, and for shell commands a resolver of
symlinks); an internal failure or an input
it cannot analyse yields "ask".
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic_core import to_jsonable_python

from policy import bash, paths, risk
from policy.context import PolicyContext
from policy.model import Decision, Risk, ask, deny
from policy.rules import PermissionRule

__all__ = ["Decision", "PolicyContext", "decide"]

PRIMARY_KEYS = ("command", "path", "file_path", "directory", "pattern", "query", "url", "name")


def decide(tool: str, args: Mapping[str, Any], context: PolicyContext) -> Decision:
    """The approval decision for one call. Pure and total: never raises, never does I/O."""
    try:
        return _decide_call(tool, args, context)
    except Exception as exc:  # noqa: BLE001 - totality: an engine bug must not let a call through
        return ask(f"The policy could not evaluate this call ({type(exc).__name__}); asking to be safe.",
                   "high", "engine.error")


def _decide_call(tool: str, args: Mapping[str, Any], ctx: PolicyContext) -> Decision:
    """The guards around the layers (below): a call that could approve something or names the approval
    state is refused first; a call through symlinks is decided as what they lead to as well; enabling tools
    that change things asks."""
    refused = _refusal(args, ctx)
    if refused is not None:
        return refused
    found = _decide(tool, args, ctx)
    if ctx.resolved_args is not None and found.action != "deny":
        found = _through_links(args, ctx, found, _decide(tool, ctx.resolved_args, ctx))
    return _escalated(tool, args, ctx, found)


# -- the guards over the call as a whole (once the gate's own rules) ---------------------------------

ENABLE_TOOLS = "enable_tools"  # the tool that turns on tools of a higher tier (its `names` argument)
ACTION_RANK = {"allow": 0, "ask": 1, "deny": 2}
RISK_RANK = {"low": 0, "medium": 1, "high": 2, "critical": 3}
SELF_APPROVAL = re.compile(r"\bapprove\b.{0,120}?\bap-[a-z2-9]{6}\b|/approvals/ap-|\bapprove\s+--list",
                           re.IGNORECASE | re.DOTALL)


def call_text(args: Any) -> str:
    """The call's arguments as one text (the approvals store's canonical JSON: sorted keys, UTF-8 kept)."""
    return json.dumps(to_jsonable_python(args), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _refusal(args: Mapping[str, Any], ctx: PolicyContext) -> Decision | None:
    """A deny for a state-changing call that could approve something or names the approval state, else None.
    Read-only tools cannot approve or change anything, so they are not checked."""
    if ctx.read_only:
        return None
    text = call_text(args)
    if SELF_APPROVAL.search(text) or (ctx.destructive and any(i in text for i in ctx.live_approval_ids)):
        return deny("Calls that mention approval ids or the approval command/page are refused: only the human "
                    "approves, outside the assistant.", "high", "approval.self-approval")
    if any(str(p) in text for p in ctx.protected_paths) or any(n in text for n in ctx.protected_names):
        return deny("The approval rules, approvals and audit log are off limits to the assistant.",
                    "critical", "approval.protected-state")
    return None


def _through_links(args: Mapping[str, Any], ctx: PolicyContext, found: Decision, linked: Decision) -> Decision:
    """`found` (the call as written) or `linked` (its paths resolved: `ctx.resolved_args`), the stricter."""
    if severity(linked) <= severity(found) or ctx.resolved_args is None:
        return found
    verb = "refuses" if linked.action == "deny" else "asks for"
    changed = _changed_paths(args, ctx.resolved_args)
    targets = ", ".join(repr(os.path.relpath(p, ctx.roots[0]) if ctx.roots else p) for p in changed)
    return Decision(linked.action, f"A path in this call leads through a symlink to {targets} (in the "
                    f"workspace), which the policy {verb} (rule {linked.rule_id}).", linked.risk, linked.rule_id)


def _escalated(tool: str, args: Mapping[str, Any], ctx: PolicyContext, found: Decision) -> Decision:
    """Enabling tools that can change things asks even when a rule allows `enable_tools`."""
    if tool == ENABLE_TOOLS and found.action == "allow":
        names = args.get("names") or []
        risky = sorted(n for n in names if n in ctx.changing_tools)
        if risky:
            return ask(f"Enabling tools that can change things: {', '.join(risky)}.", "medium",
                       "tiers.enable-dangerous")
    return found


def _changed_paths(args: Mapping[str, Any], resolved: Mapping[str, Any]) -> list[str]:
    """The resolved paths that differ from what the call wrote."""
    out: list[str] = []
    for key, value in resolved.items():
        before = args.get(key)
        pairs = zip(value, before, strict=False) if isinstance(value, list) and isinstance(before, list | tuple) \
            else [(value, before)]
        out += [str(new) for new, old in pairs if isinstance(new, str) and new != old]
    return out


def severity(decision: Decision) -> tuple[int, int]:
    return ACTION_RANK.get(decision.action, 1), RISK_RANK.get(decision.risk, 2)


@dataclass(frozen=True)
class _Call:
    tool: str
    args: Mapping[str, Any]
    ctx: PolicyContext
    roots: tuple[str, ...]
    protected: tuple[str, ...]


def _decide(tool: str, args: Mapping[str, Any], ctx: PolicyContext) -> Decision:
    if not isinstance(tool, str) or not isinstance(args, Mapping):
        return ask("Malformed call (tool name or arguments of the wrong type).", "high", "engine.bad_call")
    call = _Call(tool, args, ctx, *_places(tuple(ctx.roots), tuple(ctx.protected_paths)))
    strings, complete = risk.argument_strings(args)
    matches: list[Decision] = []
    report = _shell_report(call, matches)
    matches += _path_checks(call)
    if not complete:
        matches.append(ask("The arguments are too deeply nested or too large to check.", "high", "engine.args_too_complex"))
    matches += risk.pattern_matches(ctx.rules, tool, ctx.read_only, strings)
    matches += _permission_matches(call, report)
    matches = _user_overrides(call, report, matches)
    for action in ("deny", "ask"):
        found = next((m for m in matches if m.action == action), None)
        if found is not None:
            return found
    return _allow(call, report)


@functools.lru_cache(maxsize=64)
def _places(roots: tuple[Path, ...], protected: tuple[Path, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The roots and protected paths as normalised strings (the same few for every call: kept)."""
    return paths.root_strings(roots), tuple(p for p in (paths.normalize(str(q), None) for q in protected) if p)


# -- layer 1 ---------------------------------------------------------------------------------


def _shell_report(call: _Call, matches: list[Decision]) -> bash.Report | None:
    key = call.ctx.rules.shell.tools.get(call.tool)
    if key is None:
        return None
    command = call.args.get(key)
    if not isinstance(command, str) or not command.strip():
        matches.append(ask(f"{call.tool} needs a non-empty string argument {key!r}.", "medium", "bash.no_command"))
        return None
    tops = tuple((os.path.normpath(root), os.path.normpath(top)) for root, top in call.ctx.git_tops)
    env = bash.Env(rules=call.ctx.rules, roots=call.roots, protected=call.protected, git_tops=tops,
                   real_path=call.ctx.real_path, repo_programs=call.ctx.repo_programs)
    report = bash.analyze(command, env)
    matches += report.findings
    return report


def _path_values(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list | tuple):
        yield from (v for v in value if isinstance(v, str))


def _path_checks(call: _Call) -> list[Decision]:
    rules = call.ctx.rules
    out: list[Decision] = []
    cwd = call.roots[0]
    for key in rules.write_tools.get(call.tool, ()):
        for text in _path_values(call.args.get(key)):
            out += _write_check(call, key, text, paths.normalize(text, cwd, shell=False))
    writes = rules.write_tools.get(call.tool, ())
    for key in rules.path_keys:
        for text in _path_values(call.args.get(key)):
            found = paths.secret_check(rules, text, paths.normalize(text, cwd, shell=False), call.roots, "files")
            if found and found.action == "deny" and key in writes:  # writing a .env inside the roots: ask
                found = ask(f"{text!r} is where secrets are kept (keys, credentials, .env).", "high",
                            "files.secret_write")
            if found:
                out.append(found)
    return out


def _write_check(call: _Call, key: str, text: str, norm: str | None) -> list[Decision]:
    if "\x00" in text:
        return [deny(f"{key} contains a NUL byte.", "high", "files.bad_path")]
    if paths.matches_any(call.ctx.rules.deny_write, text, norm, call.roots):
        return [deny(f"Writing {text!r} is not allowed (shell start-up file or SSH authorized_keys).", "critical",
                     "files.startup_write")]
    if norm is not None and paths.is_protected(norm, call.protected):
        return [deny(f"{text!r} is a protected file (approval rules, audit log); agents cannot change it.",
                     "critical", "files.protected")]
    if norm is None or not paths.inside_roots(norm, call.roots):
        return [deny(f"{call.tool} would write outside the workspace roots: {text!r}.", "high",
                     "files.write_outside_roots")]
    hit = paths.matches_any(call.ctx.rules.ask_write, text, norm, call.roots)
    if hit:
        return [ask(f"Writing {text!r} can make later commands run code (git/shell/tool config).", "high",
                    "files.exec_config")]
    return []


# -- the user's explicit allow rules lift the shipped deny-by-default rules -------------------------

OVERRIDABLE = frozenset({
    "bash.secret_denied", "files.secret_denied", "bash.exfiltration", "bash.startup_write", "files.startup_write",
    "bash.privileged_container", "bash.root_shell", "bash.kill_all", "bash.download_exec",
})
"""Denied by default because no one should have to approve them in passing, but a user may want one:
an allow rule in the user's own rules file whose glob names the call lifts these (never the others:
protected files, whole-system deletes, disk writes, fork bombs, obfuscated commands)."""


def _user_overrides(call: _Call, report: bash.Report | None, matches: list[Decision]) -> list[Decision]:
    if not any(m.action == "deny" and m.rule_id in OVERRIDABLE for m in matches):
        return matches
    rules = [r for r in call.ctx.rules.permissions
             if r.action == "allow" and r.rule_id.startswith("user.") and r.arg_re is not None
             and _applies(r, call)]
    if not any(_names_call(call, rule, report) for rule in rules):
        return matches
    return [m for m in matches if not (m.action == "deny" and m.rule_id in OVERRIDABLE)]


def _names_call(call: _Call, rule: PermissionRule, report: bash.Report | None) -> bool:
    """The rule names the call: the whole command line, or every value as resolved (keyed or not, like an
    allow rule: `read_file(docs/*)` does not name `docs/../.env`)."""
    assert rule.arg_re is not None
    if report is not None:
        return bool(rule.arg_re.fullmatch(report.command.strip()))
    texts = _allow_texts(call, rule)
    return bool(texts) and all(any(rule.arg_re.fullmatch(t) for t in group) for group in texts)


# -- layer 3 ---------------------------------------------------------------------------------


def _permission_matches(call: _Call, report: bash.Report | None) -> list[Decision]:
    out: list[Decision] = []
    for rule in call.ctx.rules.permissions:
        if rule.action == "allow" or not _applies(rule, call):
            continue
        if rule.arg_re is None or any(rule.arg_re.fullmatch(t) for t in _rule_texts(call, rule, report)):
            if rule.action == "ask" and _shipped(rule) and _user_allows(call, report):
                continue  # the shipped asks are a lower tier: the user's allow rule wins
            risk: Risk = "high" if rule.action == "deny" else "medium"
            out.append(Decision(rule.action, _rule_reason(rule), risk, rule.rule_id))
    return out


def _applies(rule: PermissionRule, call: _Call) -> bool:
    """The rule names the call's tool, and its caller when it has one ([permissions.subagent])."""
    return bool(rule.tool_re.fullmatch(call.tool)) and rule.caller in (None, call.ctx.origin)


def _shipped(rule: PermissionRule) -> bool:
    """A rule of the shipped defaults: its ask is a lower tier, lifted by a user's allow rule naming the call."""
    return rule.rule_id.startswith("default.")


def _rule_reason(rule: PermissionRule) -> str:
    if not _shipped(rule) or rule.action != "ask":
        return f"Matches the rule {rule.text!r}."
    who = " (for sub-agents' calls)" if rule.caller == "subagent" else ""
    return f"Matches the shipped rule {rule.text!r}{who}; an allow rule in your rules file that names the call lifts it."


def _user_allows(call: _Call, report: bash.Report | None) -> bool:
    """An allow rule of the user's own file names this call (any arguments, or its glob names them all)."""
    return any(r.action == "allow" and r.rule_id.startswith("user.") and _applies(r, call)
               and (r.arg_re is None or _names_call(call, r, report)) for r in call.ctx.rules.permissions)


def _rule_texts(call: _Call, rule: PermissionRule, report: bash.Report | None) -> list[str]:
    """The texts an argument glob is matched against (any of them matching counts)."""
    if report is not None and rule.key is None:
        return [report.command.strip(), *report.all_texts()]
    key, value = (rule.key, call.args.get(rule.key)) if rule.key else _primary(call.args)
    texts: list[str] = []
    for item in value if isinstance(value, list | tuple) else [value]:
        texts += _value_texts(call, item, _is_path_key(call, key))
    return texts


def _primary(args: Mapping[str, Any]) -> tuple[str | None, Any]:
    for key in PRIMARY_KEYS:
        if key in args:
            return key, args[key]
    return None, _compact(args)


def _is_path_key(call: _Call, key: str | None) -> bool:
    return key is not None and (key in call.ctx.rules.path_keys or key in call.ctx.rules.write_tools.get(call.tool, ()))


def _compact(value: Any) -> str:
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(value)


def _value_texts(call: _Call, value: Any, is_path: bool, for_allow: bool = False) -> list[str]:
    """A value as written plus, for paths, its resolved and root-relative forms. Allow rules see
    only the resolved forms, so `write_file(path=notes/*)` does not allow `notes/../src/x`."""
    if not isinstance(value, str):
        return [_compact(value)]
    if not is_path:
        return [value]
    norm = paths.normalize(value, call.roots[0], shell=False)
    if norm is None:
        return [] if for_allow and "\x00" in value else [value]
    resolved = [norm, *(norm[len(r.rstrip("/")) + 1 :] for r in call.roots if norm != r and paths.within(norm, r))]
    return resolved if for_allow else [value, *resolved]


# -- allow (layers 3 and 4) --------------------------------------------------------------------


def _allow(call: _Call, report: bash.Report | None) -> Decision:
    allows = [r for r in call.ctx.rules.permissions if r.action == "allow" and _applies(r, call)]
    if report is not None:
        return _allow_shell(report, allows, call.ctx.sandboxed)
    for rule in allows:
        if rule.arg_re is None:
            return Decision("allow", f"Allowed by the rule {rule.text!r}.", "low", rule.rule_id)
        texts = _allow_texts(call, rule)
        if texts and all(any(rule.arg_re.fullmatch(t) for t in group) for group in texts):
            return Decision("allow", f"Allowed by the rule {rule.text!r}.", "low", rule.rule_id)
    if call.ctx.read_only:
        return Decision("allow", f"{call.tool} is read-only.", "low", "default.read_only")
    return ask(f"{call.tool} changes state and no rule allows it; asking.", "medium", "default.ask")


def _allow_texts(call: _Call, rule: PermissionRule) -> list[list[str]]:
    """One group of candidate texts per value; an allow rule must match every value."""
    if rule.key and rule.key not in call.args:
        return []
    key, value = (rule.key, call.args.get(rule.key)) if rule.key else _primary(call.args)
    items = list(value) if isinstance(value, list | tuple) else [value]
    return [_value_texts(call, item, _is_path_key(call, key), for_allow=True) for item in items]


def _allow_shell(report: bash.Report, allows: list[PermissionRule], sandboxed: bool) -> Decision:
    if not sandboxed:
        return ask("No OS sandbox is available, so every shell command needs approval.", "medium",
                   "shell.unsandboxed")
    used: list[str] = []
    for segment in report.segments:
        rule = _segment_rule(segment, allows)
        if rule is not None:
            used.append(rule.rule_id)
        elif not segment.safe:
            why = segment.note or "not on the allow-list"
            return ask(f"`{segment.display}`: {why}; asking.", "medium", "default.ask")
    if not report.segments:
        return ask("Empty command.", "low", "default.ask")
    if used:
        return Decision("allow", "Every command is allowed by your rules or the safe list.", "low", used[0])
    return Decision("allow", "Every command is on the safe list.", "low", "default.safe_command")


def _segment_rule(segment: bash.Segment, allows: list[PermissionRule]) -> PermissionRule | None:
    if not segment.allowable:
        return None
    for rule in allows:
        if rule.arg_re is None or any(rule.arg_re.fullmatch(t) for t in segment.texts):
            return rule
    return None
