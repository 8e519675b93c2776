"""The one scorer: BM25F with a weighted heading field, plus a proximity bonus.

Every ranked result is scored here, whichever engine found its candidates (`indexing.engine`):
- BM25F: a term's frequency is its body count plus `head_weight` x its heading count, saturated
  with k1 and normalised by the body length (b); idf = ln(1 + (N - df + 0.5) / (df + 0.5)).
  `idf`, `length_norm` and `saturate` work on floats and numpy arrays alike: the in-memory
  postings precompute their weights with these very functions.
- Proximity: each query pair (neighbours in the query or in a phrase) that stands next to each
  other in the body or heading adds bigram_weight x the smaller idf; the best `window` consecutive
  body terms add window_weight x the idf of the distinct query terms inside them.
- `score` keeps the best `want` (score, chunk id), ties by chunk id. Pre-weighted rows come with
  an upper bound on their bonus, so they are taken best bound first and scoring stops once no
  row can enter the top.
Text-file lines (`indexing.lines`) are scored here too, as one-field rows with k1 = 0.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from indexing.engine import Candidates, Fields, FieldsBatch, TermRows, WeightedRows
from indexing.query import ParsedQuery

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

T = TypeVar("T", bound=Hashable)
N = TypeVar("N", float, "npt.NDArray[Any]")  # a number, or an array of them
Scored = tuple[float, int]  # (score, chunk id)
WeightedPair = tuple[tuple[T, T], float]  # a query pair and its bigram bonus (before bigram_weight)


@dataclass(frozen=True)
class Weighting:
    """The BM25F settings (pre-weighted postings are built with them: a change means a rebuild)."""

    k1: float = 1.2
    b: float = 0.75
    head_weight: float = 2.0


@dataclass(frozen=True)
class RankParams:
    """Every ranking setting. The candidate step reads `candidates`, `fts_head_weight` and
    `match_keep`/`match_min`; the scorer reads the rest."""

    candidates: int = 50
    k1: float = 1.2
    b: float = 0.75
    head_weight: float = 2.0
    bigram_weight: float = 0.5
    window: int = 10
    window_weight: float = 0.5
    fts_head_weight: float = 2.0
    match_keep: float = 0.8  # share of the distinct loose terms (rarest first) used to find candidates
    match_min: int = 3

    @property
    def weighting(self) -> Weighting:
        return Weighting(self.k1, self.b, self.head_weight)


DEFAULT_RANK = RankParams()
DEFAULT_WEIGHTING = DEFAULT_RANK.weighting


# -- BM25F ---------------------------------------------------------------------------------------


def idf(n_docs: float, df: N, log: Callable[[N], N]) -> N:
    """Inverse document frequency (`log`: math.log for numbers, numpy.log for arrays)."""
    return log(1 + (n_docs - df + 0.5) / (df + 0.5))


def length_norm(length: N, avgdl: float, w: Weighting) -> N:
    return w.k1 * (1 - w.b + w.b * length / avgdl)


def saturate(weight: N, tf: N, norm: N, w: Weighting) -> N:
    """A term's BM25F score: its idf `weight` times its field-weighted frequency `tf`, saturated."""
    saturated: N = weight * tf * (w.k1 + 1) / (tf + norm)
    return saturated


def _bm25f(body: Counter[str], head: Counter[str], length: int, avgdl: float, idfs: dict[str, float],
           w: Weighting) -> float:
    norm = length_norm(float(length), avgdl, w)
    score = 0.0
    for t, weight in idfs.items():
        tf = body[t] + w.head_weight * head[t]
        if tf:
            score += saturate(weight, tf, norm, w)
    return score


# -- proximity -----------------------------------------------------------------------------------


def query_pairs(parsed: ParsedQuery) -> list[tuple[str, str]]:
    """Neighbouring distinct terms of the query and of each phrase, in order, once each."""
    pairs: list[tuple[str, str]] = []
    for seq in [parsed.terms, *parsed.phrases]:
        pairs += [(a, b) for a, b in zip(seq, seq[1:], strict=False) if a != b]
    return list(dict.fromkeys(pairs))


