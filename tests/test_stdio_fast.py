"""Issue 11 (MCP overhead): quick tool calls on stdio are answered by the reader (mcp_server.stdio_fast)
with the very lines the SDK's pipeline writes, and everything else still goes to the SDK.

The harness feeds our real server (build_server) through the stdio transport's own line reader and
writer (`_Lines`, `_Output`) and the SDK's `stdio_server`, once with the quick lane and once without,
and compares every answer."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, cast

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mcp_server.stdio_fast import QuickCalls
from mcp_server.stdio_pipes import _InFlight, _Lines, _Output

PROTOCOL = "2025-11-25"
INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "lane-test", "version": "1"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
WORDS = ["lighthouse", "keeper", "storms", "harbour", "wrote", "about", "the", "灯塔", "风暴", "zebra", "Storm's"]


@pytest.fixture
def server(make_settings: Any, workspace: Path) -> Any:
    from mcp.client import Client

    from mcp_server.server import build_server
    from tools.index_services import search_ready

    if make_settings().database_url:
        pytest.skip("quick calls are SQLite-only")
    for n, text in enumerate(["The lighthouse keeper wrote about storms.", "Harbour storms and the keeper.",
                              "灯塔管理员写下了风暴。", "A zebra in the harbour."]):
        (workspace / f"doc{n}.txt").write_text(text, encoding="utf-8")
    built, dispatcher = build_server(make_settings(search_memory_min_chunks=1, tool_profile="default"))

    async def index() -> None:
        async with Client(built, mode="legacy") as client:
            assert not (await client.call_tool("index_path", {"path": "."})).is_error
            deadline = time.monotonic() + 30
            while not search_ready(dispatcher.runtime) and time.monotonic() < deadline:
                await client.call_tool("search_documents", {"query": "storms 风暴"})
                await anyio.sleep(0.05)

    anyio.run(index)
    assert search_ready(dispatcher.runtime)
    return built


def serve(server: Any, messages: list[Any], quick: bool,
          at_once: frozenset[int] = frozenset()) -> tuple[list[Any], int]:
    """The messages our server writes for `messages` (a client that waits for each answer before it sends
    the next message, except those at the indexes `at_once`), and how many calls the quick lane answered."""
    from mcp.server import stdio as sdk

    written: list[str] = []
    in_flight = _InFlight()
    pending = [json.dumps(m, ensure_ascii=False) + "\n" for m in messages]

    async def readline() -> str:
        while len(messages) - len(pending) not in at_once and in_flight.ids:
            await anyio.sleep(0.001)
        return pending.pop(0) if pending else ""

    async def write(text: str) -> None:
        written.append(text)

    async def flush() -> None:
        return None

    output = _Output(write, flush, in_flight)
    lane = QuickCalls(server, output.write_line) if quick else None
    output.quick = lane

    async def run() -> None:
        lowlevel = server._lowlevel_server
        lines = cast(Any, _Lines(readline, in_flight, lane))
        async with sdk.stdio_server(stdin=lines, stdout=cast(Any, output)) as (read, send):
            await lowlevel.run(read, send, lowlevel.create_initialization_options())

    anyio.run(run)
    return [json.loads(line) for line in written], lane.taken if lane is not None else 0


def answers(messages: list[Any]) -> dict[str, Any]:
    return {json.dumps(m["id"]): m for m in messages if "id" in m}


def search(request_id: Any, **arguments: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": "search_documents", "arguments": arguments}}


def test_quick_searches_are_answered_by_the_lane_as_the_sdk_answers_them(server: Any) -> None:
    calls = [INIT, INITIALIZED, search(1, query="lighthouse storms"), search("two", query="风暴"),
             search(3, query="keeper", max_results=1), search(4, query="storms", offset=1)]
    by_sdk, none = serve(server, calls, quick=False)
    by_lane, taken = serve(server, calls, quick=True)
    assert none == 0 and taken == 4
    assert answers(by_lane) == answers(by_sdk)
    assert answers(by_lane)['"two"']["result"]["structuredContent"]["hits"][0]["path"] == "doc2.txt"


def test_what_the_lane_does_not_take_goes_to_the_sdk(server: Any) -> None:
    """Not quick, other tools, invalid arguments, progress tokens, before the handshake's answer."""
    calls = [search(1, query="storms"), INIT, INITIALIZED,
             search(2, query="storms", mode="all"), search(3, query="storms", use_regex=True),
             search(4, query="storms", bogus=1), search(5, query="storms", max_results="many"),
             {**search(6, query="storms"), "params": {"name": "search_documents", "arguments": {"query": "storms"},
                                                     "_meta": {"progressToken": 6}}},
             {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "todo_read", "arguments": {}}},
             {"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "web_fetch", "arguments": {}}},
             {"jsonrpc": "2.0", "id": 9, "method": "logging/setLevel", "params": {"level": "error"}},
             search(10, query="storms")]
    by_sdk, _ = serve(server, calls, quick=False)
    by_lane, taken = serve(server, calls, quick=True)
    assert taken == 1  # only the last one
    assert answers(by_lane) == answers(by_sdk)
    assert answers(by_lane)["1"]["error"]  # before initialize: the SDK's error


