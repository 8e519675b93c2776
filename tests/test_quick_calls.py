"""Issue 11 (MCP overhead): a quick call (ToolSpec.quick) that the gate allows at once is checked and
run on the event loop, with no worker thread; anything in it that would wait (a write, a busy pool)
moves it to a worker thread, where it runs again without being checked twice and without skipping
the check; a failing quick test or gate just means the worker thread."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Annotated, Any, cast

import anyio
import pytest
from pydantic import BaseModel, Field

from foundation.calls import CallOrigin
from foundation.errors import PolicyDenied
from foundation.storage.pooled_reads import ConnectionPool
from foundation.toolspec import ToolSpec
from foundation.waiting import MustWait, about_to_wait, on_the_loop
from mcp_server.dispatch import BaseGate, Dispatcher
from tools.runtime import Runtime

pytestmark = pytest.mark.anyio
ORIGIN = CallOrigin(kind="client", client_id="test")


class Seen(BaseModel):
    thread: int


ran: list[int] = []


def where(wait: Annotated[bool, Field(description="meet something to wait for")] = False) -> Seen:
    """Report the thread the tool runs in (after `about_to_wait` when asked)."""
    ran.append(threading.get_ident())
    if wait:
        about_to_wait()
    return Seen(thread=threading.get_ident())


def always(rt: Any, args: dict[str, Any]) -> bool:
    return True


def broken(rt: Any, args: dict[str, Any]) -> bool:
    raise RuntimeError("the quick test itself failed")


def waits(rt: Any, args: dict[str, Any]) -> bool:
    about_to_wait()  # e.g. its read found every pooled connection busy
    return True


class Gate(BaseGate):
    """check_blocking records its thread; `at_once` answers checks_at_once; `refuse` / `wait_on_loop`
    make the check refuse, or meet something to wait for when it runs on the event loop."""

    def __init__(self, at_once: bool = True, refuse: bool = False, wait_on_loop: bool = False) -> None:
        self.at_once, self.refuse, self.wait_on_loop = at_once, refuse, wait_on_loop
        self.checks: list[int] = []

    async def check(self, spec: ToolSpec, args: dict[str, Any], origin: CallOrigin) -> None:
        raise AssertionError("check_blocking is used")

    def checks_at_once(self, spec: ToolSpec, args: dict[str, Any], origin: CallOrigin) -> bool:
        return self.at_once

    def check_blocking(self, spec: ToolSpec, args: dict[str, Any], origin: CallOrigin) -> None:
        self.checks.append(threading.get_ident())
        if self.wait_on_loop:
            about_to_wait()
        if self.refuse:
            raise PolicyDenied("Denied by policy (test, high risk): no.")


@pytest.fixture(autouse=True)
def clear() -> None:
    ran.clear()


async def run(settings: Any, gate: Gate, quick: Any = always, **args: Any) -> Seen:
    spec = ToolSpec(where, title="Where", read_only=True, quick=quick)
    result = await Dispatcher(Runtime(settings), [spec], gate=gate).run("where", args, ORIGIN)
    assert isinstance(result, Seen)
    return result


async def test_a_quick_allowed_call_runs_on_the_event_loop(settings: Any) -> None:
    gate = Gate()
    result = await run(settings, gate)
    assert result.thread == threading.get_ident() and gate.checks == [threading.get_ident()]


@pytest.mark.parametrize("gate, quick", [(Gate(at_once=False), always), (Gate(), None), (Gate(), broken), (Gate(), waits)],
                         ids=["gate-not-at-once", "not-quick", "quick-test-fails", "quick-test-would-wait"])
async def test_otherwise_it_runs_in_a_worker_thread(settings: Any, gate: Gate, quick: Any) -> None:
    result = await run(settings, gate, quick)
    assert result.thread != threading.get_ident() and gate.checks == [result.thread]


async def test_a_call_that_must_wait_finishes_in_a_thread_checked_once(settings: Any) -> None:
    gate = Gate()
    result = await run(settings, gate, wait=True)
    loop = threading.get_ident()
    assert gate.checks == [loop], "the check passed on the loop: not repeated"
    assert ran == [loop, result.thread] and result.thread != loop


async def test_a_check_that_must_wait_is_not_skipped(settings: Any) -> None:
    gate = Gate(wait_on_loop=True)
    result = await run(settings, gate)
    loop = threading.get_ident()
    assert gate.checks == [loop, result.thread] and ran == [result.thread] and result.thread != loop


async def test_a_refusal_on_the_loop_stops_the_tool(settings: Any) -> None:
    gate = Gate(refuse=True)
    with pytest.raises(PolicyDenied):
        await run(settings, gate)
    assert gate.checks == [threading.get_ident()] and ran == []


def test_a_busy_pool_refuses_to_wait_on_the_loop(tmp_path: Path) -> None:
    pool = ConnectionPool(lambda: sqlite3.connect(tmp_path / "x.sqlite3", check_same_thread=False), size=1)
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        lease = pool.acquire()
        held.set()
        release.wait(10)
        pool.release(lease)

    holder = threading.Thread(target=hold)
    holder.start()
    assert held.wait(10)
    with pytest.raises(MustWait), on_the_loop():
        pool.acquire()
    threading.Timer(0.05, release.set).start()
    lease = pool.acquire()  # off the loop it waits for the connection, as before
    pool.release(lease)
    holder.join(10)


# -- the real server: search_documents on the event loop, and a deleted hit file moving it to a thread

NEVER_QUICK: list[dict[str, Any]] = [{"paths": ["docs"]}, {"query": '"exact words"'}, {"offset": 45},
                                     {"use_regex": True}, {"group_by_document": True}, {"mode": "all"}]


async def test_search_runs_on_the_loop_and_moves_to_a_thread_to_forget_a_deleted_file(
    make_settings: Any, workspace: Path, search_threads: list[str]
) -> None:
    from mcp.client import Client

    from mcp_server.server import build_server
    from tools.documents import search_is_quick
    from tools.index_services import search_ready

    if make_settings().database_url:
        pytest.skip("quick calls are SQLite-only (PostgreSQL reads are network round trips)")
    for name in ("kept", "gone"):
        (workspace / f"{name}.txt").write_text(f"The lighthouse keeper wrote about {name} storms.", encoding="utf-8")
    threads = search_threads
    server, dispatcher = build_server(make_settings(search_memory_min_chunks=1))
    async with Client(server, mode="legacy") as client:
        assert not (await client.call_tool("index_path", {"path": "."})).is_error
        deadline = time.monotonic() + 30
        while not search_ready(dispatcher.runtime) and time.monotonic() < deadline:
            await client.call_tool("search_documents", {"query": "lighthouse"})  # starts the postings' build
            await anyio.sleep(0.05)
        assert search_ready(dispatcher.runtime)
        assert search_is_quick(dispatcher.runtime, {"query": "lighthouse", "offset": 40})
        for never in NEVER_QUICK:
            assert not search_is_quick(dispatcher.runtime, {"query": "lighthouse", **never}), never
        threads.clear()
        found = (await client.call_tool("search_documents", {"query": "lighthouse storms"})).structured_content
        assert {h["path"] for h in found["hits"]} == {"kept.txt", "gone.txt"}
        assert threads == ["MainThread"]

        (workspace / "gone.txt").unlink()
        threads.clear()
        found = (await client.call_tool("search_documents", {"query": "lighthouse storms"})).structured_content
        assert [h["path"] for h in found["hits"]] == ["kept.txt"]
        assert threads[0] == "MainThread" and all(t != "MainThread" for t in threads[1:]) and len(threads) >= 2
        status = (await client.call_tool("index_status", {})).structured_content
        assert status["files"] == 1


def test_on_the_loop_only_the_loaded_postings_answer(tmp_path: Path) -> None:
    """A search on the event loop that the loaded postings cannot answer (not loaded or stale, a quoted
    phrase: the database's engine) raises MustWait; off the loop the same searches answer as before."""
    from indexing.indexer import Indexer
    from indexing.postings import MemoryIndex
    from indexing.search import Searcher
    from indexing.store import IndexStore

    folder = tmp_path / "docs"
    folder.mkdir()
    for n in range(5):
        (folder / f"d{n}.md").write_text(f"The lighthouse keeper {n} logs storms and harbour tides.", encoding="utf-8")
    store = IndexStore(tmp_path / "index.sqlite3")
    Indexer(store).index_tree(folder)
    memory = MemoryIndex(store, min_chunks=1)
    searcher = Searcher(store, memory=memory)
    for query in ("lighthouse storms", '"lighthouse keeper"'):
        with pytest.raises(MustWait), on_the_loop():
            searcher.search(query)  # the postings are not loaded yet / a phrase
    memory.build_now()
    with on_the_loop():
        assert len(searcher.search("lighthouse storms")) == 5
    with pytest.raises(MustWait), on_the_loop():
        searcher.search('"lighthouse keeper"')
    assert len(searcher.search('"lighthouse keeper"')) == 5
    (folder / "d0.md").write_text("Only gulls here.", encoding="utf-8")
    Indexer(store).index_tree(folder)  # a new generation: the loaded postings are stale
    with pytest.raises(MustWait), on_the_loop():
        searcher.search("lighthouse storms")
    assert len(searcher.search("lighthouse storms")) == 4
    store.close()


async def test_the_start_up_warm_up_loads_the_policy(make_settings: Any) -> None:
    """The rules and the policy engine load in the warm-up thread, not in the first call."""
    from mcp.client import Client

    from mcp_server.server import build_server

    server, dispatcher = build_server(make_settings())
    assert not dispatcher.gate.decides_quickly  # type: ignore[attr-defined]
    async with Client(server, mode="legacy"):
        deadline = time.monotonic() + 30
        while any(t.name == "warm-up" for t in threading.enumerate()) and time.monotonic() < deadline:
            await anyio.sleep(0.05)
        assert dispatcher.gate.decides_quickly  # type: ignore[attr-defined]


def test_on_the_loop_jieba_is_never_loaded() -> None:
    """A fresh process: on the event loop, English text analyses without jieba, and Chinese text that
    needs jieba's dictionary (not loaded yet) raises MustWait instead of loading it there."""
    import subprocess
    import sys

    code = (
        "from foundation.waiting import MustWait, on_the_loop\n"
        "from indexing.analyzer import analyze\n"
        "with on_the_loop():\n"
        "    print(analyze('lighthouse storms'))\n"
        "    try:\n"
        "        analyze('绿茶怎么泡')\n"
        "    except MustWait:\n"
        "        print('moved')\n"
        "print(len(analyze('绿茶怎么泡')) > 0)\n"
    )
    root = str(Path(__file__).resolve().parents[1])
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root,
                          env={**os.environ, "PYTHONPATH": root})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[:3] == ["['lighthous', 'storm']", "moved", "True"]


