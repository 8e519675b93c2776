"""Where a regex can start matching: the shipped path patterns all open with `^` or `/` (`(^|/)\\.env`),
so a search of a path only needs to try its start and its slashes, not every character (Python's `re`
otherwise tries each branch of a long alternation at every position: ~16 µs for an 80-character path,
a few µs this way). Decided from the parsed pattern, never from its text; anything unusual says no."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any


def opens_at_slash(pattern: re.Pattern[str]) -> bool:
    """True when every match of `pattern` starts at the text's start or at a '/' it consumes."""
    return _opens_at_slash(pattern.pattern, pattern.flags)


@lru_cache(maxsize=4096)  # rules are loaded again on every change of the file: their patterns repeat
def _opens_at_slash(source: str, flags: int) -> bool:
    try:
        from re import _parser as parser  # type: ignore[attr-defined]  # the stdlib's own pattern parser

        parsed = parser.parse(source, flags)
    except Exception:  # noqa: BLE001 - another Python's parser: search as usual
        return False
    if parsed.state.flags & re.MULTILINE:  # `^` after every newline
        return False
    return _opens(list(parsed))


def _opens(items: list[Any]) -> bool:
    if not items:
        return False
    op, arg = items[0]
    name = str(op)
    if name == "AT":
        return str(arg) in ("AT_BEGINNING", "AT_BEGINNING_STRING")
    if name == "LITERAL":
        return bool(arg == ord("/"))
    if name == "BRANCH":
        return all(_opens(list(branch)) for branch in arg[1])
    if name == "SUBPATTERN":
        _group, add_flags, _del_flags, inner = arg
        return not add_flags and _opens(list(inner))
    return False


def search_from_slashes(pattern: re.Pattern[str], text: str) -> bool:
    """`pattern.search(text) is not None` for a pattern that `opens_at_slash`."""
    match = pattern.match
    if match(text) is not None:
        return True
    at = text.find("/", 1)
    while at != -1:
        if match(text, at) is not None:
            return True
        at = text.find("/", at + 1)
    return False
