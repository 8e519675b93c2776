"""The policy's decision for one call, as the gate asks for it: the pure policy (`mcp_server.policy.decide`) in
the context only the gate knows (the call's roots, the protected files, git work trees, symlinks, program-valued
git config), a call through a symlink decided as what it leads to as well, and the gate's fail-closed
escalations (self-approval, protected state, enabling tools that change things).

The gate imports this module on first use (the start-up warm-up thread): building the server never loads the
policy (tests/test_startup.py)."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from foundation.calls import CallOrigin
from foundation.toolspec import ToolSpec
from mcp_server import policy
from mcp_server.approval.audit import AUDIT_FILE
from mcp_server.approval.git_config import program_finder
from mcp_server.approval.links import changed_paths, git_tops, real_path_resolver, resolved_path_args
from mcp_server.approval.store import APPROVALS_FILE, canonical_json
from mcp_server.policy import Decision, PolicyContext, Rules
from mcp_server.policy.model import ask, deny

log = logging.getLogger("generalagent.approval")

Decide = Callable[[str, Mapping[str, Any], PolicyContext], Decision]
ACTION_RANK = {"allow": 0, "ask": 1, "deny": 2}
RISK_RANK = {"low": 0, "medium": 1, "high": 2, "critical": 3}
_SELF_APPROVAL = re.compile(r"\bapprove\b.{0,120}?\bap-[a-z2-9]{6}\b|/approvals/ap-|\bapprove\s+--list",
                            re.IGNORECASE | re.DOTALL)


class Judge:
    """Decides calls with loaded rules. `roots(origin)`: the call's workspace roots (resolved);
    `live_ids()`: the approval ids waiting for a human; `decide`: the policy's `decide` (a test's stand-in)."""

    def __init__(self, rules: Rules, *, roots: Callable[[CallOrigin], tuple[Path, ...]],
                 live_ids: Callable[[], Iterable[str]], protected: tuple[Path, ...], specs: Mapping[str, ToolSpec],
                 sandboxed: bool, decide: Decide | None = None) -> None:
        self.rules = rules
        self.decide: Decide = decide if decide is not None else policy.decide
        self.roots, self.live_ids = roots, live_ids
        self.protected, self.specs, self.sandboxed = protected, specs, sandboxed

    def decision(self, spec: ToolSpec, args: dict[str, Any], origin: CallOrigin) -> Decision:
        """The policy's decision for this call, plus the gate's own fail-closed escalations."""
        text = "" if spec.read_only else canonical_json(args)  # neither check below applies to a read-only call
        if self._could_self_approve(spec, text):
            return deny("Calls that mention approval ids or the approval command/page are refused: only the human "
                        "approves, outside the assistant.", "high", "approval.self-approval")
        if not spec.read_only and self._mentions_protected(text):
            return deny("The approval rules, approvals and audit log are off limits to the assistant.",
                        "critical", "approval.protected-state")
        try:
            context = self.context(spec, origin)
            found = self._through_links(spec, args, context, self.decide(spec.name, args, context))
        except Exception as exc:  # the policy must never fail open
            log.exception("policy decision failed for %s", spec.name)
            return ask(f"The policy could not decide ({type(exc).__name__}); asking instead.", "high",
                       "gate.policy-error")
        return self._escalate(spec, args, found)

    def context(self, spec: ToolSpec, origin: CallOrigin) -> PolicyContext:
        roots = self.roots(origin)
        shell = spec.name in self.rules.shell.tools
        return PolicyContext(rules=self.rules, roots=roots, read_only=spec.read_only,
                             protected_paths=self.protected, origin=origin.kind, sandboxed=self.sandboxed,
                             git_tops=git_tops(roots) if shell else (),
                             real_path=real_path_resolver() if shell else None,
                             repo_programs=program_finder() if shell else None)

    def _through_links(self, spec: ToolSpec, args: dict[str, Any], context: PolicyContext,
                       found: Decision) -> Decision:
        """The policy reads paths as written; a symlink in the roots may lead to a secret store or a protected
        file. When resolving the call's path arguments changes them, that call is decided too (in the same
        `context`), and the stricter decision wins."""
        if found.action == "deny":
            return found
        roots = context.roots
        resolved = resolved_path_args(args, self.rules.path_keys, roots) if roots else None
        if resolved is None:
            return found
        decision = self.decide(spec.name, resolved, context)
        if _severity(decision) <= _severity(found):
            return found
        verb = "refuses" if decision.action == "deny" else "asks for"
        targets = ", ".join(repr(os.path.relpath(p, roots[0])) for p in changed_paths(args, resolved))
        return Decision(decision.action, f"A path in this call leads through a symlink to {targets} (in the "
                        f"workspace), which the policy {verb} (rule {decision.rule_id}).", decision.risk,
                        decision.rule_id)

    def _could_self_approve(self, spec: ToolSpec, text: str) -> bool:
        """A state-changing call that spells the approve command/page, or a destructive one (shell, file
        writes) naming a live approval id. Read-only tools cannot approve anything, so they are not checked;
        delegate_task may pass "ap-... was approved" along (its sub-agent's calls are gated themselves)."""
        if spec.read_only:
            return False
        if _SELF_APPROVAL.search(text):
            return True
        return spec.destructive and any(i in text for i in self.live_ids())

    def _mentions_protected(self, text: str) -> bool:
        """A state-changing call naming our approval/audit files (or the rules file by full path)."""
        distinctive = {APPROVALS_FILE, AUDIT_FILE}
        return any(str(p) in text or (p.name.split("-")[0] in distinctive and p.name in text) for p in self.protected)

    def _escalate(self, spec: ToolSpec, args: dict[str, Any], found: Decision) -> Decision:
        if spec.name == "enable_tools" and found.action == "allow":
            names = args.get("names") or []
            risky = sorted(n for n in names if n in self.specs and not self.specs[n].read_only)
            if risky:
                return ask(f"Enabling tools that can change things: {', '.join(risky)}.", "medium",
                           "tiers.enable-dangerous")
        return found


def load_rules(user_file: Path | None) -> Rules:
    """The shipped rules plus the user's file (the policy's `load_rules`; SettingsError names a mistake)."""
    return policy.load_rules(user_file)


def _severity(decision: Decision) -> tuple[int, int]:
    return ACTION_RANK.get(decision.action, 1), RISK_RANK.get(decision.risk, 2)
