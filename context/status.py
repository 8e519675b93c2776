"""How full the context window is: tokens, ratio, level and a one-line recommendation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Level = Literal["info", "warning", "critical"]


@dataclass(frozen=True)
class Status:
    tokens: int
    context_window: int
    ratio: float
    level: Level
    tokens_left: int
    recommendation: str


def context_level(
    tokens: int, context_window: int, warning_ratio: float = 0.75, critical_ratio: float = 0.95
) -> Status:
    """Level `info` below `warning_ratio`, `warning` up to `critical_ratio`, `critical` from there."""
    ratio = tokens / context_window if context_window > 0 else 1.0
    left = max(context_window - tokens, 0)
    if ratio >= critical_ratio:
        level: Level = "critical"
        advice = "Call compact_context now (or optimize_context) before the next model call; the window is nearly full."
    elif ratio >= warning_ratio:
        level = "warning"
        advice = "Call compact_context soon, or optimize_context to trim tool outputs and old turns."
    else:
        level = "info"
        advice = "No action needed."
    return Status(tokens, context_window, round(ratio, 4), level, left, advice)