def bonus(at: Fields[T], pairs: Sequence[WeightedPair[T]], idfs: Mapping[T, float], p: RankParams) -> float:
    """The bigram and window bonus of one chunk, from where the query terms occur in it."""
    best, present = _window_and_pairs(at.pos, at.terms, idfs, p.window)
    total = 0.0
    if pairs and p.bigram_weight:
        if at.head_pos:
            present |= _adjacent(at.head_pos, at.head_terms)
        if present:  # (none: the sum is 0, and 0.0 + 0.0 changes nothing)
            got = 0.0  # the pairs' weights added in query order: the same float as sum() over them
            for pair, weight in pairs:
                if pair in present:
                    got += weight
            total += p.bigram_weight * got
    if p.window_weight:
        total += p.window_weight * best
    return total


def weighted_pairs(pairs: Sequence[tuple[T, T]], idfs: Mapping[T, float]) -> list[WeightedPair[T]]:
    """Each query pair with what standing side by side earns it (before bigram_weight): the smaller
    idf. Pairs with a term no chunk has are left out: they never stand side by side."""
    return [((a, b), min(idfs[a], idfs[b])) for a, b in pairs if a in idfs and b in idfs]


def bonus_ceiling(
    base: npt.NDArray[np.float32], present: npt.NDArray[np.int64], idfs: dict[T, float],
    pairs: list[WeightedPair[T]], p: RankParams,
) -> npt.NDArray[np.float64]:
    """Each row's highest possible score: `base` plus the largest bonus its query terms allow
    (bit j of `present`: the row contains the j-th term of `idfs`; `pairs` from weighted_pairs).
    A row's bonus is made once per distinct `present` (a few per query), and the ceiling is raised by
    CEILING_MARGIN: it stays above the score however differently the two sums round."""
    import numpy as np

    ceiling = base.astype(np.float64)
    if len(idfs) > 63:
        return ceiling + math.inf  # too many terms to bound: every row gets its bonus
    col = {key: j for j, key in enumerate(idfs)}
    each = [p.window_weight * weight for weight in idfs.values()]
    both = [(1 << col[a] | 1 << col[b], p.bigram_weight * weight) for (a, b), weight in pairs]
    made: dict[int, float] = {}
    extra = []
    for mask in present.tolist():
        most = made.get(mask)
        if most is None:
            most = made[mask] = (sum(w for j, w in enumerate(each) if mask >> j & 1)
                                 + sum(w for need, w in both if mask & need == need))
        extra.append(most)
    ceiling += extra
    ceiling *= CEILING_MARGIN
    return ceiling


CEILING_MARGIN = 1 + 2.0**-30  # far above the rounding of a sum of 63 terms and their pairs


def _adjacent(pos: Sequence[int], terms: Sequence[T]) -> set[tuple[T, T]]:
    """Pairs of query terms that stand next to each other (`pos`: where each of `terms` occurs, in order)."""
    return {(terms[i], terms[i + 1]) for i in range(len(pos) - 1) if pos[i + 1] == pos[i] + 1}


def _window_and_pairs(
    pos: Sequence[int], terms: Sequence[T], idfs: Mapping[T, float], width: int
) -> tuple[float, set[tuple[T, T]]]:
    """The largest IDF mass of distinct query terms inside any `width` consecutive terms, and the
    pairs of query terms that stand next to each other (`_adjacent`), in one pass. (Every float is
    added and taken away in the order of the plain pass over the terms: scores do not depend on how
    this loop is written.)"""
    adjacent: set[tuple[T, T]] = set()
    if len(pos) < 2:
        return 0.0, adjacent
    best = mass = 0.0
    counts = dict.fromkeys(terms, 0)
    left, last = 0, -2
    prev = terms[0]
    for at, term in zip(pos, terms, strict=True):
        if at == last + 1:
            adjacent.add((prev, term))
        last, prev = at, term
        seen = counts[term]
        counts[term] = seen + 1
        if not seen:
            mass += idfs[term]
        edge = at - width  # (positions are integers: pos[left] <= edge is at - pos[left] >= width)
        while pos[left] <= edge:
            old = terms[left]
            seen = counts[old] - 1
            counts[old] = seen
            if not seen:
                mass -= idfs[old]
            left += 1
        if mass > best:
            best = mass
    return best, adjacent


