"""The live index, for real: files changed on disk while the server runs.

- In-process (the tool functions over a real index): a search never returns text its file no longer holds:
  a small changed text file is re-indexed inside the search, a larger one (or a DOCX) is left out with a
  note and re-indexed in the background; one watcher per data store (the advisory lock).
- Over stdio (the console script driven by the SDK's client): a watched folder follows edits (an editor's
  temp + rename save, swap files), new files, deletions, renames of files and folders, the watched folder
  deleted, and changes made while the server was down, with no index_path call; on SQLite and, with
  `--backend postgresql`, on PostgreSQL.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, nullcontext
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from tests.docgen import make_docx, make_pdf
from tests.test_stdio import CONSOLE_SCRIPT

DEADLINE_S = 60.0  # a loaded machine; on a quiet one a change is searchable well within 2 s


# -- in-process ------------------------------------------------------------------------------------


def _runtime(settings: Any, server: bool = False) -> Any:
    from tools.live_index import live_index
    from tools.runtime import Runtime

    rt = Runtime(settings)
    if server:
        live_index(rt).serving = True  # what the server's warm-up does: watch folders
    return rt


def _call() -> Any:
    from tools.runtime import CallContext

    return CallContext(tool="test")


def _search(rt: Any, query: str) -> Any:
    from tools.documents import search_documents

    return search_documents(query, rt=rt, call=_call())


def _watcher(rt: Any) -> Any:
    from tools.index_tools import index_status

    return index_status(rt=rt, call=_call()).watcher


def _paths(result: Any) -> list[str]:
    return sorted(h.path for h in result.hits)


def _until(check: Callable[[], Any], what: str, deadline: float = DEADLINE_S) -> Any:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        got = check()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"not within {deadline} s: {what}")


@pytest.mark.storage
def test_a_small_changed_text_file_is_reindexed_inside_the_search(settings: Any, workspace: Path) -> None:
    from tools.index_tools import index_path

    (workspace / "notes").mkdir()
    note = workspace / "notes" / "plan.md"
    note.write_text("# Plan\n\nThe zeppelin leaves at noon from the north field.\n")
    rt = _runtime(settings)
    try:
        index_path("notes", watch=False, rt=rt, call=_call())
        assert _paths(_search(rt, "zeppelin")) == ["notes/plan.md"]
        note.write_text("# Plan\n\nThe airship leaves at dawn from the south field.\n")
        stale = _search(rt, "zeppelin")
        assert stale.hits == [] and "changed" not in (stale.note or ""), stale  # the new text, at once
        fresh = _search(rt, "airship")
        assert _paths(fresh) == ["notes/plan.md"] and "airship" in fresh.hits[0].text
    finally:
        rt.close()


def test_a_server_started_before_any_index_watches_and_follows_it_once_made(settings: Any, workspace: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A server started on a fresh data dir writes nothing there; once an index appears it watches the folders
    and its postings follow the index (a delta made with no search)."""
    import tools.live_index as live_module
    from tools.index_services import index_store, memory_index
    from tools.index_tools import index_path

    monkeypatch.setattr(live_module, "INDEX_APPEARS_S", 0.1)
    (workspace / "notes").mkdir()
    (workspace / "notes" / "plan.md").write_text("# Plan\n\nThe zeppelin leaves at noon.\n")
    rt = _runtime(settings.model_copy(update={"search_memory_min_chunks": 1}), server=True)
    try:
        live_module.warm_up_watcher(rt)
        time.sleep(0.3)
        assert not settings.data_dir.exists() or not any(settings.data_dir.iterdir())
        index_path("notes", rt=rt, call=_call())
        assert _paths(_search(rt, "zeppelin")) == ["notes/plan.md"]  # (the postings are loaded)
        memory = memory_index(rt)
        _until(lambda: memory._follower is not None, "the postings follow the index")
        store = index_store(rt)
        more = workspace / "notes" / "more.md"
        more.write_text("# More\n\nThe airship leaves at dawn.\n")
        _until(lambda: store.file_row(str(more.resolve())) is not None, "the watcher indexed the new file")
        # the generation now or a later one (a merge, or another write, may have moved it on meanwhile)
        _until(lambda: memory.holds(store.generation()[0]), "its delta, made with no search")
    finally:
        rt.close()


