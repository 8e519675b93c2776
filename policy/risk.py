"""Layer 2 (and the per-tool risk patterns of layer 3): regexes over every string in a call.

The arguments are walked iteratively (no recursion limit to hit) and boundedly: past
MAX_ARG_NODES values or MAX_ARG_DEPTH levels the walk stops and the caller asks. Dict keys
are checked too. Shipped patterns are plain `re` and written to run in linear time; user
patterns run under the `regex` package's timeout, and a timeout counts as a match ("ask").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policy.model import Decision, ask
from policy.rules import Rules

MAX_ARG_NODES = 50_000
MAX_ARG_DEPTH = 64


def argument_strings(args: Mapping[str, Any]) -> tuple[list[str], bool]:
    """Every string (keys included) in nested arguments, and whether the walk was complete."""
    out: list[str] = []
    stack: list[tuple[Any, int]] = [(args, 0)]
    nodes = 0
    while stack:
        value, depth = stack.pop()
        nodes += 1
        if nodes > MAX_ARG_NODES or depth > MAX_ARG_DEPTH:
            return out, False
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, bytes | bytearray):
            out.append(bytes(value).decode("latin-1"))
        elif isinstance(value, Mapping):
            for key, item in value.items():
                stack.append((key, depth + 1))
                stack.append((item, depth + 1))
        elif isinstance(value, list | tuple | set | frozenset):
            stack.extend((item, depth + 1) for item in value)
    return out, True


def pattern_matches(rules: Rules, tool: str, read_only: bool, strings: list[str]) -> list[Decision]:
    """One decision per risk pattern found in any of the strings (in rule order)."""
    out: list[Decision] = []
    for pattern in rules.patterns:
        if not pattern.applies_to(tool, read_only):
            continue
        for text in strings:
            hit = pattern.matcher.search(text)
            if hit is None:
                out.append(ask(f"Risk pattern {pattern.rule_id} took too long on these arguments.", "high",
                               pattern.rule_id))
                break
            if hit:
                out.append(Decision(pattern.action, pattern.reason, pattern.risk, pattern.rule_id))
                break
    return out
