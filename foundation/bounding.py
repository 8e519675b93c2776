"""Keep tool results bounded: estimate tokens cheaply, shrink JSON values to fit, and page (the one place
that says where a page ends and the next begins)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, TypeVar

from pydantic_core import to_json

_MIN_STRING = 200
MAX_COMMAND_CHARS = 16_384
"""The one limit on a shell command line (the tool refuses longer ones, the policy does not analyse them).
A command a human may be asked to approve must be readable in one screen or two; anything longer is a
script: write it to a file (reviewable, diffable) and run that."""
TRUNCATION_NOTE = (
    "Result truncated to about {limit} tokens: lists were shortened and long texts cut. "
    "Ask for less (a smaller max_results/limit) or page with offset."
)


T = TypeVar("T")


def next_offset(end: int, total: int) -> int | None:
    """The offset of the page after one that ends at `end` of `total` items or characters (None: the last)."""
    return end if end < total else None


def page_of(items: Sequence[T], offset: int, limit: int) -> tuple[list[T], int | None]:
    """The page of `items` from `offset` (at most `limit`) and the next page's offset (None: the last page)."""
    page = list(items[offset: offset + limit])
    return page, next_offset(offset + len(page), len(items))


def text_page_end(text: str, offset: int, max_chars: int, budget_tokens: int) -> int:
    """The end of a page of `text` from `offset`: at most `max_chars`, and within `budget_tokens` once
    JSON-escaped (at least one character)."""
    end = min(len(text), offset + max_chars)
    if estimate_tokens(dumps(text[offset:end])) <= budget_tokens:
        return end
    lo, hi = offset + 1, end
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if estimate_tokens(dumps(text[offset:mid])) <= budget_tokens:
            lo = mid
        else:
            hi = mid - 1
    return lo


def past_end_note(offset: int, total: int, items: str) -> str | None:
    """The note of an empty page that starts after the last of `total` items (`items`: e.g. '37 files');
    None for any other page."""
    if offset == 0 or offset < total:
        return None
    return f"Offset {offset} is past the end: {items}. Start again from offset 0."


def estimate_tokens(text: str) -> int:
    """A cheap, deliberately high estimate: ~3.5 ASCII chars per token, 1.3 tokens per other char."""
    ascii_chars = len(text) if text.isascii() else len(text.encode("ascii", "ignore"))
    other = len(text) - ascii_chars
    return math.ceil(ascii_chars / 3.5 + other * 1.3)


def dumps(value: Any) -> str:
    """Compact JSON text, non-ASCII kept (pydantic-core's encoder: the same text as json.dumps with
    ensure_ascii=False and no spaces, in about half the time)."""
    return to_json(value).decode()


def _shrink(value: Any, ratio: float) -> Any:
    if isinstance(value, str):
        if len(value) <= _MIN_STRING:
            return value
        keep = max(_MIN_STRING, int(len(value) * ratio))
        if keep >= len(value):
            return value
        return value[:keep] + f"…[truncated {len(value) - keep} chars]"
    if isinstance(value, list):
        keep = max(1, math.ceil(len(value) * ratio)) if value else 0
        return [_shrink(item, ratio) for item in value[:keep]]
    if isinstance(value, dict):
        return {key: _shrink(item, ratio) for key, item in value.items()}
    return value


def bound_json(value: dict[str, Any], limit_tokens: int) -> tuple[dict[str, Any], str]:
    """Return the value and its JSON text, shrinking lists and strings proportionally until it fits."""
    text = dumps(value)
    size = estimate_tokens(text)
    if size <= limit_tokens:
        return value, text
    ratio = limit_tokens / size
    shrunk: dict[str, Any] = value
    for _ in range(12):
        ratio *= 0.8
        shrunk = _shrink(value, ratio)
        if estimate_tokens(dumps(shrunk)) <= limit_tokens * 0.95:
            break
    shrunk = dict(shrunk)
    shrunk["truncated"] = True
    shrunk["note"] = TRUNCATION_NOTE.format(limit=limit_tokens)
    return shrunk, dumps(shrunk)
