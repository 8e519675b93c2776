"""The index now as base postings + a small delta: what a change costs is in proportion to the change.

A `Snapshot` (the base) is of one generation. When the index moves on, the documents changed since
(`indexing.changelog`) are read again and made into a delta beside it, as search engines do with
segments: every base row of a changed document is masked out, the changed documents' chunks now
are the delta's rows (after the base's, in one row space), and new terms take ids after the base's
(one term-id space, for the scorer's proximity step). The base is merged with the delta by a whole
rebuild in the background, once the index is quiet (`indexing.postings.MemoryIndex`).

Scores are exactly those of a rebuild, though BM25F weights depend on the collection (chunks, document
frequencies, average length): the base's stored weights, scaled by each query term's idf change, are
within a known factor of the weights of now, so they pick the few rows that can be in the top k, and
only those are weighed again, from the base's term frequencies (`Snapshot.tf`) with the statistics of
now and the very functions and float operations of the build (`indexing.postings_files`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from indexing.postings_files import _batch_postings, _term_ids, _Vocab
from indexing.scoring import Weighting, idf, length_norm, saturate
from indexing.snapshot import Occurrences, Snapshot, TermInfo, TermTable

if TYPE_CHECKING:
    import numpy as np

    from indexing.changelog import Changes, ChunkTerms

CACHED_TERMS = 4096  # terms whose scaled postings a delta keeps


class _Vocabulary(_Vocab):
    """The base's term ids, new terms after them (shared by the deltas of one base, only ever added to)."""

    def __init__(self, lookup: Mapping[str, int]) -> None:
        super().__init__()
        self.base = lookup
        self.known = len(lookup)
        self.new: list[str] = []

    def __missing__(self, term: str) -> int:
        tid = self.base.get(term)
        if tid is None:
            tid = self.known + len(self.new)
            self.new.append(term)
        self[term] = tid
        return tid


@dataclass(frozen=True)
class _Chunk:
    """A delta chunk: its term ids and postings (distinct term ids, by id, and their tf)."""

    body: np.ndarray
    head: np.ndarray
    tids: np.ndarray
    tf: np.ndarray

    @staticmethod
    def made(rows: Sequence[ChunkTerms], vocab: _Vocab, weighting: Weighting) -> list[_Chunk]:
        """The chunks of `rows`, in one pass for all of them (a row's postings and sums are those of
        the build: `_batch_postings` keeps each row's occurrences in their order)."""
        import numpy as np

        if not rows:
            return []
        body, head, blen, hlen = _term_ids(rows, vocab)
        tids, at, tf = _batch_postings(body, head, blen, hlen, 0, weighting)
        order = np.argsort(at, kind="stable")  # by row; each row's term ids stay ascending
        cuts = np.searchsorted(at[order], np.arange(1, len(rows)))
        bcut, hcut = np.cumsum(blen)[:-1], np.cumsum(hlen)[:-1]
        return [_Chunk(b.copy(), h.copy(), t, f) for b, h, t, f in zip(
            np.split(body, bcut), np.split(head, hcut), np.split(tids[order], cuts), np.split(tf[order], cuts),
            strict=True)]


@dataclass(frozen=True)
class _Masked:
    """The base rows masked out so far (only ever more, for one base) and what they held."""

    alive: np.ndarray  # base row -> not masked
    at: np.ndarray  # the masked base rows
    docs: frozenset[int]  # the changed documents
    df: dict[int, int]  # term id -> masked rows holding it
    rows: int
    length: int  # their body terms
    ascending: bool  # the base rows' document ids never descend (documents are written with their chunks)


