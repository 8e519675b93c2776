"""Issue 11 (MCP overhead): quick tool calls on stdio are answered by the reader (mcp_server.stdio_fast)
with the very lines the SDK's pipeline writes, and everything else still goes to the SDK.

The harness feeds our real server (build_server) through the stdio transport's own line reader and
writer (`_Lines`, `_Output`) and the SDK's `stdio_server`, once with the quick lane and once without,
and compares every answer."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp_types.version import SUPPORTED_PROTOCOL_VERSIONS

from mcp_server.stdio_fast import QuickCalls
from mcp_server.stdio_pipes import _InFlight, _Lines, _Output
from tests.json_strategies import json_values

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
    """The messages our server writes for `messages` (dicts, or raw lines as str; a client that waits for
    each answer before it sends the next message, except those at the indexes `at_once`), and how many
    calls the quick lane answered."""
    from mcp.server import stdio as sdk

    written: list[str] = []
    in_flight = _InFlight()
    pending = [m if isinstance(m, str) else json.dumps(m, ensure_ascii=False) + "\n" for m in messages]

    async def readline() -> str:
        while len(messages) - len(pending) not in at_once and in_flight.ids:
            await anyio.sleep(0.001)
        return pending.pop(0) if pending else ""

    async def write(text: str) -> None:
        written.append(text)

    async def flush() -> None:
        return None

    output = _Output(write, flush, in_flight)
    lane = QuickCalls(server, output.write_line, in_flight.ids) if quick else None
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


def search(request_id: Any, meta: dict[str, Any] | None = None, **arguments: Any) -> dict[str, Any]:
    """A search_documents call (with `_meta` when given)."""
    params: dict[str, Any] = {"name": "search_documents", "arguments": arguments}
    if meta is not None:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def search_doing(server: Any, monkeypatch: pytest.MonkeyPatch, first: Callable[[dict[str, Any]], None]) -> None:
    """search_documents, the real one, doing `first(its keyword arguments)` before it searches."""
    import dataclasses
    import functools

    spec = server.dispatcher.specs["search_documents"]
    real = spec.fn

    @functools.wraps(real)
    def doing(*args: Any, **kwargs: Any) -> Any:
        first(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setitem(server.dispatcher.specs, "search_documents", dataclasses.replace(spec, fn=doing))


def test_quick_searches_are_answered_by_the_lane_as_the_sdk_answers_them(server: Any) -> None:
    calls = [INIT, INITIALIZED, search(1, query="lighthouse storms"), search("two", query="风暴"),
             search(3, query="keeper", max_results=1), search(4, query="storms", offset=1)]
    by_sdk, none = serve(server, calls, quick=False)
    by_lane, taken = serve(server, calls, quick=True)
    assert none == 0 and taken == 4
    assert answers(by_lane) == answers(by_sdk)
    assert answers(by_lane)['"two"']["result"]["structuredContent"]["hits"][0]["path"] == "doc2.txt"


def test_what_the_lane_does_not_take_goes_to_the_sdk(server: Any) -> None:
    """Not quick, other tools, invalid arguments, `_meta` beyond a progress token, before the handshake's
    answer."""
    calls = [search(1, query="storms"), INIT, INITIALIZED,
             search(2, query="storms", mode="all"), search(3, query="storms", use_regex=True),
             search(4, query="storms", bogus=1), search(5, query="storms", max_results="many"),
             search(6, meta={"progressToken": 6, "other": 1}, query="storms"),
             {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "todo_read", "arguments": {}}},
             {"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "web_fetch", "arguments": {}}},
             {"jsonrpc": "2.0", "id": 9, "method": "logging/setLevel", "params": {"level": "error"}},
             search(10, query="storms")]
    by_sdk, _ = serve(server, calls, quick=False)
    by_lane, taken = serve(server, calls, quick=True)
    assert taken == 1  # only the last one
    assert answers(by_lane) == answers(by_sdk)
    assert answers(by_lane)["1"]["error"]  # before initialize: the SDK's error


arguments = st.fixed_dictionaries(
    {"query": st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join) | st.text(max_size=12)},
    optional={"max_results": st.integers(-1, 60) | st.sampled_from(["3", None, ""]),
              "offset": st.integers(-1, 60), "mode": st.sampled_from(["natural", "all", "exact", "fuzzy"]),
              "group_by_document": st.booleans(), "paths": st.lists(st.sampled_from(["doc0.txt", "*.txt"]), max_size=2),
              "quary": st.just("typo")})
request_ids = st.integers(1, 10**6) | st.text(min_size=1, max_size=6)


tokens = st.none() | st.integers(0, 9) | st.text(max_size=3) | st.just(True)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(calls=st.lists(st.tuples(request_ids, arguments, tokens), min_size=1, max_size=6,
                      unique_by=lambda c: json.dumps(c[0])))
def test_random_calls_get_the_same_answers_with_and_without_the_lane(server: Any, calls: list[Any]) -> None:
    messages = [INIT, INITIALIZED, search(-1, query="storms"),
                *(search(i, meta=None if token is None else {"progressToken": token}, **args) for i, args, token in calls)]
    by_sdk, _ = serve(server, messages, quick=False)
    by_lane, taken = serve(server, messages, quick=True)
    assert answers(by_lane) == answers(by_sdk) and taken >= 1


def test_a_log_record_of_a_lane_call_reaches_the_client_as_the_sdk_sends_it(server: Any, workspace: Path) -> None:
    """The SDK path forwards the indexer's warning about a broken file; the lane's forwarding sends the
    same record as the same notification."""
    import logging

    from mcp_server import client_log
    from mcp_server.stdio_fast import _LineLog, _Notices

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
        with client_log.forwarding_to(_LineLog(_Notices(write, None), frozenset(client_log.LEVELS[1:]))):
            logging.getLogger(params["logger"]).warning(params["data"]["message"])
        await anyio.sleep(0.01)  # the send is a task of its own, as in the SDK path

    anyio.run(forward)
    assert [json.loads(line) for line in lines] == sent[:1]


@pytest.mark.parametrize("era", ["2025-11-25", "2026-07-28"])
def test_the_console_script_answers_quick_searches_in_the_lane(tmp_path: Path, era: str) -> None:
    """Over real pipes, in either era: once the postings are loaded, a search is answered by the reader."""
    from tests.test_stdio import INITIALIZE, RawStdioServer

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.txt").write_text("The lighthouse keeper wrote about storms.", encoding="utf-8")
    server = RawStdioServer(tmp_path, GENERALAGENT_ROOTS=str(docs), GENERALAGENT_LOG_LEVEL="DEBUG",
                            GENERALAGENT_SEARCH_MEMORY_MIN_CHUNKS="1")
    call = search if era == PROTOCOL else modern
    try:
        if era == PROTOCOL:
            assert "result" in server.ask(INITIALIZE)
            server.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        else:
            assert server.ask(DISCOVER)["result"]["resultType"] == "complete"
        index = call(2)
        index["params"].update(name="index_path", arguments={"path": "."})
        assert not server.ask(index)["result"].get("isError")
        deadline, n = time.monotonic() + 30, 3
        while "is answered by the stdio reader" not in server.stderr_path.read_text() and time.monotonic() < deadline:
            answer = server.ask(call(n, query="lighthouse storms"))
            assert answer["result"]["structuredContent"]["hits"][0]["path"] == "a.txt"
            n += 1
            time.sleep(0.05)
        assert "search_documents (id" in server.stderr_path.read_text()
    finally:
        server.close()


@pytest.fixture
def slow_search(server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """search_documents, the real one, taking a second more in a worker thread (it meets something to
    wait for on the loop, as a write would)."""
    from foundation.waiting import about_to_wait

    def wait_a_second(_: dict[str, Any]) -> None:
        about_to_wait()
        time.sleep(1.0)

    search_doing(server, monkeypatch, wait_a_second)


@pytest.mark.parametrize("era", ["2025", "2026"])
@pytest.mark.parametrize("named", [2, "2"])
def test_a_running_call_cancelled_by_either_spelling_of_its_id_gets_no_answer(
        server: Any, slow_search: None, named: Any, era: str) -> None:
    opening, call = session(era)
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": named}}
    calls = [*opening, call(2, query="storms"), cancel, call(3, query="keeper")]
    read_at_once = frozenset({len(opening) + 1, len(opening) + 2})
    by_sdk, _ = serve(server, calls, quick=False, at_once=read_at_once)
    by_lane, taken = serve(server, calls, quick=True, at_once=read_at_once)
    assert set(answers(by_lane)) == set(answers(by_sdk)) == {"0", "3"} and taken == 2


@pytest.mark.parametrize("era", ["2025", "2026"])
def test_at_the_end_of_input_a_call_still_running_is_answered_as_the_sdk_does(
        server: Any, slow_search: None, monkeypatch: pytest.MonkeyPatch, era: str) -> None:
    import mcp_server.stdio_pipes as pipes

    monkeypatch.setattr(pipes, "EOF_WAIT_MAX_S", 0.2)
    opening, call = session(era)
    calls = [*opening, call(2, query="storms")]
    by_sdk, _ = serve(server, calls, quick=False, at_once=frozenset({len(calls)}))
    by_lane, taken = serve(server, calls, quick=True, at_once=frozenset({len(calls)}))
    assert answers(by_lane) == answers(by_sdk) and taken == 1
    assert answers(by_lane)["2"]["error"]["message"] == "Connection closed"


@pytest.mark.parametrize("era", ["2025", "2026"])
def test_a_crash_after_the_tool_is_answered_as_the_sdk_does(
        server: Any, monkeypatch: pytest.MonkeyPatch, era: str) -> None:
    def broken(result: Any) -> Any:
        raise RuntimeError("a bug while bounding the result")

    monkeypatch.setattr(server.dispatcher, "bounded_text", broken)  # bounded_payload's first step
    opening, call = session(era)
    calls = [*opening, call(2, query="storms")]
    by_sdk, _ = serve(server, calls, quick=False)
    by_lane, taken = serve(server, calls, quick=True)
    assert answers(by_lane) == answers(by_sdk) and taken == 1
    assert answers(by_lane)["2"]["result"]["isError"] is True


@pytest.mark.parametrize("era", ["2025", "2026"])
def test_an_answer_that_cannot_be_shaped_is_the_sdks_error(
        server: Any, monkeypatch: pytest.MonkeyPatch, era: str) -> None:
    """The SDK's shaping fails (a bug, not a refusal): each era's catch-all error, on both paths."""
    from mcp.server.runner import ServerRunner

    shape = ServerRunner._serialize

    def failing(self: Any, method: str, version: str, result: Any) -> Any:
        if method == "tools/call":
            raise RuntimeError("a bug while shaping the answer")
        return shape(self, method, version, result)

    monkeypatch.setattr(ServerRunner, "_serialize", failing)
    opening, call = session(era)
    calls = [*opening, call(2, query="storms")]
    by_sdk, _ = serve(server, calls, quick=False)
    by_lane, taken = serve(server, calls, quick=True)
    assert answers(by_lane) == answers(by_sdk) and taken == 1 and answers(by_lane)["2"]["error"]


def test_session_lines_that_get_no_answer_do_not_stop_the_lane(server: Any) -> None:
    """A setLevel the SDK drops (not JSON-RPC 2.0) or one cancelled leaves no answer to wait for."""
    dropped = {"jsonrpc": "1.0", "id": 3, "method": "logging/setLevel", "params": {"level": "error"}}
    cancelled = {"jsonrpc": "2.0", "id": 4, "method": "logging/setLevel", "params": {"level": "error"}}
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 4}}
    calls = [INIT, INITIALIZED, dropped, cancelled, cancel, search(5, query="storms"), search(6, query="keeper")]
    _, taken = serve(server, calls, quick=True, at_once=frozenset({3, 4, 5, 6, 7}))
    assert taken == 2


@pytest.mark.parametrize("quick", [False, True])
def test_a_line_nested_too_deep_is_refused_and_the_server_goes_on(server: Any, quick: bool) -> None:
    calls = [INIT, INITIALIZED, "[" * 100_000 + "]" * 100_000 + "\n", search(2, query="storms")]
    written, _ = serve(server, calls, quick=quick, at_once=frozenset({3}))
    assert answers(written)["2"]["result"]["structuredContent"]["hits"]


def test_log_records_are_forwarded_as_in_the_sdk_path(server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A record a call on the event loop forwards is sent after the call is over: the SDK drops it,
    and so does the lane; a call in a worker thread sends it during the call, on both paths."""
    import logging

    from foundation.waiting import about_to_wait

    for in_thread in (False, True):
        def forward(_: dict[str, Any], in_thread: bool = in_thread) -> None:
            if in_thread:
                about_to_wait()
            logging.getLogger("generalagent.index").warning("a forwarded record")

        calls = [INIT, INITIALIZED, search(2, query="storms")]
        with monkeypatch.context() as patch:  # the real search again after each round
            search_doing(server, patch, forward)
            by_sdk, _ = serve(server, calls, quick=False)
            by_lane, taken = serve(server, calls, quick=True)
        notes = [[m for m in written if m.get("method") == "notifications/message"] for written in (by_sdk, by_lane)]
        assert notes[0] == notes[1] and len(notes[0]) == int(in_thread) and taken == 1


