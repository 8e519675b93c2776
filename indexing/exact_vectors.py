"""Exact nearest chunks over every stored vector, kept in memory as stored: int8 rows and their scales.

A search makes one pass of int8 dot products over every row (the query rounded to int8 too: numkong's
SIMD kernel when installed, ~4.5 ms per 100k rows on one core, else numpy), which puts each row's cosine
within a bound of its exact value: |row . (query - rounded query)| <= |row|_1 x half a query step. Only the
rows that bound cannot rule out of a language's top k are then re-scored exactly, as the approximate index
re-scores its candidates, so `top` is the exact top k by construction. The z-scores' means and spreads come
from per-language sums of the rows and of their outer products, made once at load (`moments_of`; float32
products a block at a time: ~0.4 s per 100k rows), not from a pass. Memory: the stored int8 vector, its
scale and its L1 norm, ~0.4 KB a chunk at 384 dimensions (float32 rows took 1.5 KB).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import cache, cached_property
from typing import Protocol

import numpy as np

BLOCK = 20_000  # rows converted at a time (sums at load, every exact cosine for the benches)
# The bound's share of a query step: half a step of rounding, plus float32 rounding of the exact re-score
# (384 products: 384 x 2^-24 of |row|_1 x the query's peak = 127 steps, ~0.003 of a step).
SLACK = 0.51


class DotKernel(Protocol):
    def __call__(self, query: np.ndarray, rows: np.ndarray) -> np.ndarray: ...


def moments_of(sums: np.ndarray, squares: np.ndarray, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per language: the sum of the query's cosines and of their squares over the language's rows, from
    `sums` (per language, the sum of its rows) and `squares` (the sum of their outer products)."""
    q = query.astype(np.float64)
    return sums @ q, (squares @ q) @ q


def quantised(query: np.ndarray) -> np.ndarray:
    """The query as int8 codes (the cosine's order ignores the scale)."""
    peak = float(np.abs(query).max()) if len(query) else 0.0
    return np.round(query / (peak / 127 if peak > 0 else 1.0)).astype(np.int8)


def int8_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(int8 codes, scales) of float rows, row by row as `indexing.embeddings.to_int8` stores a vector."""
    rows = np.asarray(rows, dtype=np.float32)
    peak = np.abs(rows).max(axis=1) if rows.size else np.zeros(len(rows), np.float32)
    scales = np.where(peak > 0, peak / 127, 1.0).astype(np.float64)
    return np.round(rows / scales[:, None]).astype(np.int8), scales


def l1_norms(rows: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """Each int8 row's L1 norm times its scale (what bounds its int8 pass's error), a block at a time."""
    out = np.zeros(len(rows))
    for at in range(0, len(rows), BLOCK):
        out[at : at + BLOCK] = np.abs(rows[at : at + BLOCK].astype(np.int32)).sum(axis=1)
    return out * np.asarray(scales, dtype=np.float64)


def exact_cosines(rows: np.ndarray, scales: np.ndarray, query: np.ndarray) -> np.ndarray:
    """The cosine of each int8 row (times its scale) with `query`, in float32 as every path re-scores."""
    cos: np.ndarray = (rows.astype(np.float32) @ query) * scales
    return cos


def positions(ids: np.ndarray, wanted: Sequence[int] | np.ndarray) -> np.ndarray:
    """Where each of `wanted` is in the ascending `ids` (-1: not there)."""
    wanted = np.asarray(wanted, dtype=np.int64)
    if not len(ids):
        return np.full(len(wanted), -1)
    at = np.searchsorted(ids, wanted).clip(0, len(ids) - 1)
    return np.where(ids[at] == wanted, at, -1)


def cosines_at(rows: np.ndarray, scales: np.ndarray, at: np.ndarray, query: np.ndarray) -> np.ndarray:
    """The exact cosine of the rows at positions `at` with `query` (NaN where a position is -1)."""
    out = np.full(len(at), np.nan)
    mine = np.flatnonzero(at >= 0)
    out[mine] = exact_cosines(rows[at[mine]], scales[at[mine]], query)
    return out


def estimates(rows: np.ndarray, scales: np.ndarray, l1: np.ndarray, query: np.ndarray,
              floats: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(every row's cosine from one int8 pass, the bound of its distance to the exact cosine). `floats`: the rows
    as float32 (int8 x scale), for when numkong is missing: one BLAS pass, off by float rounding only."""
    if not len(rows):
        return np.zeros(0), np.zeros(0)
    peak = float(np.abs(query).max()) if len(query) else 0.0
    step = peak / 127 if peak > 0 else 1.0
    if floats is not None:
        return floats @ query, l1 * (2 * (SLACK - 0.5) * step)  # two float32 roundings (see SLACK)
    near = dot_kernel()(quantised(query), rows) * step * scales
    return near, l1 * (SLACK * step)


def nearest_rows(rows: np.ndarray, scales: np.ndarray, l1: np.ndarray, pools: Sequence[np.ndarray], query: np.ndarray,
                 k: int, floats: np.ndarray | None = None) -> list[np.ndarray]:
    """Per pool (row positions), the positions of its `k` best exact cosines, best first: the int8 pass, then
    only the rows whose best case reaches the k-th best worst case re-scored exactly."""
    near, slack = estimates(rows, scales, l1, query, floats)
    out = []
    for pool in pools:
        if len(pool) > k:
            floor = np.partition(near[pool] - slack[pool], len(pool) - k)[len(pool) - k]
            pool = pool[near[pool] + slack[pool] >= floor]
        cos = exact_cosines(rows[pool], scales[pool], query)
        out.append(pool[np.argsort(-cos, kind="stable")[:k]])
    return out


