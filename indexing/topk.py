"""The exact top k rows of a sum of term weights, without scoring every posting when there are many.

Each query term has its postings (rows, ascending, and positive weights) and an upper bound, the
largest of its weights. Few postings in all: every posting is added into an n-row array (the plain
exhaustive pass). Many: a threshold prunes them, in the manner of MaxScore (Turtle & Flood 1995)
and Fagin's threshold algorithm:

1. seed: the best-weighted postings of the highest-bound terms (the rare ones), scored exactly; the
   k-th best of those scores, theta, is a lower bound of the k-th best score overall;
2. cuts: a row can only reach theta through its weights, so each term gets a cut c_t with
   sum(c_t) < theta: the lowest-bound (common, long) terms whose bounds together stay under theta
   are cut at their bound (never scanned), and what is left of theta is shared out among the other
   terms in proportion to their bounds; a row whose every weight is under its term's cut cannot
   make the top k, so the candidates are the seed plus the postings at or above their cut;
3. the candidates are scored exactly (a binary search per term) and the best k kept.

Pruning compares in float64 with a margin wider than float32 rounding, so no row of the exact top k
is lost. Every score returned is the float32 sum of the row's weights in term order, bit-identical
to `scores[rows] += weights` term after term; ties are broken by chunk id.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

Postings = tuple["np.ndarray", "np.ndarray"]  # one term's rows (ascending, distinct) and their weights

DENSE_UP_TO = 16_384  # postings in all: up to this many, scoring them all is as fast as pruning
SEED_ROWS = 4  # times k: the rows scored first for theta (at least MIN_SEED)
MIN_SEED = 256


def top_k(
    postings: Sequence[Postings], bounds: Sequence[float], k: int, chunk_ids: np.ndarray, *,
    dense_up_to: int = DENSE_UP_TO,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The `k` best rows by the float32 sum, in `postings` order, of their term weights, best first
    (ties: lower chunk id): the rows, their scores and which terms each contains (bit i: the i-th
    of `postings`, up to 63). `bounds[i]` is at least every weight of `postings[i]`. Up to
    `dense_up_to` postings in all, every posting is scored."""
    import numpy as np

    if sum(len(rows) for rows, _ in postings) <= dense_up_to:
        rows = _dense(postings, k, len(chunk_ids))
    else:
        rows = _pruned(postings, bounds, k, len(chunk_ids))
    scores, present = _exact(postings, rows)
    if len(rows) > k:
        keep = np.flatnonzero(scores >= _kth(scores, k))
        rows, scores, present = rows[keep], scores[keep], present[keep]
    order = np.lexsort((chunk_ids[rows], -scores))[:k]
    return rows[order], scores[order], present[order]


def _dense(postings: Sequence[Postings], k: int, n_rows: int) -> np.ndarray:
    """Every posting added up: the rows scoring at least the k-th best (sorted)."""
    import numpy as np

    scores, cand = _scatter(postings, n_rows)
    got = scores[cand]
    wide = k * len(postings)  # a row occurs once per term: the best `wide` entries hold the best k rows
    if len(cand) > wide:
        best = np.argpartition(got, len(got) - wide)[len(got) - wide :]
        theta = _kth(scores[_distinct(cand[best])], k)
        cand = cand[got >= theta]
    return _distinct(cand)


def _scatter(postings: Sequence[Postings], n_rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Every row's float32 sum of the postings' weights (in order), and their rows (once per posting)."""
    import numpy as np

    scores = np.zeros(n_rows, dtype=np.float32)
    for rows, weights in postings:
        scores[rows] += weights
    return scores, np.concatenate([rows for rows, _ in postings]) if len(postings) > 1 else postings[0][0]


def _pruned(postings: Sequence[Postings], bounds: Sequence[float], k: int, n_rows: int) -> np.ndarray:
    """The rows that may make the top k (sorted), scanning only the postings of the essential terms."""
    import numpy as np

    m = len(postings)
    seed = _seed(postings, bounds, max(SEED_ROWS * k, MIN_SEED))
    theta = _kth(_exact(postings, seed)[0], k)
    slack = (m + 2) * 2.0**-23  # relative error of a float32 sum of m terms, with room to spare
    budget = theta * (1 - slack) / (1 + slack)  # the k-th best scores at least this (float64 sums)
    ascending = sorted(range(m), key=lambda i: (bounds[i], -len(postings[i][0])))
    spent, first = 0.0, 0
    while first < m and spent + bounds[ascending[first]] < budget:  # together they cannot reach it
        spent += bounds[ascending[first]]
        first += 1
    if first == 0 or first == m:  # nothing to skip (or, by rounding, nothing left to scan)
        return _dense(postings, k, n_rows)
    essential = sorted(ascending[first:])
    partial, cand = _scatter([postings[i] for i in essential], n_rows)
    return _distinct(cand[partial[cand] >= (budget - spent) * (1 - slack)])


def _seed(postings: Sequence[Postings], bounds: Sequence[float], want: int) -> np.ndarray:
    """About `want` rows: the best-weighted postings of the terms with the highest bounds."""
    import numpy as np

    parts, got = [], 0
    for i in sorted(range(len(postings)), key=lambda i: (-bounds[i], len(postings[i][0]))):
        rows, weights = postings[i]
        if len(rows) > want:
            rows = rows[np.argpartition(weights, len(weights) - want)[len(weights) - want :]]
        parts.append(rows)
        got += len(rows)
        if got >= want:
            break
    return _distinct(np.concatenate(parts))


def _distinct(rows: np.ndarray) -> np.ndarray:
    """`rows` sorted, once each (np.unique hashes in numpy 2.4: 40x slower on 50k rows)."""
    import numpy as np

    rows = np.sort(rows)
    return rows[np.concatenate(([True], rows[1:] != rows[:-1]))] if len(rows) else rows


def _kth(values: np.ndarray, k: int) -> float:
    """The k-th largest of `values` (0 when there are fewer)."""
    import numpy as np

    if len(values) < k:
        return 0.0
    return float(np.partition(values, len(values) - k)[len(values) - k])


def _exact(postings: Sequence[Postings], rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The float32 scores of `rows` (sorted, distinct), summed in `postings` order, and their term bits."""
    import numpy as np

    scores = np.zeros(len(rows), dtype=np.float32)
    present = np.zeros(len(rows), dtype=np.int64)
    if not len(rows):
        return scores, present
    for bit, (term_rows, weights) in enumerate(postings):
        if len(term_rows) < len(rows):  # search the shorter list in the longer one
            at = np.searchsorted(rows, term_rows)
            at[at == len(rows)] = 0
            hit = rows[at] == term_rows
            into, picked = at[hit], weights[hit]
        else:
            at = np.searchsorted(term_rows, rows)
            at[at == len(term_rows)] = 0
            hit = term_rows[at] == rows
            into, picked = np.flatnonzero(hit), weights[at[hit]]
        scores[into] += picked
        if bit < 63:
            present[into] |= np.int64(1) << bit
    return scores, present