# -- the top `want` --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Rows(Generic[T]):
    """Candidates ready to score: best bound first when `bounds` is given."""

    ids: list[int]
    base: list[float]
    bounds: list[float] | None
    idfs: dict[T, float]
    pairs: list[WeightedPair[T]]
    fields: Callable[[int, int], FieldsBatch[T]]  # (first, stop) -> the Fields of rows first..stop-1


def score(found: Candidates, parsed: ParsedQuery, want: int, p: RankParams) -> list[Scored]:
    """The best `want` (score, chunk id) of an engine's candidates, best first (ties: lower id)."""
    if want <= 0:
        return []
    if isinstance(found, TermRows):
        return _top(_from_terms(found, parsed, p), want, p)
    return _top(_from_weights(found, parsed, p), want, p)


def _top(rows: _Rows[T], want: int, p: RankParams) -> list[Scored]:
    top: list[Scored] = []  # min-heap of the best `want` (score, -id)
    ids, base, bounds, pairs, idfs = rows.ids, rows.base, rows.bounds, rows.pairs, rows.idfs
    first, step, count = 0, want + 8, len(ids)  # positions are looked up a batch of rows at a time
    while first < count:
        stop = min(first + step, count)
        batch = rows.fields(first, stop)
        for n in range(first, stop):
            if bounds is not None and len(top) == want and bounds[n] < top[0][0]:
                return _best_first(top)
            item = (base[n] + bonus(batch[n - first], pairs, idfs, p), -ids[n])
            if len(top) < want:
                heapq.heappush(top, item)
            elif item > top[0]:
                heapq.heapreplace(top, item)
        first, step = stop, count
    return _best_first(top)


def _best_first(top: list[Scored]) -> list[Scored]:
    return [(s, -neg) for s, neg in sorted(top, reverse=True)]


def _from_terms(found: TermRows, parsed: ParsedQuery, p: RankParams) -> _Rows[str]:
    """BM25F from each row's terms, and where the query terms occur in them."""
    w = p.weighting
    dfs = found.dfs or {}
    idfs = {t: idf(found.n_docs, float(df), math.log) for t, df in dfs.items()}
    ids, base, fields = [], [], []
    none: Counter[str] = Counter()
    for chunk_id, head, body in found.rows:
        pos = [i for i, t in enumerate(body) if t in idfs]
        terms = [body[i] for i in pos]
        head_pos = [i for i, t in enumerate(head) if t in idfs]
        head_terms = [head[i] for i in head_pos]
        ids.append(chunk_id)
        base.append(_bm25f(Counter(terms), Counter(head_terms) if head_terms else none, len(body), found.avgdl, idfs, w))
        fields.append(Fields(pos, terms, head_pos, head_terms))
    return _Rows(ids, base, None, idfs, weighted_pairs(query_pairs(parsed), idfs), lambda first, stop: fields[first:stop])


def _from_weights(found: WeightedRows[int], parsed: ParsedQuery, p: RankParams) -> _Rows[int]:
    """Pre-weighted rows in order of their ceiling, with their positions looked up on demand."""
    keys = {t: known for t in dict.fromkeys(parsed.all_terms()) if (known := found.term(t)) is not None}
    idfs = dict(keys.values())
    pairs = weighted_pairs([(keys[a][0], keys[b][0]) for a, b in query_pairs(parsed) if a in keys and b in keys], idfs)
    ceiling = bonus_ceiling(found.base, found.present, idfs, pairs, p)
    order = (-ceiling).argsort(kind="stable")
    terms = list(keys)

    def fields(first: int, stop: int) -> FieldsBatch[int]:
        return found.fields(order[first:stop], terms, bool(pairs))

    return _Rows(found.ids[order].tolist(), found.base[order].tolist(), ceiling[order].tolist(), idfs, pairs, fields)