@pytest.mark.skipif(os.name == "nt", reason="no fcntl: no shared activity files")
def test_the_shared_activity_files_are_made_at_their_first_use(settings: Any) -> None:
    """A fresh data dir gets no files from the live index (a server started on it, then stopped at once,
    raced its removal); a search's mark makes the file."""
    from tools.index_queue import REINDEXING_FILE, SEARCHES_FILE
    from tools.live_index import live_index

    rt = _runtime(settings)
    try:
        live = live_index(rt)
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        live.gauge.wait_idle()
        assert not live.reindexing_elsewhere()  # (probes)
        assert not (settings.data_dir / SEARCHES_FILE).exists() and not (settings.data_dir / REINDEXING_FILE).exists()
        with live.gauge:
            assert (settings.data_dir / SEARCHES_FILE).exists()
    finally:
        rt.close()


@pytest.mark.skipif(os.name == "nt", reason="no fcntl: each process sees its own re-indexing only")
def test_no_search_waits_on_another_process_that_reindexes(settings: Any, workspace: Path) -> None:
    """While another process of the data dir re-indexes (`--workers N`: the watcher process, whose write
    transaction an inline re-index would wait for), a changed small file is left out with the note and
    queued, not re-indexed inside the search; once that process is done, inline again."""
    import subprocess
    import sys

    from tools.index_queue import REINDEXING_FILE
    from tools.index_tools import index_path

    (workspace / "notes").mkdir()
    note = workspace / "notes" / "plan.md"
    note.write_text("# Plan\n\nThe zeppelin leaves at noon.\n")
    rt = _runtime(settings.model_copy(update={"watch_indexed": False}))
    child = subprocess.Popen([sys.executable, "-c", _SEARCHING_CHILD, str(settings.data_dir), REINDEXING_FILE],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parent.parent)
    assert child.stdin is not None and child.stdout is not None
    try:
        index_path("notes", watch=False, rt=rt, call=_call())
        child.stdin.write("start\n")  # the other process re-indexes
        child.stdin.flush()
        assert child.stdout.readline().strip() == "ok"
        note.write_text("# Plan\n\nThe airship leaves at dawn.\n")
        left_out = _search(rt, "zeppelin")
        assert left_out.hits == [] and "1 file changed" in (left_out.note or ""), left_out
        child.kill()
        child.wait()
        fresh = _until(lambda: _paths(_search(rt, "airship")) == ["notes/plan.md"], "the queue re-indexed it")
        assert fresh
        note.write_text("# Plan\n\nThe balloon leaves at dusk.\n")
        inline = _search(rt, "airship")  # nobody else re-indexes: inside the search again
        assert inline.hits == [] and "changed" not in (inline.note or ""), inline
        assert _paths(_search(rt, "balloon")) == ["notes/plan.md"]
    finally:
        child.kill()
        child.communicate()  # (closes its pipes)
        rt.close()


@pytest.mark.storage
def test_a_large_changed_file_is_left_out_with_a_note_then_found_again(settings: Any, workspace: Path) -> None:
    from tools.index_tools import index_path

    (workspace / "docs").mkdir()
    big = workspace / "docs" / "big.md"
    filler = "Ordinary words about harbours, ships and cargo manifests. " * 400  # ~24 KB: over the inline budget
    big.write_text(f"# Log\n\nThe zeppelin arrived.\n\n{filler}\n")
    report = make_docx(workspace / "docs" / "report.docx", ["The zeppelin report for the board."])
    rt = _runtime(settings)
    try:
        index_path("docs", watch=False, rt=rt, call=_call())
        assert _paths(_search(rt, "zeppelin")) == ["docs/big.md", "docs/report.docx"]
        big.write_text(f"# Log\n\nThe balloon arrived.\n\n{filler}\n")
        make_docx(report, ["The balloon report for the board."])
        first = _search(rt, "zeppelin")
        assert first.hits == [], first  # never the old sentence
        assert "2 files changed since they were indexed" in (first.note or ""), first.note
        _until(lambda: _paths(_search(rt, "balloon")) == ["docs/big.md", "docs/report.docx"], "re-indexed")
        after = _search(rt, "zeppelin")
        assert after.hits == [] and "changed" not in (after.note or "")
    finally:
        rt.close()