@cache
def has_numkong() -> bool:
    return dot_kernel() is not _numpy_dots


@cache
def dot_kernel() -> DotKernel:
    """int8 rows . int8 query, exact integers as float64: numkong's SIMD kernel (with usearch, the semantic
    extra), else numpy's (a float conversion of every row per query: VectorMatrix keeps float rows instead)."""
    from indexing.embeddings import environment, openmp_wait

    try:
        with environment(openmp_wait(os.environ)):  # numkong brings its own OpenMP: the model's short spin
            import numkong
    except ImportError:
        return _numpy_dots

    def dots(query: np.ndarray, rows: np.ndarray) -> np.ndarray:
        found: np.ndarray = np.asarray(numkong.cdist(query[None, :], rows, metric="dot", threads=1))[0]
        return found

    return dots


def _numpy_dots(query: np.ndarray, rows: np.ndarray) -> np.ndarray:
    out = np.empty(len(rows))
    q = query.astype(np.float32)
    for at in range(0, len(rows), BLOCK):
        out[at : at + BLOCK] = rows[at : at + BLOCK].astype(np.float32) @ q  # small integers: exact in float32
    return out


class VectorMatrix:
    """Chunk vectors in memory, exact: `ids` (ascending), each chunk's stored int8 row, scale and L1 norm,
    which chunks are Chinese, and per language the sums behind the z-scores."""

    def __init__(self, ids: np.ndarray, rows: np.ndarray, scales: np.ndarray, chinese: np.ndarray) -> None:
        self.ids = ids
        self.rows = rows  # int8, one row per chunk
        self.scales = np.asarray(scales, dtype=np.float64)
        self.chinese = chinese
        self.codes = chinese.astype(np.intp)  # 1: Chinese, 0: other (the languages' pools)
        self.pools = [np.flatnonzero(chinese), np.flatnonzero(~chinese)]
        self.l1 = l1_norms(rows, self.scales)
        self.floats = None if has_numkong() else rows.astype(np.float32) * self.scales.astype(np.float32)[:, None]
        dim = rows.shape[1] if rows.ndim == 2 else 0
        self.sums, self.squares = np.zeros((2, dim)), np.zeros((2, dim, dim))
        for at in range(0, len(ids), BLOCK):
            self._add_block(slice(at, at + BLOCK))

    @classmethod
    def of_floats(cls, ids: np.ndarray, rows: np.ndarray, chinese: np.ndarray) -> VectorMatrix:
        """The matrix of float rows, each stored as int8 and a scale (as the index stores vectors)."""
        codes, scales = int8_rows(rows)
        return cls(ids, codes, scales, chinese)

    def __len__(self) -> int:
        return len(self.ids)

    def _add_block(self, at: slice) -> None:
        """Add rows `at` to the per-language sums (float32 products, float64 totals)."""
        block = self.rows[at].astype(np.float32) * self.scales[at].astype(np.float32)[:, None]
        for code in (0, 1):
            part = block[self.codes[at] == code]
            self.sums[code] += part.sum(axis=0, dtype=np.float64)
            self.squares[code] += part.T @ part

    def position(self, ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """Where each of `ids` is in `ids` order (-1: no vector)."""
        return positions(self.ids, ids)

    def scorer(self, query: np.ndarray) -> ExactScorer:
        return ExactScorer(self, query)


class ExactScorer:
    """One query over a `VectorMatrix`: per language the count, sum and sum of squares of every chunk's
    cosine; the exact nearest chunks of each language; any chunks' exact cosines."""

    def __init__(self, matrix: VectorMatrix, query: np.ndarray) -> None:
        self.matrix, self.query = matrix, np.asarray(query, dtype=np.float32)
        self.counts = np.bincount(matrix.codes, minlength=2)
        self.sums: np.ndarray = np.zeros(2)
        self.squares: np.ndarray = np.zeros(2)
        if len(matrix):
            self.sums, self.squares = moments_of(matrix.sums, matrix.squares, self.query)

    def top(self, k: int) -> list[int]:
        """Chunk ids of the `k` best cosines of each language (Chinese first), best first."""
        if not len(self.matrix) or k <= 0:
            return []
        m = self.matrix
        return [int(i) for best in nearest_rows(m.rows, m.scales, m.l1, m.pools, self.query, k, m.floats) for i in m.ids[best]]

    def cosines(self, ids: Sequence[int]) -> np.ndarray:
        """The exact cosine of each of `ids` (NaN: no vector)."""
        m = self.matrix
        return cosines_at(m.rows, m.scales, m.position(ids), self.query)

    @cached_property
    def cos(self) -> np.ndarray:
        """Every chunk's exact cosine, in `ids` order (the benches' dense-alone ranking: a pass in floats)."""
        out = np.empty(len(self.matrix))
        for at in range(0, len(self.matrix), BLOCK):
            out[at : at + BLOCK] = exact_cosines(self.matrix.rows[at : at + BLOCK], self.matrix.scales[at : at + BLOCK], self.query)
        return out
