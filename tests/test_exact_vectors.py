"""The exact dense path (indexing/exact_vectors.py): an int8 pass, then only the rows its bound cannot rule
out re-scored, gives the exact top k of each language, and the moments of every cosine."""

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from indexing.exact_vectors import (
    VectorMatrix,
    _numpy_dots,
    dot_kernel,
    estimates,
    exact_cosines,
    nearest_rows,
)


def exact_top(m: VectorMatrix, query: np.ndarray, k: int) -> list[list[float]]:
    cos = m.scorer(query).cos
    return [sorted(cos[pool], reverse=True)[:k] for pool in m.pools]


@st.composite
def cases(draw: st.DrawFn) -> tuple[VectorMatrix, np.ndarray, int]:
    n, dim = draw(st.integers(1, 60)), draw(st.integers(1, 12))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    base = rng.standard_normal((n, dim)).astype(np.float32)
    if draw(st.booleans()):  # near ties: noisy copies of a few rows
        base = base[rng.integers(0, max(1, n // 5), n)] + 1e-3 * rng.standard_normal((n, dim)).astype(np.float32)
    chinese = rng.random(n) < draw(st.floats(0, 1))
    query = rng.standard_normal(dim).astype(np.float32)
    query /= max(float(np.linalg.norm(query)), 1e-9)
    return VectorMatrix.of_floats(np.arange(1, n + 1) * 3, base, chinese), query, draw(st.integers(1, 20))


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None, max_examples=300)
@given(cases())
def test_the_top_k_is_the_exact_top_k_of_each_language(case: tuple[VectorMatrix, np.ndarray, int]) -> None:
    m, query, k = case
    scorer = m.scorer(query)
    got = scorer.top(k)
    cos = scorer.cosines(got)
    chinese = m.chinese[m.position(got)]
    for want, mine in zip(exact_top(m, query, k), (cos[chinese], cos[~chinese]), strict=True):
        assert list(mine) == sorted(mine, reverse=True)  # best first
        np.testing.assert_allclose(mine, want, rtol=0, atol=1e-6)  # the same cosines (ties may swap ids)


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(cases())
def test_the_int8_pass_is_within_its_bound_and_the_moments_are_every_cosines(case: tuple[VectorMatrix, np.ndarray, int]) -> None:
    m, query, _ = case
    scorer = m.scorer(query)
    near, slack = estimates(m.rows, m.scales, m.l1, scorer.query)
    assert np.all(np.abs(near - scorer.cos) <= slack + 1e-9)
    for code in (0, 1):
        cos = scorer.cos[m.codes == code]
        assert scorer.counts[code] == len(cos)
        np.testing.assert_allclose(scorer.sums[code], cos.sum(), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(scorer.squares[code], (cos * cos).sum(), rtol=1e-4, atol=1e-4)


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(cases())
def test_without_numkong_the_float_rows_give_the_same_top_k(case: tuple[VectorMatrix, np.ndarray, int]) -> None:
    m, query, k = case
    floats = m.rows.astype(np.float32) * m.scales.astype(np.float32)[:, None]
    near, slack = estimates(m.rows, m.scales, m.l1, query, floats)
    assert np.all(np.abs(near - m.scorer(query).cos) <= slack + 1e-9)
    with_floats = nearest_rows(m.rows, m.scales, m.l1, m.pools, query, k, floats)
    with_int8 = nearest_rows(m.rows, m.scales, m.l1, m.pools, query, k)
    for a, b in zip(with_floats, with_int8, strict=True):
        np.testing.assert_allclose(exact_cosines(m.rows[a], m.scales[a], query),
                                   exact_cosines(m.rows[b], m.scales[b], query), rtol=0, atol=1e-6)


@given(st.integers(1, 50), st.integers(1, 40), st.integers(0, 2**32 - 1))
def test_the_dot_kernel_gives_exact_integers(n: int, dim: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    rows = rng.integers(-127, 128, (n, dim), dtype=np.int8)
    query = rng.integers(-127, 128, dim, dtype=np.int8)
    want = rows.astype(np.int64) @ query.astype(np.int64)
    assert np.array_equal(dot_kernel()(query, rows), want)
    assert np.array_equal(_numpy_dots(query, rows), want)


def test_an_empty_matrix_has_no_top_and_no_moments() -> None:
    m = VectorMatrix.of_floats(np.zeros(0, np.int64), np.zeros((0, 4), np.float32), np.zeros(0, bool))
    scorer = m.scorer(np.ones(4, np.float32) / 2)
    assert scorer.top(5) == [] and len(scorer.cosines([1, 2])) == 2
    assert list(scorer.counts) == [0, 0]