def test_a_serving_process_hands_the_gil_to_searches_sooner(settings: Any) -> None:
    """The server's warm-up shortens the GIL switch interval (background re-indexing and postings merges
    otherwise hold searches up to 5 ms each time they give the GIL up), with watching off too."""
    import sys

    from tools.live_index import SWITCH_INTERVAL_S, warm_up_watcher

    before = sys.getswitchinterval()
    sys.setswitchinterval(0.005)  # Python's default (an earlier test in this process may have warmed a server up)
    rt = _runtime(settings.model_copy(update={"watch_indexed": False}))
    try:
        warm_up_watcher(rt)
        assert sys.getswitchinterval() == pytest.approx(SWITCH_INTERVAL_S) and SWITCH_INTERVAL_S < 0.005
    finally:
        sys.setswitchinterval(before)
        rt.close()


_SEARCHING_CHILD = """
import sys
from pathlib import Path
from tools.index_queue import SearchGauge, SharedActivity
gauge = SearchGauge(SharedActivity.at(Path(sys.argv[1]), sys.argv[2]))
for line in sys.stdin:
    if line.strip() == "start":
        gauge.__enter__()
    else:
        gauge.__exit__(None, None, None)
    print("ok", flush=True)
"""


@pytest.mark.skipif(os.name == "nt", reason="no fcntl: each process sees its own searches only")
def test_the_reindexing_process_yields_to_the_searches_of_other_processes(tmp_path: Path) -> None:
    """`--workers N`: the worker that re-indexes waits (bounded) while another worker's search runs, and not
    after it ended or after that worker was killed mid-search (the kernel lets its lock go)."""
    import subprocess
    import sys
    import threading

    from tools.index_queue import SEARCHES_FILE, SearchGauge, SharedActivity

    child = subprocess.Popen([sys.executable, "-c", _SEARCHING_CHILD, str(tmp_path), SEARCHES_FILE], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, cwd=Path(__file__).parent.parent)
    assert child.stdin is not None and child.stdout is not None
    gauge = SearchGauge(SharedActivity.at(tmp_path, SEARCHES_FILE))

    def tell(line: str) -> None:
        child.stdin.write(line + "\n")
        child.stdin.flush()
        assert child.stdout.readline().strip() == "ok"

    def waited() -> float:
        started = time.monotonic()
        gauge.wait_idle(at_most=30.0)
        return time.monotonic() - started

    try:
        assert waited() < 1.0
        tell("start")  # the other process searches
        waiter = threading.Thread(target=waited)
        waiter.start()
        waiter.join(timeout=0.5)
        assert waiter.is_alive()  # this one waits for it
        tell("end")
        waiter.join(timeout=5.0)
        assert not waiter.is_alive()
        tell("start")
        child.kill()
        child.wait()
        assert waited() < 5.0
    finally:
        child.kill()
        child.communicate()  # (closes its pipes)
        gauge.close()


