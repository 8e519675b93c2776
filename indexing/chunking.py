"""Content-aware chunking: `chunk_document(extracted, options) -> list[Chunk]`.

Each unit (page, slide, sheet rows, heading section) is chunked on its own, so a chunk never
spans two pages/slides/sheets and always carries one heading path. Inside a unit the text is cut
at the highest-level boundary that yields pieces of at most `max_chars`: blank-line paragraphs →
lines → sentences (。！？；… and . ! ? ; followed by space, closing quotes kept with the sentence) →
fixed-size windows with `overlap_chars` of overlap (the last resort; they prefer to end at a space
or a CJK comma). Whole pieces of one level are packed greedily up to `max_chars`; a piece too
large is cut at the next level on its own (a chunk never holds fragments of two paragraphs),
aiming at equal sizes below the paragraph level. Below the paragraph level a chunk also starts
with the last whole sentences (or lines) of the previous one, up to `overlap_chars` and only as
far as it still fits in `max_chars`, so a fact next to a cut stays with its context (whole
paragraphs are not repeated). A chunk shorter than `min_chars` is merged with a neighbour in the
same unit when the result still fits. A unit that is only a heading (shorter than `min_chars`)
is glued to the following sub-section (a chunk that still ends inside it keeps its heading).

Spreadsheet rows (XLSX "row" units, one per row, the sheet's header row in their heading) are
packed into windows of whole rows up to `max_chars`; the next window starts with the last rows of
the previous one only as far as they fit in `overlap_chars`, so each row is indexed once plus that
overlap. A row longer than `max_chars` is cut on its own like any text.

Invariants: `chunk.text == extracted.text[chunk.start:chunk.end]`; chunks are in text order (starts
never decrease, ends increase: no chunk lies inside the one before) and trimmed of surrounding
whitespace; every non-whitespace character is in at least one chunk; `len(chunk.text) <= max_chars`.
Runs in linear time.

`CHUNKER_VERSION` names these rules: an index made with other rules or options re-chunks
(`chunking_key`, `IndexStore.ensure_chunking`).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace

from indexing.model import Chunk, ChunkingOptions, Extracted, Unit

_LEVELS = (
    re.compile(r"\n[ \t\r\f\v]*\n\s*"),  # paragraphs (blank lines)
    re.compile(r"\n"),  # lines
    re.compile(r"(?:[。！？；…]+|[!?;]+(?=\s|$)|\.(?=\s|$))[\"'”’」』）)\]]*\s*"),  # sentences
)
_SOFT_BREAKS = " \n\t，、,；;"
CHUNKER_VERSION = "3"  # 2: sentence lead-ins below the paragraph level; 3: a chunk that ends in a glued
# heading-only section carries that section's heading


def chunking_key(options: ChunkingOptions) -> str:
    """What an index's chunks were made with: these rules and these options."""
    return f"{CHUNKER_VERSION}:{options.max_chars}:{options.overlap_chars}:{options.min_chars}"


@dataclass(frozen=True)
class _Segment:
    start: int
    end: int
    unit: Unit
    glued: tuple[Unit, ...] = ()
    """Heading-only units glued before `unit` (clipped to the text): a chunk that ends in one of them
    carries its heading, not the child's."""

    def unit_at(self, end: int) -> Unit:
        """The unit a chunk ending at `end` ends in."""
        return next((unit for unit in reversed(self.glued) if unit.start < end <= unit.end), self.unit)


def chunk_document(extracted: Extracted, options: ChunkingOptions | None = None) -> list[Chunk]:
    """Cut a document into chunks (see the module docstring for the rules)."""
    options = options or ChunkingOptions()
    text = extracted.text
    units = sorted(extracted.units, key=lambda u: (u.start, u.end))
    if not units and text.strip():
        units = [Unit(start=0, end=len(text), kind="text")]
    chunks: list[Chunk] = []
    for (is_row, _), run in itertools.groupby(units, key=lambda u: (u.kind == "row", u.sheet)):
        group = list(run)
        segments = _row_windows(text, group, options) if is_row else _segments(text, group, options)
        for segment in segments:
            for start, end in _chunk_span(text, segment.start, segment.end, options.max_chars, options):
                chunks.append(_make_chunk(text, len(chunks), start, end, segment.unit_at(end)))
    return chunks


