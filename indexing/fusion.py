"""Re-ranking lexical candidates by a second score: min-max normalise both over the candidates
and mix them. Pure functions; used by the hybrid (dense) mode and by the bench's pseudo-relevance feedback.

Min-max over the candidates puts both scores on [0, 1] whatever their scale (BM25 grows with
query length, cosine does not); rank fusion (RRF) throws the score gaps away and measured worse.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


def min_max(scores: Sequence[float]) -> list[float]:
    """`scores` mapped onto [0, 1] (all equal: all 0)."""
    if not scores:
        return []
    low, high = min(scores), max(scores)
    span = high - low
    return [(s - low) / span if span > 0 else 0.0 for s in scores]


def fuse(lexical: Sequence[float], other: Sequence[float], weight: float) -> list[float]:
    """(1 - weight) x normalised lexical + weight x normalised other, per candidate."""
    if len(lexical) != len(other):
        raise ValueError("fuse: one score of each kind per candidate")
    return [(1 - weight) * a + weight * b for a, b in zip(min_max(lexical), min_max(other), strict=True)]


def reorder(items: Sequence[T], scores: Sequence[float]) -> list[tuple[float, T]]:
    """(score, item) best first; ties keep the input (lexical) order."""
    order = sorted(range(len(items)), key=lambda i: (-scores[i], i))
    return [(scores[i], items[i]) for i in order]
