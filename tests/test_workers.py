"""Several server processes on one PostgreSQL database, for real: `serve --transport http --workers 2`
(two processes on one socket, any request to any worker), and two separate servers on different ports
(written on one, read at once on the other; concurrent clients lose nothing; one killed with SIGKILL
while clients run, the other serves on). Plus the refusals: --workers N>1 without PostgreSQL, with
stdio, and --workers 0. A 2025-era session sent to the wrong process gets HTTP 404 with a JSON-RPC error.

The servers run this worktree's code (`python -m mcp_server`, cwd and PYTHONPATH at the repo root).
Concurrency phases last GA_TEST_SECONDS (default 15, for the suite's time; 30 as the scale-out issue asks;
e.g. 5 for a quick run).
"""

from __future__ import annotations

import http.client
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.test_http import INIT_BODY, MCP_HEADERS, HttpServer, free_port, request, server_env
from tests.test_storage_index_processes import assert_consistent, corpus, open_here

ROOT = Path(__file__).resolve().parent.parent
SECONDS = float(os.environ.get("GA_TEST_SECONDS") or 15)
CLIENTS = 8
ACCESS = re.compile(r"\[(\d+)\] uvicorn\.access: .*\"POST /mcp HTTP")

pytestmark = pytest.mark.timeout(300)


def serve_command(port: int, *args: str) -> list[str]:
    return [sys.executable, "-m", "mcp_server", "serve", "--transport", "http", "--port", str(port), *args]


def spawn(tmp: Path, url: str | None, *args: str, profile: str = "full",
          root: Path | None = None) -> tuple[subprocess.Popen[bytes], int, Path]:
    port = free_port()
    tmp.mkdir(parents=True, exist_ok=True)
    log = tmp / f"server-{port}.log"
    root = root or tmp / "workspace"
    root.mkdir(exist_ok=True)
    env = server_env(tmp / "data", PYTHONPATH=str(ROOT), GENERALAGENT_TOOL_PROFILE=profile,
                     GENERALAGENT_ROOTS=str(root))
    if url:
        env["GENERALAGENT_DATABASE_URL"] = url
    with log.open("wb") as sink:
        process = subprocess.Popen(serve_command(port, *args), stdin=subprocess.DEVNULL, stdout=sink,
                                   stderr=subprocess.STDOUT, env=env, cwd=ROOT)
    return process, port, log


def start(tmp: Path, url: str | None, *args: str, profile: str = "full") -> HttpServer:
    """A server of this worktree, once `/health` answers (90 s at most)."""
    return start_all([tmp], url, *args, profile=profile)[0]


def start_all(folders: list[Path], url: str | None, *args: str, profile: str = "full",
              root: Path | None = None) -> list[HttpServer]:
    """One server per folder (its own data dir), started together; returned once each answers `/health`.
    `profile`: the full one by default (list_memories); `root`: one folder the servers share (else
    each its own workspace)."""
    servers = [HttpServer(*spawn(tmp, url, *args, profile=profile, root=root)) for tmp in folders]
    deadline = time.monotonic() + 90  # a few seconds; a loaded machine took over 30
    for server in servers:
        while not _healthy(server):
            if server.process.poll() is not None or time.monotonic() > deadline:
                for each in servers:
                    each.stop()
                raise AssertionError(f"server did not start (exit code {server.process.returncode}):\n"
                                     f"{server.stderr()}")
            time.sleep(0.1)
    return servers


def _healthy(server: HttpServer) -> bool:
    try:
        return request(server.port, "GET", "/health")[0] == 200
    except OSError:
        return False


@pytest.fixture
def servers() -> Iterator[list[HttpServer]]:
    """Servers a test started; stopped (SIGTERM, then SIGKILL) at its end whatever happened."""
    started: list[HttpServer] = []
    yield started
    for server in started:
        server.stop()


@asynccontextmanager
async def client(url: str, mode: str, *, reconnect: bool = False, **options: Any) -> AsyncIterator[Any]:
    """An SDK client over HTTP. `reconnect`: a new TCP connection per request (`Connection: close`),
    so that the kernel may hand each one to another worker."""
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    headers = {"Connection": "close"} if reconnect else None
    async with (create_mcp_http_client(headers=headers) as http,
                Client(streamable_http_client(url, http_client=http), mode=mode, **options) as session):
        yield session


