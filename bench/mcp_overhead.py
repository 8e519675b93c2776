"""What MCP adds to a call, and the server's memory after many searches (issue 11, scale).

    .venv/bin/python -m bench.mcp_overhead [--copies 1] [--calls 300] [--skip-latency]
                                           [--transports in-process in-memory stdio raw http third-party]
                                           [--rss-chunks 100000] [--rss-queries 2000] [--keep DIR]

1. Latency per call, p50/p95 in ms, of `search_documents` (DEV questions, top 10, on the DEV chunks
   replicated `--copies` times) and of a trivial tool (`todo_read`):
   - in-process: `indexing.search.Searcher.search` directly (search only), the tool function
     `tools.documents.search_documents` called directly (search plus the result's hits), the tool through
     `Dispatcher.run` (argument checks, approval gate, audit line, logging; no protocol);
   - the MCP SDK client over the in-memory transport, over stdio (the `generalagent-mcp` console
     script) and over Streamable HTTP on loopback;
   - `raw`: the server's cost alone, without the SDK client's (it re-validates every result against the
     output schema and parses it, 1-3 ms a call): a minimal JSON-RPC client in this process writing one
     line per request to the server's stdin, against our server and against a bare SDK `MCPServer`
     returning our tools' results computed beforehand (the SDK's own floor for the same payloads); our
     server also in the 2026-07-28 era (`server/discover`, the envelope on every request); the tool function
     behind a plain pipe (`--serve-plain`: a query line in, the result's JSON out, no MCP: what any second
     process costs); and the tool function in this process; their calls interleaved, BLOCK at a time;
   - `third-party`: the console script driven by the OpenAI Agents SDK (`MCPServerStdio`) and by
     pydantic-ai (`MCPToolset` over fastmcp), dev dependencies, with the strict-mode arguments a model
     sends (every property, null when unused); both speak the 2026-07-28 era.
   "MCP overhead" = transport p50 - in-process p50, shown over the bare search and over the tool function
   (for a bare MCPServer, whose tool does no work, over 0). "Server overhead over the SDK floor" = (our
   server's raw-client p50 - the tool function's p50) - the bare MCPServer's raw-client p50; the raw rows'
   summary line takes the tool function interleaved with them.
   The servers run this checkout's code (its root first on PYTHONPATH) and `--transports` picks the rows.
2. Memory (`--rss-chunks N`, 0 to skip): a server over HTTP on an index of N replicated DEV chunks
   answers `--rss-queries` searches from 8 concurrent clients; its RSS (anonymous and file-backed),
   open index connections (file descriptors) and mappings of the index file, before and after.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from bench.index_speed import chunk_corpora, replicas
from bench.retrieval import DEFAULT_EVAL, load_jsonl
from indexing.store import AnalyzedChunk, IndexStore

SCRIPT = Path(sys.executable).with_name("generalagent-mcp")
ROOT = Path(__file__).resolve().parents[1]
PROTOCOL = "2025-11-25"
MODERN_PROTOCOL = "2026-07-28"
SERVER_STAMP = {"io.modelcontextprotocol/serverInfo": {"name": "generalagent-mcp"}}
WARM_UP = 20
RSS_CLIENTS = 8


# -- the index: replicated DEV chunks, each document a real (empty) file inside the workspace -------


def build_index(data: Path, ws: Path, chunks: list[AnalyzedChunk], total: int) -> int:
    """An index of `total` chunks in `data/index.sqlite3`, its files under `ws`; returns the chunks."""
    from indexing.analyzer import ANALYZER_VERSION

    store = IndexStore(data / "index.sqlite3")
    docs = replicas(chunks, total)
    for at in range(0, len(docs), 200):
        with store.write() as conn:
            for key, group in docs[at : at + 200]:
                path = ws / "docs" / (key.replace(":", "-") + ".txt")
                doc_id = store.insert_document(conn, key, "text", 0, group)
                store.link_file(conn, str(path), doc_id, 0, 0)
    store.set_meta("analyzer", ANALYZER_VERSION)
    n = store.totals()["chunks"]
    store.close()
    (ws / "docs").mkdir(parents=True, exist_ok=True)
    for key, _ in docs:
        (ws / "docs" / (key.replace(":", "-") + ".txt")).touch()
    return n


def server_env(data: Path, ws: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GENERALAGENT_")}
    env.update(GENERALAGENT_DATA_DIR=str(data), GENERALAGENT_ROOTS=str(ws),
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])))
    return env


# -- 1. latency -----------------------------------------------------------------------------------


Row = tuple[float, float, float]  # p50 ms, p95 ms, CPU ms per call


def percentiles(times: list[float]) -> tuple[float, float]:
    times = sorted(times)
    return statistics.median(times), times[max(0, int(len(times) * 0.95) - 1)]


def timed(fn: Callable[[int], object], n: int, cpu: Callable[[], float] = time.process_time) -> Row:
    for i in range(WARM_UP):
        fn(i)
    times = []
    cpu_before = cpu()
    for i in range(n):
        started = time.perf_counter()
        fn(i)
        times.append((time.perf_counter() - started) * 1000)
    return (*percentiles(times), (cpu() - cpu_before) * 1000 / n)


async def atimed(fn: Callable[[int], Awaitable[object]], n: int, cpu: Callable[[], float] = time.process_time) -> Row:
    for i in range(WARM_UP):
        await fn(i)
    times = []
    cpu_before = cpu()
    for i in range(n):
        started = time.perf_counter()
        await fn(i)
        times.append((time.perf_counter() - started) * 1000)
    return (*percentiles(times), (cpu() - cpu_before) * 1000 / n)


def process_cpu(pid: int) -> Callable[[], float]:
    """CPU seconds (user + system) used so far by process `pid`, all its threads."""
    ticks = os.sysconf("SC_CLK_TCK")

    def read() -> float:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / ticks

    return read


def child_server() -> int:
    """The pid of the `generalagent-mcp` process this process started (stdio)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        if int(text.rsplit(")", 1)[1].split()[1]) == os.getpid() and "generalagent" in text:
            return int(stat.parent.name)
    raise SystemExit("the stdio server process was not found")


