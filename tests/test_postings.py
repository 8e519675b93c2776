"""The postings: the same ranking as an exhaustive rerank, never stale, built in the background, saved
and reopened after a restart (never half-written or damaged ones), the same arrays from the streaming build."""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from indexing.engine import TermRows
from indexing.hits import ChunkHit
from indexing.indexer import Indexer
from indexing.postings import (
    MemoryIndex,
    Occurrences,
    Snapshot,
    TermInfo,
    TermTable,
    build_snapshot,
    open_snapshot,
)
from indexing.postings_child import ChildBuild
from indexing.query import parse, plan
from indexing.scoring import DEFAULT_RANK, DEFAULT_WEIGHTING, Weighting, idf, length_norm, saturate, score
from indexing.search import PathFilter, Searcher
from indexing.store import IndexStore

EN = ["revenue", "growth", "margin", "customer", "churn", "lighthouse", "harbour", "engine", "turbine", "battery", "solar", "wind", "grid", "contract", "supplier", "invoice", "audit", "forecast", "budget", "quarter", "baseline", "running", "runner", "river", "bridge"]
ZH = ["营收", "增长", "客户", "利润", "合同", "供应商", "审计", "预算", "季度", "电池", "风电", "电网", "发动机", "灯塔", "港口", "河流", "桥梁"]


def _corpus(folder: Path, files: int = 60, seed: int = 3) -> None:
    rng = random.Random(seed)
    for n in range(files):
        words = EN if n % 2 else ZH
        sep = " " if n % 2 else ""
        heading = sep.join(rng.sample(words, 2))
        paras = [sep.join(rng.choices(words, k=rng.randint(8, 40))) for _ in range(rng.randint(1, 4))]
        (folder / f"doc{n:02}.md").write_text(f"# {heading}\n\n" + "\n\n".join(paras) + "\n", encoding="utf-8")


def _queries(seed: int = 5, n: int = 60) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.sample(EN, rng.randint(1, 5))) if i % 2 else "".join(rng.sample(ZH, rng.randint(1, 4)))
            for i in range(n)]


@pytest.fixture()
def indexed(tmp_path: Path) -> tuple[Path, IndexStore]:
    folder = tmp_path / "docs"
    folder.mkdir()
    _corpus(folder)
    store = IndexStore(tmp_path / "index.sqlite3")
    Indexer(store).index_tree(folder)
    return folder, store


def _exhaustive(store: IndexStore, query: str, k: int) -> list[tuple[int, float]]:
    """The reference: every chunk of the index scored from its stored terms (as FTS5 candidates are)."""
    rows = [(i, head.split(), body.split()) for i, head, body in store.conn().execute(
        "SELECT id, head_terms, terms FROM chunks")]
    parsed = parse(query)
    found = TermRows(rows, *store.corpus_stats(), store.doc_freqs(parsed.all_terms()))
    return [(i, s) for s, i in score(found, parsed, len(rows), DEFAULT_RANK) if s > 0][:k]


def _in_memory(searcher: Searcher, query: str) -> list[ChunkHit] | None:
    """The top 10 through the in-memory engine alone (None: it cannot answer now)."""
    return searcher.rank_by(searcher.engines[0], plan(query), 10, None)


def test_memory_ranking_equals_an_exhaustive_rerank(indexed: tuple[Path, IndexStore]) -> None:
    _, store = indexed
    memory = MemoryIndex(store)
    assert memory.build_now() is not None
    searcher = Searcher(store, memory=memory)
    for query in _queries():
        got = _in_memory(searcher, query)
        assert got is not None, "the fresh in-memory postings must serve natural queries"
        want = _exhaustive(store, query, 10)
        assert [h.chunk_id for h in got] == [i for i, _ in want], query
        assert [h.score for h in got] == pytest.approx([s for _, s in want], rel=1e-4), query


