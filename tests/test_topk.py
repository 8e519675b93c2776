"""MaxScore top k (`indexing.topk`) equals scoring every posting: same rows, bit-identical float32
scores, same term bits, same order (ties by chunk id)."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from indexing.postings import build_snapshot
from indexing.scoring import DEFAULT_WEIGHTING
from indexing.topk import Postings, contenders, presence, top_k


def exhaustive(postings: list[Postings], k: int, chunk_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every posting scattered in term order (float32), every touched row sorted: the reference."""
    n = len(chunk_ids)
    scores = np.zeros(n, dtype=np.float32)
    present = np.zeros(n, dtype=np.int64)
    for bit, (rows, weights) in enumerate(postings):
        scores[rows] += weights
        if bit < 63:
            present[rows] |= np.int64(1) << bit
    touched = np.unique(np.concatenate([rows for rows, _ in postings]))
    order = np.lexsort((chunk_ids[touched], -scores[touched]))[:k]
    best = touched[order]
    return best, scores[best], present[best]


def _same(got: tuple[np.ndarray, ...], want: tuple[np.ndarray, ...]) -> None:
    assert got[0].tolist() == want[0].tolist()
    assert got[1].tobytes() == want[1].tobytes()  # bit-identical scores
    assert got[2].tolist() == want[2].tolist()


WEIGHTS = st.one_of(  # a few values (many ties and equal sums) or any positive float32
    st.sampled_from([0.25, 0.5, 1.0, 1.5, 3.0, 0.1, 0.7]),
    st.floats(0.0009765625, 30, width=32),
)


@st.composite
def queries(draw: st.DrawFn) -> tuple[list[Postings], list[float], int, np.ndarray]:
    n = draw(st.integers(1, 80))
    m = draw(st.integers(1, 9))
    postings: list[Postings] = []
    bounds: list[float] = []
    for _ in range(m):
        rows = sorted(draw(st.sets(st.integers(0, n - 1), min_size=1, max_size=n)))
        weights = np.array([draw(WEIGHTS) for _ in rows], dtype=np.float32)
        postings.append((np.array(rows, dtype=np.int32), weights))
        loose = draw(st.sampled_from([1.0, 1.0, 1.0, 1.5]))  # a bound may be above the largest weight
        bounds.append(float(weights.max()) * loose)
    k = draw(st.integers(1, 90))
    ids = np.array(draw(st.permutations(range(n))), dtype=np.int64) * 3 + 7  # ties: not row order
    return postings, bounds, k, ids


@given(queries())
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_pruned_top_k_equals_scoring_every_posting(case: tuple[list[Postings], list[float], int, np.ndarray]) -> None:
    postings, bounds, k, ids = case
    want = exhaustive(postings, k, ids)
    _same(top_k(postings, bounds, k, ids), want)  # pruned
    _same(top_k(postings, bounds, k, ids), want)  # every posting scored


def test_skewed_postings_prune_and_stay_exact() -> None:
    """Long low-weight postings and short high-weight ones: the case MaxScore prunes."""
    rng = np.random.default_rng(4)
    n = 20_000
    ids = np.arange(n, dtype=np.int64) * 2
    for trial in range(30):
        postings: list[Postings] = []
        for size, top in [(30, 9.0), (300, 6.0), (4000, 2.0), (15000, 0.6), (19000, 0.3)][: 2 + trial % 4]:
            rows = np.sort(rng.choice(n, size, replace=False)).astype(np.int32)
            weights = (rng.random(size) * top).astype(np.float32) + np.float32(0.01)
            postings.append((rows, weights))
        order = rng.permutation(len(postings))
        postings = [postings[i] for i in order]
        for k in (1, 10, 50, 200):
            bounds = [float(w.max()) for _, w in postings]
            want = exhaustive(postings, k, ids)
            _same(top_k(postings, bounds, k, ids), want)
            if len(postings) == 5:  # few rows selected: those of the rare terms that reach theta
                scores = np.zeros(n, dtype=np.float32)
                for rows, weights in postings:
                    scores[rows] += weights
                cand = contenders(postings, bounds, k, scores)
                assert set(want[0].tolist()) <= set(cand.tolist())
                assert len(cand) < n / 20