@pytest.mark.parametrize("era", ["2025", "2026"])
def test_progress_reaches_the_client_as_in_the_sdk_path(server: Any, monkeypatch: pytest.MonkeyPatch, era: str) -> None:
    """A call with a progress token is taken; the progress it reports (from a worker thread) goes out as
    the SDK sends it, and none without a token."""
    from foundation.waiting import about_to_wait

    def report(kwargs: dict[str, Any]) -> None:
        about_to_wait()
        kwargs["call"].report(1, 2, "half way")
        kwargs["call"].report(2)

    search_doing(server, monkeypatch, report)
    opening, call = session(era)
    calls = [*opening, call(2, {"progressToken": "p"}, query="storms"), call(3, query="keeper")]
    by_sdk, _ = serve(server, calls, quick=False)
    by_lane, taken = serve(server, calls, quick=True)
    progress = [[m for m in written if m.get("method") == "notifications/progress"] for written in (by_sdk, by_lane)]
    assert progress[0] == progress[1] and len(progress[0]) == 2 and taken == 2
    assert answers(by_lane) == answers(by_sdk)


# -- the 2026-07-28 era: every request carries its envelope in `_meta`; no handshake

MODERN = "2026-07-28"
ENVELOPE = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "modern-test", "version": "1"}}
DISCOVER = {"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": {"_meta": ENVELOPE}}


