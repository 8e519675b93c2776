"""An in-memory copy of the index's postings, for fast natural-language ranking.

FTS5 has to visit and score every chunk that matches any query term (an OR query over 100k
chunks takes milliseconds). This module keeps, per term, the rows that contain it with their
BM25F term weight precomputed, plus every chunk's term sequence for the proximity bonus, as
numpy arrays. A query then scores all matching chunks exactly with a few vectorised operations.

It is derived data, like the FTS table: built from `chunks.terms`/`chunks.head_terms` in a
background thread, tagged with the index generation it was built at, and never used once the
index has changed (search falls back to FTS5 until the rebuild is done).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from indexing.scoring import DEFAULT_WEIGHTING, Weighting, idf, length_norm, saturate

if TYPE_CHECKING:  # numpy loads with the first snapshot: small indexes never need it
    import numpy as np

    from indexing.store import IndexStore

log = logging.getLogger(__name__)

DEFAULT_MAX_CHUNKS = 200_000  # about 140 MB of postings


@dataclass(frozen=True)
class TermInfo:
    tid: int
    start: int  # this term's slice of Snapshot.rows / Snapshot.weights
    end: int
    idf: float


@dataclass(frozen=True)
class Snapshot:
    """The postings of one index generation (immutable; replaced whole by a rebuild)."""

    generation: int
    weighting: Weighting
    terms: dict[str, TermInfo]
    chunk_ids: np.ndarray  # row -> chunk id
    doc_ids: np.ndarray  # row -> document id
    rows: np.ndarray  # postings: the rows of each term, grouped by term
    weights: np.ndarray  # BM25F score of each posting: idf x saturated term frequency
    body: np.ndarray  # every row's body term ids, concatenated
    body_off: np.ndarray  # row r's body is body[body_off[r]:body_off[r + 1]]
    head: np.ndarray
    head_off: np.ndarray
    bounds: dict[int, float] = field(default_factory=dict, compare=False, repr=False)  # term id -> largest weight

    @property
    def n_rows(self) -> int:
        return len(self.chunk_ids)

    def top(self, terms: Sequence[str], k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The `k` best rows by BM25F over `terms` (OR), best first: the rows, their scores, and
        which of the distinct known terms (bit i: the i-th, in query order, up to 63) each contains."""
        import numpy as np

        from indexing.topk import top_k

        infos = [self.terms[t] for t in dict.fromkeys(terms) if t in self.terms]
        if not infos or k <= 0:
            return np.empty(0, np.int64), np.empty(0, np.float32), np.empty(0, np.int64)
        postings = [(self.rows[i.start : i.end], self.weights[i.start : i.end]) for i in infos]
        return top_k(postings, [self._bound(i) for i in infos], k, self.chunk_ids)

    def _bound(self, info: TermInfo) -> float:
        """The largest weight of the term's postings (computed on first use)."""
        bound = self.bounds.get(info.tid)
        if bound is None:
            bound = self.bounds[info.tid] = float(self.weights[info.start : info.end].max())
        return bound

    def found(self, rows: np.ndarray, terms: Sequence[str], field: str = "body") -> Occurrences:
        """Where `terms` occur in each row's body (or heading): positions and term ids."""
        import numpy as np

        seq, off = (self.body, self.body_off) if field == "body" else (self.head, self.head_off)
        tids = [self.terms[t].tid for t in terms if t in self.terms]
        starts, ends = off[rows], off[rows + 1]
        lengths = ends - starts
        if not tids or not lengths.any():
            return Occurrences([], [], [0] * (len(rows) + 1))
        bounds = np.concatenate(([0], np.cumsum(lengths)))
        gathered = seq[np.repeat(starts - bounds[:-1], lengths) + np.arange(bounds[-1])]
        wanted = np.zeros(len(self.terms), dtype=bool)
        wanted[tids] = True
        hits = np.flatnonzero(wanted[gathered])
        owner = np.searchsorted(bounds, hits, side="right") - 1
        splits = np.searchsorted(owner, np.arange(len(rows) + 1)).tolist()
        return Occurrences((hits - bounds[owner]).tolist(), gathered[hits].tolist(), splits)


@dataclass(frozen=True)
class Occurrences:
    """Term occurrences of several rows: row n's are positions/tids[splits[n]:splits[n + 1]]."""

    positions: list[int]
    tids: list[int]
    splits: list[int]

    def of(self, n: int) -> tuple[list[int], list[int]]:
        a, b = self.splits[n], self.splits[n + 1]
        return self.positions[a:b], self.tids[a:b]