class DeltaSnapshot:
    """The base snapshot with the changed documents' rows masked out and a delta's rows after them;
    answers as the Snapshot of `generation` (`top`, `found`, `terms`, `chunk_ids`, `doc_ids`).

    Made from the previous delta of the same base (`before`) and the changes after it: what a new
    generation costs is in proportion to what it changed (plus one pass over a byte per base row)."""

    def __init__(self, base: Snapshot, changes: Changes, weighting: Weighting, before: DeltaSnapshot | None) -> None:
        import numpy as np

        self.base, self.weighting, self.generation = base, weighting, changes.generation
        self.made = time.monotonic()
        self.vocab: _Vocabulary = before.vocab if before is not None else _Vocabulary(_table(base).ids())
        fresh = set(changes.doc_ids)
        kept = [(r, c) for r, c in zip(before.rows, before.chunks, strict=True) if r[1] not in fresh] if before else []
        made = list(zip(changes.rows, _Chunk.made(changes.rows, self.vocab, weighting), strict=True))
        both = sorted(kept + made, key=lambda pair: pair[0][0])  # by chunk id
        self.rows: list[ChunkTerms] = [r for r, _ in both]
        self.chunks: list[_Chunk] = [c for _, c in both]
        chunks = self.chunks
        self.masked: _Masked = _mask(base, before.masked if before is not None else None, fresh, changes.rows)
        self.n_terms = len(self.vocab.base) + len(self.vocab.new)
        ids = np.array([r[0] for r in self.rows], dtype=np.int64)
        if before is None or len(made) > len(kept):
            self._delta_postings(chunks)
        else:
            self._merged_postings(before, fresh, made, ids)
        blen = [len(c.body) for c in chunks]
        self.delta_len = np.asarray(blen, dtype=np.int64)
        self.n = base.n_rows - self.masked.rows + len(self.rows)
        total = int(base.body_off[-1]) - self.masked.length + int(sum(blen))
        self.avgdl = total / self.n if self.n and total else 1.0  # (= numpy's mean of the lengths: an exact sum)
        self.chunk_ids = _Joined(base.chunk_ids, ids)
        self.doc_ids = _Joined(base.doc_ids, np.array([r[1] for r in self.rows], dtype=np.int64))
        self.terms = _Terms(self)
        self.delta = _delta_snapshot(self, chunks)
        self._postings: dict[int, tuple[np.ndarray, np.ndarray, float]] = {}  # term id -> `_scaled`
        self._idf: dict[int, float] = {}

    @property
    def changed_docs(self) -> int:
        return len(self.masked.docs)

    @property
    def alive(self) -> np.ndarray:
        return self.masked.alive

    @property
    def n_rows(self) -> int:
        return len(self.chunk_ids)

    def _delta_postings(self, chunks: list[_Chunk]) -> None:
        """The delta's (term id, row, tf), by term then row."""
        import numpy as np

        if not chunks:
            self._dtid, self._drow, self._dtf = np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float64)
            return
        tid = np.concatenate([c.tids for c in chunks])
        row = np.repeat(np.arange(len(chunks), dtype=np.int64), [len(c.tids) for c in chunks])
        tf = np.concatenate([c.tf for c in chunks])
        order = np.argsort(tid, kind="stable")
        self._dtid, self._drow, self._dtf = tid[order], row[order], tf[order]

    def _merged_postings(self, before: DeltaSnapshot, fresh: set[int], made: list[tuple[ChunkTerms, _Chunk]],
                         ids: np.ndarray) -> None:
        """As `_delta_postings`, from `before`'s (already by term then row) and the `made` chunks' only: the
        rows `before` keeps are renumbered (an order-keeping map: they stay sorted) and the made chunks'
        postings, sorted alone, are inserted where they belong. A new generation during a burst then costs
        in proportion to what it changed, not to the whole delta."""
        import numpy as np

        stays = np.fromiter((r[1] not in fresh for r in before.rows), dtype=bool, count=len(before.rows))
        now = np.full(len(before.rows), -1, dtype=np.int64)
        now[stays] = np.searchsorted(ids, before.chunk_ids.delta[stays])
        keep = stays[before._drow]
        k_tid, k_row, k_tf = before._dtid[keep], now[before._drow[keep]], before._dtf[keep]
        if not made:
            self._dtid, self._drow, self._dtf = k_tid, k_row, k_tf
            return
        chunks = [c for _, c in made]
        rows = np.searchsorted(ids, np.array([r[0] for r, _ in made], dtype=np.int64))
        m_tid = np.concatenate([c.tids for c in chunks])
        m_row = np.repeat(rows, [len(c.tids) for c in chunks])
        m_tf = np.concatenate([c.tf for c in chunks])
        order = np.lexsort((m_row, m_tid))
        m_tid, m_row, m_tf = m_tid[order], m_row[order], m_tf[order]
        n = max(1, len(ids))
        at = np.searchsorted(k_tid * n + k_row, m_tid * n + m_row)
        self._dtid, self._drow, self._dtf = np.insert(k_tid, at, m_tid), np.insert(k_row, at, m_row), np.insert(
            k_tf, at, m_tf)

    def df(self, tid: int) -> int:
        """Chunks holding the term now."""
        import numpy as np

        held = 0
        if tid < self.vocab.known:
            s, e = _table(self.base).span(tid)
            held = e - s - self.masked.df.get(tid, 0)
        a, b = np.searchsorted(self._dtid, [tid, tid + 1])
        return held + int(b - a)

    def idf(self, tid: int) -> float:
        """The term's idf now, as a rebuild computes it (numpy's log of the same float64 values)."""
        import numpy as np

        got = self._idf.get(tid)
        if got is None:
            got = self._idf[tid] = float(idf(self.n, np.array([self.df(tid)], dtype=np.int64), np.log)[0])
        return got
    def top(self, terms: Sequence[str], k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """As Snapshot.top, over the rows of now, without weighing every posting again. The base's stored
        weights, each term's times its idf now over its idf then, are within a factor [lo, hi] of the weights
        of now (only the average length moved in the length normalisation: `_slack`); so the rows that rank
        within lo / hi of the k-th best by them hold the exact top k, and only those are weighed exactly
        (`_exact`), with the very operations of a rebuild."""
        import numpy as np

        from indexing.topk import contenders, presence, summed

        tids = list(dict.fromkeys(info.tid for t in terms if (info := self.terms.get(t)) is not None))
        if not tids or k <= 0:
            return np.empty(0, np.int64), np.empty(0, np.float32), np.empty(0, np.int64)
        scaled = [self._scaled(tid) for tid in tids]
        postings = [(rows, weights) for rows, weights, _ in scaled]
        scores = summed(postings, self.n_rows)
        scores[self.masked.at] = 0  # the changed documents' rows, still in the base's postings
        cand = contenders(postings, [bound for _, _, bound in scaled], k, scores, self._slack(len(tids)))
        exact = self._exact(cand, tids)
        cand, exact = cand[exact > 0], exact[exact > 0]
        order = np.lexsort((self.chunk_ids[cand], -exact))[:k]
        best = cand[order]
        return best, exact[order], presence(best, [rows for rows, _ in postings])

    def _slack(self, terms: int) -> float:
        """lo / hi: a row's sum of scaled base weights times [lo, hi] holds its exact score. A weight is
        idf x tf (k1 + 1) / (tf + k1 (1 - b) + k1 b len / avgdl): with the idf's change scaled out, only
        the last term of the denominator moved, by avgdl then / avgdl now, so the weight moved by a factor
        between 1 and r = avgdl now / avgdl then; plus float32 rounding (stored weights, the scaling, sums)."""
        base = self.base
        then = float(base.body_off[-1]) / base.n_rows if base.n_rows and base.body_off[-1] else 1.0
        r = self.avgdl / then
        rounding = (terms + 4) * 2.0**-23
        return min(1.0, r) * (1 - rounding) / (max(1.0, r) * (1 + rounding))

    def _scaled(self, tid: int) -> tuple[np.ndarray, np.ndarray, float]:
        """The term's rows of now (ascending: the base's, masked ones too, then the delta's), their weights
        (the base's scaled by the idf's change, the delta's exact) and an upper bound of those."""
        got = self._postings.get(tid)
        if got is None:
            got = self._scaled_now(tid)
            if len(self._postings) >= CACHED_TERMS:
                self._postings.clear()
            self._postings[tid] = got
        return got

    def _scaled_now(self, tid: int) -> tuple[np.ndarray, np.ndarray, float]:
        import numpy as np

        base = self.base
        rows: list[np.ndarray] = []
        weights: list[np.ndarray] = []
        bound = 0.0
        s, e = _table(base).span(tid) if tid < self.vocab.known else (0, 0)
        if e > s:
            scale = self.idf(tid) / _table(base).idf_of(tid)
            rows.append(base.rows[s:e])
            weights.append(base.weights[s:e] * np.float32(scale))
            bound = base._bound(TermInfo(tid, s, e, 0.0)) * scale * (1 + 2.0**-21)  # (over the float32 product)
        a, b = np.searchsorted(self._dtid, [tid, tid + 1])
        if b > a:
            rows.append(self._drow[a:b] + base.n_rows)
            weights.append(self._weights(tid, self._dtf[a:b], self.delta_len[self._drow[a:b]]))
            bound = max(bound, float(weights[-1].max()))
        if len(rows) == 1:
            return rows[0], weights[0], bound
        if not rows:
            return np.zeros(0, np.int64), np.zeros(0, np.float32), 0.0
        return np.concatenate(rows), np.concatenate(weights), bound

    def _weights(self, tid: int, tf: np.ndarray, length: np.ndarray) -> np.ndarray:
        """Postings' weights of now (tf float64, body lengths int64), as a rebuild computes them."""
        import numpy as np

        w = self.weighting
        return saturate(np.full(len(tf), self.idf(tid)), tf, length_norm(length, self.avgdl, w), w).astype(np.float32)

    def _exact(self, cand: np.ndarray, tids: Sequence[int]) -> np.ndarray:
        """The rows' float32 sums of their weights of now, term after term as a rebuild adds them (0: a row
        of a changed document)."""
        import numpy as np

        base, nb = self.base, self.base.n_rows
        total = np.zeros(len(cand), np.float32)
        in_base = cand < nb
        at_base = np.flatnonzero(in_base)
        at_base = at_base[self.masked.alive[cand[at_base]]]
        at_delta = np.flatnonzero(~in_base)
        base_rows, delta_rows = cand[at_base].astype(np.int64), cand[at_delta] - nb
        for tid in tids:
            weight = np.zeros(len(cand), np.float32)
            s, e = _table(base).span(tid) if tid < self.vocab.known else (0, 0)
            where, hit = _found(base.rows[s:e], base_rows)
            if len(where):
                r = base_rows[hit]
                tf = base.tf[s + where].astype(np.float64)  # type: ignore[index]
                weight[at_base[hit]] = self._weights(tid, tf, base.body_off[r + 1] - base.body_off[r])
            a, b = np.searchsorted(self._dtid, [tid, tid + 1])
            where, hit = _found(self._drow[a:b], delta_rows)
            if len(where):
                weight[at_delta[hit]] = self._weights(tid, self._dtf[a + where], self.delta_len[delta_rows[hit]])
            total += weight
        return total

    def found(self, rows: np.ndarray, tids: Sequence[int], heads: bool = True) -> tuple[Occurrences, Occurrences]:
        """As Snapshot.found: base rows from the base, delta rows from the delta."""
        import numpy as np

        nb = self.base.n_rows
        in_base = rows < nb
        if in_base.all():
            return self.base.found(rows, [t for t in tids if t < len(self.base.terms)], heads)
        if not in_base.any():
            return self.delta.found(rows - nb, tids, heads)
        first = self.base.found(rows[in_base], [t for t in tids if t < len(self.base.terms)], heads)
        second = self.delta.found(rows[~in_base] - nb, tids, heads)
        which = np.cumsum(in_base) - 1, np.cumsum(~in_base) - 1
        return tuple(_merged([p[f] for p in (first, second)], in_base.tolist(), which)  # type: ignore[return-value]
                     for f in (0, 1))


def _found(rows: np.ndarray, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each of `wanted` is in the ascending `rows`, for those that are there, and which those are."""
    import numpy as np

    if not len(rows) or not len(wanted):
        return np.zeros(0, np.int64), np.zeros(len(wanted), bool)
    at = np.minimum(rows.searchsorted(wanted), len(rows) - 1)
    hit = rows[at] == wanted
    return at[hit], hit


def _merged(parts: list[Occurrences], in_base: list[bool], which: tuple[np.ndarray, np.ndarray]) -> Occurrences:
    positions: list[int] = []
    tids: list[int] = []
    splits = [0]
    for n, here in enumerate(in_base):
        pos, t = parts[0 if here else 1].of(int(which[0 if here else 1][n]))
        positions += pos
        tids += t
        splits.append(len(positions))
    return Occurrences(positions, tids, splits)


def _mask(base: Snapshot, before: _Masked | None, docs: set[int], rows: list[ChunkTerms]) -> _Masked:
    """`before` and every base row of `docs`, or of a chunk id of `rows` (a chunk id is only reused
    once its document was dropped), masked out. Costs a copy of a byte per base row, the rest in
    proportion to the change."""
    import numpy as np

    alive = before.alive.copy() if before is not None else np.ones(base.n_rows, dtype=bool)
    ids = np.array([r[0] for r in rows], dtype=np.int64)
    at = np.searchsorted(base.chunk_ids, ids)
    reused = at < base.n_rows
    reused[reused] = base.chunk_ids[at[reused]] == ids[reused]
    ascending = before.ascending if before is not None else bool(np.all(base.doc_ids[1:] >= base.doc_ids[:-1]))
    hit = np.concatenate((_rows_of(base, docs, ascending), at[reused])).astype(np.int64)
    newly = np.unique(hit[alive[hit]])
    alive[newly] = False
    df = dict(before.df) if before is not None else {}
    for tid, count in zip(*_held(base, newly), strict=True):
        df[tid] = df.get(tid, 0) + count
    length = int((base.body_off[newly + 1] - base.body_off[newly]).sum())
    at = np.concatenate((before.at, newly)) if before is not None else newly
    return _Masked(alive, at, frozenset(docs | (before.docs if before is not None else frozenset())), df,
                   (before.rows if before is not None else 0) + len(newly),
                   (before.length if before is not None else 0) + length, ascending)


def _rows_of(base: Snapshot, docs: set[int], ascending: bool) -> np.ndarray:
    """The base rows of `docs`: by binary search where the rows' document ids ascend, else by one
    pass over them."""
    import numpy as np

    wanted = np.fromiter(sorted(docs), dtype=np.int64, count=len(docs))
    if not ascending:
        return np.asarray(np.isin(base.doc_ids, wanted).nonzero()[0], dtype=np.int64)
    first, stop = np.searchsorted(base.doc_ids, wanted), np.searchsorted(base.doc_ids, wanted, side="right")
    spans = stop - first
    rows: np.ndarray = np.arange(int(spans.sum()), dtype=np.int64) - np.repeat(np.cumsum(spans) - spans - first, spans)
    return rows


def _held(base: Snapshot, rows: np.ndarray) -> tuple[list[int], list[int]]:
    """The term ids the base `rows` hold (body or heading) and in how many of them."""
    import numpy as np

    keys = []
    for data, off in ((base.body, base.body_off), (base.head, base.head_off)):
        starts, ends = off[rows], off[rows + 1]
        lengths = ends - starts
        at = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths) + np.repeat(starts, lengths)
        keys.append(data[at].astype(np.int64) * max(1, len(rows)) + np.repeat(np.arange(len(rows)), lengths))
    unique = np.unique(np.concatenate(keys))
    tids, counts = np.unique(unique // max(1, len(rows)), return_counts=True)
    return tids.tolist(), counts.tolist()


class _Joined:
    """A base array and the delta's after it, indexed by row (without copying the base)."""

    def __init__(self, base: np.ndarray, delta: np.ndarray) -> None:
        self.base, self.delta = base, delta

    def __len__(self) -> int:
        return len(self.base) + len(self.delta)

    def __getitem__(self, rows: np.ndarray) -> np.ndarray:
        import numpy as np

        rows = np.asarray(rows)
        nb = len(self.base)
        in_base = rows < nb
        if in_base.all():
            return self.base[rows]  # type: ignore[no-any-return]
        got = np.empty(rows.shape, dtype=self.base.dtype)
        got[in_base] = self.base[rows[in_base]]
        got[~in_base] = self.delta[rows[~in_base] - nb]
        return got


def _table(snap: Snapshot) -> TermTable:
    terms = snap.terms
    assert isinstance(terms, TermTable), "a delta's base is a snapshot opened from its files"
    return terms


def _delta_snapshot(view: DeltaSnapshot, chunks: list[_Chunk]) -> Snapshot:
    """The delta's rows as a Snapshot (for `found`: its terms are the view's, one id space)."""
    import numpy as np

    empty = np.zeros(0, dtype=np.int64)

    def joined(parts: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        data = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)
        return data, np.concatenate(([0], np.cumsum([len(p) for p in parts], dtype=np.int64)))

    body, body_off = joined([c.body for c in chunks])
    head, head_off = joined([c.head for c in chunks])
    return Snapshot(view.generation, view.weighting, view.terms, empty, empty, empty, empty, body, body_off, head,
                    head_off)


class _Terms(Mapping[str, TermInfo]):
    """Term -> TermInfo of now (idf of now; no rows span: see DeltaSnapshot._scaled); a term
    no chunk holds any more is not there."""

    def __init__(self, view: DeltaSnapshot) -> None:
        self.view = view
        self.size = view.n_terms

    def tid(self, term: str) -> int | None:
        vocab = self.view.vocab
        tid = vocab.get(term)  # (dict.get: no new id)
        if tid is None:
            tid = vocab.base.get(term)
        return tid if tid is not None and tid < self.size and self.view.df(tid) > 0 else None

    def get(self, term: str, default: TermInfo | None = None) -> TermInfo | None:  # type: ignore[override]
        tid = self.tid(term)
        return TermInfo(tid, 0, 0, self.view.idf(tid)) if tid is not None else default

    def __getitem__(self, term: str) -> TermInfo:
        info = self.get(term)
        if info is None:
            raise KeyError(term)
        return info

    def __contains__(self, term: object) -> bool:
        return isinstance(term, str) and self.tid(term) is not None

    def __len__(self) -> int:
        return self.size  # the id space (Snapshot.found sizes its lookup table with it)

    def __iter__(self) -> Iterator[str]:
        yield from (t for t in self.view.vocab.base if t in self)
        yield from (t for t in self.view.vocab.new[: self.size - self.view.vocab.known] if t in self)