def modern(request_id: Any, meta: dict[str, Any] | None = None, **arguments: Any) -> dict[str, Any]:
    """A search_documents call in the 2026-07-28 era (the envelope, updated by `meta`)."""
    return search(request_id, meta={**ENVELOPE, **(meta or {})}, **arguments)


def session(era: str) -> tuple[list[Any], Callable[..., dict[str, Any]]]:
    """The messages that open a session of `era` ("2025", "2026") and how a search is sent in it."""
    return ([INIT, INITIALIZED], search) if era == "2025" else ([DISCOVER], modern)


def test_modern_era_searches_are_answered_by_the_lane_as_the_sdk_answers_them(server: Any) -> None:
    """Once the SDK answered the session's first request in the 2026 era (not before), enveloped quick
    calls are taken: resultType and the serverInfo stamp as the SDK puts them."""
    calls = [modern(1, query="storms"), modern("two", query="风暴"), modern(3, query="keeper", max_results=1),
             DISCOVER, modern(4, {"progressToken": 4}, query="lighthouse storms")]
    by_sdk, none = serve(server, calls, quick=False)
    by_lane, taken = serve(server, calls, quick=True)
    assert none == 0 and taken == 3  # the first answer settles the era
    assert answers(by_lane) == answers(by_sdk)
    result = answers(by_lane)["4"]["result"]
    assert result["resultType"] == "complete" and "io.modelcontextprotocol/serverInfo" in result["_meta"]
    assert result["structuredContent"]["hits"][0]["path"] == "doc0.txt"


