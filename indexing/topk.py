"""The exact top k rows of a sum of term weights, without scoring every posting (MaxScore).

Each query term has its postings (sorted rows, positive weights) and an upper bound, the largest
of its weights. Terms are taken from the highest bound down (the rare, high-idf ones first). While
the bounds of the terms not taken yet could still lift a row outside the candidates into the top k,
the next term's postings are merged into the candidates ("essential" terms). Once the k-th best
partial score (a lower bound: weights are positive) beats the sum of the remaining bounds, no other
row can make the top k, and the remaining terms, which are the common ones with long postings, are
only looked up for the candidates (a binary search each), dropping every candidate whose partial
score plus the remaining bounds falls below the k-th best (Turtle & Flood 1995, term-at-a-time).

The pruning sums in float64 with a margin wider than float32 rounding, so it never drops a row of
the exact top k. The survivors are then scored again in float32, adding the terms in query order,
which gives exactly the scores a dense `scores[rows] += weights` pass in query order gives; ties
are broken by chunk id.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

Postings = tuple["np.ndarray", "np.ndarray"]  # one term's rows (ascending, distinct) and their weights


def top_k(
    postings: Sequence[Postings], bounds: Sequence[float], k: int, chunk_ids: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The `k` best rows by the float32 sum, in `postings` order, of their term weights, best first
    (ties: lower chunk id): the rows, their scores and which terms each contains (bit i: the i-th
    of `postings`, up to 63). `bounds[i]` is at least every weight of `postings[i]`."""
    survivors = _survivors(postings, bounds, k)
    scores, present = _exact(postings, survivors)
    import numpy as np

    order = np.lexsort((chunk_ids[survivors], -scores))[:k]
    return survivors[order], scores[order], present[order]


def _survivors(postings: Sequence[Postings], bounds: Sequence[float], k: int) -> np.ndarray:
    """The rows that may be in the top k (sorted): every row whose score can reach the k-th best."""
    import numpy as np

    m = len(postings)
    order = sorted(range(m), key=lambda i: (-bounds[i], len(postings[i][0])))
    rest = [0.0] * (m + 1)  # rest[i]: the sum of the bounds of order[i:]
    for i in range(m - 1, -1, -1):
        rest[i] = rest[i + 1] + float(bounds[order[i]])
    slack = (m + 2) * 2.0**-23  # relative error of a float32 sum of m terms, with room to spare
    low, high = 1 - slack, 1 + slack
    rows, acc = postings[order[0]][0], postings[order[0]][1].astype(np.float64)
    theta = _kth(acc, k)
    at = 1
    while at < m and not rest[at] * high < theta * low:  # a row outside `rows` could still make it
        rows, acc = _merge(rows, acc, *postings[order[at]])
        theta = _kth(acc, k)
        at += 1
    for i in order[at:]:  # only the candidates can make the top k now
        keep = (acc + rest[at]) * high >= theta * low
        if not keep.all():
            rows, acc = rows[keep], acc[keep]
        acc = acc + _lookup(rows, *postings[i])
        theta = _kth(acc, k)
        at += 1
    return rows[acc * high >= theta * low]


def _kth(acc: np.ndarray, k: int) -> float:
    """The k-th largest of `acc` (0 when there are fewer)."""
    import numpy as np

    if len(acc) < k:
        return 0.0
    return float(np.partition(acc, len(acc) - k)[len(acc) - k])


def _merge(rows: np.ndarray, acc: np.ndarray, more: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`rows` with their sums `acc`, plus the postings (`more`, `weights`): sorted, distinct."""
    import numpy as np

    at = np.searchsorted(rows, more)
    hit = rows[np.minimum(at, len(rows) - 1)] == more
    acc = acc.copy()
    acc[at[hit]] += weights[hit]
    new = ~hit
    if not new.any():
        return rows, acc
    return np.insert(rows, at[new], more[new]), np.insert(acc, at[new], weights[new])


def _lookup(rows: np.ndarray, term_rows: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The term's weight in each of `rows` (float64; 0 where it does not occur)."""
    import numpy as np

    out = np.zeros(len(rows))
    if not len(rows):
        return out
    at = np.searchsorted(term_rows, rows)
    at[at == len(term_rows)] = 0
    hit = term_rows[at] == rows
    out[hit] = weights[at[hit]]
    return out


def _exact(postings: Sequence[Postings], rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The float32 scores of `rows`, summed in `postings` order, and their term bits (up to 63)."""
    import numpy as np

    scores = np.zeros(len(rows), dtype=np.float32)
    present = np.zeros(len(rows), dtype=np.int64)
    if not len(rows):
        return scores, present
    for bit, (term_rows, weights) in enumerate(postings):
        at = np.searchsorted(term_rows, rows)
        at[at == len(term_rows)] = 0
        hit = term_rows[at] == rows
        scores[hit] += weights[at[hit]]
        if bit < 63:
            present |= hit.astype(np.int64) << bit
    return scores, present