def in_process(data: Path, ws: Path, queries: list[str], n: int) -> dict[str, Row]:
    import anyio

    from foundation.calls import CallOrigin
    from indexing.hybrid import searcher as make_searcher
    from tools.index_services import index_store, memory_index, vector_worker

    _server, dispatcher = built_here(data, ws)
    rt = dispatcher.runtime
    searcher = make_searcher(index_store(rt), memory_index(rt), vector_worker(rt))
    out = {"search: Searcher.search": timed(lambda i: searcher.search(queries[i % len(queries)], limit=11), n)}
    out["search: the tool function"] = timed(tool_function(rt, queries), n)
    origin = CallOrigin(kind="client", client_id="bench")

    async def run() -> None:
        async def search(i: int) -> object:
            return await dispatcher.run("search_documents", {"query": queries[i % len(queries)]}, origin)

        async def todo(i: int) -> object:
            return await dispatcher.run("todo_read", {}, origin)

        out["search: Dispatcher.run"] = await atimed(search, n)
        out["todo_read: Dispatcher.run"] = await atimed(todo, n)

    anyio.run(run)
    return out


def built_here(data: Path, ws: Path) -> tuple[Any, Any]:
    """Our server and dispatcher in this process, the index's postings loaded."""
    from foundation.settings import load_settings
    from mcp_server.server import build_server
    from tools.index_services import memory_index

    server, dispatcher = build_server(load_settings({"data_dir": data, "roots": [ws]}, environ={}))
    memory_index(dispatcher.runtime).build_now()
    return server, dispatcher


def tool_function(rt: Any, queries: list[str]) -> Callable[[int], Any]:
    """The i-th search, by the tool function called directly."""
    search = searching(rt)
    return lambda i: search(queries[i % len(queries)])


def searching(rt: Any) -> Callable[[str], Any]:
    """A query's search by the tool function called directly (its SearchResult)."""
    from tools.documents import search_documents
    from tools.runtime import CallContext

    call = CallContext(tool="search_documents", client_id="bench", session_id=None)
    return lambda query: search_documents(query, rt=rt, call=call)


CLIENT_CHECK = [0.0]  # seconds the SDK client spent re-validating structured results (its output-schema check)


def time_client_check() -> None:
    """Count the time the Python SDK client spends checking each result against the tool's output
    schema (jsonschema, in the client: not the server's cost, and other clients do it differently)."""
    from mcp.client.session import ClientSession

    original = ClientSession.validate_tool_result
    if getattr(original, "timed", False):
        return

    async def timed_check(self: Any, name: str, result: Any) -> None:
        started = time.perf_counter()
        try:
            await original(self, name, result)
        finally:
            CLIENT_CHECK[0] += time.perf_counter() - started

    timed_check.timed = True  # type: ignore[attr-defined]
    ClientSession.validate_tool_result = timed_check  # type: ignore[method-assign]


