"""The exact top k rows of a sum of term weights, looking only at the rows that can make it.

Each query term has its postings (rows, ascending, and positive weights) and an upper bound, the
largest of its weights. Every posting is added into an n-row float32 array, term after term (the
scores are exactly those of a plain exhaustive pass); what is pruned is the selection, which used
to gather and partition the scores of every posting:

1. theta: the k-th best score among the rows of the terms with the highest bounds (the rare
   terms) is a lower bound of the k-th best score overall;
2. MaxScore (Turtle & Flood 1995): the lowest-bound terms (the common ones, with the longest
   postings) whose bounds together stay under theta cannot lift a row to theta alone, so every row
   of the top k has one of the other, "essential", terms: only their rows are looked at, and only
   those scoring at least theta are sorted, ties by chunk id.

A float32 sum of m weights can exceed their exact sum: the bounds are compared with a margin wider
than that rounding, so no row of the exact top k is missed.
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
    scores = summed(postings, len(chunk_ids))
    best, got = ordered(contenders(postings, bounds, k, scores), scores, k, chunk_ids)
    return best, got, presence(best, [rows for rows, _ in postings])


def summed(postings: Sequence[Postings], n: int) -> np.ndarray:
    """Every row's float32 sum of its term weights, in `postings` order."""
    import numpy as np

    scores = np.zeros(n, dtype=np.float32)
    for rows, weights in postings:
        np.add.at(scores, rows, weights)  # rows are distinct: the same float32 sums as scores[rows] += weights
    return scores


def ordered(cand: np.ndarray, scores: np.ndarray, k: int, chunk_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The `k` best of the rows `cand` by `scores`, best first, ties by chunk id: rows and scores."""
    import numpy as np

    got = scores[cand]
    if len(cand) > k:
        keep = got >= _kth(got, k)
        cand, got = cand[keep], got[keep]
    order = np.lexsort((chunk_ids[cand], -got))[:k]
    return cand[order], got[order]


def contenders(postings: Sequence[Postings], bounds: Sequence[float], k: int, scores: np.ndarray,
               slack: float = 1.0) -> np.ndarray:
    """Every row (sorted, once each) that scores at least `slack` x the k-th best score (and some below it).
    Scores known only within a factor [lo, hi] of the exact ones (`indexing.delta`): with slack = lo / hi,
    the rows of the exact top k are among them."""
    m = len(postings)
    theta = _kth(scores[_seed(postings, bounds, k)], k) * slack
    limit = theta * (1 - (m + 2) * 2.0**-23)  # under theta by more than float32 rounding of m terms
    ascending = sorted(range(m), key=lambda i: (bounds[i], -len(postings[i][0])))
    spent, skipped = 0.0, 0
    while skipped < m - 1 and spent + bounds[ascending[skipped]] < limit:
        spent += bounds[ascending[skipped]]
        skipped += 1
    essential = [postings[i][0] for i in sorted(ascending[skipped:])]
    import numpy as np

    if len(essential) == 1 and theta > 0:  # one term's rows: sorted and distinct already
        return essential[0][scores[essential[0]] >= theta]
    cand = np.concatenate(essential) if len(essential) > 1 else essential[0]
    if theta > 0:
        return _distinct(cand[scores[cand] >= theta])
    # too few rows in the seed for a theta: the best k entries of each term hold the best k rows (exact
    # scores only: with approximate ones every row is a contender)
    return _distinct(_widest(cand, scores, k * len(essential)) if slack == 1.0 else cand)


def _seed(postings: Sequence[Postings], bounds: Sequence[float], k: int) -> np.ndarray:
    """The rows (once each) of the highest-bound terms, enough of them to hold k rows if they can."""
    import numpy as np

    parts: list[np.ndarray] = []
    got = 0
    for i in sorted(range(len(postings)), key=lambda i: (-bounds[i], len(postings[i][0]))):
        parts.append(postings[i][0])
        got += len(parts[-1])
        if got >= 2 * k:
            break
    return parts[0] if len(parts) == 1 else _distinct(np.concatenate(parts))


def _widest(cand: np.ndarray, scores: np.ndarray, wide: int) -> np.ndarray:
    """The `wide` best-scoring entries of `cand`, and every entry tied with the last of them."""

    if len(cand) <= wide:
        return cand
    got = scores[cand]
    kept: np.ndarray = cand[got >= _kth(got, wide)]
    return kept


def _distinct(rows: np.ndarray) -> np.ndarray:
    """`rows` sorted, once each (np.unique hashes in numpy 2.4: 40x slower on 50k rows)."""
    import numpy as np

    rows = rows.copy()  # (the array methods skip numpy's Python wrappers: ~0.5 us a call)
    rows.sort()
    return rows[np.concatenate(([True], rows[1:] != rows[:-1]))] if len(rows) else rows


def _kth(values: np.ndarray, k: int) -> float:
    """The k-th largest of `values` (0 when there are fewer)."""
    if len(values) < k:
        return 0.0
    part = values.copy()
    part.partition(len(values) - k)
    return float(part[len(values) - k])


def presence(cand: np.ndarray, postings: list[np.ndarray]) -> np.ndarray:
    """Bit i set where the row contains term i (`postings`: each term's sorted rows; up to 63 terms)."""
    import numpy as np

    if not len(cand):
        return np.zeros(0, dtype=np.int64)
    # the first entry >= each row (clipped to the last: a row past every entry is not there either)
    found = [rows.take(rows.searchsorted(cand), mode="clip") == cand for rows in postings[:63]]
    packed = np.packbits(np.array(found), axis=0, bitorder="little")  # byte j: terms 8j..8j+7, bit i: term 8j+i
    if len(packed) == 1:
        present: np.ndarray = packed[0].astype(np.int64)
        return present
    shifts = 8 * np.arange(len(packed), dtype=np.int64)[:, None]
    present = (packed.astype(np.int64) << shifts).sum(axis=0)  # distinct bits: their sum is their OR
    return present
