"""The index now as base postings + a small delta: what a change costs is in proportion to the change.

A `Snapshot` (the base) is of one generation. When the index moves on, the documents changed since
(`indexing.changelog`) are read again and made into a delta beside it, as search engines do with
segments: every base row of a changed document is masked out, the changed documents' chunks now
are the delta's rows (after the base's, in one row space), and new terms take ids after the base's
(one term-id space, for the scorer's proximity step). The base is merged with the delta by a whole
rebuild in the background, once the index is quiet (`indexing.postings.MemoryIndex`).

Scores are exactly those of a rebuild: BM25F weights depend on the collection (chunks, document
frequencies, average length), so the delta keeps the base's term frequencies (`Snapshot.tf`) and
weighs each query term's postings again with the statistics of now, with the very functions and
float operations of the build (`indexing.postings_files`).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from indexing.postings_files import _batch_postings, _term_ids, _Vocab
from indexing.scoring import Weighting, idf, length_norm, saturate
from indexing.snapshot import Occurrences, Snapshot, TermInfo, TermTable

if TYPE_CHECKING:
    import numpy as np

    from indexing.changelog import Changes

CACHED_TERMS = 4096  # terms whose re-weighed postings a delta keeps


class _Vocabulary(_Vocab):
    """The base's term ids, new terms after them."""

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