def test_what_the_lane_does_not_take_in_the_modern_era_goes_to_the_sdk(server: Any) -> None:
    """No envelope, a broken or unsupported one, `_meta` beyond what the lane honours, initialize (refused
    in this era), and an enveloped call in a 2025 session (refused there)."""
    calls = [DISCOVER, search(1, query="storms"),
             modern(2, {"io.modelcontextprotocol/protocolVersion": "2099-01-01"}, query="storms"),
             search(3, meta={k: v for k, v in ENVELOPE.items() if "Capabilities" not in k}, query="storms"),
             modern(4, {"io.modelcontextprotocol/logLevel": "loud"}, query="storms"),
             modern(5, {"io.modelcontextprotocol/clientInfo": "not an object"}, query="storms"),
             modern(6, {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}, query="storms"),
             modern(7, {"progressToken": None}, query="storms"),
             {**INIT, "id": 8}, modern(9, query="storms", mode="all"), modern(10, query="storms")]
    by_sdk, _ = serve(server, calls, quick=False)
    by_lane, taken = serve(server, calls, quick=True)
    assert taken == 1  # only the last one
    assert answers(by_lane) == answers(by_sdk)
    assert all("error" in answers(by_lane)[key] for key in ("1", "2", "3", "8"))
    legacy = [INIT, INITIALIZED, modern(1, query="storms"), search(2, query="storms")]
    by_sdk, _ = serve(server, legacy, quick=False)
    by_lane, taken = serve(server, legacy, quick=True)
    assert answers(by_lane) == answers(by_sdk) and taken == 1 and "error" in answers(by_lane)["1"]


