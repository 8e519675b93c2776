"""Base postings + a delta of the changed documents: the same ids and scores as a whole rebuild,
whatever sequence of adds, replacements and deletions (ids reused after a delete too), on both
backends, and in another process's copy that follows the generation."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from indexing.delta import DeltaSnapshot
from indexing.indexer import Indexer
from indexing.postings import MemoryIndex, Snapshot
from indexing.query import parse, plan
from indexing.search import Searcher
from indexing.store import IndexStore

WORDS = ["revenue", "growth", "margin", "churn", "harbour", "engine", "turbine", "battery", "solar", "grid",
         "audit", "budget", "zeppelin", "hangar", "营收", "增长", "客户", "灯塔"]
QUERIES = ["revenue growth", "zeppelin", "harbour engine turbine", "churn", "营收增长", "grid solar battery audit",
           "hangar zeppelin budget", "margin"]

op = st.tuples(st.sampled_from(["add", "replace", "delete"]), st.integers(0, 7), st.integers(0, 10**6))


def _write(folder: Path, n: int, seed: int) -> None:
    rng = random.Random(seed)
    heading = " ".join(rng.sample(WORDS, 2)) if seed % 3 else ""
    paras = [" ".join(rng.choices(WORDS[: rng.randint(4, len(WORDS))], k=rng.randint(3, 30)))
             for _ in range(rng.randint(1, 3))]
    (folder / f"f{n}.md").write_text((f"# {heading}\n\n" if heading else "") + "\n\n".join(paras) + "\n", encoding="utf-8")


def _apply(folder: Path, indexer: Indexer, ops: list[tuple[str, int, int]], follow: MemoryIndex | None = None) -> None:
    """The operations, one write each; `follow` makes its delta after each (deltas made from deltas) and
    searches it (what its deltas keep of the base's postings is then reused, or must not be)."""
    for kind, n, seed in ops:
        if follow is not None and isinstance(view := follow.current(*indexer.store.generation()), DeltaSnapshot):
            for query in QUERIES:
                view.top(parse(query).terms, 3)
        path = folder / f"f{n}.md"
        if kind == "delete":
            if path.exists():
                path.unlink()
                indexer.remove_path(str(path))
        else:
            if kind == "replace" and not path.exists():
                continue
            _write(folder, n, seed)
            indexer.index_file(path)


def _same(view: DeltaSnapshot, full: Snapshot) -> None:
    assert view.generation == full.generation
    for query in QUERIES:
        terms = parse(query).terms
        for k in (1, 3, 50):
            rows, scores, present = view.top(terms, k)
            want_rows, want_scores, want_present = full.top(terms, k)
            assert view.chunk_ids[rows].tolist() == full.chunk_ids[want_rows].tolist(), query
            assert scores.tolist() == want_scores.tolist(), query  # bit for bit
            assert present.tolist() == want_present.tolist(), query
        for t in terms:
            a, b = view.terms.get(t), full.terms.get(t)
            assert (a is None) == (b is None) and (a is None or a.idf == b.idf), t  # type: ignore[union-attr]


def _ranked(searcher: Searcher, query: str) -> list[tuple[int, float]]:
    got = searcher.rank_by(searcher.engines[0], plan(query), 10, None)
    assert got is not None, "the in-memory engine answers"
    return [(h.chunk_id, h.score) for h in got]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=st.lists(st.integers(0, 10**6), min_size=1, max_size=6), ops=st.lists(op, min_size=1, max_size=12),
       chained=st.booleans())
def test_base_and_delta_equal_a_whole_rebuild(tmp_path_factory: pytest.TempPathFactory, first: list[int],
                                              ops: list[tuple[str, int, int]], chained: bool) -> None:
    folder = tmp_path_factory.mktemp("docs")
    store = IndexStore(tmp_path_factory.mktemp("db") / "index.sqlite3")
    indexer = Indexer(store)
    for n, seed in enumerate(first):
        _write(folder, n, seed)
    indexer.index_tree(folder)
    memory = MemoryIndex(store)
    assert memory.build_now() is not None
    _apply(folder, indexer, ops, memory if chained else None)
    generation, chunks = store.generation()
    full_memory = MemoryIndex(store)
    full = full_memory.build_now()
    if full is None:  # everything deleted
        return
    view = memory.current(generation, chunks)
    if view is None or isinstance(view, Snapshot):  # nothing changed after all
        assert view is None or view.generation == generation
        return
    assert isinstance(view, DeltaSnapshot)
    _same(view, full)
    fast, ref = Searcher(store, memory=memory), Searcher(store, memory=full_memory)
    for query in QUERIES:
        assert _ranked(fast, query) == _ranked(ref, query), query  # through the scorer: proximity too
    store.close()