async def over_client(client: Any, label: str, queries: list[str], n: int,
                      cpu: Callable[[], float] = time.process_time) -> dict[str, Row]:
    async def search(i: int) -> object:
        result = await client.call_tool("search_documents", {"query": queries[i % len(queries)]})
        assert not result.is_error, result.content
        return result

    async def todo(i: int) -> object:
        return await client.call_tool("todo_read", {})

    rows = {}
    for name, fn in (("search", search), ("todo_read", todo)):
        CLIENT_CHECK[0] = 0.0
        rows[f"{name}: {label}"] = await atimed(fn, n, cpu)
        CHECK_MS[f"{name}: {label}"] = CLIENT_CHECK[0] * 1000 / (n + WARM_UP)
    return rows


CHECK_MS: dict[str, float] = {}


def in_memory(data: Path, ws: Path, queries: list[str], n: int) -> dict[str, Row]:
    import anyio
    from mcp.client import Client

    async def run() -> dict[str, Row]:
        server, dispatcher = built_here(data, ws)
        async with Client(server, mode="legacy") as client:
            while any(thread.name == "warm-up" for thread in threading.enumerate()):
                await anyio.sleep(0.1)  # the server's start-up warm-up (jieba, tiktoken) is not what is measured
            rows = await over_client(client, "MCP in-memory", queries, n)

        async def decline(context: Any, params: Any) -> Any:  # never called when nothing needs approval
            from mcp_types import ElicitResult

            return ElicitResult(action="decline")

        async with Client(server, mode="legacy", elicitation_callback=decline) as client:
            rows |= await over_client(client, "MCP in-memory, client with elicitation", queries, n)
        async with Client(minimal_server(dispatcher.runtime, queries[: n + WARM_UP]), mode="legacy") as client:
            rows |= await over_client(client, "bare MCPServer in-memory, same results", queries, n)
        return rows

    return anyio.run(run)


def minimal_server(rt: Any, queries: list[str]) -> Any:
    """A bare MCPServer whose search_documents and todo_read return our tools' results for these queries
    (computed beforehand), with the same result schemas: what the SDK alone costs for the same payloads."""
    from mcp.server import MCPServer
    from mcp.server.mcpserver.tools.base import Tool

    from foundation.schemas import portable_schema
    from tools.documents import SearchResult
    from tools.runtime import CallContext
    from tools.todos import TodoList
    from tools.todos import todo_read as real_todo_read

    computed = searching(rt)
    results = {q: computed(q) for q in dict.fromkeys(queries)}
    todo = real_todo_read(rt=rt, call=CallContext(tool="todo_read", client_id="bench", session_id=None))

    def search(query: str) -> SearchResult:
        return results[query]

    def todo_read() -> TodoList:
        return todo

    search.__annotations__, todo_read.__annotations__ = {"query": str, "return": SearchResult}, {"return": TodoList}
    tools = [Tool.from_function(search, name="search_documents"), Tool.from_function(todo_read)]
    for tool in tools:  # the schemas our server lists (the SDK's public constructor takes the tools as built)
        if tool.fn_metadata.output_schema is not None:
            tool.fn_metadata.output_schema = portable_schema(tool.fn_metadata.output_schema, output=True)
    return MCPServer("bare", log_level="WARNING", tools=tools)


def over_stdio(data: Path, ws: Path, queries: list[str], n: int) -> dict[str, Row]:
    import anyio
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=str(SCRIPT), args=["serve"], env=server_env(data, ws), cwd=str(ws))

    async def run() -> dict[str, Row]:
        with (data.parent / "stdio.log").open("w") as err:
            async with Client(stdio_client(params, errlog=err), mode="legacy") as client:
                await _wait_for_postings(client, queries)
                return await over_client(client, "MCP stdio", queries, n, process_cpu(child_server()))

    return anyio.run(run)


def over_http(data: Path, ws: Path, queries: list[str], n: int) -> dict[str, Row]:
    import anyio
    from mcp.client import Client

    process, port = start_http(data, ws)
    try:
        async def run() -> dict[str, Row]:
            async with Client(f"http://127.0.0.1:{port}/mcp", mode="legacy") as client:
                await _wait_for_postings(client, queries)
                return await over_client(client, "MCP HTTP", queries, n, process_cpu(process.pid))

        return anyio.run(run)
    finally:
        stop(process)


POSTINGS_PENDING = "while the postings are built"  # index_status's `search` until they are (MemoryIndex.state)


async def _wait_for_postings(client: Any, queries: list[str]) -> None:
    """The server builds its in-memory postings in the background: wait until it has (a few s)."""
    import anyio

    for _ in range(3):
        await client.call_tool("search_documents", {"query": queries[0]})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        status = await client.call_tool("index_status", {})
        if POSTINGS_PENDING not in str(status.structured_content or status.content):
            return
        await anyio.sleep(0.2)