def test_one_watcher_per_data_store(settings: Any, workspace: Path) -> None:
    """Two server processes on one data store (two runtimes here: the lock file is per open file): one
    watches, the other follows; when the leader stops, the follower takes over."""
    from tools.index_tools import index_path
    from tools.live_index import live_index

    (workspace / "shared").mkdir()
    (workspace / "shared" / "a.md").write_text("alpha words")
    first, second = _runtime(settings, server=True), _runtime(settings, server=True)
    try:
        index_path("shared", rt=first, call=_call())
        leader = live_index(first).watcher
        assert leader is not None
        _until(lambda: leader.status.state == "watching", "the first one leads")
        live_index(second).start_watching()
        follower = live_index(second).watcher
        assert follower is not None
        _until(lambda: follower.status.state == "follower", "the second one follows")
        live_index(first).close()
        _until(lambda: follower.status.state == "watching", "the follower takes over")
        (workspace / "shared" / "b.md").write_text("bravo words")
        _until(lambda: _paths(_search(second, "bravo")) == ["shared/b.md"], "the new leader indexes")
    finally:
        first.close()
        second.close()


def test_a_damaged_file_is_reported_once_per_version(settings: Any, workspace: Path) -> None:
    from tests.docgen import make_corrupt_pdf
    from tools.index_tools import index_path
    from tools.live_index import live_index

    (workspace / "in").mkdir()
    (workspace / "in" / "ok.md").write_text("fine words")
    rt = _runtime(settings, server=True)
    try:
        index_path("in", rt=rt, call=_call())
        bad = make_corrupt_pdf(workspace / "in" / "bad.pdf")
        watcher = _until(lambda: _watcher(rt).failures, "the failure is reported")
        assert [f.split(": ", 1)[0] for f in watcher] == ["in/bad.pdf"]
        reindexed = live_index(rt).queue.stats.reindexed
        os.utime(bad)  # an event, same bytes: a new version (mtime) is reported once more, not retried forever
        for _ in range(3):
            (workspace / "in" / "ok.md").write_text(f"fine words {_}")
        _until(lambda: live_index(rt).queue.stats.reindexed >= reindexed + 1, "ok.md re-indexed")
        assert len(_watcher(rt).failures or []) == 1
    finally:
        rt.close()


# -- over stdio --------------------------------------------------------------------------------------


class Server:
    """The console script over stdio, with the SDK's client: call a tool, get its structured result."""

    def __init__(self, client: Any) -> None:
        self.client = client

    async def call(self, tool: str, **args: Any) -> dict[str, Any]:
        result = await self.client.call_tool(tool, args)
        assert not result.is_error, result
        return dict(result.structured_content)

    async def search(self, query: str) -> list[str]:
        result = await self.client.call_tool("search_documents", {"query": query})
        if result.is_error and "index is empty" in result.content[0].text:
            return []
        assert not result.is_error, result
        return sorted(h["path"] for h in result.structured_content["hits"])

    async def until(self, query: str, want: list[str]) -> float:
        """Seconds until a search for `query` finds exactly `want`."""
        start = time.monotonic()
        got: list[str] = []
        while time.monotonic() - start < DEADLINE_S:
            got = await self.search(query)
            if got == want:
                return time.monotonic() - start
            await anyio.sleep(0.05)
        raise AssertionError(f"{query!r}: {got}, not {want}, after {DEADLINE_S} s")

    async def status_until(self, check: Callable[[dict[str, Any]], bool]) -> None:
        """Wait until index_status (totals) passes `check`."""
        start, status = time.monotonic(), {}
        while time.monotonic() - start < DEADLINE_S:
            status = await self.call("index_status")
            if check(status):
                return
            await anyio.sleep(0.1)
        raise AssertionError(f"index_status after {DEADLINE_S} s: {status}")

    async def fresh(self, path: str) -> float:
        """Seconds until index_status says `path` is indexed and unchanged since: the watcher did it (a
        status call re-indexes nothing)."""
        start = time.monotonic()
        status: dict[str, Any] = {}
        while time.monotonic() - start < DEADLINE_S:
            status = (await self.call("index_status", path=path))["path_status"]
            if status.get("indexed") and status.get("fresh"):
                return time.monotonic() - start
            await anyio.sleep(0.05)
        raise AssertionError(f"{path} not fresh after {DEADLINE_S} s: {status}")