def build_snapshot(
    generation: int, rows: Sequence[tuple[int, int, str, str]], weighting: Weighting
) -> Snapshot:
    """Postings for (chunk id, document id, head terms, body terms) rows, ordered by chunk id."""
    import numpy as np

    vocab: dict[str, int] = {}
    body_ids: list[int] = []
    head_ids: list[int] = []
    body_len = np.empty(len(rows), dtype=np.int64)
    head_len = np.empty(len(rows), dtype=np.int64)
    add = vocab.setdefault
    for r, (_cid, _did, head_text, body_text) in enumerate(rows):
        b = [add(t, len(vocab)) for t in body_text.split()]
        h = [add(t, len(vocab)) for t in head_text.split()] if head_text else []
        body_ids += b
        head_ids += h
        body_len[r], head_len[r] = len(b), len(h)
    n, v = len(rows), max(len(vocab), 1)
    body = np.array(body_ids, dtype=np.int32)
    head = np.array(head_ids, dtype=np.int32)
    body_off = np.concatenate(([0], np.cumsum(body_len)))
    head_off = np.concatenate(([0], np.cumsum(head_len)))
    # one key per (term, row) occurrence; its count (heading occurrences weighted) is the BM25F tf
    keys = np.concatenate((
        body.astype(np.int64) * n + np.repeat(np.arange(n), body_len),
        head.astype(np.int64) * n + np.repeat(np.arange(n), head_len),
    ))
    occurrence = np.concatenate((np.ones(len(body)), np.full(len(head), weighting.head_weight)))
    unique, inverse = np.unique(keys, return_inverse=True)
    tf = np.bincount(inverse, weights=occurrence, minlength=len(unique))
    post_rows = (unique % max(n, 1)).astype(np.int32)
    post_terms = unique // max(n, 1)
    avgdl = float(body_len.mean()) if n and body_len.sum() else 1.0
    norm = length_norm(body_len, avgdl, weighting)
    counts = np.bincount(post_terms, minlength=v)
    idfs = idf(n, counts, np.log)
    weights = saturate(idfs[post_terms], tf, norm[post_rows], weighting).astype(np.float32)
    bounds = np.concatenate(([0], np.cumsum(counts))).tolist()
    terms = {
        t: TermInfo(i, bounds[i], bounds[i + 1], float(idfs[i])) for t, i in vocab.items()
    }
    return Snapshot(
        generation, weighting, terms,
        np.array([r[0] for r in rows], dtype=np.int64), np.array([r[1] for r in rows], dtype=np.int64),
        post_rows, weights, body, body_off, head, head_off,
    )


class MemoryIndex:
    """The current Snapshot of one index database, rebuilt in the background when it goes stale."""

    def __init__(
        self, store: IndexStore, weighting: Weighting = DEFAULT_WEIGHTING, *, min_chunks: int = 1,
        max_chunks: int = DEFAULT_MAX_CHUNKS,
    ) -> None:
        self.store = store
        self.weighting = weighting
        self.min_chunks = max(1, min_chunks)
        self.max_chunks = max_chunks
        self._snapshot: Snapshot | None = None
        self._lock = threading.Lock()
        self._build_lock = threading.Lock()
        self._building = False

    def current(self, generation: int, chunks: int) -> Snapshot | None:
        """The snapshot of `generation`, or None (and a rebuild starts) when there is none yet."""
        snap = self._snapshot
        if snap is not None and snap.generation == generation:
            return snap
        if self._worth_it(chunks):
            self._start_build()
        else:
            self._snapshot = None  # outside the size range now: free the stale copy
        return None

    def _worth_it(self, chunks: int) -> bool:
        return self.min_chunks <= chunks <= self.max_chunks

    def state(self, generation: int, chunks: int) -> str:
        """How natural-language search runs now, for index_status (starts a build when stale)."""
        if chunks > self.max_chunks:
            return f"{self.store.engine_name}: over search_memory_max_chunks ({self.max_chunks:,})"
        if chunks < self.min_chunks:
            return f"{self.store.engine_name}: under search_memory_min_chunks ({self.min_chunks:,})"
        if self.current(generation, chunks) is not None:
            return "in memory"
        return f"{self.store.engine_name} while the in-memory copy is built"

    def build_now(self) -> Snapshot | None:
        """Build (or refresh) the snapshot in this thread; None when the index is outside the size range."""
        with self._build_lock:
            generation, chunks = self.store.generation()
            snap = self._snapshot if self._worth_it(chunks) else None
            if snap is not None and snap.generation == generation:
                return snap
            read = self.store.snapshot_rows(self._worth_it)  # the generation and the rows agree
            if read is None:
                self._snapshot = None
                return None
            self._snapshot = build_snapshot(read[0], read[1], self.weighting)
            return self._snapshot

    def _start_build(self) -> None:
        with self._lock:
            if self._building:
                return
            self._building = True
        threading.Thread(target=self._build_in_background, name="postings-build", daemon=True).start()

    def _build_in_background(self) -> None:
        try:
            self.build_now()
        except Exception:  # the FTS5 path keeps working; try again on a later search
            log.exception("building the in-memory postings failed")
        finally:
            with self._lock:
                self._building = False