async def call(session: Any, tool: str, seconds: float = 30, **args: Any) -> dict[str, Any]:
    with anyio.fail_after(seconds):
        result = await session.call_tool(tool, args)
    assert not result.is_error, (tool, result.content)
    data: dict[str, Any] = result.structured_content
    return data


def pids_that_served(server: HttpServer) -> set[int]:
    return {int(pid) for pid in ACCESS.findall(server.stderr())}


async def all_facts(session: Any) -> set[str]:
    facts: set[str] = set()
    offset: int | None = 0
    while offset is not None:
        page = await call(session, "list_memories", offset=offset, limit=100)
        facts.update(f["content"] for f in page["facts"])
        offset = page["next_offset"]
    return facts


# --- --workers 2: one socket, two processes ------------------------------------------------------


@pytest.mark.anyio
async def test_two_workers_serve_one_address_and_share_the_state(pg_url: str, tmp_path: Path,
                                                                 servers: list[HttpServer]) -> None:
    server = start(tmp_path, pg_url, "--workers", "2", profile="default")
    servers.append(server)
    assert "(2 worker processes)" in server.stderr()
    async with client(server.url, "legacy", reconnect=True) as legacy, client(server.url, "auto") as modern:
        await call(legacy, "enable_tools", names=["list_memories"])  # lands on one worker, counts on all
        await call(modern, "enable_tools", names=["count_tokens"])
    for n in range(40):  # each request on a new connection: whichever worker accepts it answers
        mode = ("legacy", "auto")[n % 2]
        async with client(server.url, mode, reconnect=True) as writer:
            await call(writer, "todo_write", todos=[{"content": f"step {n}", "status": "pending"}], list_id=f"l{n}")
            await call(writer, "remember", fact=f"worker fact {secrets.token_hex(6)} {n}")
        if n >= 3 and len(pids_that_served(server)) == 2:
            break
    written = n + 1
    workers = pids_that_served(server)
    assert len(workers) == 2 and server.process.pid not in workers, server.stderr()
    for mode, enabled in (("legacy", "list_memories"), ("auto", "count_tokens")):
        async with client(server.url, mode, reconnect=True) as session:
            for _ in range(8):
                assert enabled in {tool.name for tool in (await session.list_tools()).tools}
    async with client(server.url, "legacy", reconnect=True) as reader:  # every write, from any worker
        for k in range(written):
            seen = await call(reader, "todo_read", list_id=f"l{k}")
            assert [i["content"] for i in seen["items"]] == [f"step {k}"]
        assert len(await all_facts(reader)) == written

    await assert_approvals_work_across_workers(server, tmp_path, pg_url)

    victim = min(workers)  # a worker that dies is logged and replaced; the server serves on
    os.kill(victim, signal.SIGKILL)
    await _wait_for(lambda: f"worker {victim} was killed by SIGKILL" in server.stderr()
                    and "in its place" in server.stderr(), server)
    async with client(server.url, "auto", reconnect=True) as session:
        for k in range(written):
            assert (await call(session, "todo_read", list_id=f"l{k}"))["version"] == 1

    taken = run_cli(tmp_path / "second", "serve", "--transport", "http", "--port", str(server.port), "--workers", "2",
                    url=pg_url)  # the workers' port is not shared with a second server by accident
    assert taken.returncode == 1 and f"Cannot listen on 127.0.0.1:{server.port}" in taken.stderr, taken.stderr

    health = {json.loads(request(server.port, "GET", "/health")[1])["pid"] for _ in range(10)}
    assert victim not in health and server.process.pid not in health
    children = _children(server.process.pid)
    assert len(children) == 3 and victim not in children  # the two workers and the folder watcher
    server.process.send_signal(signal.SIGTERM)  # stops every worker, then the supervisor
    assert server.process.wait(timeout=20) == 0, server.stderr()
    assert all(not _alive(pid) for pid in children)