@asynccontextmanager
async def serve(tmp_path: Path, workspace: Path, database_url: str | None) -> AsyncIterator[Server]:
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    env = {"GENERALAGENT_DATA_DIR": str(tmp_path / "data"), "GENERALAGENT_ROOTS": str(workspace),
           "GENERALAGENT_TOOL_PROFILE": "full",
           "GENERALAGENT_EMBEDDING_PROVIDER": "off"}  # lexical pages (where the semantic extra is installed too)
    if database_url:
        env["GENERALAGENT_DATABASE_URL"] = database_url
    params = StdioServerParameters(command=str(CONSOLE_SCRIPT), args=["serve"], env=env, cwd=str(tmp_path))
    with (tmp_path / "stderr.txt").open("a") as err:
        async with Client(stdio_client(params, errlog=err)) as client:
            yield Server(client)


def _save_like_an_editor(path: Path, text: str) -> None:
    """Swap file, write to a temp file, rename over the original (vim, VS Code, JetBrains do some of it)."""
    swap = path.with_name(f".{path.name}.swp")
    swap.write_text("swap")
    temp = path.with_name(f"{path.name}.tmp~")
    temp.write_text(text)
    os.replace(temp, path)
    swap.unlink()


@pytest.mark.storage
@pytest.mark.anyio
async def test_a_watched_folder_follows_the_files(tmp_path: Path, workspace: Path, database_url: str | None) -> None:
    docs = workspace / "docs"
    (docs / "sub").mkdir(parents=True)
    (docs / "a.md").write_text("# A\n\nThe zeppelin leaves at noon.\n")
    (docs / "sub" / "b.txt").write_text("bravo in a sub folder\n")
    make_pdf(docs / "c.pdf", [["charlie on a page of a PDF"]])
    async with serve(tmp_path, workspace, database_url) as server:
        indexed = await server.call("index_path", path="docs")
        assert indexed["indexed"] == 3 and indexed["watched"] is True, indexed
        assert (await server.call("index_status"))["watcher"]["folders"] == ["docs"]

        _save_like_an_editor(docs / "a.md", "# A\n\nThe airship leaves at dawn.\n")
        await server.fresh("docs/a.md")  # by the watcher: no search, no index_path
        assert await server.search("zeppelin") == [] and await server.search("airship") == ["docs/a.md"]

        make_docx(docs / "new.docx", ["delta in a new document"])
        await server.until("delta", ["docs/new.docx"])
        make_pdf(docs / "c.pdf", [["echo on the new page"]])
        await server.fresh("docs/c.pdf")
        assert await server.search("charlie") == []

        os.rename(docs / "sub" / "b.txt", docs / "sub" / "moved.txt")
        await server.until("bravo", ["docs/sub/moved.txt"])
        os.rename(docs / "sub", docs / "renamed")
        await server.until("bravo", ["docs/renamed/moved.txt"])
        (docs / "new.docx").unlink()
        await server.until("delta", [])
        status = (await server.call("index_status", path="docs"))["path_status"]
        assert status["files"] == 3 and status["fresh"] is True, status

        shutil.rmtree(docs)  # the watched folder itself
        await server.status_until(lambda s: s["watcher"].get("missing") == ["docs"] and s["files"] == 0)

        (docs / "again").mkdir(parents=True)  # it comes back: watched again
        (docs / "again" / "f.md").write_text("foxtrot is back")
        await server.until("foxtrot", ["docs/again/f.md"])
        stopped = await server.call("unwatch_path", path="docs")
        assert stopped == {"unwatched": ["docs"], "watched": []}


