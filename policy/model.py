"""The decision value returned by the policy (kept apart so every policy module can use it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Action = Literal["allow", "ask", "deny"]
Risk = Literal["low", "medium", "high", "critical"]


@dataclass(frozen=True)
class Decision:
    """What to do with one tool call: `action`, a short human `reason`, a `risk` level and the
    `rule_id` of the rule that decided (e.g. "bash.rm_recursive", "user.deny[2]")."""

    action: Action
    reason: str
    risk: Risk
    rule_id: str

    def as_dict(self) -> dict[str, str]:
        return {"action": self.action, "risk": self.risk, "reason": self.reason, "rule_id": self.rule_id}


def ask(reason: str, risk: Risk, rule_id: str) -> Decision:
    return Decision("ask", reason, risk, rule_id)


def deny(reason: str, risk: Risk, rule_id: str) -> Decision:
    return Decision("deny", reason, risk, rule_id)