@given(st.lists(st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=12), min_size=1, max_size=40),
       st.lists(st.sampled_from("abcdefghz"), min_size=1, max_size=8), st.integers(1, 45))
@settings(max_examples=150, deadline=None)
def test_snapshot_top_equals_scoring_every_posting(docs: list[list[str]], query: list[str], k: int) -> None:
    snap = build_snapshot(1, [(10 + 2 * i, i, "", " ".join(d)) for i, d in enumerate(docs)], DEFAULT_WEIGHTING)
    known = [snap.terms[t] for t in dict.fromkeys(query) if t in snap.terms]
    got = snap.top(query, k)
    if not known:
        assert all(len(a) == 0 for a in got)
        return
    postings = [(snap.rows[i.start : i.end], snap.weights[i.start : i.end]) for i in known]
    _same(got, exhaustive(postings, k, snap.chunk_ids))


def _presence_reference(cand: np.ndarray, postings: list[np.ndarray]) -> np.ndarray:
    """`topk.presence` as it was: one searchsorted, mask, gather, compare, cast, shift and or per term."""
    present = np.zeros(len(cand), dtype=np.int64)
    for bit, rows in enumerate(postings[:63]):
        at = np.searchsorted(rows, cand)
        at[at == len(rows)] = 0
        present |= (rows[at] == cand).astype(np.int64) << bit
    return present


@given(st.integers(1, 300), st.lists(st.sets(st.integers(0, 299), min_size=1), min_size=1, max_size=70),
       st.lists(st.integers(0, 320), max_size=60))
@settings(max_examples=300, deadline=None)
def test_presence_equals_its_term_by_term_reference(n: int, terms: list[set[int]], cand: list[int]) -> None:
    """Rows past the last entry, absent rows, repeated rows and more than 63 terms (the 64th on are left out)."""
    postings = [np.array(sorted(r % n for r in rows), dtype=np.int32) for rows in terms]
    postings = [np.unique(rows) for rows in postings]
    rows = np.array(cand, dtype=np.int64)
    assert presence(rows, postings).tolist() == _presence_reference(rows, postings).tolist()


@given(st.lists(st.lists(st.tuples(st.integers(0, 59), WEIGHTS), min_size=1, max_size=40), min_size=1, max_size=6),
       st.integers(1, 20), st.floats(0.5, 2.0), st.integers(0, 2**32 - 1))
@settings(max_examples=200, deadline=None)
def test_contenders_of_scores_known_within_a_factor_hold_the_exact_top_k(
        terms: list[list[tuple[int, float]]], k: int, r: float, seed: int) -> None:
    """Weights each moved by its own factor in [lo, hi] (as a delta's scaled base weights are from the exact
    ones): the contenders of the moved sums, with slack lo / hi, hold every row of the exact top k."""
    rng = np.random.default_rng(seed)
    lo, hi = min(1.0, r), max(1.0, r)
    exact: list[Postings] = []
    moved: list[Postings] = []
    for term in terms:
        got = dict(term)
        rows = np.array(sorted(got), dtype=np.int64)
        weights = np.array([got[int(i)] for i in rows], dtype=np.float32)
        exact.append((rows, weights))
        moved.append((rows, (weights * rng.uniform(lo, hi, len(rows))).astype(np.float32)))
    ids = np.arange(60, dtype=np.int64)
    want = exhaustive(exact, k, ids)[0]
    m = len(terms)
    rounding = (m + 4) * 2.0**-23
    scores = np.zeros(60, dtype=np.float32)
    for rows, weights in moved:
        scores[rows] += weights
    bounds = [float(w.max()) * (1 + 2.0**-21) for _, w in moved]
    cand = contenders(moved, bounds, k, scores, lo * (1 - rounding) / (hi * (1 + rounding)))
    assert set(want.tolist()) <= set(cand.tolist())
