"""The chunk vectors of large indexes, kept in step incrementally: an HNSW graph per language (`usearch`, the
semantic extra), used instead of the exact matrix (which is read whole after each change) from
`indexing.vectors.ANN_MIN_CHUNKS` chunks on. Up to `FLAT_MAX` rows a search still takes the exact int8 pass
over every row (`indexing.exact_vectors`), faster there than the graphs; beyond it, the graphs.

Each graph holds its language's vectors centred (minus the language's mean vector, int8 steps of one size, inner
product: the same order as the cosine), keyed by chunk id; a query's candidates are re-scored with the exact
cosine of the stored vector (int8 x scale, kept beside the graphs, as the exact matrix has it), so the fusion
sees the same numbers on both paths.
The z-scores need each language's mean and spread of the query's cosines over all its chunks: they come
from stored sums (of the vectors, and of their outer products), exact, with no pass over the rows.

Kept in step by a diff against `chunk_vectors` (chunk id and scale: a chunk id reused for new text has
another vector, so another scale): removed and changed chunks leave their graph, new ones join it,
the sums follow. When most rows changed the graphs are built again. The graphs and the sums are saved in the
data directory (`vectors/`, files named by a token, `current` names the latest: a reader never sees a half
written set), so a server start loads them and only adds what changed meanwhile.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from indexing.exact_vectors import (
    cosines_at,
    l1_norms,
    moments_of,
    nearest_rows,
    positions,
    quantised,
)

if TYPE_CHECKING:
    from usearch.index import Index

    from indexing.embeddings import StoredVectors
    from indexing.store import IndexStore


class VectorSource(Protocol):
    """The stored vectors as `indexing.vectors.VectorStore` reads them."""

    store: IndexStore

    def scales(self) -> tuple[np.ndarray, np.ndarray]: ...

    def stored(self, ids: Sequence[int] | None = None) -> StoredVectors: ...


log = logging.getLogger(__name__)

CONNECTIVITY = 16  # graph edges per node (usearch's default)
EXPANSION_ADD = 128  # candidates kept while linking a new node (usearch's default)
EXPANSION_SEARCH = 800  # candidates kept while searching. bench.ann_cost, noisy copies of 500 real vectors (hard: near ties):
# at 20k, 400 finds 0.99 of the exact 50; at 100k, 400 / 800 / 1600 find 0.86 / 0.92 / 0.97 of the exact 50 and
# 0.94 / 0.99 / 1.00 of the exact 10 of each language, for 7 / 11 / 16 ms CPU a query on 2 loaded cores
OVERFETCH = 2  # graph neighbours asked per chunk wanted, re-scored exactly
# Up to this many rows, a search takes the exact int8 pass over every row (indexing.exact_vectors), and no graphs
# are built (their CPU and ~1 KB a chunk saved). numkong's kernel on one core, other processes paused: 4.4 ms at
# 100k rows, 10.9 at 300k, 40 at 1M; the graphs took 14 ms at 100k (random vectors, EXPANSION_SEARCH 800, both
# languages).
FLAT_MAX = 300_000
REBUILD_SHARE = 0.5  # more rows changed than this share of the index: build the graphs again
SAVE_SHARE = 0.01  # rows changed since the last save, as a share of the index, before it is saved again
FETCH = 5_000  # rows read from the store and added at a time (a search waits at most for one such step)


def row_sums(rows: np.ndarray, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sums, squares) of `rows` per language code (0: other, 1: Chinese), float64."""
    dim = rows.shape[1] if rows.ndim == 2 else 0
    sums, squares = np.zeros((2, dim)), np.zeros((2, dim, dim))
    for code in (0, 1):
        part = rows[codes == code].astype(np.float64)
        sums[code], squares[code] = part.sum(axis=0), part.T @ part
    return sums, squares


def changes(old_ids: np.ndarray, old_scales: np.ndarray, new_ids: np.ndarray, new_scales: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray]:
    """(ids to remove, ids to add) to turn the (id, scale) rows `old` into `new` (both sorted by id, ids unique):
    an id whose scale changed is in both."""
    return old_ids[~kept(old_ids, old_scales, new_ids, new_scales)], new_ids[~kept(new_ids, new_scales, old_ids, old_scales)]