@pytest.mark.storage
@pytest.mark.anyio
async def test_changes_made_while_the_server_was_down_are_found(tmp_path: Path, workspace: Path,
                                                                 database_url: str | None) -> None:
    docs = workspace / "docs"
    docs.mkdir()
    (docs / "keep.md").write_text("golf stays the same")
    (docs / "edit.md").write_text("hotel before the edit")
    (docs / "drop.md").write_text("india will be deleted")
    async with serve(tmp_path, workspace, database_url) as server:
        await server.call("index_path", path="docs")
    (docs / "edit.md").write_text("juliet after the edit")
    (docs / "drop.md").unlink()
    (docs / "added.md").write_text("kilo is new")
    async with serve(tmp_path, workspace, database_url) as server:
        await server.fresh("docs/edit.md")  # the start-up stat pass, no call needed
        await server.until("kilo", ["docs/added.md"])
        assert await server.search("hotel") == [] and await server.search("india") == []
        assert await server.search("golf") == ["docs/keep.md"]


def test_doctor_says_how_folders_are_watched(settings: Any, workspace: Path) -> None:
    from mcp_server.cmd_doctor import check_watcher
    from tools.index_tools import index_path
    from tools.index_watch import watch_health

    assert "none yet" in check_watcher(settings).detail
    (workspace / "w" / "deep").mkdir(parents=True)
    (workspace / "w" / "deep" / "x.md").write_text("x-ray")
    rt = _runtime(settings)
    try:
        index_path("w", rt=rt, call=_call())  # a one-shot run (no server): stored, watched by the next server
    finally:
        rt.close()
    check = check_watcher(settings)
    assert check.detail.startswith("1 folders, file-system events"), check
    if Path("/proc/sys/fs/inotify/max_user_watches").exists():
        assert "2 of " in check.detail and "inotify watches needed" in check.detail
    assert watch_health([str(workspace / "w")], polling=True) == (True, "1 folders, polling every 2 s (watch_polling)")


def test_the_index_command_saves_the_postings_and_the_watch(tmp_path: Path, workspace: Path) -> None:
    """`generalagent-mcp index` builds the search postings too: the next server opens them (no build)."""
    from foundation.settings import load_settings
    from tests.test_cli_paths import run
    from tools.index_services import index_store, memory_index
    from tools.index_watch import watched_folders

    (workspace / "docs").mkdir()
    for n in range(5):
        (workspace / "docs" / f"n{n}.md").write_text(f"note {n} about the lima project")
    data = tmp_path / "data"
    done = run(workspace, data, "--root", str(workspace), "index", "docs", GENERALAGENT_SEARCH_MEMORY_MIN_CHUNKS="1")
    assert done.returncode == 0, done.stderr
    assert "Search postings saved (5 chunks" in done.stdout and "Watched" in done.stdout, done.stdout
    rt = _runtime(load_settings({"data_dir": data, "roots": [workspace], "search_memory_min_chunks": 1}, environ={}))
    try:
        assert watched_folders(index_store(rt)) == [str(workspace / "docs")]
        memory = memory_index(rt)
        assert memory.current(*index_store(rt).generation()) is not None and memory.builds == 0  # opened, not built
    finally:
        rt.close()


@pytest.mark.storage
@pytest.mark.anyio
async def test_two_servers_on_one_data_store_one_watches(tmp_path: Path, workspace: Path,
                                                         database_url: str | None) -> None:
    """Two servers on one data store: one watches (the advisory lock), the other follows, and both find
    what the watcher indexed (the generation they follow)."""
    (workspace / "docs").mkdir()
    (workspace / "docs" / "m.md").write_text("mike is here")
    async with serve(tmp_path, workspace, database_url) as one, serve(tmp_path, workspace, database_url) as two:
        await one.call("index_path", path="docs")
        states = set()
        for _ in range(int(DEADLINE_S / 0.2)):
            states = {(await s.call("index_status"))["watcher"]["state"] for s in (one, two)}
            if states == {"watching", "follower"}:
                break
            await anyio.sleep(0.2)
        assert states == {"watching", "follower"}
        (workspace / "docs" / "n.md").write_text("november arrives")
        await one.until("november", ["docs/n.md"])
        await two.until("november", ["docs/n.md"])


# -- properties --------------------------------------------------------------------------------------

_NAMES = st.sampled_from(["a", "b.md", ".hidden", ".git", "__generalagent__", "x.swp", "notes", ".a.md.swp"])