def _row_windows(text: str, rows: list[Unit], options: ChunkingOptions) -> Iterator[_Segment]:
    """Windows of whole consecutive rows up to max_chars, overlapping by the rows that fit in overlap_chars."""
    limit, n, i = options.max_chars, len(rows), 0
    fresh = 0  # the window's first row that the window before did not hold (only such rows overlap again)
    while i < n:
        first = rows[i]
        j = i
        while j + 1 < n and rows[j + 1].end - first.start <= limit:
            j += 1
        last = rows[j]
        span = (first.rows or (0, 0))[0], (last.rows or (0, 0))[1]
        yield _Segment(first.start, last.end, replace(last, start=first.start, rows=span))
        if j + 1 >= n:
            return
        k, following = j + 1, rows[j + 1]
        if following.end - following.start <= limit:  # a long row next starts afresh
            # the overlap: the last rows that fit in overlap_chars and still leave room for the next row
            # (else the next window would end where this one does: a repeat with nothing new); a row this
            # window repeats from the one before is not carried again (it would be in three windows)
            while (k - 1 > max(i, fresh - 1) and last.end - rows[k - 1].start <= options.overlap_chars
                   and following.end - rows[k - 1].start <= limit):
                k -= 1
        i, fresh = k, j + 1


def _make_chunk(text: str, index: int, start: int, end: int, unit: Unit) -> Chunk:
    return Chunk(
        index=index,
        start=start,
        end=end,
        text=text[start:end],
        heading=" > ".join(unit.heading_path),
        page=unit.page,
        slide=unit.slide,
        sheet=unit.sheet,
        rows=unit.rows,
    )


def _location(unit: Unit) -> tuple[object, ...]:
    return (unit.page, unit.slide, unit.sheet, unit.rows)


def _segments(text: str, units: list[Unit], options: ChunkingOptions) -> Iterator[_Segment]:
    """Units clipped to the text and to each other; a tiny heading-only unit is glued to its child."""
    glued: list[Unit] = []
    last_end = 0
    for i, unit in enumerate(units):
        start, end = max(unit.start, last_end, 0), min(unit.end, len(text))
        if end <= start:
            continue
        last_end = end
        nxt = units[i + 1] if i + 1 < len(units) else None
        if (
            nxt is not None
            and len(text[start:end].strip()) < options.min_chars
            and _location(nxt) == _location(unit)
            and nxt.heading_path[: len(unit.heading_path)] == unit.heading_path
        ):
            glued.append(replace(unit, start=start, end=end))
            continue
        yield _Segment(glued[0].start if glued else start, end, unit, tuple(glued))
        glued = []


def _chunk_span(text: str, start: int, end: int, limit: int, options: ChunkingOptions) -> list[tuple[int, int]]:
    spans = _split(text, start, end, 0, limit, options)
    trimmed: list[tuple[int, int, bool]] = []
    for span in (_trim(text, s, e, hard) for s, e, hard in spans):
        if span[0] < span[1] and (not trimmed or span[1] > trimmed[-1][1]):  # not a repeated lead-in alone
            trimmed.append(span)
    return [(s, e) for s, e, _ in _merge_small(trimmed, limit, options.min_chars)]


