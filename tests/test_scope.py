"""`scope.allowed`: exactly the positions whose document some file inside the scope links to, on either
backend, for any link layout (several paths per document, none, errors, moves after a first check)."""

from __future__ import annotations

from collections.abc import Iterator
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from indexing.scope import PathFilter, allowed
from tests.storage_fixtures import index_store_for

pytestmark = pytest.mark.storage

PATHS = ["/w/a/x.md", "/w/a/y.md", "/w/a/deep/z.md", "/w/ab/x.md", "/w/a.md", "/w/b/x.txt", "/other/x.md"]
SCOPES = [PathFilter(folders=("/w/a",)), PathFilter(folders=("/w/a/", "/other")), PathFilter(files=("/w/a.md",)),
          PathFilter(globs=("*.txt",)), PathFilter(globs=("/w/?/x.*",), files=("/other/x.md",)),
          PathFilter(folders=("/w/b",), globs=("*/deep/*",))]


@pytest.fixture
def indexed(request: pytest.FixtureRequest, tmp_path: Path, backend: str) -> Iterator[tuple[Any, list[int]]]:
    """An index of five documents (no chunks) that no file links to yet."""
    store = index_store_for(request, tmp_path, backend)
    with store.write() as conn:
        docs = [store.insert_document(conn, f"hash{n}", "text", 0, []) for n in range(5)]
    yield store, docs
    store.close()


def relink(store: Any, links: dict[str, int | None]) -> None:
    """The `files` table becomes `links` (path -> document, None: a file that failed to index)."""
    with store.write() as conn:
        for (path,) in conn.execute("SELECT path FROM files").fetchall():
            store.unlink_file(conn, path)
        for path, doc in links.items():
            store.link_file(conn, path, doc, 1, 1, None if doc is not None else "unreadable")


def inside(path: str, scope: PathFilter) -> bool:
    return (path in scope.files or any(path.startswith(d.rstrip("/") + "/") for d in scope.folders)
            or any(fnmatchcase(path, g) for g in scope.globs))


def expected(links: dict[str, int | None], doc_ids: list[int], scope: PathFilter) -> list[int]:
    reachable = {doc for path, doc in links.items() if doc is not None and inside(path, scope)}
    return [i for i, d in enumerate(doc_ids) if d in reachable]


def test_documents_linked_inside_duplicates_unknown_ids_and_moves(indexed: tuple[Any, list[int]]) -> None:
    store, (a, b, c, d, e) = indexed
    links = {"/w/a/x.md": a, "/w/ab/x.md": b, "/w/a/y.md": c, "/other/y.md": c, "/other/d.md": d, "/w/a/bad.md": None}
    relink(store, links)
    folder = PathFilter(folders=("/w/a",))
    ids = [d, a, a, b, c, e, 999_999, a, d]
    assert allowed(store, ids, folder) == [1, 2, 4, 7]
    assert allowed(store, [], folder) == []
    assert allowed(store, [e, 999_999], folder) == []
    generation = store.generation()
    with store.write() as conn:  # a's file moves out (a rename: the same document), d's moves in
        store.unlink_file(conn, "/w/a/x.md")
        store.link_file(conn, "/other/x.md", a, 1, 1)
        store.unlink_file(conn, "/other/d.md")
        store.link_file(conn, "/w/a/deep/d.md", d, 1, 1)
    assert store.generation() == generation  # links alone do not move the generation: nothing may key on it
    assert allowed(store, ids, folder) == [0, 4, 8]
    assert allowed(store, ids, PathFilter(globs=("/other/*",))) == [1, 2, 4, 7]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_the_same_as_a_python_filter_for_any_layout(indexed: tuple[Any, list[int]], data: st.DataObject) -> None:
    store, doc_ids = indexed
    docs = st.sampled_from(doc_ids)
    links = data.draw(st.dictionaries(st.sampled_from(PATHS), st.none() | docs, max_size=len(PATHS)))
    scope = data.draw(st.sampled_from(SCOPES))
    relink(store, links)
    for _ in range(3):
        ids = data.draw(st.lists(docs | st.just(999_999), max_size=30))
        assert allowed(store, ids, scope) == expected(links, ids, scope)