implementations = st.fixed_dictionaries({"name": st.text(max_size=8), "version": st.sampled_from(["1", "2.0"])},
                                        optional={"title": st.text(max_size=4)}) | st.none() | st.just(["x"])
envelopes = st.fixed_dictionaries(
    {"io.modelcontextprotocol/protocolVersion": st.sampled_from([MODERN, MODERN, "2025-11-25", 7])},
    optional={"io.modelcontextprotocol/clientCapabilities": st.just({}) | st.just({"sampling": {}}) | st.just(3),
              "io.modelcontextprotocol/clientInfo": implementations,
              "io.modelcontextprotocol/logLevel": st.sampled_from(["debug", "info", "warning", "error", "x", None]),
              "progressToken": tokens})


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(calls=st.lists(st.tuples(request_ids, arguments, envelopes), min_size=1, max_size=6,
                      unique_by=lambda c: json.dumps(c[0])))
def test_random_modern_calls_get_the_same_answers_with_and_without_the_lane(server: Any, calls: list[Any]) -> None:
    messages = [DISCOVER, modern(-1, query="storms"), *(search(i, meta=meta, **args) for i, args, meta in calls)]
    by_sdk, _ = serve(server, messages, quick=False)
    by_lane, taken = serve(server, messages, quick=True)
    assert answers(by_lane) == answers(by_sdk) and taken >= 1


@pytest.mark.parametrize("opt_in", [None, "debug", "warning", "error"])
def test_modern_log_records_follow_the_requests_opt_in_as_in_the_sdk_path(
        server: Any, monkeypatch: pytest.MonkeyPatch, opt_in: str | None) -> None:
    """A forwarded warning reaches the client only when the request opted in at warning or below."""
    import logging

    from foundation.waiting import about_to_wait

    def forward(_: dict[str, Any]) -> None:
        about_to_wait()  # in a worker thread: the record is sent while the call runs
        logging.getLogger("generalagent.index").warning("a forwarded record")

    search_doing(server, monkeypatch, forward)
    meta = {} if opt_in is None else {"io.modelcontextprotocol/logLevel": opt_in}
    calls = [DISCOVER, modern(2, meta, query="storms")]
    by_sdk, _ = serve(server, calls, quick=False)
    by_lane, taken = serve(server, calls, quick=True)
    notes = [[m for m in written if m.get("method") == "notifications/message"] for written in (by_sdk, by_lane)]
    assert notes[0] == notes[1] and len(notes[0]) == int(opt_in in ("debug", "warning")) and taken == 1
    assert answers(by_lane) == answers(by_sdk)


