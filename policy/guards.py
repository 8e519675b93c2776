"""The rules about a call as a whole, around the layered decision of `engine.py` (they were the gate's own):

- before it: a state-changing call that could approve a pending call (it spells the approve command or page,
  or, destructive, names a live approval id) or that names the approval state (the rules files, approvals,
  audit log) is refused; nothing, not even a user's allow rule, lifts either;
- `through_links`: a call whose path arguments lead through a symlink is decided as what they lead to as
  well, and the stricter decision wins;
- `escalated`: enabling tools that can change things asks, whatever allowed `enable_tools`.

Pure like the rest of the policy: what they need (live approval ids, resolved paths, the tools that change
things) arrives in the `PolicyContext`."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any

from pydantic_core import to_jsonable_python

from policy.context import PolicyContext
from policy.model import Decision, ask, deny

ENABLE_TOOLS = "enable_tools"  # the tool that turns on tools of a higher tier (its `names` argument)
ACTION_RANK = {"allow": 0, "ask": 1, "deny": 2}
RISK_RANK = {"low": 0, "medium": 1, "high": 2, "critical": 3}
SELF_APPROVAL = re.compile(r"\bapprove\b.{0,120}?\bap-[a-z2-9]{6}\b|/approvals/ap-|\bapprove\s+--list",
                           re.IGNORECASE | re.DOTALL)


def call_text(args: Any) -> str:
    """The call's arguments as one text (the approvals store's canonical JSON: sorted keys, UTF-8 kept)."""
    return json.dumps(to_jsonable_python(args), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def refusal(args: Mapping[str, Any], ctx: PolicyContext) -> Decision | None:
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


def through_links(args: Mapping[str, Any], ctx: PolicyContext, found: Decision, linked: Decision) -> Decision:
    """`found` (the call as written) or `linked` (its paths resolved: `ctx.resolved_args`), the stricter."""
    if severity(linked) <= severity(found) or ctx.resolved_args is None:
        return found
    verb = "refuses" if linked.action == "deny" else "asks for"
    changed = changed_paths(args, ctx.resolved_args)
    targets = ", ".join(repr(os.path.relpath(p, ctx.roots[0]) if ctx.roots else p) for p in changed)
    return Decision(linked.action, f"A path in this call leads through a symlink to {targets} (in the "
                    f"workspace), which the policy {verb} (rule {linked.rule_id}).", linked.risk, linked.rule_id)


def escalated(tool: str, args: Mapping[str, Any], ctx: PolicyContext, found: Decision) -> Decision:
    """Enabling tools that can change things asks even when a rule allows `enable_tools`."""
    if tool == ENABLE_TOOLS and found.action == "allow":
        names = args.get("names") or []
        risky = sorted(n for n in names if n in ctx.changing_tools)
        if risky:
            return ask(f"Enabling tools that can change things: {', '.join(risky)}.", "medium",
                       "tiers.enable-dangerous")
    return found


def changed_paths(args: Mapping[str, Any], resolved: Mapping[str, Any]) -> list[str]:
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