def test_stale_postings_are_never_used(indexed: tuple[Path, IndexStore]) -> None:
    folder, store = indexed
    memory = MemoryIndex(store)
    memory.build_now()
    searcher = Searcher(store, memory=memory)
    (folder / "new.md").write_text("# Zeppelin\n\nThe zeppelin hangar was rebuilt.\n", encoding="utf-8")
    Indexer(store).index_file(folder / "new.md")
    found = searcher.search("zeppelin")
    assert [Path(h.path).name for h in found] == ["new.md"]
    delta = _in_memory(searcher, "zeppelin")  # index changed: base + a delta of the new document answer
    assert delta is not None and [h.chunk_id for h in delta] == [found[0].chunk_id]
    memory.build_now()
    fresh = _in_memory(searcher, "zeppelin")
    assert fresh is not None and [h.chunk_id for h in fresh] == [found[0].chunk_id]
    (folder / "new.md").unlink()
    Indexer(store).remove_path(str(folder / "new.md"))
    assert searcher.search("zeppelin hangar") == []
    assert _in_memory(searcher, "zeppelin hangar") == []  # its rows masked out of the base
    memory.build_now()
    assert _in_memory(searcher, "zeppelin hangar") == []


def test_path_filters_and_other_modes_agree_with_fts(indexed: tuple[Path, IndexStore]) -> None:
    folder, store = indexed
    memory = MemoryIndex(store)
    memory.build_now()
    fast, slow = Searcher(store, memory=memory), Searcher(store)
    scopes = [PathFilter(files=(str(folder / "doc03.md"),)), PathFilter(globs=("*/doc1*.md",)),
              PathFilter(folders=(str(folder),))]
    for query in _queries(n=20):
        for scope in scopes:
            assert [h.chunk_id for h in fast.search(query, paths=scope)] == [
                h.chunk_id for h in slow.search(query, paths=scope)
            ] or len(slow.search(query, paths=scope, limit=50)) > 10  # FTS5 may miss a weak candidate
        assert [h.chunk_id for h in fast.search(query, mode="all")] == [h.chunk_id for h in slow.search(query, mode="all")]


def test_built_in_the_background_and_capped(indexed: tuple[Path, IndexStore]) -> None:
    _, store = indexed
    memory = MemoryIndex(store)
    assert memory.current(*store.generation()) is None  # starts a build
    deadline = time.monotonic() + 60
    while memory.current(*store.generation()) is None:
        assert time.monotonic() < deadline, "the background build never finished"
        time.sleep(0.02)
    capped = MemoryIndex(store, max_chunks=0)
    assert capped.current(*store.generation()) is None and capped.build_now() is None
    assert Searcher(store, memory=capped).search("revenue growth")  # FTS5 still answers
    memory.max_chunks = store.generation()[1] - 1  # the index outgrew the cap: the copy is dropped
    assert memory.build_now() is None and memory._snapshot is None


# -- saved snapshots: reopened after a restart, never stale, never half-written ---------------------


