"""Hypothesis strategies for JSON values (what a tool's structured content may hold)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st


def json_values(max_leaves: int = 20, non_finite: bool = False) -> st.SearchStrategy[Any]:
    """Any JSON value: null, booleans, integers of any size, finite floats, UTF-8 text, lists and objects
    (`non_finite`: floats also NaN and infinities, which pydantic-core's JSON parser reads, as a request may hold)."""
    floats = st.floats() if non_finite else st.floats(allow_nan=False, allow_infinity=False)
    scalars = st.none() | st.booleans() | st.integers() | floats | st.text(st.characters(codec="utf-8"), max_size=30)
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=5)
                        | st.dictionaries(st.text(max_size=8), inner, max_size=5), max_leaves=max_leaves)