def test_the_start_up_warm_up_loads_the_dictionary_only_for_an_index(tmp_path: Path) -> None:
    """A fresh process: with no index the warm-up leaves the segmenter's dictionary (~0.25 s of CPU, ~57 MB)
    for the first Chinese text; with an index it loads it, so the first Chinese search does not wait."""
    import subprocess
    import sys

    code = (
        "from foundation.settings import load_settings\n"
        "from indexing import analyzer\n"
        "from tools.index_services import warm_up_search\n"
        "from tools.runtime import Runtime\n"
        "rt = Runtime(load_settings())\n"
        "warm_up_search(rt)\n"
        "print(analyzer._segmenter is not None)\n"
        "rt.close()\n"
    )
    root = str(Path(__file__).resolve().parents[1])

    def loaded(data: Path) -> str:
        env = {k: v for k, v in os.environ.items() if not k.startswith("GENERALAGENT_")}
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root,
                              env={**env, "PYTHONPATH": root, "GENERALAGENT_DATA_DIR": str(data)})
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout.strip()

    assert loaded(tmp_path / "fresh") == "False"
    (tmp_path / "indexed").mkdir()
    from indexing.store import IndexStore

    IndexStore(tmp_path / "indexed" / "index.sqlite3").close()
    assert loaded(tmp_path / "indexed") == "True"


