"""Candidates from the in-memory postings (`indexing.postings`): every chunk that contains a query
term is weighed, exactly, and the best `k` by BM25F go on to the scorer with their pre-weighted sums.

Answers natural-mode queries without phrases while the snapshot matches the index generation and
the ranking's BM25F settings; otherwise returns None and FTS5 answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from foundation.waiting import about_to_wait
from indexing.engine import Fields, FieldsBatch
from indexing.scope import PathFilter, active, allowed
from indexing.scoring import RankParams

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from indexing.delta import DeltaSnapshot
    from indexing.postings import MemoryIndex, Occurrences, Snapshot
    from indexing.query import Query
    from indexing.store import IndexStore


class MemoryEngine:
    def __init__(self, memory: MemoryIndex, store: IndexStore, params: RankParams) -> None:
        self.memory = memory
        self.store = store
        self.params = params
        self.weighting = params.weighting  # (a property that makes a new Weighting)

    def candidates(self, query: Query, k: int, scope: PathFilter | None) -> SnapshotRows | None:
        """The `k` best chunks by BM25F inside `scope`; None when the postings cannot answer (not
        built, stale, another mode, phrases, or too few of the widened top inside `scope`)."""
        if query.mode != "natural":
            return None
        snap = self._snapshot()
        if snap is None or query.parsed.phrases:
            return None
        scope = active(scope)
        rows, bm25, present = snap.top(query.parsed.terms, k if scope is None else 4 * k)
        if scope is not None:
            keep = allowed(self.store, snap.doc_ids[rows].tolist(), scope)
            if len(keep) < k and len(rows) == 4 * k:
                return None
            rows, bm25, present = rows[keep[:k]], bm25[keep[:k]], present[keep[:k]]
        return SnapshotRows(snap, rows, snap.chunk_ids[rows], bm25, present)

    def _snapshot(self) -> Snapshot | DeltaSnapshot | None:
        generation, chunks = self.store.generation()
        if not self.memory.holds(generation):
            about_to_wait()  # opening or building the postings (a call on the event loop moves to a thread)
        snap = self.memory.current(generation, chunks)
        return snap if snap is not None and snap.weighting == self.weighting else None


@dataclass(frozen=True)
class SnapshotRows:
    """Candidate rows of a snapshot (`engine.WeightedRows` keyed by term id)."""

    snap: Snapshot | DeltaSnapshot
    rows: npt.NDArray[np.int64]  # the candidates' rows in the snapshot
    ids: npt.NDArray[np.int64]
    base: npt.NDArray[np.float32]
    present: npt.NDArray[np.int64]

    def term(self, term: str) -> tuple[int, float] | None:
        info = self.snap.terms.get(term)
        return (info.tid, info.idf) if info is not None else None

    def fields(self, picks: npt.NDArray[np.intp], terms: list[str], heads: bool) -> FieldsBatch[int]:
        batch = self.rows[picks]
        known = self.snap.terms
        body, head = self.snap.found(batch, [info.tid for t in terms if (info := known.get(t)) is not None], heads)
        return _fields(body, head)


def _fields(body: Occurrences, head: Occurrences) -> list[Fields[int]]:
    """Each row's Fields, made at once (a list is a FieldsBatch)."""
    pos, tids, cuts = body.positions, body.tids, body.splits
    ends = cuts[1:]
    if not head.positions:
        none: list[int] = []
        return [Fields(pos[a:b], tids[a:b], none, none) for a, b in zip(cuts, ends, strict=False)]
    hpos, htids, hcuts = head.positions, head.tids, head.splits
    return [Fields(pos[a:b], tids[a:b], hpos[c:d], htids[c:d])
            for a, b, c, d in zip(cuts, ends, hcuts, hcuts[1:], strict=False)]
