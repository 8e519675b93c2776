"""Which documents each index generation changed, for deltas beside the in-memory postings.

Every write that adds or drops a document's chunks moves the generation on (`indexing.store`) and,
in the same transaction, records (that generation, the document id) in `index_changes`. A process
whose postings are of generation `base` learns what changed since from the rows of the generations
after it: the documents named there are re-read whole (their current chunks, none when deleted), and
every older chunk of theirs is masked out of the postings. Ids reused after a delete are safe: a
document id is always re-read as it is now, and a chunk id is only reused once its document was
dropped (and named). A generation moved on without naming its documents (a rebuild, an import, a
re-analysis, a log pruned past `base`) leaves a gap: then no delta is made and the postings are
rebuilt whole, as before.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

ChunkTerms = tuple[int, int, str, str]  # a chunk's (id, doc_id, head_terms, terms)
Rows = Callable[[str, Sequence[object]], list[Any]]  # (SQL, parameters) -> rows, in one read transaction


class ChangeSource(Protocol):
    """An index store (`indexing.store.IndexStore`, or PostgreSQL's)."""

    @property
    def backend(self) -> str: ...

    def consistent_read(self) -> AbstractContextManager[Rows]: ...

KEEP_GENERATIONS = 100_000  # generations whose changes are kept (a postings copy older than that is rebuilt)

_LOG = {
    False: "INSERT INTO index_changes(generation, doc_id) SELECT generation, value FROM stats, json_each(?)",
    True: "INSERT INTO index_changes(generation, doc_id) SELECT generation, d::bigint FROM stats, "
          "json_array_elements_text(?::json) AS d",
}
_PRUNE = "DELETE FROM index_changes WHERE generation < (SELECT generation FROM stats) - ?"
_CHUNKS = {
    False: "SELECT id, doc_id, head_terms, terms FROM chunks WHERE doc_id IN (SELECT value FROM json_each(?)) ORDER BY id",
    True: "SELECT id, doc_id, head_terms, terms FROM chunks WHERE doc_id IN "
          "(SELECT d::bigint FROM json_array_elements_text(?::json) AS d) ORDER BY id",
}


def log_change(conn: Any, doc_ids: Sequence[int], postgres: bool = False) -> None:
    """Record that the generation the caller's write just made changed `doc_ids` (and forget the
    changes of generations long past)."""
    if doc_ids:
        conn.execute(_LOG[postgres], (json.dumps([int(d) for d in doc_ids]),))
    conn.execute(_PRUNE, (KEEP_GENERATIONS,))


@dataclass(frozen=True)
class Changes:
    """What changed after a base generation, read in one transaction."""

    generation: int  # the index's generation now
    doc_ids: list[int]  # the documents changed since the base (sorted)
    rows: list[ChunkTerms]  # their chunks now: (chunk id, document id, head terms, terms), by chunk id


def read_changes(store: ChangeSource, base: int, max_docs: int) -> Changes | None:
    """The documents changed after generation `base` with their chunks now; None when the log cannot
    say (a generation that named no documents, or pruned) or more than `max_docs` changed."""
    with store.consistent_read() as all_rows:
        return _read(all_rows, base, max_docs, store.backend == "postgresql")


def _read(all_rows: Rows, base: int, max_docs: int,
          postgres: bool) -> Changes | None:
    (generation,) = all_rows("SELECT generation FROM stats", ())[0]
    generation = int(generation)
    if generation < base:
        return None
    logged = all_rows("SELECT generation, doc_id FROM index_changes WHERE generation > ? AND generation <= ?",
                      (base, generation))
    if len({int(g) for g, _ in logged}) != generation - base:
        return None  # a generation that named no documents: only a whole rebuild can follow it
    docs = sorted({int(d) for _, d in logged})
    if len(docs) > max_docs:
        return None
    rows = all_rows(_CHUNKS[postgres], (json.dumps(docs),)) if docs else []
    return Changes(generation, docs, [(int(a), int(b), str(c), str(d)) for a, b, c, d in rows])
