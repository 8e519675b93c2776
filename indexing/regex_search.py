"""Regular-expression search under a time bound (the `regex` package's per-call timeout).

Routing: when the pattern has whole literal words that every match must contain (outside
alternations and optional parts), the index finds the chunks holding those words and the regex
runs on their text only; otherwise the stored text of every chunk (in scope) is scanned.
Every regex call gets the time left of one overall budget; running out raises PatternTooSlow.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import regex

from foundation.errors import PatternTooSlow, QuerySyntaxError
from indexing.analyzer import analyze, has_han
from indexing.hits import CHUNK_COLS, ChunkHit, attach, hit_of
from indexing.scope import PathFilter, active
from indexing.search import Searcher

DEFAULT_BUDGET_SECONDS = 2.0
MAX_PATTERN_CHARS = 1000
_WORD = re.compile(r"[^\W_]+")


@dataclass
class TimedPattern:
    """A compiled pattern plus the deadline all of its calls share."""

    pattern: Any
    deadline: float
    budget: float

    def search(self, text: str, pos: int = 0) -> Any:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise self.too_slow()
        try:
            return self.pattern.search(text, pos, timeout=left)
        except TimeoutError:
            raise self.too_slow() from None

    def too_slow(self) -> PatternTooSlow:
        return PatternTooSlow(
            f"Regex pattern too slow, simplify it (it ran over {self.budget:g} s): avoid nested or adjacent "
            "repeats such as (a+)+ or (.*)*, anchor it, or add a literal word it must contain."
        )


def compile_pattern(pattern: str, budget: float = DEFAULT_BUDGET_SECONDS, ignore_case: bool = False) -> TimedPattern:
    """Compile `pattern` (QuerySyntaxError with the reason when invalid)."""
    if not pattern:
        raise QuerySyntaxError("Empty regex. Give a pattern, e.g. revenue\\s+growth or use_regex=false.")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise QuerySyntaxError(f"Regex longer than {MAX_PATTERN_CHARS} characters; shorten it.")
    flags = regex.MULTILINE | (regex.IGNORECASE if ignore_case else 0)
    try:
        compiled = regex.compile(pattern, flags)
    except (regex.error, ValueError, OverflowError) as exc:
        raise QuerySyntaxError(
            f"Invalid regex ({exc}). Escape special characters with a backslash, e.g. 4\\.1 or C\\+\\+, "
            "or search without use_regex."
        ) from None
    return TimedPattern(compiled, time.monotonic() + budget, budget)


def required_words(pattern: str) -> list[str]:
    """Whole words every match must contain, from the pattern's top-level literal runs."""
    try:
        import re._parser as sre_parse

        parsed = sre_parse.parse(pattern)
    except Exception:  # regex-only syntax: no routing, scan
        return []
    ops = list(parsed)
    if any(op == sre_parse.BRANCH for op, _ in ops):
        return []
    words: list[str] = []
    run, bounded_left = "", False
    for op, arg in [*ops, (None, None)]:
        if op == sre_parse.LITERAL:
            run += chr(arg)
            continue
        words += _whole_words(run, bounded_left, op == sre_parse.AT)
        run, bounded_left = "", op == sre_parse.AT
    return words


def _whole_words(run: str, left_bound: bool, right_bound: bool) -> list[str]:
    out = []
    for m in _WORD.finditer(run):
        left_ok = m.start() > 0 or left_bound
        right_ok = m.end() < len(run) or right_bound
        if left_ok and right_ok and not has_han(m.group()):
            out.append(m.group())
    return out


def search_index(
    searcher: Searcher, pattern: str, *, limit: int, offset: int = 0, paths: PathFilter | None = None,
    budget: float = DEFAULT_BUDGET_SECONDS, ignore_case: bool = False,
) -> list[tuple[ChunkHit, str]]:
    """Chunks whose text matches `pattern` with the first match, in rank (FTS route) or stored order."""
    timed = compile_pattern(pattern, budget, ignore_case)
    terms = [t for w in required_words(pattern) for t in analyze(w)]
    rows = _fts_rows(searcher, terms, paths) if terms else _all_rows(searcher, paths)
    found: list[tuple[ChunkHit, str]] = []
    for row in rows:
        m = timed.search(row[11])
        if m is None:
            continue
        found.append((hit_of(row, 1.0), m.group()[:200]))
        if len(found) >= offset + limit:
            break
    hits = found[offset:]
    attach(searcher.store, [h for h, _ in hits], paths, 0)
    return hits


def _scope(paths: PathFilter | None, backend: str) -> tuple[str, list[str]]:
    if (scope := active(paths)) is None:
        return "", []
    docs, args = scope.documents_sql(backend)
    return f" AND c.doc_id IN {docs}", args


def _fts_rows(searcher: Searcher, terms: list[str], paths: PathFilter | None) -> Iterable[tuple]:  # type: ignore[type-arg]
    store = searcher.store
    scope, args = _scope(paths, store.backend)
    source, where, order, match = store.chunks_with_all(list(dict.fromkeys(terms)))
    return store.stream(f"SELECT {CHUNK_COLS} FROM {source} WHERE {where}{scope} ORDER BY {order}", [match, *args])


def _all_rows(searcher: Searcher, paths: PathFilter | None) -> Iterable[tuple]:  # type: ignore[type-arg]
    scope, args = _scope(paths, searcher.store.backend)
    return searcher.store.stream(f"SELECT {CHUNK_COLS} FROM chunks c WHERE 1=1{scope} ORDER BY c.doc_id, c.idx", args)