# -- the real gate: the audit line of a call run on the loop is written after the call, never dropped


async def test_the_audit_line_of_a_call_on_the_loop_follows_the_call(settings: Any) -> None:
    """A quick call the policy allows at once is answered before its audit line is written (at the loop's
    next turn, so the answer does not wait for it); a call in a worker thread has its line before it ends.
    Either way each call gets exactly one line, in the order of the calls."""
    from mcp_server.approval.audit import AuditLog
    from mcp_server.approval.gate import PolicyGate

    audit = AuditLog(settings.data_dir)
    gate = PolicyGate(settings, audit=audit)
    gate.warm_up()
    logged_args = lambda: [json.loads(line)["args"] for line in audit.lines()]  # noqa: E731
    loop = threading.get_ident()
    for n in range(3):
        seen = await run(settings, cast(Any, gate))
        assert seen.thread == loop and len(logged_args()) == 2 * n, "answered before its line is written"
        await anyio.sleep(0)
        assert len(logged_args()) == 2 * n + 1
        seen = await run(settings, cast(Any, gate), wait=True)  # moved to a thread: the loop turned
        assert seen.thread != loop and logged_args()[-2:] == [{}, {"wait": True}]
    assert [json.loads(line)["outcome"] for line in audit.lines()] == ["allowed"] * 6


@pytest.mark.parametrize("sink", ["waits", "fails"])
async def test_the_line_after_the_call_is_written_off_the_loops_mark_and_its_failure_logged(
        settings: Any, sink: str, caplog: pytest.LogCaptureFixture) -> None:
    """The deferred line is written outside the call's context (a sink may wait there), and a sink's failure
    other than an OSError is logged by the gate, not raised into the event loop."""
    from mcp_server.approval.audit import AuditLog
    from mcp_server.approval.gate import PolicyGate

    class Sink(AuditLog):
        def append(self, lines: list[str]) -> None:
            about_to_wait()  # MustWait if still marked as on the loop
            if sink == "fails":
                raise ValueError("a sink bug")
            super().append(lines)

    audit = Sink(settings.data_dir)
    gate = PolicyGate(settings, audit=audit)
    gate.warm_up()
    failures: list[Any] = []
    loop = asyncio.get_running_loop()
    handler = loop.get_exception_handler()
    loop.set_exception_handler(lambda loop, context: failures.append(context))
    try:
        seen = await run(settings, cast(Any, gate))
        await anyio.sleep(0)
    finally:
        loop.set_exception_handler(handler)
    assert seen.thread == threading.get_ident() and failures == []
    logged = [r for r in caplog.records if "could not write the audit line" in r.getMessage()]
    assert len(list(audit.lines())) == (sink == "waits") and len(logged) == (sink == "fails")
