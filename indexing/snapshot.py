"""The postings of one index generation as numpy arrays (`Snapshot`, immutable; see `indexing.postings`
for how a copy is kept up to date, and `indexing.postings_files` for its files)."""

from __future__ import annotations

import shutil
import tempfile
import weakref
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from indexing.scoring import Weighting

if TYPE_CHECKING:  # numpy loads with the first snapshot: small indexes never need it
    import numpy as np


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
    terms: Mapping[str, TermInfo]
    chunk_ids: np.ndarray  # row -> chunk id
    doc_ids: np.ndarray  # row -> document id
    rows: np.ndarray  # postings: the rows of each term, grouped by term
    weights: np.ndarray  # BM25F score of each posting: idf x saturated term frequency
    body: np.ndarray  # every row's body term ids, concatenated
    body_off: np.ndarray  # row r's body is body[body_off[r]:body_off[r + 1]]
    head: np.ndarray
    head_off: np.ndarray
    max_weights: dict[int, float] = field(default_factory=dict, compare=False, repr=False)  # term id -> its largest weight (cached)
    tf: np.ndarray | None = field(default=None, compare=False, repr=False)  # each posting's field-weighted tf
    tf_exact: bool = False  # `tf` holds every tf exactly: a delta can reweigh the postings (`indexing.delta`)

    @property
    def n_rows(self) -> int:
        return len(self.chunk_ids)

    def top(self, terms: Sequence[str], k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The `k` best rows by BM25F over `terms` (OR), best first: the rows, their scores, and
        which of the distinct known terms (bit i: the i-th, in query order, up to 63) each contains."""
        import numpy as np

        from indexing.topk import top_k

        infos = [info for t in dict.fromkeys(terms) if (info := self.terms.get(t)) is not None]
        if not infos or k <= 0:
            return np.empty(0, np.int64), np.empty(0, np.float32), np.empty(0, np.int64)
        postings = [(self.rows[i.start : i.end], self.weights[i.start : i.end]) for i in infos]
        return top_k(postings, [self._bound(i) for i in infos], k, self.chunk_ids)

    def _bound(self, info: TermInfo) -> float:
        """The largest weight of the term's postings (computed on first use)."""
        bound = self.max_weights.get(info.tid)
        if bound is None:
            bound = self.max_weights[info.tid] = float(self.weights[info.start : info.end].max())
        return bound

    def found(self, rows: np.ndarray, tids: Sequence[int], heads: bool = True) -> tuple[Occurrences, Occurrences]:
        """Where the terms `tids` occur in each row's body and (when `heads`) heading: positions and
        term ids. Both fields are gathered at once (some 25 small numpy operations, not 2 x 20)."""
        import numpy as np

        n = len(rows)
        none = Occurrences([], [], [0] * (n + 1))
        heads = heads and len(self.head) > 0  # (an index without headings)
        fields = [(self.body, self.body_off), (self.head, self.head_off)] if heads else [(self.body, self.body_off)]
        starts, lengths = _spans(rows, [off for _, off in fields])
        ends = lengths.cumsum()  # entry j (row j's body, then row j - n's heading) is gathered[ends[j] - lengths[j]:ends[j]]
        if not tids or not len(ends) or not ends[-1]:
            return none, none
        firsts = ends - lengths
        local = np.arange(ends[-1]) - firsts.repeat(lengths)  # each gathered term's position in its field
        at = local + starts.repeat(lengths)
        cut = int(ends[n - 1])  # the bodies' terms, then the headings'
        gathered = fields[0][0][at] if not heads else np.concatenate((self.body[at[:cut]], self.head[at[cut:]]))
        wanted = np.zeros(len(self.terms), dtype=bool)
        wanted[tids] = True
        hits = wanted[gathered].nonzero()[0]
        splits = [*hits.searchsorted(firsts).tolist(), len(hits)]
        positions, hit_tids = local[hits].tolist(), gathered[hits].tolist()
        body = Occurrences(positions, hit_tids, splits[: n + 1])
        return body, Occurrences(positions, hit_tids, splits[n:]) if heads else none


def _spans(rows: np.ndarray, offsets: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Where each row's field starts and how long it is, field after field (`offsets`: each field's
    row offsets, row r's terms are field[off[r]:off[r + 1]])."""
    import numpy as np

    after = rows + 1
    starts = [off[rows] for off in offsets]
    ends = [off[after] for off in offsets]
    if len(offsets) == 1:
        return starts[0], ends[0] - starts[0]
    first = np.concatenate(starts)
    return first, np.concatenate(ends) - first


@dataclass(frozen=True)
class Occurrences:
    """Term occurrences of several rows: row n's are positions/tids[splits[n]:splits[n + 1]]."""

    positions: list[int]
    tids: list[int]
    splits: list[int]

    def of(self, n: int) -> tuple[list[int], list[int]]:
        a, b = self.splits[n], self.splits[n + 1]
        return self.positions[a:b], self.tids[a:b]


def open_snapshot(directory: Path, generation: int, weighting: Weighting) -> Snapshot:
    """The snapshot saved in `directory`, memory-mapped (postings_files.SnapshotDamaged when it
    cannot be used)."""
    from indexing.postings_files import read_snapshot

    a, words, tf_exact = read_snapshot(directory, generation, weighting)
    return Snapshot(generation, weighting, TermTable(words, a["bounds"], a["idf"]), a["chunk_ids"], a["doc_ids"],
                    a["rows"], a["weights"], a["body"], a["body_off"], a["head"], a["head_off"], tf=a["tf"],
                    tf_exact=tf_exact)


def build_snapshot(
    generation: int, rows: Sequence[tuple[int, int, str, str]], weighting: Weighting, directory: Path | None = None
) -> Snapshot:
    """The snapshot of (chunk id, document id, head terms, body terms) rows, ordered by chunk id, written
    to `directory` (by default a temporary one, removed with the snapshot) and memory-mapped."""
    from indexing.postings_files import write_snapshot

    target = directory or Path(tempfile.mkdtemp(prefix="postings-")) / "snapshot"
    write_snapshot(target, generation, [rows], weighting)
    snap = open_snapshot(target, generation, weighting)
    if directory is None:
        weakref.finalize(snap, shutil.rmtree, target.parent, True)
    return snap


MADE_TERMS = 16_384  # TermInfo objects a TermTable keeps (about 4 MB)


class TermTable(Mapping[str, TermInfo]):
    """Term -> TermInfo, made on lookup from the vocabulary and the `bounds`/`idf` arrays."""

    def __init__(self, words: list[str], bounds: np.ndarray, idfs: np.ndarray) -> None:
        self._ids = dict(zip(words, range(len(words)), strict=True))
        self._bounds = bounds
        self._idf = idfs
        self._made: dict[str, TermInfo] = {}  # terms looked up lately: a query looks its terms up ~5 times

    def __getitem__(self, term: str) -> TermInfo:
        info = self._made.get(term)
        if info is None:
            i = self._ids[term]
            if len(self._made) >= MADE_TERMS:
                self._made.clear()
            info = self._made[term] = TermInfo(i, int(self._bounds[i]), int(self._bounds[i + 1]), float(self._idf[i]))
        return info

    def ids(self) -> dict[str, int]:
        """Term -> term id."""
        return self._ids

    def dfs(self) -> np.ndarray:
        """Each term id's document frequency (the length of its postings)."""
        import numpy as np

        return np.diff(self._bounds)

    def span(self, tid: int) -> tuple[int, int]:
        """The term id's slice of the postings."""
        return int(self._bounds[tid]), int(self._bounds[tid + 1])

    def idf_of(self, tid: int) -> float:
        """The term id's idf, as its postings' weights were computed with it."""
        return float(self._idf[tid])

    def get(self, term: str, default: TermInfo | None = None) -> TermInfo | None:  # type: ignore[override]
        """The term's TermInfo, else `default` (Mapping.get would call __getitem__ and catch a KeyError)."""
        info = self._made.get(term)
        return info if info is not None else self[term] if term in self._ids else default

    def __contains__(self, term: object) -> bool:
        return term in self._ids

    def __len__(self) -> int:
        return len(self._ids)

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids)