def test_a_delta_answers_at_once_and_is_merged_when_quiet(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import indexing.postings as postings

    folder = tmp_path / "docs"
    folder.mkdir()
    for n in range(6):
        _write(folder, n, n)
    store = IndexStore(tmp_path / "index.sqlite3")
    indexer = Indexer(store)
    indexer.index_tree(folder)
    memory = MemoryIndex(store)
    memory.build_now()
    searcher = Searcher(store, memory=memory)
    (folder / "new.md").write_text("# Zeppelin\n\nThe zeppelin hangar was rebuilt.\n", encoding="utf-8")
    indexer.index_file(folder / "new.md")
    builds = memory.builds
    assert [cid for cid, _ in _ranked(searcher, "zeppelin hangar")][:1] == [
        h.chunk_id for h in Searcher(store).search("zeppelin hangar")][:1]
    assert memory.builds == builds  # answered by the delta, no rebuild during the change
    monkeypatch.setattr(postings, "MERGE_QUIET_S", 0.0)
    _ranked(searcher, "zeppelin")  # quiet: the merge starts in the background
    for _ in range(200):
        if memory.builds > builds and memory.holds(store.generation()[0]) and memory._delta is None:
            break
        memory.build_now()
    assert memory.builds > builds


def test_a_gap_in_the_change_log_means_a_rebuild(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    for n in range(4):
        _write(folder, n, n)
    store = IndexStore(tmp_path / "index.sqlite3")
    Indexer(store).index_tree(folder)
    memory = MemoryIndex(store)
    memory.build_now()
    store.rebuild()  # a generation that names no documents
    generation, chunks = store.generation()
    assert memory._delta_of(generation) is None


@pytest.mark.storage
def test_another_process_follows_through_the_log_on_either_backend(request: pytest.FixtureRequest, tmp_path: Path,
                                                                   backend: str) -> None:
    from tests.storage_fixtures import index_store_for

    folder = tmp_path / "docs"
    folder.mkdir()
    for n in range(5):
        _write(folder, n, n)
    store = index_store_for(request, tmp_path, backend)
    indexer = Indexer(store)
    indexer.index_tree(folder)
    memory = MemoryIndex(store)
    memory.build_now()
    _apply(folder, indexer, [("replace", 1, 7), ("delete", 2, 0), ("add", 2, 9), ("add", 6, 3), ("delete", 0, 0)])
    generation, chunks = store.generation()
    view = memory.current(generation, chunks)
    assert isinstance(view, DeltaSnapshot)
    full = MemoryIndex(store).build_now()
    assert full is not None
    _same(view, full)


EDIT_IN_ANOTHER_PROCESS = r"""
import sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from indexing.indexer import Indexer
from indexing.store import IndexStore
store = IndexStore(Path(sys.argv[2]))
folder = Path(sys.argv[3])
indexer = Indexer(store)
(folder / "f1.md").write_text("# zeppelin hangar\n\nrevenue growth zeppelin\n", encoding="utf-8")
indexer.index_file(folder / "f1.md")
(folder / "f2.md").unlink()
indexer.remove_path(str(folder / "f2.md"))
(folder / "f9.md").write_text("solar grid zeppelin battery\n", encoding="utf-8")
indexer.index_file(folder / "f9.md")
store.close()
"""


def test_a_process_follows_what_another_changed(tmp_path: Path) -> None:
    """Another process's writes reach this process's postings through the change log, as a delta."""
    import subprocess
    import sys

    folder = tmp_path / "docs"
    folder.mkdir()
    for n in range(5):
        _write(folder, n, n + 1)
    store = IndexStore(tmp_path / "index.sqlite3")
    Indexer(store).index_tree(folder)
    memory = MemoryIndex(store)
    memory.build_now()
    root = Path(__file__).resolve().parent.parent
    subprocess.run([sys.executable, "-c", EDIT_IN_ANOTHER_PROCESS, str(root), str(tmp_path / "index.sqlite3"),
                    str(folder)], check=True, timeout=120)
    view = memory.current(*store.generation())
    assert isinstance(view, DeltaSnapshot) and view.changed_docs >= 3
    full = MemoryIndex(store).build_now()
    assert full is not None
    _same(view, full)
    names = {Path(h.path).name for h in Searcher(store, memory=memory).search("zeppelin", limit=20)}
    assert {"f1.md", "f9.md"} <= names and "f2.md" not in names


@settings(deadline=None)
@given(st.lists(st.integers(0, 30), max_size=60), st.sets(st.integers(0, 32), max_size=8))
def test_the_rows_of_changed_documents_are_found_by_search_as_by_a_pass(doc_ids: list[int], docs: set[int]) -> None:
    """The binary search over ascending document ids finds exactly the rows one pass over them finds,
    and so does the pass used when they do not ascend."""
    import types

    import numpy as np

    from indexing.delta import _rows_of

    for ids, ascending in ((sorted(doc_ids), True), (doc_ids, False)):
        base = types.SimpleNamespace(doc_ids=np.array(ids, dtype=np.int64))
        expected = np.isin(base.doc_ids, list(docs)).nonzero()[0].tolist()
        assert sorted(_rows_of(base, docs, ascending).tolist()) == expected  # type: ignore[arg-type]


def test_a_delta_made_from_the_last_one_renumbers_the_rows_it_keeps(tmp_path: Path) -> None:
    """Files added one by one, then the first of them replaced and another deleted, a delta after each
    write (each made from the last: its postings merged with the changed chunks', not rebuilt): the
    rows after a dropped one move up, and the result equals a whole rebuild."""
    folder = tmp_path / "docs"
    folder.mkdir()
    for n in range(4):
        _write(folder, n, n + 11)
    store = IndexStore(tmp_path / "index.sqlite3")
    indexer = Indexer(store)
    indexer.index_tree(folder)
    memory = MemoryIndex(store)
    assert memory.build_now() is not None
    ops = [("add", 10 + n, 100 + n) for n in range(5)] + [("replace", 10, 7), ("delete", 12, 0), ("replace", 11, 9)]
    _apply(folder, indexer, ops, memory)
    view = memory.current(*store.generation())
    full_memory = MemoryIndex(store)
    full = full_memory.build_now()
    assert isinstance(view, DeltaSnapshot) and full is not None
    _same(view, full)
    for query in QUERIES:
        assert _ranked(Searcher(store, memory=memory), query) == _ranked(Searcher(store, memory=full_memory), query)
