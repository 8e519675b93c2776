"""Compiled patterns of the approval rules: `Matcher` (one regex; a user's runs under a time bound) and
`MatcherSet` (several searched as one alternation). Built by rules.py when the rules load; searched by the
path checks and the risk patterns for every call."""

from __future__ import annotations

import posixpath
import re
from typing import Any

from policy.anchors import opens_at_slash, search_from_slashes

USER_PATTERN_TIMEOUT = 0.05  # seconds; a user regex that runs longer counts as "ask"
LONG_TEXT_CHARS = 64 * 1024
"""Texts longer than this are searched with the `regex` package in concurrent mode, which releases the
GIL: a 4 MB argument then never holds up other clients' calls while the patterns scan it."""
NOT_COVERING_KEPT = 64  # places (workspace roots) whose narrowed pattern sets are kept


class Matcher:
    """A compiled regex; user patterns run under a time bound (the `regex` package's timeout)."""

    __slots__ = ("source", "_compiled", "_timeout", "_released", "_at_slashes")

    def __init__(self, source: str, compiled: Any, timeout: float | None) -> None:
        self.source = source
        self._compiled = compiled
        self._timeout = timeout
        self._released: Any = None  # the same pattern compiled by `regex`, for long texts
        self._at_slashes = timeout is None and opens_at_slash(compiled)  # tried at the start and slashes only

    def search(self, text: str) -> bool | None:
        """True/False, or None when a user pattern ran out of time (callers treat that as "ask")."""
        if self._timeout is None:
            if len(text) > LONG_TEXT_CHARS:
                return self._gil_free().search(text, concurrent=True) is not None
            if self._at_slashes:
                return search_from_slashes(self._compiled, text)
            return self._compiled.search(text) is not None
        try:
            return self._compiled.search(text, timeout=self._timeout, concurrent=True) is not None
        except TimeoutError:
            return None

    @property
    def shipped(self) -> bool:
        """One of the shipped rules' patterns (the user's own run under a time bound)."""
        return self._timeout is None

    def _gil_free(self) -> Any:
        if self._released is None:
            import regex

            self._released = regex.compile(self._compiled.pattern, regex.V0 | self._compiled.flags)
        return self._released

    def __repr__(self) -> str:
        return f"Matcher({self.source!r})"


class MatcherSet:
    """Several regexes searched as one (one alternation per engine): "does any of them match?"."""

    __slots__ = ("sources", "_combined", "_each", "_not_covering")

    def __init__(self, matchers: list[Matcher]) -> None:
        self.sources: tuple[str, ...] = tuple(m.source for m in matchers)
        self._each = tuple(matchers)
        self._not_covering: dict[str, MatcherSet] = {}
        combined: list[Matcher] = []
        shipped = [m for m in matchers if m._timeout is None]
        at_slashes = [m for m in shipped if m._at_slashes]  # one alternation searched from slashes
        for timeout, group in ((None, at_slashes), (None, [m for m in shipped if not m._at_slashes]),
                               (USER_PATTERN_TIMEOUT, [m for m in matchers if m._timeout is not None])):
            if not group:
                continue
            alternation = "|".join(f"(?:{_scoped_flags(m.source)})" for m in group)
            try:
                if timeout is None:
                    combined.append(Matcher(alternation, re.compile(alternation), None))
                else:
                    import regex

                    combined.append(Matcher(alternation, regex.compile(alternation, regex.V0), timeout))
            except Exception:  # noqa: BLE001 - flags that cannot be combined: search one by one
                combined += group
        self._combined = tuple(combined)

    def search(self, text: str) -> bool | None:
        """True/False, or None when a user pattern timed out (treat as a match)."""
        for matcher in self._combined:
            hit = matcher.search(text)
            if hit is None or hit:
                return hit
        return False

    def not_covering(self, place: str) -> MatcherSet:
        """These patterns but the shipped ones that cover an area holding the folder `place` below its top:
        found in `place` and in its parent (either letter case). `^/root(/|$)` goes for /root/ws but stays
        for /root itself; the user's own patterns all stay. Kept per place (a server has a few roots)."""
        found = self._not_covering.get(place)
        if found is None:
            parent = posixpath.dirname(place.rstrip("/")) or "/"
            found = MatcherSet([m for m in self._each if not (m.shipped and _found(m, place) and _found(m, parent))])
            if len(self._not_covering) < NOT_COVERING_KEPT:
                self._not_covering[place] = found
        return found

    def __bool__(self) -> bool:
        return bool(self.sources)


def _found(matcher: Matcher, text: str) -> bool:
    """Found in `text` or in its lower-cased spelling."""
    return matcher.search(text) is True or matcher.search(text.lower()) is True


def _scoped_flags(source: str) -> str:
    """`(?i)abc` -> `(?i:abc)`, so that patterns with leading flags can share one alternation."""
    m = re.match(r"\(\?([imsx]+)\)", source)
    return f"(?{m.group(1)}:{source[m.end():]})" if m else source
