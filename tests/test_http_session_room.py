"""A flood of 2025-era `initialize` does not lock other clients out (issue 30, finding 7): before, the SDK
answered 503 to every new session once 10,000 were open (10,000 `initialize` in 25 s from one process).
Now the flooder's own least recently used sessions are ended to make room; a session opened before the flood
keeps working and a new client still connects. (The limits are lowered here, ours to 20 and so the SDK's to
40: 120 `initialize` would have met the SDK's 503.)"""

from __future__ import annotations

from typing import Any

import httpx2 as httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_server import session_limit
from tests import approval_helpers as helpers

pytestmark = pytest.mark.anyio
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "flood", "version": "1"}}}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


async def test_a_flood_of_initialize_ends_the_flooders_sessions_not_others(settings: Any, monkeypatch: Any) -> None:
    from mcp.client import Client

    monkeypatch.setattr(session_limit, "MAX_OPEN_SESSIONS", 20)
    with helpers.real_http_server(settings) as (_, port):
        url = f"http://127.0.0.1:{port}/mcp"
        async with Client(url, mode="legacy") as early:
            await early.list_tools()
            async with httpx.AsyncClient(timeout=60) as flood:
                statuses = [(await flood.post(url, json=INIT, headers=HEADERS)).status_code for _ in range(120)]
            assert set(statuses) == {200}, statuses  # never 503: the flood ends its own oldest sessions
            assert (await early.call_tool("now", {})).is_error is False  # the early session survived
            async with Client(url, mode="legacy") as late:
                assert (await late.call_tool("now", {})).is_error is False


def test_the_victim_is_the_biggest_clients_least_recently_used_session() -> None:
    room = session_limit.SessionRoom(app=None, limit=4)  # type: ignore[arg-type]
    for session, owner in [("a", "alice"), ("f1", "flood"), ("f2", "flood"), ("b", "bob"), ("f3", "flood")]:
        room.sessions[session] = owner
    room.sessions.move_to_end("f1")
    assert room._victim() == ("f2", "flood")
    assert list(room.sessions) == ["a", "b", "f3", "f1"]


@settings(max_examples=300, deadline=None)
@given(owners=st.lists(st.sampled_from(["flood", "alice", "bob", "carol"]), min_size=1, max_size=40),
       touched=st.lists(st.integers(0, 39), max_size=10))
def test_the_victim_always_belongs_to_a_client_holding_the_most(owners: list[str], touched: list[int]) -> None:
    room = session_limit.SessionRoom(app=None, limit=len(owners))  # type: ignore[arg-type]
    for i, owner in enumerate(owners):
        room.sessions[f"s{i}"] = owner
    for i in touched:
        if f"s{i}" in room.sessions:
            room.sessions.move_to_end(f"s{i}")
    before = list(room.sessions.items())
    counts = {o: owners.count(o) for o in owners}
    session, owner = room._victim()
    assert counts[owner] == max(counts.values())
    first_of_owner = next(s for s, o in before if counts[o] == max(counts.values()))
    assert session == first_of_owner and session not in room.sessions
