"""Shrinking one tool output: JSON-aware when it parses, a middle cut with a marker otherwise."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from context.tokens import lower_bound, rough_tokens, upper_bound

FLAG_KEYS = {
    "success",
    "ok",
    "status",
    "error",
    "errors",
    "code",
    "message",
    "count",
    "total",
    "total_count",
    "returncode",
    "exit_code",
    "id",
    "name",
    "type",
    "truncated",
    "has_more",
    "next_offset",
}
_MAX_DEPTH = 4


def cut_middle(text: str, max_tokens: int, tokens: int, note: str = "") -> str:
    """Keep the head and the tail of `text` (about `max_tokens` together) with a marker between."""
    if tokens <= max_tokens or len(text) < 40:
        return text
    chars_per_token = len(text) / max(tokens, 1)
    keep = max(int(max_tokens * chars_per_token * 0.9), 20)
    head, tail = text[: keep * 2 // 3], text[len(text) - keep // 3 :]
    omitted = max(tokens - max_tokens, 1)
    marker = f"\n…[compressed: about {omitted} tokens omitted from the middle{note}]…\n"
    return head + marker + tail


def compress_json(value: Any, long_string_chars: int) -> tuple[Any, int]:
    """A smaller copy of a JSON value and how many list items were dropped."""
    omitted = [0]
    small = _shrink(value, long_string_chars, 0, omitted)
    return small, omitted[0]


def _shrink(value: Any, limit: int, depth: int, omitted: list[int]) -> Any:
    if isinstance(value, str):
        return value if len(value) <= limit else value[: limit // 2] + f"…[{len(value) - limit // 2} chars]"
    if isinstance(value, list):
        if depth >= _MAX_DEPTH:
            omitted[0] += len(value)
            return f"[{len(value)} items]"
        if len(value) <= 2:
            return [_shrink(item, limit, depth + 1, omitted) for item in value]
        omitted[0] += len(value) - 2
        middle = {"compressed": True, "omitted_items": len(value) - 2, "total_items": len(value)}
        return [
            _shrink(value[0], limit, depth + 1, omitted),
            middle,
            _shrink(value[-1], limit, depth + 1, omitted),
        ]
    if isinstance(value, dict):
        if depth >= _MAX_DEPTH:
            return {k: v for k, v in value.items() if k in FLAG_KEYS and not isinstance(v, (dict, list))}
        return {str(k): _shrink(v, limit, depth + 1, omitted) for k, v in value.items()}
    return value


def compress_output(text: str, max_tokens: int, count: Callable[[str], int]) -> tuple[str | None, int]:
    """(the compressed text, or None when `text` already fits in `max_tokens`; a lower bound of the
    original's tokens, exact when it had to be counted, 0 when it fits). The original is counted
    only when its cheap bounds cannot decide; the compressed text always has fewer tokens than it."""
    tokens = tokens_over(text, max_tokens, count)
    if tokens is None:
        return None, 0
    small = _compressed(text, max_tokens, tokens, count)
    if count(small) < tokens:
        return small, tokens
    exact = count(text)  # `tokens` was only a bound: compare with the real size
    return (small, exact) if count(small) < exact else (None, exact)


def tokens_over(text: str, limit: int, count: Callable[[str], int]) -> int | None:
    """None when `text` has at most `limit` tokens, else its token count or a lower bound (> limit)."""
    if upper_bound(text) <= limit:
        return None
    floor = lower_bound(text)
    if floor > limit:
        return floor
    tokens = count(text)
    return tokens if tokens > limit else None


def _compressed(text: str, max_tokens: int, floor: int, count: Callable[[str], int]) -> str:
    stripped = text.strip()
    if stripped[:1] in ("{", "[") and len(stripped) < 5_000_000:
        try:
            value = json.loads(stripped)
        except ValueError:
            value = None
        if isinstance(value, (dict, list)):
            packed = _compress_json_to_fit(value, max_tokens, count)
            if packed is not None:
                return packed
    return cut_to(text, max_tokens, floor, count)


def cut_to(text: str, max_tokens: int, floor: int, count: Callable[[str], int], note: str = "") -> str:
    """`cut_middle` without counting `text`: sized by an estimate of its tokens (at least `floor`),
    then checked by counting the result and cut once more when it is still over `max_tokens`."""
    estimate = max(rough_tokens(text) * 11 // 10, floor)  # a little high: the result rarely needs a recut
    out = cut_middle(text, max_tokens, estimate, note)
    tokens = count(out)
    if tokens > max_tokens and out != text:
        out = cut_middle(text, max_tokens, int(estimate * tokens / max(max_tokens * 0.9, 1)) + 1, note)
    return out


def _compress_json_to_fit(value: Any, max_tokens: int, count: Callable[[str], int]) -> str | None:
    for limit in (400, 120, 40):
        small, omitted = compress_json(value, limit)
        wrapped = _mark(small, omitted)
        text = json.dumps(wrapped, ensure_ascii=False, separators=(",", ":"), default=str)
        if count(text) <= max_tokens:
            return text
    # Still too big (many keys): keep only the flags, then say what was there.
    if isinstance(value, dict):
        flags = {k: v for k, v in value.items() if k in FLAG_KEYS and not isinstance(v, (dict, list))}
        flags.update({"compressed": True, "omitted_keys": sorted(k for k in value if k not in flags)[:20]})
        text = json.dumps(flags, ensure_ascii=False, separators=(",", ":"), default=str)
        if count(text) <= max_tokens:
            return text
    return None


def _mark(small: Any, omitted: int) -> Any:
    if isinstance(small, dict):
        return {**small, "compressed": True, "omitted_items": omitted}
    return {"compressed": True, "omitted_items": omitted, "items": small}


def shorten(text: str, max_tokens: int, count: Callable[[str], int], note: str = "") -> str:
    """`text` when it has at most `max_tokens` tokens, else cut in the middle to about that many."""
    tokens = tokens_over(text, max_tokens, count)
    return text if tokens is None else cut_to(text, max_tokens, tokens, count, note)