# -- the server alone: a minimal JSON-RPC client over stdio, no SDK on the client side --------------


class RawClient:
    """An MCP client reduced to the wire: one JSON line per message to the child's stdin, responses read
    line by line until the one with the request's id (notifications skipped); results are not checked
    against any schema, only parsed with `json.loads`. 2025 era (`initialize`), or with `modern` the
    2026-07-28 era: `server/discover`, then the envelope in every request's `_meta`."""

    def __init__(self, command: list[str], env: dict[str, str], cwd: Path, log: Path, modern: bool = False) -> None:
        self.log = log
        with log.open("wb") as err:  # the child keeps its own copy of the descriptor
            self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                            env=env, cwd=str(cwd))
        self.last_id = 0
        self.meta: dict[str, Any] | None = None
        try:
            if modern:
                self.meta = self.envelope()
                self.request("server/discover", {})
                return
            self.request("initialize", {"protocolVersion": PROTOCOL, "capabilities": {},
                                        "clientInfo": {"name": "bench-raw", "version": "1"}})
            self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        except BaseException:
            self.close()
            raise

    @staticmethod
    def envelope() -> dict[str, Any]:
        """The `_meta` of every 2026-07-28 request."""
        return {"io.modelcontextprotocol/protocolVersion": MODERN_PROTOCOL, "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "bench-raw", "version": "1"}}

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.last_id += 1
        if self.meta is not None:
            params = {**params, "_meta": self.meta}
        self.send({"jsonrpc": "2.0", "id": self.last_id, "method": method, "params": params})
        assert self.process.stdout is not None
        while line := self.process.stdout.readline():
            message = json.loads(line)
            if message.get("id") != self.last_id or "method" in message:
                continue  # a notification (or a request from the server, none with no client capabilities)
            if "error" in message:
                raise SystemExit(f"{method} failed: {message['error']}; the server's log is {self.log}")
            result: dict[str, Any] = message["result"]
            return result
        raise SystemExit(f"the server closed its output during {method}; its log is {self.log}")

    def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = self.request("tools/call", {"name": name, "arguments": arguments})
        if result.get("isError"):
            raise SystemExit(f"{name} failed: {result.get('content')}; the server's log is {self.log}")
        return result

    def close(self) -> None:
        end_input(self.process)
        if self.process.stdout is not None:
            self.process.stdout.close()


def end_input(process: subprocess.Popen[bytes]) -> None:
    """Close a child's stdin (a server on stdio exits at the end of input); killed if still running after 10 s."""
    assert process.stdin is not None
    process.stdin.close()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def wait_for_postings_raw(client: RawClient, queries: list[str]) -> None:
    """`_wait_for_postings` through the raw client."""
    for _ in range(3):
        client.call_tool("search_documents", {"query": queries[0]})
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if POSTINGS_PENDING not in json.dumps(client.call_tool("index_status", {}), ensure_ascii=False):
            return
        time.sleep(0.2)


RAW = "raw JSON-RPC client, stdio"
RAW_MODERN = "raw JSON-RPC client, stdio, 2026-07-28"
BARE_RAW = "bare MCPServer, raw JSON-RPC client, stdio"
PLAIN = "the tool function behind a plain pipe (no MCP), a line in, its JSON out"
FN_HERE = "the tool function, in this process, interleaved with the stdio rows"


def over_raw(data: Path, ws: Path, queries: list[str], n: int) -> dict[str, Row]:
    """Our server (the console script, as for the stdio rows) in both eras, the tool function behind a plain
    pipe (`--serve-plain`) and a bare MCPServer (`--serve-bare`), each a child process on stdio, driven by
    `RawClient` (the plain pipe by `PlainClient`), their calls interleaved (`interleaved`); CPU is the server
    process's."""
    env = server_env(data, ws)
    asked = data.parent / "bare-queries.json"
    asked.write_text(json.dumps(queries[: n + WARM_UP], ensure_ascii=False), encoding="utf-8")
    bare = [sys.executable, "-m", "bench.mcp_overhead", "--serve-bare", str(data), str(ws), str(asked)]
    with contextlib.ExitStack() as stack:
        ours = stack.enter_context(contextlib.closing(RawClient([str(SCRIPT), "serve"], env, ws,
                                                                data.parent / "raw-stdio.log")))
        modern = stack.enter_context(contextlib.closing(RawClient([str(SCRIPT), "serve"], env, ws,
                                                                  data.parent / "raw-modern-stdio.log", modern=True)))
        plain = stack.enter_context(contextlib.closing(PlainClient(data, ws)))
        floor = stack.enter_context(contextlib.closing(RawClient(bare, env, ws, data.parent / "bare-stdio.log")))
        for client in (ours, modern):
            wait_for_postings_raw(client, queries)
        searches = {f"search: {label}": client for label, client in ((RAW, ours), (RAW_MODERN, modern),
                                                                      (BARE_RAW, floor))}
        calls: dict[str, tuple[Callable[[int], object], Callable[[], float]]] = {
            label: (_raw_search(client, queries), process_cpu(client.process.pid)) for label, client in searches.items()}
        calls[f"search: {PLAIN}"] = (lambda i: plain.search(queries[i % len(queries)]), process_cpu(plain.process.pid))
        calls[f"search: {FN_HERE}"] = (tool_function(built_here(data, ws)[1].runtime, queries), time.process_time)
        rows = interleaved(calls, n)
        return rows | interleaved({f"todo_read: {label}": (_raw_todo(client), process_cpu(client.process.pid))
                                   for label, client in ((RAW, ours), (RAW_MODERN, modern), (BARE_RAW, floor))}, n)


def _raw_search(client: RawClient, queries: list[str]) -> Callable[[int], object]:
    return lambda i: client.call_tool("search_documents", {"query": queries[i % len(queries)]})


def _raw_todo(client: RawClient) -> Callable[[int], object]:
    return lambda i: client.call_tool("todo_read", {})


BLOCK = 20
"""Calls in a row before the next row's (`interleaved`): one call each in turn would leave every server's
caches cold on every call (measured: all stdio rows +0.8 to +1.5 ms, the plain pipe's too)."""


def interleaved(calls: dict[str, tuple[Callable[[int], object], Callable[[], float]]], n: int) -> dict[str, Row]:
    """`timed` for several rows at once, BLOCK calls of each in turn (each entry: the call, the CPU clock of
    whoever does its work): the machine's drifts hit every row alike."""
    for i in range(WARM_UP):
        for call, _ in calls.values():
            call(i)
    times: dict[str, list[float]] = {label: [] for label in calls}
    cpu_used = dict.fromkeys(calls, 0.0)  # counted per block: this process's clock also runs the other rows' clients
    for start in range(0, n, BLOCK):
        for label, (call, cpu) in calls.items():
            cpu_before = cpu()
            for i in range(start, min(n, start + BLOCK)):
                started = time.perf_counter()
                call(i)
                times[label].append((time.perf_counter() - started) * 1000)
            cpu_used[label] += cpu() - cpu_before
    return {label: (*percentiles(times[label]), cpu_used[label] * 1000 / n) for label in calls}


AGENTS = "OpenAI Agents SDK (MCPServerStdio), stdio"
PYDANTIC_AI = "pydantic-ai (MCPToolset, fastmcp), stdio"


def over_third_party(data: Path, ws: Path, queries: list[str], n: int) -> dict[str, Row]:
    """The console script driven by the OpenAI Agents SDK and by pydantic-ai (dev dependencies), each as it
    calls a tool for a model: strict-mode arguments (every property, null when unused), the 2026-07-28
    era both speak. The client's own cost is in the wall time; CPU is the server process's."""
    import anyio

    rows: dict[str, Row] = {}
    for label, session in ((AGENTS, _agents_session), (PYDANTIC_AI, _pydantic_ai_session)):
        log = data.parent / f"{session.__name__.strip('_')}.log"
        command = ["/bin/sh", "-c", 'exec "$0" serve 2>"$1"', str(SCRIPT), str(log)]  # its log to a file, as the others'
        rows |= anyio.run(_third_party_rows, label, session, command, server_env(data, ws), ws, queries, n)
    return rows


async def _third_party_rows(label: str, session: Callable[..., Any], command: list[str], env: dict[str, str],
                            ws: Path, queries: list[str], n: int) -> dict[str, Row]:
    import anyio

    async with session(command, env, ws) as (schema_of, call):
        properties = schema_of("search_documents")["properties"]

        async def search(i: int) -> object:
            return await call("search_documents", {**dict.fromkeys(properties), "query": queries[i % len(queries)]})

        await search(0)
        deadline = time.monotonic() + 60
        while POSTINGS_PENDING in str(await call("index_status", dict.fromkeys(schema_of("index_status")["properties"]))):
            if time.monotonic() > deadline:
                break
            await anyio.sleep(0.2)
        return {f"search: {label}": await atimed(search, n, process_cpu(child_server()))}


@contextlib.asynccontextmanager
async def _agents_session(command: list[str], env: dict[str, str],
                         ws: Path) -> AsyncIterator[tuple[Callable[[str], Any], Any]]:
    from agents.mcp import MCPServerStdio

    server = MCPServerStdio(params={"command": command[0], "args": command[1:], "env": env, "cwd": str(ws)},
                            client_session_timeout_seconds=120, name="bench")
    async with server:
        tools = {tool.name: tool for tool in await server.list_tools()}

        async def call(name: str, arguments: dict[str, Any]) -> object:
            result = await server.call_tool(name, arguments)
            assert not result.is_error, result.content
            return result.structured_content

        yield (lambda name: tools[name].input_schema), call


@contextlib.asynccontextmanager
async def _pydantic_ai_session(command: list[str], env: dict[str, str],
                              ws: Path) -> AsyncIterator[tuple[Callable[[str], Any], Any]]:
    import warnings

    from fastmcp.client.transports import StdioTransport
    from pydantic_ai.mcp import MCPToolset

    toolset = MCPToolset(StdioTransport(command[0], command[1:], env=env, cwd=str(ws)), log_level="info",
                         tool_error_behavior="error", init_timeout=120, read_timeout=120)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # whether it could apply log_level on this era
        async with toolset:
            tools = {tool.name: tool for tool in await toolset.list_tools()}
            yield (lambda name: tools[name].input_schema), toolset.direct_call_tool


def serve_bare(data: Path, ws: Path, queries: list[str]) -> int:
    """`--serve-bare`: `minimal_server` for these queries on stdio (nothing but JSON-RPC on stdout)."""
    import contextlib

    with contextlib.redirect_stdout(sys.stderr):  # stray prints while building must not reach the wire
        server = minimal_server(built_here(data, ws)[1].runtime, queries)
    server.run("stdio")
    return 0


def serve_plain(data: Path, ws: Path) -> int:
    """`--serve-plain`: the tool function behind a plain pipe, no MCP: a line {"query": ...} in, the result's
    JSON (`model_dump_json`) out, in a blocking loop (the floor of any out-of-process call of the same
    function: two processes, two pipe crossings, the result as JSON)."""
    import contextlib

    with contextlib.redirect_stdout(sys.stderr):
        rt = built_here(data, ws)[1].runtime
    out, search = sys.stdout.buffer, searching(rt)
    for line in sys.stdin.buffer:
        out.write(search(json.loads(line)["query"]).model_dump_json(by_alias=True).encode() + b"\n")
        out.flush()
    return 0


class PlainClient:
    """The client of `--serve-plain`: a query line out, a result line back, parsed with `json.loads`."""

    def __init__(self, data: Path, ws: Path) -> None:
        command = [sys.executable, "-m", "bench.mcp_overhead", "--serve-plain", str(data), str(ws)]
        self.log = data.parent / "plain-pipe.log"
        with self.log.open("wb") as err:
            self.process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                            env=server_env(data, ws), cwd=str(ws))

    def search(self, query: str) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps({"query": query}).encode() + b"\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"the plain pipe server stopped; its log is {self.log}")
        result: dict[str, Any] = json.loads(line)
        return result

    def close(self) -> None:
        end_input(self.process)


