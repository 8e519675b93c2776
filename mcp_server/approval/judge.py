"""The policy's decision for one call, as the gate asks for it: the context only the gate knows (the call's
roots, the protected files and names, git work trees, symlinks, program-valued git config, the approvals
waiting for a human, the tools that change things), gathered here, and the one pure decision
(`policy.decide`) asked once in it. Every rule, the gate's former own ones too (self-approval,
protected state, symlinks, enabling tools), is the policy's (`policy/engine.py`).

The gate imports this module on first use (the start-up warm-up thread): building the server never loads the
policy (tests/test_startup.py)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import policy
from foundation.calls import CallOrigin
from foundation.toolspec import ToolSpec
from mcp_server.approval.audit import AUDIT_FILE
from mcp_server.approval.git_config import program_finder
from mcp_server.approval.links import git_tops, real_path_resolver, resolved_path_args
from mcp_server.approval.store import APPROVALS_FILE
from policy import Decision, PolicyContext, Rules
from policy.model import ask

log = logging.getLogger("generalagent.approval")

Decide = Callable[[str, Mapping[str, Any], PolicyContext], Decision]
DISTINCTIVE_FILES = frozenset({APPROVALS_FILE, AUDIT_FILE})
"""Protected files whose bare name is distinctive (with SQLite's side files): a state-changing call naming one
at all is refused; the others (policy.toml) only when named by full path."""


def protected_names(protected: tuple[Path, ...]) -> tuple[str, ...]:
    """The names of the protected files whose mention alone is refused (`DISTINCTIVE_FILES` and side files)."""
    return tuple(p.name for p in protected if p.name.split("-")[0] in DISTINCTIVE_FILES)


def changing_tools(specs: Mapping[str, ToolSpec]) -> frozenset[str]:
    """The registered tools that change things (enabling one asks)."""
    return frozenset(name for name, spec in specs.items() if not spec.read_only)


class Judge:
    """Decides calls with loaded rules. `roots(origin)`: the call's workspace roots (resolved);
    `live_ids()`: the approval ids waiting for a human; `decide`: the policy's `decide` (a test's stand-in)."""

    def __init__(self, rules: Rules, *, roots: Callable[[CallOrigin], tuple[Path, ...]],
                 live_ids: Callable[[], Iterable[str]], protected: tuple[Path, ...], specs: Mapping[str, ToolSpec],
                 sandboxed: bool, decide: Decide | None = None) -> None:
        self.rules = rules
        self.decide: Decide = decide if decide is not None else policy.decide
        self.roots, self.live_ids = roots, live_ids
        self.protected, self.sandboxed = protected, sandboxed
        self.protected_names, self.changing_tools = protected_names(protected), changing_tools(specs)

    def decision(self, spec: ToolSpec, args: dict[str, Any], origin: CallOrigin) -> Decision:
        """The policy's decision for this call in the context gathered here (asks when gathering fails)."""
        try:
            context = self.context(spec, args, origin)
        except Exception as exc:  # the gate must never fail open
            log.exception("gathering the policy's context failed for %s", spec.name)
            return ask(f"The policy could not decide ({type(exc).__name__}); asking instead.", "high",
                       "gate.policy-error")
        return self.decide(spec.name, args, context)

    def context(self, spec: ToolSpec, args: dict[str, Any], origin: CallOrigin) -> PolicyContext:
        """What the pure policy needs to know about this call beyond its name and arguments."""
        roots = self.roots(origin)
        shell = spec.name in self.rules.shell.tools
        destructive = spec.destructive and not spec.read_only
        return PolicyContext(
            rules=self.rules, roots=roots, read_only=spec.read_only, protected_paths=self.protected,
            protected_names=self.protected_names, origin=origin.kind, destructive=spec.destructive,
            live_approval_ids=tuple(self.live_ids()) if destructive else (), changing_tools=self.changing_tools,
            resolved_args=resolved_path_args(args, self.rules.path_keys, roots) if roots else None,
            sandboxed=self.sandboxed, git_tops=git_tops(roots) if shell else (),
            real_path=real_path_resolver() if shell else None, repo_programs=program_finder() if shell else None)


def load_rules(user_file: Path | None) -> Rules:
    """The shipped rules plus the user's file (the policy's `load_rules`; SettingsError names a mistake)."""
    return policy.load_rules(user_file)