def _saved(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def _top_ids(memory: MemoryIndex, store: IndexStore) -> list[list[int]]:
    searcher = Searcher(store, memory=memory)
    return [[h.chunk_id for h in _in_memory(searcher, q) or []] for q in _queries(n=20)]


def test_postings_that_follow_the_index_make_its_delta_and_merge_it_without_a_search(
        indexed: tuple[Path, IndexStore], monkeypatch: pytest.MonkeyPatch) -> None:
    """A serving process's postings follow the index: a new generation's delta is made by the follower,
    not by the next search, and merged once the index is quiet; then the follower stops when told."""
    import indexing.postings as postings

    monkeypatch.setattr(postings, "MERGE_QUIET_S", 0.3)
    folder, store = indexed
    memory = MemoryIndex(store)
    memory.build_now()
    builds = memory.builds
    memory.follow()
    memory.follow()  # (once)
    try:
        (folder / "new.md").write_text("# Zeppelin\n\nThe zeppelin hangar was rebuilt.\n", encoding="utf-8")
        Indexer(store).index_file(folder / "new.md")
        generation = store.generation()[0]
        deadline = time.monotonic() + 20
        while not memory.holds(generation) and time.monotonic() < deadline:
            time.sleep(0.005)
        assert memory.holds(generation)  # no search asked for it
        while memory.builds == builds and time.monotonic() < deadline:
            time.sleep(0.01)
        snap = memory.current(*store.generation())
        assert memory.builds == builds + 1 and snap is not None and snap.generation == generation  # merged
    finally:
        memory.stop_following()
    follower = memory._follower
    assert follower is not None
    follower.join(timeout=5)
    assert not follower.is_alive()


def test_postings_that_follow_an_index_without_them_build_them_once_it_is_quiet(
        indexed: tuple[Path, IndexStore], monkeypatch: pytest.MonkeyPatch) -> None:
    """No postings yet (an index made after the server started, or a build a concurrent write made give up): the
    follower builds them once the index is quiet, with no search (else it waited for one: a loaded CI run)."""
    import indexing.postings as postings

    monkeypatch.setattr(postings, "MERGE_QUIET_S", 0.3)
    _, store = indexed
    memory = MemoryIndex(store)
    memory.follow()
    try:
        generation = store.generation()[0]
        deadline = time.monotonic() + 20
        while not memory.holds(generation) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert memory.holds(generation) and memory.builds == 1
    finally:
        memory.stop_following()


def test_a_restart_opens_the_saved_snapshot_without_rebuilding(indexed: tuple[Path, IndexStore], tmp_path: Path) -> None:
    _, store = indexed
    saved = tmp_path / "postings"
    saved.mkdir()
    first = MemoryIndex(store, directory=saved)
    assert first.build_now() is not None and first.builds == 1
    assert len(_saved(saved)) == 1
    restarted = MemoryIndex(store, directory=saved)  # a new process: nothing in memory
    snap = restarted.current(*store.generation())  # the first search opens the files at once
    assert snap is not None and restarted.builds == 0
    assert restarted.build_now() is snap and restarted.builds == 0
    assert _top_ids(restarted, store) == _top_ids(first, store)
    assert isinstance(snap.rows.base, np.memmap) and isinstance(snap.body.base, np.memmap)  # views of the files


def test_a_stale_saved_snapshot_is_ignored_and_removed(indexed: tuple[Path, IndexStore], tmp_path: Path) -> None:
    folder, store = indexed
    saved = tmp_path / "postings"
    saved.mkdir()
    MemoryIndex(store, directory=saved).build_now()
    old = _saved(saved)
    (folder / "new.md").write_text("# Zeppelin\n\nThe zeppelin hangar was rebuilt.\n", encoding="utf-8")
    Indexer(store).index_file(folder / "new.md")
    restarted = MemoryIndex(store, directory=saved)
    assert restarted.current(*store.generation()) is None or restarted.builds == 1  # never the old files
    snap = restarted.build_now()
    assert snap is not None and snap.generation == store.generation()[0] and restarted.builds == 1
    assert "zeppelin" in snap.terms and not set(old) & set(_saved(saved))  # the old generation is gone
    assert len(_saved(saved)) == 1


def test_a_build_cut_off_leaves_nothing_that_is_used(indexed: tuple[Path, IndexStore], tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    import indexing.postings_files as files

    _, store = indexed
    saved = tmp_path / "postings"
    saved.mkdir()
    memory = MemoryIndex(store, directory=saved)

    def crash(*args: object) -> object:
        raise KeyboardInterrupt  # the process dies half-way through writing

    monkeypatch.setattr(files, "_regrouped", crash)
    with pytest.raises(KeyboardInterrupt):
        memory.build_now()
    assert _saved(saved) == [] and memory._snapshot is None
    monkeypatch.undo()
    # a scratch directory of a build whose process died (kill -9: nothing removed it) is never opened
    final = memory._path(store.generation()[0])
    dead = saved / f"{final.name}.tmp-999999999-deadbeef"
    dead.mkdir()
    (dead / "rows.bin").write_bytes(b"\0" * 12)
    assert memory.build_now() is not None and memory.builds == 1
    assert _saved(saved) == [final.name]


def test_a_child_process_builds_the_postings_once_for_every_process(indexed: tuple[Path, IndexStore],
                                                                     tmp_path: Path) -> None:
    folder, store = indexed
    saved = tmp_path / "postings"
    saved.mkdir()
    here = MemoryIndex(store)  # the reference: built in this process
    here.build_now()
    workers = [MemoryIndex(store, directory=saved, child=ChildBuild(tmp_path)) for _ in range(2)]
    got: list[Snapshot | None] = []
    threads = [threading.Thread(target=lambda m=m: got.append(m.build_now())) for m in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(m.builds for m in workers) == 1  # the second child waited for the first, then found its files
    assert all(s is not None and isinstance(s.rows.base, np.memmap) for s in got)  # mapped from the saved files
    assert _top_ids(workers[0], store) == _top_ids(workers[1], store) == _top_ids(here, store)
    (folder / "new.md").write_text("# Zeppelin\n\nThe zeppelin hangar was rebuilt.\n", encoding="utf-8")
    Indexer(store).index_file(folder / "new.md")
    assert workers[0].current(*store.generation()) is not None  # a delta, until the merge below
    merged = workers[0].build_now()
    assert merged is not None and merged.generation == store.generation()[0] and workers[0].builds == 2 - workers[1].builds
    assert "zeppelin" in merged.terms and _saved(saved) == [".build.lock", workers[0]._path(merged.generation).name]


def test_a_child_build_that_fails_leaves_the_build_to_this_process(indexed: tuple[Path, IndexStore], tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    _, store = indexed
    saved = tmp_path / "postings"
    saved.mkdir()
    memory = MemoryIndex(store, directory=saved, child=ChildBuild(tmp_path / "index.sqlite3"))  # a file: no data dir
    assert memory.build_now() is not None and memory.builds == 1
    here = MemoryIndex(store)
    here.build_now()
    assert "child process failed" in caplog.text and _top_ids(memory, store) == _top_ids(here, store)


_PARENT = """
import sys
from pathlib import Path
from indexing.postings_child import ChildBuild, build_in_child
from indexing.scoring import DEFAULT_WEIGHTING
build_in_child(ChildBuild(Path(sys.argv[1])), Path(sys.argv[2]), DEFAULT_WEIGHTING, 1, 10**9)
"""


def _children_building(saved: Path) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"indexing.postings_child_main" in argv and str(saved).encode() in argv:
            found.append(int(entry.name))
    return found


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="finds the child through /proc")
def test_a_child_build_ends_when_its_parent_is_killed(indexed: tuple[Path, IndexStore], tmp_path: Path) -> None:
    import fcntl
    import subprocess
    import sys

    from indexing.postings_child import LOCK_NAME

    saved = tmp_path / "postings"
    saved.mkdir()
    with open(saved / LOCK_NAME, "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another build runs: the child waits for the lock
        parent = subprocess.Popen([sys.executable, "-c", _PARENT, str(tmp_path), str(saved)],
                                  cwd=Path(__file__).resolve().parent.parent)
        deadline = time.monotonic() + 30
        while not _children_building(saved) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _children_building(saved), "the build's child process started"
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 10
        while _children_building(saved) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _children_building(saved), "the child ended with its parent, though still waiting for the lock"


@pytest.mark.parametrize("damage", ["truncate", "manifest", "missing", "garbage-manifest"])
def test_damaged_saved_files_are_rebuilt(indexed: tuple[Path, IndexStore], tmp_path: Path, damage: str) -> None:
    _, store = indexed
    saved = tmp_path / "postings"
    saved.mkdir()
    first = MemoryIndex(store, directory=saved)
    first.build_now()
    want = _top_ids(first, store)
    (path,) = saved.iterdir()
    if damage == "truncate":  # (a new file: the first snapshot still maps the old one)
        data = (path / "rows.bin").read_bytes()
        (path / "rows.bin").unlink()
        (path / "rows.bin").write_bytes(data[: len(data) // 2])
    elif damage == "manifest":
        (path / "manifest.json").unlink()
    elif damage == "missing":
        (path / "body_off.bin").unlink()
    else:
        (path / "manifest.json").write_text('{"format": 1, "generation"', encoding="utf-8")
    memory = MemoryIndex(store, directory=saved)
    assert memory.current(*store.generation()) is None  # not used: rebuilt in the background
    snap = memory.build_now()
    assert snap is not None and memory.builds == 1
    assert _top_ids(memory, store) == want


# -- the streaming build equals a build of everything at once ---------------------------------------


def _reference_build(rows: list[tuple[int, int, str, str]], weighting: Weighting) -> dict[str, np.ndarray]:
    """The former whole-index build in memory (every occurrence at once): the arrays to match."""
    vocab: dict[str, int] = {}
    body_ids: list[int] = []
    head_ids: list[int] = []
    body_len = np.empty(len(rows), dtype=np.int64)
    head_len = np.empty(len(rows), dtype=np.int64)
    add = vocab.setdefault
    for r, (_cid, _did, head_text, body_text) in enumerate(rows):
        b = [add(t, len(vocab)) for t in body_text.split()]
        h = [add(t, len(vocab)) for t in head_text.split()] if head_text else []
        body_ids += b
        head_ids += h
        body_len[r], head_len[r] = len(b), len(h)
    n, v = len(rows), max(len(vocab), 1)
    body = np.array(body_ids, dtype=np.int32)
    head = np.array(head_ids, dtype=np.int32)
    keys = np.concatenate((
        body.astype(np.int64) * n + np.repeat(np.arange(n), body_len),
        head.astype(np.int64) * n + np.repeat(np.arange(n), head_len),
    ))
    occurrence = np.concatenate((np.ones(len(body)), np.full(len(head), weighting.head_weight)))
    unique, inverse = np.unique(keys, return_inverse=True)
    tf = np.bincount(inverse, weights=occurrence, minlength=len(unique))
    post_rows = (unique % max(n, 1)).astype(np.int32)
    post_terms = unique // max(n, 1)
    avgdl = float(body_len.mean()) if n and body_len.sum() else 1.0
    norm = length_norm(body_len, avgdl, weighting)
    counts = np.bincount(post_terms, minlength=v)
    idfs = idf(n, counts, np.log)
    return {
        "vocab": np.array(list(vocab), dtype=object), "rows": post_rows,
        "weights": saturate(idfs[post_terms], tf, norm[post_rows], weighting).astype(np.float32),
        "body": body, "head": head, "body_off": np.concatenate(([0], np.cumsum(body_len))),
        "head_off": np.concatenate(([0], np.cumsum(head_len))),
        "bounds": np.concatenate(([0], np.cumsum(counts)))[: len(vocab) + 1], "idf": idfs[: len(vocab)],
        "chunk_ids": np.array([r[0] for r in rows], dtype=np.int64), "doc_ids": np.array([r[1] for r in rows], dtype=np.int64),
    }


_WORDS = st.sampled_from(["a", "b", "c", "d", "营收", "增长", "e1", "f", "gg", "h"])
_TEXT = st.lists(_WORDS, max_size=12).map(" ".join)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(st.tuples(_TEXT, _TEXT), max_size=30), batch=st.integers(1, 7), part=st.integers(1, 12),
       head_weight=st.sampled_from([2.0, 1.3, 0.7]))
def test_the_streaming_build_equals_a_whole_build(tmp_path_factory: pytest.TempPathFactory,
                                                  monkeypatch: pytest.MonkeyPatch, texts: list[tuple[str, str]],
                                                  batch: int, part: int, head_weight: float) -> None:
    import indexing.postings_files as files

    monkeypatch.setattr(files, "PART_POSTINGS", part)  # many term ranges
    weighting = Weighting(head_weight=head_weight)
    rows = [(3 * i + 1, i // 2, head, body) for i, (head, body) in enumerate(texts)]
    target = tmp_path_factory.mktemp("snap") / "s"
    files.write_snapshot(target, 7, (rows[i : i + batch] for i in range(0, len(rows), batch)), weighting)
    snap = open_snapshot(target, 7, weighting)
    want = _reference_build(rows, weighting)
    assert list(snap.terms) == list(want["vocab"])
    for name in ("rows", "weights", "body", "head", "body_off", "head_off", "chunk_ids", "doc_ids"):
        assert np.array_equal(np.asarray(getattr(snap, name)), want[name]), name
    for tid, term in enumerate(want["vocab"]):
        info = snap.terms[term]
        assert (info.tid, info.start, info.end, info.idf) == (
            tid, want["bounds"][tid], want["bounds"][tid + 1], want["idf"][tid])
    assert sorted(p.name for p in target.iterdir()) == sorted([f"{n}.bin" for n in files.ARRAYS] + ["terms.txt", "manifest.json"])


@pytest.mark.storage
def test_saved_postings_on_either_backend(request: pytest.FixtureRequest, tmp_path: Path, backend: str) -> None:
    """The rows are read in batches from either store; a second MemoryIndex (a restart, or another
    process of the same machine) opens the saved files instead of rebuilding."""
    from tests.storage_fixtures import index_store_for

    folder = tmp_path / "docs"
    folder.mkdir()
    _corpus(folder, files=20)
    store = index_store_for(request, tmp_path, backend)
    Indexer(store).index_tree(folder)
    saved = tmp_path / "postings"
    saved.mkdir()
    first = MemoryIndex(store, directory=saved)
    assert first.build_now() is not None and first.builds == 1
    again = MemoryIndex(store, directory=saved)
    assert again.current(*store.generation()) is not None and again.builds == 0
    assert _top_ids(again, store) == _top_ids(first, store)
    got = _in_memory(Searcher(store, memory=again), "revenue growth")
    assert got is not None and [h.chunk_id for h in got] == [i for i, _ in _exhaustive(store, "revenue growth", 10)]


def test_a_copied_index_never_opens_the_original_snapshots(indexed: tuple[Path, IndexStore], tmp_path: Path) -> None:
    """export/import gives the copy its own postings id, and a saved snapshot whose row count is not
    the index's (a restored backup that reached the same generation) is rebuilt, never used."""
    from foundation.storage.transfer import export, import_
    from indexing.portable import IndexPortable

    _, store = indexed
    saved = tmp_path / "postings"
    saved.mkdir()
    MemoryIndex(store, directory=saved).build_now()
    export([IndexPortable(store)], tmp_path / "index.jsonl", "test")
    copy = IndexStore(tmp_path / "copy.sqlite3")
    import_([IndexPortable(copy)], tmp_path / "index.jsonl")
    assert copy.get_meta("postings_id") not in (None, store.get_meta("postings_id"))  # made when it opened
    copied = MemoryIndex(copy, directory=saved)
    assert copied.build_now() is not None and copied.builds == 1 and len(_saved(saved)) == 2
    # same id and generation, other rows: the saved files are another index's
    twin = MemoryIndex(store, directory=saved)
    generation, chunks = store.generation()
    assert twin._open_saved(generation, chunks + 1) is None and len(_saved(saved)) == 1
    assert twin.build_now() is not None and twin.builds == 1


def test_an_old_scratch_folder_is_removed_even_when_its_pid_runs(indexed: tuple[Path, IndexStore], tmp_path: Path) -> None:
    import os

    _, store = indexed
    saved = tmp_path / "postings"
    saved.mkdir()
    memory = MemoryIndex(store, directory=saved)
    final = memory._path(store.generation()[0])
    young, old = (saved / f"{final.name}.tmp-{os.getpid()}-{tag}" for tag in ("young", "old"))
    for scratch in (young, old):
        scratch.mkdir()
    os.utime(old, (time.time() - 2 * 86_400, time.time() - 2 * 86_400))  # a build killed two days ago
    assert memory.build_now() is not None
    assert young.exists() and not old.exists()


def test_another_indexes_snapshots_go_once_unopened_for_a_day(indexed: tuple[Path, IndexStore], tmp_path: Path) -> None:
    """Snapshots of another postings id (the index file was deleted and made again, moved aside as
    damaged, or another was imported) are removed once no process has opened them for a day; one
    opened lately may be mapped by a live process of that index and stays."""
    import os

    _, store = indexed
    saved = tmp_path / "postings"
    saved.mkdir()
    folder = tmp_path / "before"
    folder.mkdir()
    _corpus(folder, files=4)
    before = IndexStore(tmp_path / "before.sqlite3")  # the index as it was before it was made again
    Indexer(before).index_tree(folder)
    assert MemoryIndex(before, directory=saved).build_now() is not None
    (theirs,) = _saved(saved)
    assert MemoryIndex(store, directory=saved).build_now() is not None
    assert theirs in _saved(saved) and len(_saved(saved)) == 2  # opened a moment ago: may be in use
    os.utime(saved / theirs, (time.time() - 2 * 86_400, time.time() - 2 * 86_400))
    restarted = MemoryIndex(store, directory=saved)
    assert restarted.current(*store.generation()) is not None and restarted.builds == 0
    assert _saved(saved) == [restarted._path(store.generation()[0]).name]


def _no_read_held(store: IndexStore) -> bool:
    """True when no read transaction is open on the index: on SQLite, a checkpoint after a new write
    copies the whole WAL back (none can pass a reader's snapshot); on PostgreSQL no session of the
    database is idle in a transaction (one would hold back vacuum)."""
    import sqlite3

    if store.backend == "postgresql":
        (idle,) = store.conn().execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                                       "AND state LIKE 'idle in transaction%'").fetchone()
        return bool(idle == 0)
    other = sqlite3.connect(store.path, isolation_level=None)
    try:
        other.execute("INSERT OR REPLACE INTO meta(key, value) VALUES('probe', ?)", (str(time.time_ns()),))
        _busy, log, copied = other.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        return bool(log == copied)
    finally:
        other.close()


@pytest.mark.storage
def test_the_build_reads_short_transactions_of_one_generation(request: pytest.FixtureRequest, tmp_path: Path,
                                                              backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rows are read a page at a time, each page in a read transaction of its own (SQLite can
    checkpoint its WAL, PostgreSQL vacuum, while a build runs); a change to the chunks meanwhile stops
    the read (IndexChanged) instead of mixing two generations, and the build saves nothing."""
    import indexing.postings_files as files
    from indexing.store import IndexChanged
    from tests.storage_fixtures import index_store_for

    folder = tmp_path / "docs"
    folder.mkdir()
    _corpus(folder, files=20)
    store = index_store_for(request, tmp_path, backend)
    Indexer(store).index_tree(folder)
    with store.snapshot_batches(lambda chunks: True, size=5) as read:
        assert read is not None
        generation, batches = read
        rows = next(batches)
        assert _no_read_held(store)  # between pages
        store.set_meta("unrelated", "a write that leaves the chunks alone")
        for batch in batches:
            rows += batch
        assert _no_read_held(store)  # after the last page, while the snapshot's files are written
    assert generation == store.generation()[0]
    assert rows == [tuple(r) for r in store.conn().execute(
        "SELECT id, doc_id, head_terms, terms FROM chunks ORDER BY id").fetchall()]
    (folder / "new.md").write_text("# Zeppelin\n\nThe zeppelin hangar was rebuilt.\n", encoding="utf-8")
    with store.snapshot_batches(lambda chunks: True, size=5) as read:
        assert read is not None
        next(read[1])
        Indexer(store).index_file(folder / "new.md")
        with pytest.raises(IndexChanged):
            list(read[1])
    # the same through a build: the index changes while its rows are turned into term ids
    saved = tmp_path / "postings"
    saved.mkdir()
    term_ids = files._term_ids

    def index_meanwhile(*args: object) -> object:
        if not (folder / "newer.md").exists():
            (folder / "newer.md").write_text("# Airship\n\nThe airship hangar.\n", encoding="utf-8")
            Indexer(store).index_file(folder / "newer.md")
        return term_ids(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(files, "_term_ids", index_meanwhile)
    memory = MemoryIndex(store, directory=saved)
    assert memory.build_now() is None and _saved(saved) == [] and memory.builds == 0
    snap = memory.build_now()
    assert snap is not None and snap.generation == store.generation()[0] and "airship" in snap.terms


def _same_index(store: IndexStore) -> IndexStore:
    """Another store object on the same database, as another process opens it."""
    return store.reopened()


@pytest.mark.storage
def test_the_postings_id_is_made_once_when_the_index_is_made(request: pytest.FixtureRequest, tmp_path: Path,
                                                             backend: str) -> None:
    """A new index has its id before any search (no search thread writes it); one that went missing
    is made under the store's one writer, so first searches racing in several processes agree."""
    from tests.storage_fixtures import index_store_for

    store = index_store_for(request, tmp_path, backend)
    made = store.get_meta("postings_id")
    assert made is not None and len(made) == 16
    assert MemoryIndex(store)._identity() == made
    with store.write() as conn:
        conn.execute("DELETE FROM meta WHERE key = 'postings_id'")
    others = [_same_index(store) for _ in range(4)]
    barrier = threading.Barrier(len(others))
    ids: list[str] = []

    def first_search(s: IndexStore) -> None:
        barrier.wait(5)
        ids.append(MemoryIndex(s)._identity())

    threads = [threading.Thread(target=first_search, args=(s,)) for s in others]
    for t in threads:
        t.start()
    for t in threads:
        t.join(20)
    assert len(ids) == 4 and set(ids) == {store.get_meta("postings_id")}
    for s in others:
        s.close()


def test_an_index_keeps_the_postings_id_an_earlier_version_made(tmp_path: Path) -> None:
    """Its saved postings stay usable: the migration making the id keeps one a search already made."""
    import sqlite3

    from foundation import sqlite_db
    from indexing.sqlite_schema import MIGRATIONS

    conn = sqlite3.connect(tmp_path / "index.sqlite3", isolation_level=None)
    sqlite_db.migrate(conn, MIGRATIONS[:5])
    conn.execute("INSERT INTO meta(key, value) VALUES('postings_id', 'made-by-a-search')")
    conn.close()
    assert IndexStore(tmp_path / "index.sqlite3").get_meta("postings_id") == "made-by-a-search"


def _found_reference(snap: Snapshot, rows: np.ndarray, terms: list[str], field: str) -> Occurrences:
    """`Snapshot.found` as it was: one field a call, by terms."""
    seq, off = (snap.body, snap.body_off) if field == "body" else (snap.head, snap.head_off)
    tids = [snap.terms[t].tid for t in terms if t in snap.terms]
    starts, ends = off[rows], off[rows + 1]
    lengths = ends - starts
    if not tids or not lengths.any():
        return Occurrences([], [], [0] * (len(rows) + 1))
    bounds = np.concatenate(([0], np.cumsum(lengths)))
    gathered = seq[np.repeat(starts - bounds[:-1], lengths) + np.arange(bounds[-1])]
    wanted = np.zeros(len(snap.terms), dtype=bool)
    wanted[tids] = True
    hits = np.flatnonzero(wanted[gathered])
    owner = np.searchsorted(bounds, hits, side="right") - 1
    splits = np.searchsorted(owner, np.arange(len(rows) + 1)).tolist()
    return Occurrences((hits - bounds[owner]).tolist(), gathered[hits].tolist(), splits)


@settings(max_examples=200, deadline=None)
@given(texts=st.lists(st.tuples(_TEXT, _TEXT), min_size=1, max_size=20), picks=st.lists(st.integers(0, 19), max_size=25),
       terms=st.lists(st.sampled_from(["a", "b", "营收", "gg", "h", "zz"]), max_size=6), heads=st.booleans())
def test_found_equals_one_field_at_a_time(texts: list[tuple[str, str]], picks: list[int], terms: list[str],
                                          heads: bool) -> None:
    """Both fields gathered at once give each row's occurrences as two calls of one field did
    (empty rows and headings, unknown terms, repeated rows, an index without headings)."""
    snap = build_snapshot(1, [(i, i, head, body) for i, (head, body) in enumerate(texts)], DEFAULT_WEIGHTING)
    rows = np.array([p % len(texts) for p in picks], dtype=np.int64)
    body, head = snap.found(rows, [snap.terms[t].tid for t in terms if t in snap.terms], heads)
    want_body = _found_reference(snap, rows, terms, "body")
    want_head = _found_reference(snap, rows, terms if heads else [], "head")
    for n in range(len(rows)):
        assert body.of(n) == want_body.of(n) and head.of(n) == want_head.of(n)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lookups=st.lists(st.sampled_from(["a", "b", "c", "d", "e", "nope", ""]), max_size=40), keep=st.integers(1, 4))
def test_term_table_lookups_agree_whatever_it_keeps(monkeypatch: pytest.MonkeyPatch, lookups: list[str],
                                                    keep: int) -> None:
    import indexing.snapshot as snapshot

    monkeypatch.setattr(snapshot, "MADE_TERMS", keep)  # the kept TermInfos are dropped again and again
    words = ["a", "b", "c", "d", "e"]
    bounds, idfs = np.array([0, 3, 4, 9, 9, 12], dtype=np.int64), np.array([0.5, 1.25, 2.0, 0.1, 3.5])
    table = TermTable(words, bounds, idfs)
    for term in lookups:
        want = TermInfo(words.index(term), int(bounds[words.index(term)]), int(bounds[words.index(term) + 1]),
                        float(idfs[words.index(term)])) if term in words else None
        assert table.get(term) == want and (term in table) == (want is not None)
        other = TermInfo(-1, 0, 0, 0.0)
        assert table.get(term, other) == (want or other)
        if want is not None:
            assert table[term] == want
