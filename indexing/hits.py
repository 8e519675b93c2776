"""Results as the caller sees them: ranked chunk ids turned into hits read from the store, with
their document's path and hash and, when asked, the text around them and neighbouring chunks."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from indexing.scope import PathFilter, active
from indexing.store import IndexStore

CHUNK_COLS = 'c.id, c.doc_id, c.idx, c.start, c."end", c.heading, c.page, c.slide, c.sheet, c.row_first, c.row_last, c.text'


@dataclass
class ChunkHit:
    chunk_id: int
    doc_id: int
    index: int
    start: int
    end: int
    heading: str
    page: int | None
    slide: int | None
    sheet: str | None
    rows: tuple[int, int] | None
    text: str
    score: float
    path: str = ""
    doc_hash: str = ""
    before: str = ""
    after: str = ""
    by_meaning: bool = False  # found by the dense candidates only, not among the chunks that match the query's words


@dataclass
class DocumentHit:
    doc_id: int
    path: str
    doc_hash: str
    score: float
    matched: list[ChunkHit] = field(default_factory=list)
    context: list[ChunkHit] = field(default_factory=list)


def hit_of(row: Sequence[Any], score: float = 0.0) -> ChunkHit:
    """A hit from CHUNK_COLS, optionally followed by the document's hash and first path."""
    rows = (row[9], row[10]) if row[9] is not None else None
    hit = ChunkHit(row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7], row[8], rows, row[11], score)
    if len(row) > 12:
        hit.doc_hash, hit.path = row[12], row[13] or ""
    return hit


def ranked_hits(store: IndexStore, scored: Sequence[tuple[float, int]], scope: PathFilter | None) -> list[ChunkHit]:
    """Hits for (score, chunk id), in the order given, each with its document's hash and first path
    (the first one inside `scope`)."""
    if not scored:
        return []
    scores = {chunk_id: s for s, chunk_id in scored}
    cond, extra = scope.sql(store.backend) if (scope := active(scope)) is not None else ("1=1", [])
    rows = store.conn().execute(
        f"SELECT {CHUNK_COLS}, d.hash, (SELECT min(path) FROM files f WHERE f.doc_id = c.doc_id AND {cond}) "
        f"FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE c.id IN ({','.join('?' * len(scores))})",
        [*extra, *scores],
    ).fetchall()
    by_id = {r[0]: r for r in rows}
    return [hit_of(by_id[i], s) for i, s in scores.items() if i in by_id]


def attach(store: IndexStore, hits: list[ChunkHit], scope: PathFilter | None, context_chars: int) -> None:
    """Fill in path and content hash where missing (ranked hits come with them) and, when asked,
    the text around each hit."""
    if missing := [h for h in hits if not h.path]:
        _fill_paths(store, missing, scope)
    if context_chars > 0:
        for h in hits:
            _context(store, h, context_chars)


def _fill_paths(store: IndexStore, hits: list[ChunkHit], scope: PathFilter | None) -> None:
    """Each hit's first path (inside `scope`) and its document's content hash."""
    doc_ids = sorted({h.doc_id for h in hits})
    sql = (f"SELECT f.doc_id, f.path, d.hash FROM files f JOIN documents d ON d.id = f.doc_id "
           f"WHERE f.doc_id IN ({','.join('?' * len(doc_ids))})")
    args: list[object] = list(doc_ids)
    if (scope := active(scope)) is not None:
        cond, extra = scope.sql(store.backend)
        sql += f" AND {cond}"
        args += extra
    first: dict[int, str] = {}
    hashes: dict[int, str] = {}
    for doc_id, path, digest in store.conn().execute(sql + " ORDER BY f.path", args):
        first.setdefault(doc_id, path)
        hashes[doc_id] = digest
    for h in hits:
        h.path, h.doc_hash = first.get(h.doc_id, ""), hashes.get(h.doc_id, "")


def _context(store: IndexStore, hit: ChunkHit, chars: int) -> None:
    for idx, start, _end, text in store.conn().execute(
        'SELECT idx, start, "end", text FROM chunks WHERE doc_id=? AND idx IN (?, ?)',
        (hit.doc_id, hit.index - 1, hit.index + 1),
    ):
        if idx < hit.index:
            hit.before = text[: max(0, hit.start - start)][-chars:]
        else:
            hit.after = text[max(0, hit.end - start) :][:chars]


def neighbours(store: IndexStore, hit: ChunkHit, skip: set[int]) -> list[ChunkHit]:
    """The chunks just before and after `hit` in its document, except those at indexes `skip`."""
    rows = store.conn().execute(
        f"SELECT {CHUNK_COLS} FROM chunks c WHERE c.doc_id=? AND c.idx IN (?, ?) ORDER BY c.idx",
        (hit.doc_id, hit.index - 1, hit.index + 1),
    )
    out = [hit_of(r) for r in rows if r[2] not in skip]
    for h in out:
        h.path, h.doc_hash = hit.path, hit.doc_hash
    return out