def test_a_call_the_lane_fails_to_read_goes_to_the_sdk_and_the_reader_goes_on(
        server: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Reading a call must never stop the reader: a failure there (say, an envelope nested too deep to
    encode as its cache key: RecursionError) leaves the call to the SDK, as without the lane."""
    import logging

    from mcp.shared.inbound import classify_inbound_request

    import mcp_server.stdio_fast as lane

    def too_deep(body: Any, **kwargs: Any) -> Any:
        if "deep" in json.dumps(body):
            raise RecursionError("maximum recursion depth exceeded")
        return classify_inbound_request(body, **kwargs)

    monkeypatch.setattr(lane, "classify_inbound_request", too_deep)
    calls = [DISCOVER, modern(1, {"io.modelcontextprotocol/clientCapabilities": {"experimental": {"deep": {}}}},
                              query="storms"), modern(2, query="storms")]
    by_sdk, _ = serve(server, calls, quick=False)
    with caplog.at_level(logging.DEBUG, logger="generalagent.server"):
        by_lane, taken = serve(server, calls, quick=True)
    assert answers(by_lane) == answers(by_sdk) and taken == 1 and "result" in answers(by_lane)["1"]
    assert "a tools/call the lane could not read goes to the SDK" in caplog.text


def test_a_session_request_sharing_an_id_in_flight_turns_the_lane_off(server: Any) -> None:
    """A setLevel whose id a ping still in flight holds: which answer is whose is unsure, so the lane stays
    off (the SDK answers everything) and the reader goes on."""
    ping = {"jsonrpc": "2.0", "id": 5, "method": "ping"}
    level = {"jsonrpc": "2.0", "id": 5, "method": "logging/setLevel", "params": {"level": "bogus"}}
    calls = [INIT, INITIALIZED, ping, level, search(6, query="storms"), search(7, query="keeper")]
    by_sdk, _ = serve(server, calls, quick=False, at_once=frozenset({3}))
    by_lane, taken = serve(server, calls, quick=True, at_once=frozenset({3}))
    assert answers(by_lane) == answers(by_sdk) and taken == 0 and "result" in answers(by_lane)["7"]


def test_lines_the_sdk_cannot_parse_are_not_taken(server: Any) -> None:
    """Parsed as the SDK parses (pydantic-core's JSON): a lone surrogate or nesting past its limit gets no
    answer from the SDK, and none from the lane."""
    deep = json.dumps(modern(3, {"io.modelcontextprotocol/clientCapabilities": {"experimental": {"x": "X"}}},
                             query="storms")).replace('"X"', "[" * 250 + "]" * 250)
    calls = [DISCOVER, json.dumps(modern(1, query="storms"))[:-2] + ', "s": "a\\ud800b"}}\n',
             json.dumps(modern(2, {"io.modelcontextprotocol/clientInfo": {"name": "X", "version": "1"}},
                               query="storms")).replace('"X"', '"a\\ud800b"') + "\n", deep + "\n",
             modern(4, query="storms")]
    by_sdk, _ = serve(server, calls, quick=False)
    by_lane, taken = serve(server, calls, quick=True)
    assert answers(by_lane) == answers(by_sdk) and taken == 1 and set(answers(by_lane)) == {"0", "4"}
    legacy = [INIT, INITIALIZED, json.dumps(search(1, {"progressToken": "X"}, query="storms")).replace(
        '"X"', '"a\\ud800b"') + "\n", search(2, query="storms")]
    by_sdk, _ = serve(server, legacy, quick=False)
    by_lane, taken = serve(server, legacy, quick=True)
    assert answers(by_lane) == answers(by_sdk) and taken == 1 and set(answers(by_lane)) == {"0", "2"}


@pytest.mark.parametrize("era", ["2025", "2026"])
def test_the_calling_clients_name_reaches_the_audit_log_as_in_the_sdk_path(server: Any, era: str) -> None:
    opening, call = session(era)
    named = {"io.modelcontextprotocol/clientInfo": {"name": "auditor", "version": "1"}} if era == "2026" else {}
    calls = [*opening, call(2, named or None, query="storms"), call(3, named or None, query="keeper")]
    origins = []
    for quick in (False, True):
        _, taken = serve(server, calls, quick=quick)
        entries = server.dispatcher.gate.audit.read(2)
        origins.append([(e["tool"], e["origin"]) for e in entries])
    expected = "client:auditor" if era == "2026" else "client:lane-test"
    assert origins[0] == origins[1] == [("search_documents", expected)] * 2 and taken == 2


def test_a_session_opened_without_the_2026_envelope_never_takes_enveloped_calls(server: Any) -> None:
    """A 2025 session may open with a ping (its empty result is no 2026-era answer); an enveloped call in it
    is the SDK's to refuse."""
    ping = {"jsonrpc": "2.0", "id": 9, "method": "ping"}
    calls = [ping, INIT, INITIALIZED, modern(1, query="storms"), search(2, query="storms")]
    by_sdk, _ = serve(server, calls, quick=False)
    by_lane, taken = serve(server, calls, quick=True)
    assert answers(by_lane) == answers(by_sdk) and taken == 1 and "error" in answers(by_lane)["1"]


def test_a_refused_call_does_not_stop_later_calls_with_its_envelope(server: Any) -> None:
    """The envelope is read once for all calls that carry it: a first call with a bad name or bad arguments
    (the SDK's to refuse) does not keep the next ones from the lane."""
    bad_name, bad_arguments = modern(1, query="storms"), modern(2, query="storms")
    bad_name["params"]["name"], bad_arguments["params"]["arguments"] = 5, []
    calls = [DISCOVER, bad_name, bad_arguments, modern(3, query="storms"), modern(4, query="keeper")]
    by_sdk, _ = serve(server, calls, quick=False)
    by_lane, taken = serve(server, calls, quick=True)
    assert answers(by_lane) == answers(by_sdk) and taken == 2
    assert "error" in answers(by_lane)["1"] and "error" in answers(by_lane)["2"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(structured=st.dictionaries(st.text(max_size=12), json_values(), max_size=6),
       version=st.sampled_from(SUPPORTED_PROTOCOL_VERSIONS),
       request_id=st.integers(0, 2**31) | st.text(max_size=8))
def test_an_answer_shaped_on_its_own_is_the_sdks_line(server: Any, structured: dict[str, Any], version: str,
                                                      request_id: int | str) -> None:
    """An answer the kept line does not take is shaped on its own, its structured content parsed from its JSON
    text: the line is the one the SDK's shaping writes (any JSON, any protocol version), shaped once."""
    from mcp.server.runner import ServerRunner
    from mcp_types import CallToolResult, JSONRPCResponse, TextContent

    from foundation.bounding import dumps
    from mcp_server.stdio_fast import _line

    text = dumps(structured)
    outcome = CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured)
    lane = QuickCalls(server, cast(Any, None))
    shaped: list[Any] = []
    shape = lane._serializer._serialize

    def recorded(method: str, version: str, result: Any) -> Any:
        shaped.append(result.structured_content)
        return shape(method, version, result)

    lane._serializer._serialize = recorded  # type: ignore[method-assign]
    runner = ServerRunner(server._lowlevel_server, connection=None, lifespan_state=None)  # type: ignore[arg-type]
    expected = _line(JSONRPCResponse(jsonrpc="2.0", id=request_id,
                                     result=runner._serialize("tools/call", version, outcome)))
    plain = CallToolResult(content=[TextContent(type="text", text=text)])  # as the lane's call leaves it
    assert lane._shaped(request_id, version, plain, text) == expected
    assert shaped == [structured]


@pytest.mark.parametrize("change", ["alter", "drop", "fail"])
def test_an_answer_shaped_on_its_own_follows_a_changing_shaping(server: Any, change: str) -> None:
    """A shaping that alters or drops the structured content, or refuses it (none in this SDK's versions):
    the line the lane writes is byte for byte the one that shaping writes, or its error."""
    from mcp_types import CallToolResult, JSONRPCResponse, TextContent

    from foundation.bounding import dumps
    from mcp_server.stdio_fast import _line

    structured = {"hits": [{"path": "a.txt", "score": 1.5, "text": "storms \u00e9 \x00"}], "total": 1}
    text = dumps(structured)
    lane = QuickCalls(server, cast(Any, None))
    changing = changed_shaping(lane, change)
    full = CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured)
    if change == "fail":
        line = lane._shaped(5, PROTOCOL, CallToolResult(content=[TextContent(type="text", text=text)]), text)
        assert json.loads(line)["error"]["message"] == "refused"
        return
    expected = _line(JSONRPCResponse(jsonrpc="2.0", id=5, result=changing("tools/call", PROTOCOL, full)))
    assert lane._shaped(5, PROTOCOL, CallToolResult(content=[TextContent(type="text", text=text)]), text) == expected


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(structured=st.dictionaries(st.text(st.characters(codec="utf-8"), max_size=12), json_values(), max_size=6),
       version=st.sampled_from(SUPPORTED_PROTOCOL_VERSIONS),
       request_id=st.integers() | st.text(st.characters(codec="utf-8"), max_size=8))
def test_an_answer_filled_into_the_kept_line_is_the_sdks_line(server: Any, structured: dict[str, Any], version: str,
                                                             request_id: int | str) -> None:
    """A plain answer's line is the one kept for its protocol version with the id, the text and the structured
    content spliced in: byte for byte the line the SDK writes (any JSON, any version, any id), and the SDK's
    shaping runs once per version, not per answer."""
    from mcp.server.runner import ServerRunner
    from mcp_types import CallToolResult, JSONRPCResponse, TextContent

    from foundation.bounding import dumps
    from mcp_server.stdio_fast import _line

    text = dumps(structured)
    outcome = CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured)
    runner = ServerRunner(server._lowlevel_server, connection=None, lifespan_state=None)  # type: ignore[arg-type]
    expected = _line(JSONRPCResponse(jsonrpc="2.0", id=request_id,
                                     result=runner._serialize("tools/call", version, outcome)))
    lane = QuickCalls(server, cast(Any, None))
    shaped: list[str] = []
    shape = lane._serializer._serialize

    def counted(method: str, version: str, result: Any) -> Any:
        shaped.append(version)
        return shape(method, version, result)

    lane._serializer._serialize = counted  # type: ignore[method-assign]
    plain = CallToolResult(content=[TextContent(type="text", text=text)])  # as the lane's call leaves it
    for _ in range(2):
        assert lane._templated(request_id, version, plain, text) == expected
    assert shaped == [version]