def start_http(data: Path, ws: Path) -> tuple[subprocess.Popen[bytes], int]:
    from bench.http_load import wait_for_health

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    log = (data.parent / f"http-{port}.log").open("wb")
    process = subprocess.Popen([str(SCRIPT), "serve", "--transport", "http", "--host", "127.0.0.1", "--port", str(port)],
                               env=server_env(data, ws), stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd=str(ws))
    return wait_for_health(process, port, Path(log.name))


def stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


PARTS: dict[str, Callable[[Path, Path, list[str], int], dict[str, Row]]] = {
    "in-process": in_process, "in-memory": in_memory, "stdio": over_stdio, "raw": over_raw, "http": over_http,
    "third-party": over_third_party}


def latency_table(data: Path, ws: Path, queries: list[str], n: int, parts: list[str]) -> list[str]:
    time_client_check()
    rows: dict[str, Row] = {}
    for part in (PARTS[name] for name in ["in-process", *[p for p in parts if p != "in-process"]]):
        try:
            rows.update(part(data, ws, queries, n))
        except ImportError as missing:  # the third-party clients are dev dependencies
            print(f"  ({part.__name__} skipped: {missing}; the README's test command installs them)",
                  file=sys.stderr, flush=True)
            continue
        print(f"  ({part.__name__} done)", file=sys.stderr, flush=True)
    base = rows["search: Searcher.search"][0]
    tool, tool_cpu = rows["search: the tool function"][0], rows["search: the tool function"][2]
    lines = ["| call | p50 ms | p95 ms | p50 over Searcher.search | p50 over the tool function | of which the "
             "client's schema check | CPU ms per call | CPU over the tool function |", "|---|---|---|---|---|---|---|---|"]
    for name, (p50, p95, cpu) in rows.items():
        search, bare = name.startswith("search"), "bare MCPServer" in name  # a bare tool's work is 0
        over = f"{p50 - (0 if bare else base):+.2f}" if search else ""
        over_tool = f"{p50 - (0 if bare else tool):+.2f}" if search and "Searcher" not in name else ""
        over_cpu = f"{cpu - (0 if bare else tool_cpu):+.2f}" if search and "Searcher" not in name else ""
        check = f"{CHECK_MS[name]:.2f}" if name in CHECK_MS else "none" if "raw JSON-RPC" in name else ""
        lines.append(f"| {name} | {p50:.2f} | {p95:.2f} | {over} | {over_tool} | {check} | {cpu:.2f} | {over_cpu} |")
    lines.append("(CPU: this process for in-process and in-memory rows (client and server), the server process "
                 "for stdio, raw, HTTP and the third-party clients; it depends less on the machine's load than the "
                 "wall times. The client's schema check: the Python SDK client re-validating each structured result "
                 "against the tool's output schema (jsonschema), a mean; the raw client checks nothing. A bare "
                 "MCPServer returns results computed beforehand: its \"over\" columns are over 0.)")
    return lines + floor_lines(rows)