@pytest.mark.anyio
async def test_a_process_of_its_own_watches_the_folders_at_a_lower_priority(pg_url: str, tmp_path: Path,
                                                                           servers: list[HttpServer]) -> None:
    """--workers 2: a third process, niced below the workers and serving no requests, watches the indexed
    folders and re-indexes what changes (the workers' watchers only follow, and report the failures it
    recorded); it is replaced when it dies."""
    server = start(tmp_path, pg_url, "--workers", "2", profile="default")
    servers.append(server)
    note = tmp_path / "workspace" / "docs" / "note.md"
    note.parent.mkdir()
    note.write_text("# Plan\n\nThe zeppelin budget is fixed.\n", encoding="utf-8")
    async with client(server.url, "auto", reconnect=True) as session:
        await call(session, "index_path", path="docs", seconds=60)
        children = _children(server.process.pid)
        own = os.getpriority(os.PRIO_PROCESS, server.process.pid)
        watchers = [pid for pid in children if os.getpriority(os.PRIO_PROCESS, pid) == own + 10]
        assert len(children) == 3 and len(watchers) == 1, (children, watchers)
        served = {json.loads(request(server.port, "GET", "/health")[1])["pid"] for _ in range(20)}
        assert watchers[0] not in served
        for n, word in enumerate(("airship", "balloon")):
            note.write_text(f"# Plan\n\nThe {word} budget doubled.\n", encoding="utf-8")
            deadline = time.monotonic() + 30
            while True:  # found again without any index_path call
                found = await call(session, "search_documents", query=word)
                if [h["path"] for h in found["hits"]] == ["docs/note.md"] and not found.get("note"):
                    break
                assert time.monotonic() < deadline, (found, server.stderr())
                await anyio.sleep(0.2)
            status = await call(session, "index_status", path="docs")
            assert status["watcher"]["state"] == "follower", status["watcher"]
            if n == 0:  # the watcher dies: another takes its place, at the same priority
                os.kill(watchers[0], signal.SIGKILL)
                await _wait_for(lambda: "in its place" in server.stderr(), server)
                # the replacement lowers its own priority once it runs (the supervisor logs the fork before that)
                await _wait_for(lambda: len([pid for pid in _children(server.process.pid) - children
                                             if os.getpriority(os.PRIO_PROCESS, pid) == own + 10]) == 1, server)
        (note.parent / "broken.pdf").write_bytes(b"%PDF-1.7 not really a pdf")  # the workers report its failure
        deadline = time.monotonic() + 30
        while not (await call(session, "index_status", path="docs"))["watcher"].get("failures"):
            assert time.monotonic() < deadline, server.stderr()
            await anyio.sleep(0.2)
        for _ in range(4):  # whichever worker answers
            failures = (await call(session, "index_status", path="docs"))["watcher"]["failures"]
            assert len(failures) == 1 and failures[0].startswith("docs/broken.pdf: "), failures


async def assert_approvals_work_across_workers(server: HttpServer, tmp: Path, url: str) -> None:
    """A risky call asks the human on any worker: 2026-07-28, by a form whose answer comes back in a new
    request (any worker may take it); 2025-era requests on stateless workers cannot be asked, so the call
    is approved with `generalagent-mcp approve` and repeated (any worker honours the grant, once)."""
    from tests.approval_helpers import elicitation_answer

    seen: list[str] = []
    async with client(server.url, "auto", reconnect=True, elicitation_callback=elicitation_answer("accept", seen=seen)
                      ) as modern:
        for n in range(4):
            await call(modern, "write_file", path=f"form-{n}.txt", content=f"approved {n}")
    assert len(seen) == 4 and all((tmp / "workspace" / f"form-{n}.txt").read_text() == f"approved {n}" for n in range(4))

    async with client(server.url, "legacy", reconnect=True) as legacy:
        asked = await legacy.call_tool("write_file", {"path": "cli.txt", "content": "approved by cli"})
        text = asked.content[0].text
        assert asked.is_error and "Approval required" in text, text
        approval = re.search(r"approve (ap-[a-z0-9]+)", text)
        assert approval, text
        done = subprocess.run([sys.executable, "-m", "mcp_server", "approve", approval.group(1), "--scope", "once"],
                              input="y\n", capture_output=True, text=True, timeout=60, cwd=ROOT,
                              # the person's terminal on this computer: the server's data dir, whose key seals the
                              # grant (the database URL alone grants nothing: issue 30, finding 4)
                              env=server_env(tmp / "data", PYTHONPATH=str(ROOT), GENERALAGENT_DATABASE_URL=url))
        assert done.returncode == 0, done.stdout + done.stderr
        await call(legacy, "write_file", path="cli.txt", content="approved by cli")
        again = await legacy.call_tool("write_file", {"path": "cli.txt", "content": "approved by cli"})
        assert again.is_error and "Approval required" in again.content[0].text  # once means once
    assert (tmp / "workspace" / "cli.txt").read_text() == "approved by cli"