@given(parts=st.lists(_NAMES, min_size=1, max_size=5))
@hsettings(max_examples=200, deadline=None)
def test_the_watch_filter_is_the_indexing_rule(parts: list[str]) -> None:
    """An event passes exactly when no component under the watched folder is hidden or the server's own,
    and it is not inside the skipped (data) folder; events outside the watched folders never pass."""
    from foundation.paths import INDEX_DIR_NAMES
    from tools.index_queue import ReindexQueue, SearchGauge
    from tools.index_watch import FolderWatcher

    watcher = FolderWatcher(None, nullcontext, ReindexQueue(lambda *a: None, SearchGauge()),  # type: ignore[arg-type]
                            skip=(Path("/w/root/notes"),))
    watcher.status.folders = ("/w/root",)
    path = "/w/root/" + "/".join(parts)
    hidden = any(p.startswith(".") or p in INDEX_DIR_NAMES for p in parts)
    in_skip = parts[0] == "notes"
    assert watcher._wanted(None, path) == (not hidden and not in_skip)
    assert not watcher._wanted(None, "/w/other/" + "/".join(parts))


@given(edits=st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["same", "touch", "grow", "delete"])),
                      max_size=8))
@hsettings(max_examples=30, deadline=None)
def test_changed_files_are_exactly_those_whose_size_or_mtime_moved(tmp_path_factory: Any,
                                                                     edits: list[tuple[int, str]]) -> None:
    from indexing.freshness import changed_files
    from indexing.indexer import Indexer
    from indexing.store import IndexStore

    folder = tmp_path_factory.mktemp("fresh")
    files = [folder / f"f{i}.md" for i in range(4)]
    for i, f in enumerate(files):
        f.write_text(f"file {i}")
    store = IndexStore(folder / "index.sqlite3")
    try:
        Indexer(store).index_files(files)
        moved: set[str] = set()
        for i, what in edits:
            f = files[i]
            if not f.exists():
                continue
            if what == "touch":
                os.utime(f, ns=(0, f.stat().st_mtime_ns + 1_000_000))
                moved.add(str(f))
            elif what == "grow":
                f.write_text(f.read_text() + " more")
                moved.add(str(f))
            elif what == "delete":
                f.unlink()
                moved.discard(str(f))
        found = {c.path for c in changed_files(store, [str(f) for f in files] * 2 + [""])}
        assert found == {p for p in moved if os.path.exists(p)}
    finally:
        store.close()


_TREE_NAMES = st.sampled_from(["a.md", "b.txt", "c.bin", "README", ".h.md", "d", ".git", "__generalagent__", "e.pdf"])


@given(tree=st.lists(st.tuples(st.lists(_TREE_NAMES, min_size=1, max_size=3), st.booleans()), max_size=12))
@hsettings(max_examples=40, deadline=None)
def test_the_stat_pass_walks_as_index_path_does(tmp_path_factory: Any, tree: list[tuple[list[str], bool]]) -> None:
    """The stat pass's quick walk finds exactly the supported files index_path's walk finds (hidden entries,
    the server's folders, symlinks leading out skipped), with their sizes."""
    from foundation.filewalk import FileWalk
    from indexing.extract import is_supported
    from tools.index_scan import QuickWalk

    base = tmp_path_factory.mktemp("walk")
    root, outside = base / "root", base / "outside.md"
    root.mkdir()
    outside.write_text("out")
    for parts, link in tree:
        path = root.joinpath(*parts)
        if any(p.is_file() or p.is_symlink() for p in [path, *path.parents] if p != root and root in p.parents):
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists():
            continue
        if link:
            path.symlink_to(outside if len(parts) % 2 else root / "a.md")
        else:
            path.write_text("/".join(parts))
    quick = {(p, size) for p, size, _ in QuickWalk(str(root))}
    walked = {(str(e.path), e.size) for e in FileWalk(root) if is_supported(e.path)}
    assert quick == walked
