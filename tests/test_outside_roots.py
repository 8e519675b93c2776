"""search_documents' note on indexed files outside the roots counts only the gaps between the roots'
path ranges (issue 11: no scan of every indexed path per search); the count is the same as before."""

from __future__ import annotations

from pathlib import Path

import pytest

from indexing.store import IndexStore, folder_range
from tools.documents import _count_outside

PATHS = ["/a/x", "/a/y/z", "/a0", "/a-b/c", "/b/1", "/b/c/d", "/c", "/ab/q", "/", "/a/b/c/d", "/zz/top", "/0"]


@pytest.fixture
def store(tmp_path: Path) -> IndexStore:
    s = IndexStore(tmp_path / "index.sqlite3")
    with s.write() as conn:
        for path in PATHS:
            s.link_file(conn, path, None, 0, 0, error="unreadable")
    yield s
    s.close()


@pytest.mark.parametrize("roots", [("/a",), ("/a", "/b"), ("/b", "/a"), ("/a", "/a/y"), ("/",), ("/zz", "/a-b", "/ab")])
def test_outside_count_matches_the_ranges(store: IndexStore, roots: tuple[str, ...]) -> None:
    ranges = [folder_range(r) for r in roots]
    expected = sum(1 for p in PATHS if not any(low <= p < high for low, high in ranges))
    assert _count_outside(store, tuple(Path(r) for r in roots)) == expected