async def _wait_for(condition: Any, server: HttpServer, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, server.stderr()
        await anyio.sleep(0.1)


def _children(pid: int) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


# --- two separate servers on one database --------------------------------------------------------


@dataclass
class Load:
    """What the concurrent clients wrote and what went wrong (by client)."""

    todo_writes: dict[str, int] = field(default_factory=dict)  # list id -> how many writes
    facts: set[str] = field(default_factory=set)
    errors: dict[int, list[str]] = field(default_factory=dict)


async def run_clients(urls: list[str], seconds: float, load: Load, prefix: str = "load") -> None:
    """CLIENTS clients, alternately on each url, writing and reading todos and memory until the time is up
    (client i writes the list `{prefix}-{i}`)."""
    deadline = time.monotonic() + seconds

    async def one(index: int) -> None:
        url, list_id = urls[index % len(urls)], f"{prefix}-{index}"
        try:
            async with client(url, ("legacy", "auto")[index % 2]) as session:
                k = 0
                while time.monotonic() < deadline:
                    k += 1
                    await call(session, "todo_write", todos=[{"content": f"{list_id} #{k}", "status": "pending"}],
                               list_id=list_id)
                    load.todo_writes[list_id] = k
                    seen = await call(session, "todo_read", list_id=list_id)
                    assert seen["version"] == k and seen["items"][0]["content"] == f"{list_id} #{k}", seen
                    if k % 3 == 0:
                        fact = f"load fact {secrets.token_hex(6)} {secrets.token_hex(6)}"
                        await call(session, "remember", fact=fact)
                        load.facts.add(fact)
        except Exception as exc:  # recorded per client: the test decides which clients may fail
            load.errors.setdefault(index, []).append(describe(exc))

    async with anyio.create_task_group() as tg:
        for index in range(CLIENTS):
            tg.start_soon(one, index)


def describe(exc: BaseException) -> str:
    """The innermost errors of an exception (group), one line each."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(describe(inner) for inner in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"


async def check_everything_readable(url: str, load: Load) -> None:
    async with client(url, "auto") as reader:
        for list_id, writes in load.todo_writes.items():
            seen = await call(reader, "todo_read", list_id=list_id)
            assert seen["version"] == writes and seen["items"][0]["content"] == f"{list_id} #{writes}", seen
        missing = load.facts - await all_facts(reader)
        assert not missing, f"{len(missing)} of {len(load.facts)} facts lost"


@pytest.mark.anyio
async def test_two_servers_on_one_database_see_each_others_writes(pg_url: str, tmp_path: Path,
                                                                  servers: list[HttpServer]) -> None:
    shared = corpus(tmp_path / "shared", 40)
    first, second = start_all([tmp_path / "a", tmp_path / "b"], pg_url, root=shared)
    servers += [first, second]
    assert_a_2025_session_on_the_wrong_process_is_a_clear_404(first, second)
    async with client(first.url, "legacy") as a, client(second.url, "auto") as b:
        indexed = await call(a, "index_path", path=".")
        assert indexed["indexed"] == 40
        found = await call(b, "search_documents", query="marker7 lighthouse", max_results=1)  # the other server
        assert found["hits"][0]["path"] == "f007.md"
        for n in range(5):
            await call(a, "todo_write", todos=[{"content": f"from a {n}", "status": "pending"}], list_id="team")
            seen = await call(b, "todo_read", list_id="team")  # at once, on the other server
            assert seen["version"] == n + 1 and seen["items"][0]["content"] == f"from a {n}"
        await call(a, "remember", fact="The release train leaves on Thursdays")
        recalled = await call(b, "recall", query="when does the release train leave")
        assert "Thursdays" in recalled["memory_block"]

    load = Load()
    await run_clients([first.url, second.url], SECONDS, load)
    assert not load.errors, load.errors
    assert len(load.todo_writes) == CLIENTS and sum(load.todo_writes.values()) >= CLIENTS
    await check_everything_readable(first.url, load)
    await check_everything_readable(second.url, load)


CUT_FILES = 800  # the folder the kill cuts off mid-run (a quiet machine indexed 400 before a kill 3 s in)


@pytest.mark.anyio
async def test_the_other_server_serves_on_when_one_is_killed(pg_url: str, tmp_path: Path,
                                                             servers: list[HttpServer]) -> None:
    shared = corpus(tmp_path / "shared", CUT_FILES)
    doomed, survivor = start_all([tmp_path / "a", tmp_path / "b"], pg_url, root=shared)
    servers += [doomed, survivor]
    async with client(doomed.url, "auto") as session:  # a background run the kill cuts off mid-folder
        await call(session, "index_path", path=".", wait=False)
    before = Load()
    await run_clients([doomed.url, survivor.url], 1.0, before)
    assert not before.errors, before.errors

    during = Load()

    async def kill_soon() -> None:  # as soon as the run has written some files: mid-folder on any machine
        await anyio.sleep(0.3)
        await anyio.to_thread.run_sync(wait_for_indexed_files, pg_url, tmp_path, 10)
        doomed.process.send_signal(signal.SIGKILL)

    async with anyio.create_task_group() as tg:
        tg.start_soon(kill_soon)
        tg.start_soon(run_clients, [doomed.url, survivor.url], SECONDS, during, "during")
    assert doomed.process.wait(timeout=10) == -signal.SIGKILL
    survivors = {i for i in range(CLIENTS) if i % 2 == 1}
    assert not {i: e for i, e in during.errors.items() if i in survivors}, during.errors  # B never failed
    assert set(during.errors) <= {i for i in range(CLIENTS) if i % 2 == 0}, during.errors
    await check_everything_readable(survivor.url, before)  # written before the kill: intact
    served = Load(todo_writes={k: v for k, v in during.todo_writes.items() if int(k.split("-")[1]) in survivors})
    await check_everything_readable(survivor.url, served)
    await assert_the_cut_index_is_consistent_and_finished_elsewhere(survivor, pg_url, tmp_path)


def wait_for_indexed_files(url: str, tmp: Path, files: int, timeout: float = 60) -> None:
    db, store = open_here(url, tmp / "watch")
    try:
        deadline = time.monotonic() + timeout
        while store.totals()["files"] < files:
            assert time.monotonic() < deadline, "the background index run wrote nothing"
            time.sleep(0.05)
    finally:
        db.close()


async def assert_the_cut_index_is_consistent_and_finished_elsewhere(survivor: HttpServer, url: str, tmp: Path) -> None:
    """The run the kill cut off left a consistent index that the survivor searches and completes."""
    db, store = open_here(url, tmp / "check")
    try:
        assert_consistent(store)
        assert 0 < store.totals()["files"] < CUT_FILES, "the kill came after the run started and before it ended"
    finally:
        db.close()
    async with client(survivor.url, "auto") as session:
        status = await call(session, "index_status", path=".")
        assert status["jobs"][0]["state"] == "interrupted", status["jobs"]
        await call(session, "index_path", path=".", seconds=180)  # continues: the files indexed before are unchanged
        # (up to 790 files: 10-15 s on a loaded machine, and it met the usual 30 s bound on a busier one)
        found = await call(session, "search_documents", query=f"marker{CUT_FILES - 1}", max_results=1)
        assert found["hits"][0]["path"] == f"f{CUT_FILES - 1}.md"


# --- refusals and the 2025-era session on the wrong process ----------------------------------------


def run_cli(tmp: Path, *args: str, url: str | None = None) -> subprocess.CompletedProcess[str]:
    env = server_env(tmp / "data", PYTHONPATH=str(ROOT))
    if url:
        env["GENERALAGENT_DATABASE_URL"] = url
    return subprocess.run([sys.executable, "-m", "mcp_server", *args], capture_output=True, text=True, timeout=60,
                          env=env, cwd=ROOT, stdin=subprocess.DEVNULL)


def test_several_workers_need_postgresql(tmp_path: Path) -> None:
    started = time.monotonic()
    done = run_cli(tmp_path, "serve", "--transport", "http", "--port", str(free_port()), "--workers", "2")
    assert done.returncode == 2, done.stderr
    assert "GENERALAGENT_DATABASE_URL=postgresql://... or use --workers 1" in done.stderr
    assert time.monotonic() - started < 20 and done.stdout == ""


@pytest.mark.parametrize(("args", "message"), [
    (("--transport", "http", "--workers", "0"), "--workers: 0 is out of range (give a number of processes, 1-64)"),
    (("--transport", "http", "--workers", "-3"), "--workers: -3 is out of range"),
    (("--transport", "http", "--workers", "65"), "--workers: 65 is out of range"),
    (("--workers", "2"), "--workers N>1 needs --transport http"),
])
def test_impossible_worker_counts_are_refused(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    done = run_cli(tmp_path, "serve", *args, url="postgresql://nobody@127.0.0.1:1/none")
    assert done.returncode == 2 and message in done.stderr, done.stderr


def assert_a_2025_session_on_the_wrong_process_is_a_clear_404(first: HttpServer, second: HttpServer) -> None:
    """A 2025-era session lives in the process that created it: another one answers HTTP 404 with a
    JSON-RPC error (the spec's signal to start a new session), where it lives it works."""
    conn = http.client.HTTPConnection("127.0.0.1", first.port, timeout=10)
    conn.request("POST", "/mcp", INIT_BODY, MCP_HEADERS)
    response = conn.getresponse()
    response.read()
    session = response.getheader("mcp-session-id")
    conn.close()
    assert response.status == 200 and session
    body = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})
    headers = {**MCP_HEADERS, "Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
    status, answer = request(second.port, "POST", "/mcp", body, headers)
    assert status == 404, answer
    error = json.loads(answer)
    assert error["jsonrpc"] == "2.0" and error["error"]["message"] == "Session not found"
    assert request(first.port, "POST", "/mcp", body, headers)[0] == 200


def test_a_wrong_setting_in_the_workers_stops_the_server_at_once(tmp_path: Path) -> None:
    """Workers build their servers after the fork; a setting that breaks the build (here the rules file)
    would break every worker alike: the server stops with the settings exit code, not after retries."""
    rules = tmp_path / "policy.toml"
    rules.write_text("not [valid\n")
    env = server_env(tmp_path / "data", PYTHONPATH=str(ROOT), GENERALAGENT_POLICY_FILE=str(rules),
                     GENERALAGENT_DATABASE_URL="postgresql://nobody@127.0.0.1:1/none")
    done = subprocess.run(serve_command(free_port(), "--workers", "2"), capture_output=True, text=True, timeout=60,
                          env=env, cwd=ROOT, stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done.stderr
    assert "invalid TOML" in done.stderr and "a setting is wrong" in done.stderr
    assert "in its place" not in done.stderr


def test_answers_are_not_held_back_by_nagle(tmp_path: Path, servers: list[HttpServer]) -> None:
    """The listening socket is a TCP one that asyncio recognises (proto IPPROTO_TCP), so accepted
    connections get TCP_NODELAY: otherwise each answer (headers, then body) waited ~40 ms for the
    client's delayed ACK, and 20 requests on one connection took at least 0.8 s. (Here rather than in
    test_http.py, whose servers run the installed console script, not necessarily this tree.)"""
    from mcp_server.transports import bind_socket

    with bind_socket("127.0.0.1", 0) as sock:
        assert sock.proto == socket.IPPROTO_TCP
    server = start(tmp_path, None)
    servers.append(server)
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        conn.request("GET", "/health")
        conn.getresponse().read()
        took: list[float] = []
        deadline = time.monotonic() + 30  # held back, 20 answers never take < 0.8 s: one fast round proves it
        while len(took) < 5 or time.monotonic() < deadline:  # (a busy machine may need many rounds for one)
            started = time.monotonic()
            for _ in range(20):
                conn.request("GET", "/health")
                assert conn.getresponse().read()
            took.append(time.monotonic() - started)
            if took[-1] < 0.6:
                break
        assert min(took) < 0.6, took
    finally:
        conn.close()