def test_a_call_cancelled_before_it_ran_gets_no_answer(server: Any) -> None:
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}
    written, taken = serve(server, [INIT, INITIALIZED, search(2, query="storms"), cancel, search(3, query="keeper")],
                           quick=True, at_once=frozenset({3}))
    assert set(answers(written)) == {"0", "3"} and taken == 2


arguments = st.fixed_dictionaries(
    {"query": st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join) | st.text(max_size=12)},
    optional={"max_results": st.integers(-1, 60) | st.sampled_from(["3", None, ""]),
              "offset": st.integers(-1, 60), "mode": st.sampled_from(["natural", "all", "exact", "fuzzy"]),
              "group_by_document": st.booleans(), "paths": st.lists(st.sampled_from(["doc0.txt", "*.txt"]), max_size=2),
              "quary": st.just("typo")})
request_ids = st.integers(1, 10**6) | st.text(min_size=1, max_size=6)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(calls=st.lists(st.tuples(request_ids, arguments), min_size=1, max_size=6, unique_by=lambda c: json.dumps(c[0])))
def test_random_calls_get_the_same_answers_with_and_without_the_lane(server: Any, calls: list[Any]) -> None:
    messages = [INIT, INITIALIZED, search(-1, query="storms"), *(search(i, **args) for i, args in calls)]
    by_sdk, _ = serve(server, messages, quick=False)
    by_lane, taken = serve(server, messages, quick=True)
    assert answers(by_lane) == answers(by_sdk) and taken >= 1


def test_a_log_record_of_a_lane_call_reaches_the_client_as_the_sdk_sends_it(server: Any, workspace: Path) -> None:
    """The SDK path forwards the indexer's warning about a broken file; the lane's forwarding sends the
    same record as the same notification."""
    import logging

    from mcp_server import client_log
    from mcp_server.stdio_fast import _LineLog

    (workspace / "broken.pdf").write_bytes(b"%PDF-1.4 not really")
    index = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
             "params": {"name": "index_path", "arguments": {"path": "broken.pdf"}}}
    by_sdk, _ = serve(server, [INIT, INITIALIZED, index], quick=False)
    sent = [m for m in by_sdk if m.get("method") == "notifications/message"]
    assert sent, by_sdk
    lines: list[str] = []

    async def write(text: str) -> None:
        lines.append(text)

    async def forward() -> None:
        params = sent[0]["params"]
        with client_log.forwarding_to(_LineLog(write, "info")):
            logging.getLogger(params["logger"]).warning(params["data"]["message"])
        await anyio.sleep(0.01)  # the send is a task of its own, as in the SDK path

    anyio.run(forward)
    assert [json.loads(line) for line in lines] == sent[:1]


def test_the_console_script_answers_quick_searches_in_the_lane(tmp_path: Path) -> None:
    """Over real pipes: once the postings are loaded, a search is answered by the reader."""
    from tests.test_stdio import INITIALIZE, RawStdioServer

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("The lighthouse keeper wrote about storms.", encoding="utf-8")
    server = RawStdioServer(tmp_path, GENERALAGENT_ROOTS=str(docs), GENERALAGENT_LOG_LEVEL="DEBUG",
                            GENERALAGENT_SEARCH_MEMORY_MIN_CHUNKS="1")
    try:
        assert "result" in server.ask(INITIALIZE)
        server.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        assert not server.ask({**search(2, path="."), "params": {"name": "index_path", "arguments": {"path": "."}}}
                              )["result"].get("isError")
        deadline, n = time.monotonic() + 30, 3
        while "is answered by the stdio reader" not in server.stderr_path.read_text() and time.monotonic() < deadline:
            answer = server.ask(search(n, query="lighthouse storms"))
            assert answer["result"]["structuredContent"]["hits"][0]["path"] == "a.txt"
            n += 1
            time.sleep(0.05)
        assert "search_documents (id" in server.stderr_path.read_text()
    finally:
        server.close()