def _split(text: str, start: int, end: int, level: int, limit: int, options: ChunkingOptions) -> list[tuple[int, int, bool]]:
    """Chunks (start, end, hard) of text[start:end]: pieces at this level's boundaries are packed
    greedily; a piece too large is split at the next level on its own, so a chunk never mixes
    fragments of two paragraphs. Below paragraphs the packing aims at equal sizes (no tiny tail).
    hard = a fixed-size window (never merged with neighbours)."""
    if end - start <= limit:
        return [(start, end, False)]
    if level >= len(_LEVELS):
        return list(_windows(text, start, end, limit, options))
    target = limit
    if level >= 1:
        parts = -(-(end - start) // limit)
        target = min(limit, (end - start) // parts + limit // 10)
    out: list[tuple[int, int, bool]] = []
    current: list[tuple[int, int]] = []  # the pieces of the chunk being packed
    own = 0  # its first piece that is not a lead-in
    lead = options.overlap_chars if level >= 1 else 0
    for a, b in _boundaries(text, start, end, level):
        if b - a > limit:
            if current:
                out.append((current[0][0], current[-1][1], False))
                current = []
            out.extend(_split(text, a, b, level + 1, limit, options))
        elif not current:
            current, own = [(a, b)], 0
        elif b - current[own][0] <= target and b - current[0][0] <= limit:
            current.append((a, b))
        else:
            out.append((current[0][0], current[-1][1], False))
            current = _lead_in(current, b, lead, limit) + [(a, b)]
            own = len(current) - 1
    if current:
        out.append((current[0][0], current[-1][1], False))
    return out


def _lead_in(previous: list[tuple[int, int]], end: int, budget: int, limit: int) -> list[tuple[int, int]]:
    """The last whole pieces of the previous chunk (never all of it) that the next chunk, ending at
    `end`, starts with: at most `budget` characters, and only as far as the chunk fits in `limit`."""
    k = len(previous)
    while k > 1 and previous[-1][1] - previous[k - 1][0] <= budget and end - previous[k - 1][0] <= limit:
        k -= 1
    return previous[k:]


def _boundaries(text: str, start: int, end: int, level: int) -> Iterator[tuple[int, int]]:
    """Contiguous pieces of text[start:end], each ending just after a boundary of `level`."""
    piece_start = start
    for match in _LEVELS[level].finditer(text, start, end):
        cut = match.end()
        if piece_start < cut < end:
            yield piece_start, cut
            piece_start = cut
    yield piece_start, end


def _windows(text: str, start: int, end: int, limit: int, options: ChunkingOptions) -> Iterator[tuple[int, int, bool]]:
    """Fixed-size windows with overlap, preferring to end just after a space or comma."""
    overlap = min(options.overlap_chars, limit // 2)
    pos = start
    while pos < end:
        if end - pos < max(options.min_chars, 1) and pos > start:
            pos = max(start, end - max(options.min_chars, overlap))  # no tiny tail: reach back a little
        stop = min(pos + limit, end)
        if stop < end:
            brk = max(text.rfind(ch, pos + limit // 2, stop) for ch in _SOFT_BREAKS)
            if brk >= 0:
                stop = brk + 1
        yield pos, stop, True
        if stop >= end:
            return
        nxt = stop - overlap
        if overlap and nxt > pos:
            space = text.find(" ", nxt, stop)
            if 0 <= space < stop - 1:
                nxt = space + 1
        pos = nxt if nxt > pos else stop


def _trim(text: str, start: int, end: int, hard: bool) -> tuple[int, int, bool]:
    piece = text[start:end]
    stripped = piece.lstrip()
    start += len(piece) - len(stripped)
    end -= len(stripped) - len(stripped.rstrip())
    return start, end, hard


def _merge_small(spans: list[tuple[int, int, bool]], limit: int, min_chars: int) -> list[tuple[int, int, bool]]:
    """Merge a chunk under `min_chars` into the previous or next soft chunk when the result fits."""
    out: list[tuple[int, int, bool]] = []
    i = 0
    while i < len(spans):
        start, end, hard = spans[i]
        small = not hard and end - start < min_chars
        if small and out and not out[-1][2] and end - out[-1][0] <= limit:
            out[-1] = (out[-1][0], end, False)
        elif small and i + 1 < len(spans) and not spans[i + 1][2] and spans[i + 1][1] - start <= limit:
            spans[i + 1] = (start, spans[i + 1][1], False)
        else:
            out.append((start, end, hard))
        i += 1
    return out