@pytest.mark.parametrize("change", ["alter", "drop", "text", "fail"])
def test_no_line_is_kept_when_the_shaping_changes_a_stand_in(server: Any, change: str) -> None:
    """A shaping that alters, drops or refuses a stand-in (none in this SDK's versions): no line is kept for
    that version, and each answer is shaped on its own (`_shaped`)."""
    from mcp_types import CallToolResult, TextContent

    lane = QuickCalls(server, cast(Any, None))
    changed_shaping(lane, change)
    plain = CallToolResult(content=[TextContent(type="text", text='{"a":1}')])
    assert lane._templated(5, PROTOCOL, plain, '{"a":1}') is None
    assert lane._templates == {PROTOCOL: None}


def test_only_a_plain_answer_is_filled_into_the_kept_line(server: Any) -> None:
    """An error, an answer with other content or a `_meta`, or an id that is neither a number nor a string:
    shaped on its own."""
    from mcp_types import CallToolResult, TextContent

    lane = QuickCalls(server, cast(Any, None))
    text = '{"a":1}'
    plain = CallToolResult(content=[TextContent(type="text", text=text)])
    assert lane._templated(5, PROTOCOL, plain, text) is not None
    others = [CallToolResult(content=[TextContent(type="text", text=text)], is_error=True),
              CallToolResult(content=[TextContent(type="text", text='{"b":2}')]),
              CallToolResult(content=[TextContent(type="text", text=text)], _meta={"k": 1}),
              CallToolResult(content=[TextContent(type="text", text=text), TextContent(type="text", text=text)])]
    assert all(lane._templated(5, PROTOCOL, other, text) is None for other in others)
    assert lane._templated(5, PROTOCOL, plain, None) is None
    assert lane._templated(cast(Any, 5.0), PROTOCOL, plain, text) is None
    assert lane._templated(cast(Any, True), PROTOCOL, plain, text) is None


def changed_shaping(lane: QuickCalls, change: str) -> Callable[[str, str, Any], Any]:
    """Make the lane's SDK shaping of an answer `change` it: refuse it ("fail"), drop its structured content
    ("drop"), replace its text ("text") or add to its structured content ("alter"). Returns that shaping."""
    shape = lane._serializer._serialize

    def changing(method: str, version: str, result: Any) -> Any:
        wire = dict(shape(method, version, result))
        if change == "fail":
            raise ValueError("refused")
        if change == "drop":
            wire.pop("structuredContent", None)
        elif change == "text":
            wire["content"] = [{"type": "text", "text": "changed"}]
        else:
            wire["structuredContent"] = {**wire["structuredContent"], "added": True}
        return wire

    lane._serializer._serialize = changing  # type: ignore[method-assign]
    return changing