def floor_lines(rows: dict[str, Row]) -> list[str]:
    """Our server's overhead over the SDK's floor, both measured with the raw client over stdio."""
    if f"search: {RAW}" not in rows:
        return []
    (ours, _, ours_cpu), (fn, _, fn_cpu) = rows[f"search: {RAW}"], (rows.get(f"search: {FN_HERE}")
                                                                           or rows["search: the tool function"])
    (bare, _, bare_cpu), (todo, _, todo_cpu) = rows[f"search: {BARE_RAW}"], rows[f"todo_read: {RAW}"]
    bare_todo, _, bare_todo_cpu = rows[f"todo_read: {BARE_RAW}"]
    lines = []
    if f"search: {PLAIN}" in rows:
        (plain, _, plain_cpu), (modern, _, modern_cpu) = rows[f"search: {PLAIN}"], rows[f"search: {RAW_MODERN}"]
        lines.append(f"Interleaved (raw client, stdio; p50 ms, the server's CPU ms per call): our server over the tool "
                     f"function in this process, 2025 era {ours - fn:+.2f} ms, 2026-07-28 {modern - fn:+.2f} ms; the "
                     f"plain pipe over it {plain - fn:+.2f} ms (what any second process costs); MCP over the plain "
                     f"pipe, 2025 era {ours - plain:+.2f} ms (CPU {ours_cpu - plain_cpu:+.2f}), 2026-07-28 "
                     f"{modern - plain:+.2f} ms (CPU {modern_cpu - plain_cpu:+.2f}).")
    return lines + [f"Server overhead over the SDK floor (raw client, stdio; p50 ms, CPU ms per call): search = (our "
            f"server - the tool function) - bare MCPServer = ({ours:.2f} - {fn:.2f}) - {bare:.2f} = "
            f"{ours - fn - bare:+.2f} ms, CPU {ours_cpu - fn_cpu - bare_cpu:+.2f} ms; todo_read = our server - "
            f"bare MCPServer = {todo:.2f} - {bare_todo:.2f} = {todo - bare_todo:+.2f} ms, CPU "
            f"{todo_cpu - bare_todo_cpu:+.2f} ms (its tool function, a small read, not subtracted)."]