class DeltaSnapshot:
    """The base snapshot with the changed documents' rows masked out and a delta's rows after them;
    answers as the Snapshot of `generation` (`top`, `found`, `terms`, `chunk_ids`, `doc_ids`)."""

    def __init__(self, base: Snapshot, changes: Changes, weighting: Weighting) -> None:
        import numpy as np

        self.base, self.weighting, self.generation = base, weighting, changes.generation
        self.made = time.monotonic()
        self.changed_docs = len(changes.doc_ids)
        nb = base.n_rows
        self.alive = ~np.isin(base.doc_ids, np.asarray(changes.doc_ids, dtype=np.int64))
        delta_ids = np.array([r[0] for r in changes.rows], dtype=np.int64)
        at = np.searchsorted(base.chunk_ids, delta_ids)
        reused = at < nb
        reused[reused] = base.chunk_ids[at[reused]] == delta_ids[reused]
        self.alive[at[reused]] = False  # (a chunk id is only reused once its document was dropped)
        vocab = _Vocabulary(_table(base).ids())
        body, head, blen, hlen = _term_ids(changes.rows, vocab) if changes.rows else (
            np.zeros(0, np.int32), np.zeros(0, np.int32), [], [])
        n_terms = vocab.known + len(vocab.new)
        postings: tuple[np.ndarray, np.ndarray, np.ndarray] = _batch_postings(body, head, blen, hlen, 0, weighting) if (
            changes.rows) else (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.float64))
        self._dtid, self._drow, self._dtf = postings  # (term id, row, tf), by term then row
        df = np.zeros(n_terms, dtype=np.int64)
        df[: vocab.known] = _table(base).dfs()
        df -= _masked_df(base, ~self.alive, n_terms)
        df += np.bincount(self._dtid, minlength=n_terms)
        self.df = df
        masked_len = int((base.body_off[1:] - base.body_off[:-1])[~self.alive].sum())
        self.n = int(self.alive.sum()) + len(changes.rows)
        total = int(base.body_off[-1]) - masked_len + int(sum(blen))
        self.avgdl = total / self.n if self.n and total else 1.0  # (= numpy's mean of the lengths: an exact sum)
        self.idf = idf(self.n, df, np.log)
        self.delta_len = np.asarray(blen, dtype=np.int64)
        self.chunk_ids = np.concatenate((base.chunk_ids, delta_ids))
        self.doc_ids = np.concatenate((base.doc_ids, np.array([r[1] for r in changes.rows], dtype=np.int64)))
        self.terms = _Terms(self, vocab.new)
        self.delta = _delta_snapshot(self, body, head, blen, hlen)
        self._postings: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    @property
    def n_rows(self) -> int:
        return len(self.chunk_ids)

    def top(self, terms: Sequence[str], k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """As Snapshot.top, over the rows of now."""
        import numpy as np

        from indexing.topk import top_k

        infos = [info for t in dict.fromkeys(terms) if (info := self.terms.get(t)) is not None]
        if not infos or k <= 0:
            return np.empty(0, np.int64), np.empty(0, np.float32), np.empty(0, np.int64)
        postings = [self.postings(i.tid) for i in infos]
        return top_k(postings, [float(w.max()) for _, w in postings], k, self.chunk_ids)

    def postings(self, tid: int) -> tuple[np.ndarray, np.ndarray]:
        """The term's rows of now (ascending) and their weights, weighed as a rebuild would."""
        got = self._postings.get(tid)
        if got is None:
            got = self._weigh(tid)
            if len(self._postings) >= CACHED_TERMS:
                self._postings.clear()
            self._postings[tid] = got
        return got

    def _weigh(self, tid: int) -> tuple[np.ndarray, np.ndarray]:
        import numpy as np

        base, w = self.base, self.weighting
        rows, tfs, lengths = [], [], []
        if tid < len(base.terms):
            s, e = _table(base).span(tid)
            r = base.rows[s:e]
            keep = self.alive[r]
            r = r[keep].astype(np.int64)
            rows.append(r)
            tfs.append(base.tf[s:e][keep].astype(np.float64))  # type: ignore[index]
            lengths.append(base.body_off[r + 1] - base.body_off[r])
        a, b = np.searchsorted(self._dtid, [tid, tid + 1])
        rows.append(self._drow[a:b] + base.n_rows)
        tfs.append(self._dtf[a:b])
        lengths.append(self.delta_len[self._drow[a:b]])
        row, tf, length = np.concatenate(rows), np.concatenate(tfs), np.concatenate(lengths).astype(np.int64)
        weights = saturate(self.idf[[tid] * len(row)], tf, length_norm(length, self.avgdl, w), w)
        return row, weights.astype(np.float32)

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


def _masked_df(base: Snapshot, masked: np.ndarray, n_terms: int) -> np.ndarray:
    """How many masked rows hold each term (in the body or the heading)."""
    import numpy as np

    rows = masked.nonzero()[0]
    keys = []
    for data, off in ((base.body, base.body_off), (base.head, base.head_off)):
        starts, ends = off[rows], off[rows + 1]
        lengths = ends - starts
        at = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths) + np.repeat(starts, lengths)
        keys.append(data[at].astype(np.int64) * max(1, len(rows)) + np.repeat(np.arange(len(rows)), lengths))
    unique = np.unique(np.concatenate(keys))
    return np.bincount(unique // max(1, len(rows)), minlength=n_terms)


def _table(snap: Snapshot) -> TermTable:
    terms = snap.terms
    assert isinstance(terms, TermTable), "a delta's base is a snapshot opened from its files"
    return terms


def _delta_snapshot(view: DeltaSnapshot, body: np.ndarray, head: np.ndarray, blen: list[int],
                    hlen: list[int]) -> Snapshot:
    """The delta's rows as a Snapshot (for `found`: its terms are the view's, one id space)."""
    import numpy as np

    empty = np.zeros(0, dtype=np.int64)
    return Snapshot(view.generation, view.weighting, view.terms, empty, empty, empty, empty, body,
                    np.concatenate(([0], np.cumsum(blen, dtype=np.int64))), head,
                    np.concatenate(([0], np.cumsum(hlen, dtype=np.int64))))


class _Terms(Mapping[str, TermInfo]):
    """Term -> TermInfo of now (idf of now; no rows span: see DeltaSnapshot.postings); a term
    no chunk holds any more is not there."""

    def __init__(self, view: DeltaSnapshot, new: list[str]) -> None:
        self.view = view
        self.base = _table(view.base).ids()
        self.new = {t: len(self.base) + i for i, t in enumerate(new)}

    def tid(self, term: str) -> int | None:
        tid = self.base.get(term)
        if tid is None:
            tid = self.new.get(term)
        return tid if tid is not None and self.view.df[tid] > 0 else None

    def get(self, term: str, default: TermInfo | None = None) -> TermInfo | None:  # type: ignore[override]
        tid = self.tid(term)
        return TermInfo(tid, 0, 0, float(self.view.idf[tid])) if tid is not None else default

    def __getitem__(self, term: str) -> TermInfo:
        info = self.get(term)
        if info is None:
            raise KeyError(term)
        return info

    def __contains__(self, term: object) -> bool:
        return isinstance(term, str) and self.tid(term) is not None

    def __len__(self) -> int:
        return len(self.view.df)  # the id space (Snapshot.found sizes its lookup table with it)

    def __iter__(self) -> Iterator[str]:
        yield from (t for t in self.view.base.terms if t in self)
        yield from (t for t in self.new if t in self)