def kept(ids: np.ndarray, scales: np.ndarray, other_ids: np.ndarray, other_scales: np.ndarray) -> np.ndarray:
    """For each (id, scale) row: True when `other` has the same row (vectorised: 1M rows in ~0.1 s)."""
    if not len(other_ids):
        return np.zeros(len(ids), dtype=bool)
    at = np.searchsorted(other_ids, ids).clip(0, len(other_ids) - 1)
    same: np.ndarray = (other_ids[at] == ids) & (other_scales[at] == scales)
    return same


class AnnVectors:
    """Every chunk vector: the sorted `ids`, their int8 `codes`, `scales`, L1 norms and `chinese` flags, per-language
    sums for the z-scores, and beyond FLAT_MAX rows two usearch graphs (other, Chinese). Reads as `indexing.vectors.VectorMatrix` does
    (ids, chinese, position, scorer); `sync` brings it in step with the store."""

    def __init__(self, dim: int, model: str, graphed: bool = True) -> None:
        self.dim, self.model = dim, model
        self.graphed = graphed  # the graphs hold every row (beyond FLAT_MAX), else they stay empty: searches are flat
        self.ids = np.zeros(0, np.int64)
        self.scales = np.zeros(0, np.float64)
        self.chinese = np.zeros(0, bool)
        self.codes = np.zeros((0, dim), np.int8)  # each row's stored int8 vector (the exact cosines)
        self.l1 = np.zeros(0)  # each row's L1 norm x scale (the int8 pass's error bound)
        self.sums, self.squares = np.zeros((2, dim)), np.zeros((2, dim, dim))
        self.centre = np.zeros((2, dim))  # per graph: subtracted from its vectors (fixed when it gets its first rows)
        self.step = np.zeros(2)  # per graph: one int8 step of its centred vectors
        self.graphs = [new_graph(dim), new_graph(dim)]
        self.generation = -1  # the store's generation at the last sync
        self.unsaved = 0  # rows added or removed since saved
        self.lock = threading.RLock()  # held while rows change, and by a search's reads

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def counts(self) -> np.ndarray:
        return np.array([len(self.ids) - int(self.chinese.sum()), int(self.chinese.sum())])

    def position(self, ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """Where each of `ids` is in `ids` order (-1: no vector)."""
        return positions(self.ids, ids)

    def scorer(self, query: np.ndarray) -> AnnScorer:
        return AnnScorer(self, query)

    # -- keeping in step -------------------------------------------------------------------------

    def sync(self, vectors: VectorSource) -> AnnVectors:
        """This index brought in step with the stored vectors, or a new one when most rows changed."""
        generation = vectors.store.generation()[0]
        ids, scales = vectors.scales()
        gone, come = changes(self.ids, self.scales, ids, scales)
        target = self
        graphed = wants_graphs(len(ids), self.graphed)
        if graphed != self.graphed or (len(self.ids) and len(gone) + len(come) > REBUILD_SHARE * max(len(ids), 1)):
            target, gone, come = AnnVectors(self.dim, self.model, graphed), np.zeros(0, np.int64), ids  # a fresh graph links better
        with target.lock:
            target._remove(gone)
        for at in range(0, len(come), FETCH):
            part = target._read(vectors, come[at : at + FETCH])
            with target.lock:
                target.add_rows(*part)
        target.generation = generation
        target.unsaved += len(gone) + len(come)
        return target

    def should_save(self) -> bool:
        return self.unsaved > SAVE_SHARE * len(self.ids) or (self.unsaved > 0 and not len(self.ids))

    def _remove(self, ids: np.ndarray) -> None:
        if not len(ids):
            return
        at = self.position(ids.tolist())
        at = at[at >= 0]
        for code in (0, 1):
            mine = at[self.chinese[at] == bool(code)]
            if len(mine):
                rows = self.codes[mine].astype(np.float64) * self.scales[mine][:, None]
                self.sums, self.squares = self.sums.copy(), self.squares.copy()
                self.sums[code] -= rows.sum(axis=0)
                self.squares[code] -= rows.T @ rows
                if self.graphed:
                    self.graphs[code].remove(self.ids[mine].astype(np.uint64))
        keep = np.ones(len(self.ids), bool)
        keep[at] = False
        self.ids, self.scales, self.chinese, self.codes = self.ids[keep], self.scales[keep], self.chinese[keep], self.codes[keep]
        self.l1 = self.l1[keep]

    def _read(self, vectors: VectorSource, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(ids, int8 codes, scales, chinese) of those of `ids` that have a vector now."""
        stored = vectors.stored(ids.tolist())
        return stored.ids, stored.codes(self.dim), stored.scales, stored.chinese

    def add_rows(self, new_ids: np.ndarray, codes: np.ndarray, scales: np.ndarray, chinese: np.ndarray) -> None:
        """Add rows whose ids are not in the index (int8 codes, scales, Chinese flags)."""
        if not len(new_ids):
            return
        rows = codes.astype(np.float64) * scales[:, None]
        sums, squares = row_sums(rows, chinese.astype(np.intp))
        self.sums, self.squares = self.sums + sums, self.squares + squares
        for code in (0, 1):
            mine = chinese == bool(code)
            if mine.any() and self.graphed:
                self.graphs[code].add(new_ids[mine].astype(np.uint64), self._centred(code, rows[mine]), threads=0)
        order = np.argsort(np.concatenate([self.ids, new_ids]), kind="stable")
        self.ids = np.concatenate([self.ids, new_ids])[order]
        self.scales = np.concatenate([self.scales, scales])[order]
        self.chinese = np.concatenate([self.chinese, chinese])[order]
        self.codes = np.concatenate([self.codes, codes])[order]
        self.l1 = np.concatenate([self.l1, l1_norms(codes, scales)])[order]

    def _centred(self, code: int, rows: np.ndarray) -> np.ndarray:
        """`rows` as graph `code` holds them: minus its centre, in int8 steps of one size (the inner product
        then orders them as the cosine does: q.(x - c) = q.x - q.c). Text embeddings share a direction (cosines
        of unrelated English passages ~0.75): centred, the graph links them far better (bench.ann_cost)."""
        if not len(self.graphs[code]) or self.step[code] <= 0:
            self.centre[code] = rows.mean(axis=0)
            self.step[code] = max(float(np.abs(rows - self.centre[code]).max()), 1e-6) / 127
        centred: np.ndarray = np.clip(np.round((rows - self.centre[code]) / self.step[code]), -127, 127).astype(np.int8)
        return centred

    # -- saving ----------------------------------------------------------------------------------

    def save(self, folder: Path) -> None:
        """Write the graphs and the sums under a new token, then point `current` at it; older sets go."""
        folder.mkdir(parents=True, exist_ok=True)
        token = secrets.token_hex(6)
        for code, name in enumerate(("other", "zh") if self.graphed else ()):
            self.graphs[code].save(str(folder / f"{name}-{token}.usearch"))
        with open(folder / f"rows-{token}.npz", "wb") as f:
            np.savez(f, ids=self.ids, scales=self.scales, chinese=self.chinese, codes=self.codes, sums=self.sums,
                     squares=self.squares, centre=self.centre, step=self.step)
        pointer = folder / f"current.{token}.tmp"
        pointer.write_text(json.dumps({"token": token, "model": self.model, "dim": self.dim, "generation": self.generation,
                                       "graphed": self.graphed}))
        os.replace(pointer, folder / "current")
        for old in folder.iterdir():
            if token not in old.name and old.name != "current":
                old.unlink(missing_ok=True)
        self.unsaved = 0

    @classmethod
    def load(cls, folder: Path, model: str, dim: int) -> AnnVectors | None:
        """The set `current` names, if it was made with `model` at `dim` dimensions and reads whole."""
        try:
            meta = json.loads((folder / "current").read_text())
            if meta.get("model") != model or meta.get("dim") != dim:
                return None
            token = str(meta["token"])
            ann = cls(dim, model, bool(meta.get("graphed", True)))  # sets saved before FLAT_MAX all had graphs
            with np.load(folder / f"rows-{token}.npz") as rows:
                ann.ids, ann.scales, ann.chinese, ann.codes = rows["ids"], rows["scales"], rows["chinese"], rows["codes"]
                ann.sums, ann.squares, ann.centre, ann.step = rows["sums"], rows["squares"], rows["centre"], rows["step"]
            ann.l1 = l1_norms(ann.codes, ann.scales)
            for code, name in enumerate(("other", "zh") if ann.graphed else ()):
                ann.graphs[code].load(str(folder / f"{name}-{token}.usearch"))
                ann.graphs[code].expansion_search = EXPANSION_SEARCH  # type: ignore[misc]  # a search setting, not the file's
            if ann.graphed and sum(len(g) for g in ann.graphs) != len(ann.ids):
                return None
            ann.generation = int(meta.get("generation", -1))
            return ann
        except (OSError, ValueError, KeyError, RuntimeError) as exc:
            log.info("no saved vector graphs in %s (%s): building them", folder, exc)
            return None


def wants_graphs(rows: int, graphed: bool) -> bool:
    """Whether an index of `rows` rows keeps graphs: beyond FLAT_MAX, and once built down to half of it (a
    collection near the threshold does not build and drop them by turns)."""
    return rows > (FLAT_MAX // 2 if graphed else FLAT_MAX)


def new_graph(dim: int) -> Index:
    from indexing.embeddings import before_usearch, environment, openmp_wait

    before_usearch()
    # usearch loads numkong, which brings its own OpenMP runtime; with libgomp's default spin its idle threads held
    # up the bundled model's (query embedding 21 -> 45 ms): it starts with the model's short spin (read as it loads)
    with environment(openmp_wait(os.environ)):
        from usearch.index import Index

    return Index(ndim=dim, metric="ip", dtype="i8", connectivity=CONNECTIVITY,
                 expansion_add=EXPANSION_ADD, expansion_search=EXPANSION_SEARCH)


class AnnScorer:
    """One query over `AnnVectors`: the nearest chunks of each language (the exact int8 pass, or the graphs'
    candidates re-scored exactly)."""

    def __init__(self, ann: AnnVectors, query: np.ndarray) -> None:
        self.ann, self.query = ann, query
        with ann.lock:
            self.sums, self.squares = moments_of(ann.sums, ann.squares, query)
            self.counts = ann.counts

    def top(self, k: int) -> list[int]:
        """Chunk ids of the `k` nearest chunks of each language, best first: exact without graphs, else the
        graphs' candidates ordered by exact cosine."""
        with self.ann.lock:
            ann = self.ann
            if not ann.graphed:
                pools = [np.flatnonzero(ann.chinese), np.flatnonzero(~ann.chinese)]  # Chinese first, as below
                return [int(i) for best in nearest_rows(ann.codes, ann.scales, ann.l1, pools, self.query, k) for i in ann.ids[best]]
        code = quantised(self.query)
        out: list[int] = []
        with self.ann.lock:
            for graph in (self.ann.graphs[1], self.ann.graphs[0]):  # Chinese first, as the exact matrix's pools
                if not len(graph):
                    continue
                found = graph.search(code, min(len(graph), OVERFETCH * k), threads=1)
                keys = np.asarray(found.keys, dtype=np.int64)
                cos = self.cosines(keys)
                out += keys[np.argsort(-cos, kind="stable")[:k]].tolist()
        return out

    def cosines(self, ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """The exact cosine of each of `ids` (NaN: no vector)."""
        ids = np.asarray(ids, dtype=np.int64)
        with self.ann.lock:
            return self._cosines(ids)

    def _cosines(self, ids: np.ndarray) -> np.ndarray:
        ann = self.ann
        return cosines_at(ann.codes, ann.scales, ann.position(ids), self.query)