# -- 2. memory after many searches ------------------------------------------------------------------


def proc_memory(pid: int, db: Path) -> dict[str, int]:
    """RSS parts (kB), open descriptors of the index file and its mappings (count, kB mapped)."""
    status = Path(f"/proc/{pid}/status").read_text()
    values = {line.split(":")[0]: int(line.split()[1]) for line in status.splitlines()
              if line.startswith(("VmRSS", "RssAnon", "RssFile", "Threads"))}
    fds = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            fds += os.readlink(fd) == str(db)
        except OSError:
            continue
    maps = [line for line in Path(f"/proc/{pid}/maps").read_text().splitlines() if line.endswith(str(db))]
    mapped = sum(int(b, 16) - int(a, 16) for a, b in (line.split()[0].split("-") for line in maps)) // 1024
    return {**values, "index fds": fds, "index maps": len(maps), "mapped kB": mapped}


def rss_table(data: Path, ws: Path, queries: list[str], total: int) -> list[str]:
    import anyio
    from mcp.client import Client

    db = data / "index.sqlite3"
    process, port = start_http(data, ws)
    try:
        before = proc_memory(process.pid, db)
        started = time.perf_counter()

        async def client_loop(k: int) -> None:
            async with Client(f"http://127.0.0.1:{port}/mcp", mode="legacy") as client:
                for i in range(k, total, RSS_CLIENTS):
                    result = await client.call_tool("search_documents", {"query": queries[i % len(queries)]})
                    assert not result.is_error, result.content

        async def run() -> None:
            async with anyio.create_task_group() as group:
                for k in range(RSS_CLIENTS):
                    group.start_soon(client_loop, k)

        anyio.run(run)
        elapsed = time.perf_counter() - started
        after = proc_memory(process.pid, db)
    finally:
        stop(process)
    lines = ["| server | VmRSS MB | RssAnon MB | RssFile MB | threads | index fds | index mappings (MB mapped) |",
             "|---|---|---|---|---|---|---|"]
    for label, m in (("at start", before), (f"after {total:,} searches ({elapsed:.0f} s)", after)):
        lines.append(f"| {label} | {m['VmRSS'] / 1024:.0f} | {m['RssAnon'] / 1024:.0f} | {m['RssFile'] / 1024:.0f} | "
                     f"{m['Threads']} | {m['index fds']} | {m['index maps']} ({m['mapped kB'] / 1024:.0f}) |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--eval", type=Path, default=DEFAULT_EVAL)
    parser.add_argument("--copies", type=int, default=1, help="DEV chunk copies in the latency index")
    parser.add_argument("--calls", type=int, default=300, help="timed calls per row")
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--transports", nargs="+", choices=list(PARTS), default=list(PARTS))
    parser.add_argument("--rss-chunks", type=int, default=0, help="chunks in the memory index (0: skip)")
    parser.add_argument("--rss-queries", type=int, default=2000)
    parser.add_argument("--keep", type=Path, default=None, help="build the indexes here and keep them (re-used)")
    parser.add_argument("--serve-bare", nargs=3, type=Path, metavar=("DATA", "WS", "QUERIES"),
                        help=argparse.SUPPRESS)  # the bare MCPServer's child process (over_raw)
    parser.add_argument("--serve-plain", nargs=2, type=Path, metavar=("DATA", "WS"),
                        help=argparse.SUPPRESS)  # the plain pipe's child process (over_raw)
    args = parser.parse_args(argv)
    if args.serve_plain:
        logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
        return serve_plain(*args.serve_plain)
    if args.serve_bare:
        logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
        data, ws, asked = args.serve_bare
        return serve_bare(data, ws, json.loads(asked.read_text(encoding="utf-8")))
    logging.basicConfig(level=logging.WARNING)  # the client's own request logs are not what is measured
    for name in ("httpx", "mcp", "generalagent"):
        logging.getLogger(name).setLevel(logging.WARNING)
    chunks = chunk_corpora(args.eval)
    queries = [q["query"] for lang in ("zh", "en") for q in load_jsonl(args.eval / lang / "queries_dev.jsonl")
               if q["query"].strip()]
    random.Random(7).shuffle(queries)
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-mcp-"))
    try:
        if not args.skip_latency:
            data, ws = work / "latency" / "data", work / "latency" / "ws"
            if not (data / "index.sqlite3").exists():
                n = build_index(data, ws, chunks, args.copies * len(chunks))
            else:
                n = args.copies * len(chunks)
            print(f"latency, {n:,} chunks, {args.calls} calls per row after {WARM_UP} warm-up calls, protocol 2025-11-25:")
            print("\n".join(latency_table(data, ws, queries, args.calls, args.transports)), flush=True)
        if args.rss_chunks:
            data, ws = work / f"rss-{args.rss_chunks}" / "data", work / f"rss-{args.rss_chunks}" / "ws"
            if not (data / "index.sqlite3").exists():
                started = time.perf_counter()
                build_index(data, ws, chunks, args.rss_chunks)
                print(f"(memory index of {args.rss_chunks:,} chunks built in {time.perf_counter() - started:.0f} s, "
                      f"{(data / 'index.sqlite3').stat().st_size / 2**20:.0f} MB)", file=sys.stderr, flush=True)
            print(f"\nserver memory, {args.rss_chunks:,} chunks, {args.rss_queries:,} searches from {RSS_CLIENTS} "
                  "HTTP clients:")
            print("\n".join(rss_table(data, ws, queries, args.rss_queries)), flush=True)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
