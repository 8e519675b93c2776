"""On sessionless HTTP (the 2026-07-28 era) a session grant is bound to something the client cannot choose
(issue 30, finding 7): before, it was keyed by the client's self-declared name, so another client declaring
the same name (every client of one SDK does) inherited "approve for this session"."""

from __future__ import annotations

from typing import Any

import pytest

from tests import approval_helpers as helpers

pytestmark = pytest.mark.anyio


async def test_a_session_grant_does_not_pass_to_another_client_of_the_same_name(settings: Any,
                                                                                monkeypatch: Any) -> None:
    from mcp.client import Client

    helpers.install(monkeypatch)
    seen: list[str] = []
    with helpers.real_http_server(settings) as (_, port):
        url = f"http://127.0.0.1:{port}/mcp"
        async with Client(url, mode="auto", elicitation_callback=helpers.elicitation_answer(
                "accept", "approve_session", seen=seen)) as first:
            assert not (await first.call_tool("poke", {"text": "one"})).is_error
        async with Client(url, mode="auto", elicitation_callback=helpers.elicitation_answer(
                "decline", seen=seen)) as second:
            other = await second.call_tool("poke", {"text": "two"})
    assert other.is_error and helpers.CALLS == ["one"], other
    assert len(seen) == 2  # the second client was asked itself


class _Request:
    def __init__(self, headers: dict[str, str]) -> None:
        self.headers = headers


def test_the_grant_key_follows_the_bearer_token_or_the_call() -> None:
    from mcp_server.server import sessionless_grant_key

    assert sessionless_grant_key(None, None) is None  # stdio
    assert sessionless_grant_key(_Request({}), "server-issued") is None  # a 2025 session the server issued
    token_a = sessionless_grant_key(_Request({"authorization": "Bearer a"}), None)
    assert token_a == sessionless_grant_key(_Request({"authorization": "Bearer a"}), None)
    assert token_a != sessionless_grant_key(_Request({"authorization": "Bearer b"}), None)
    assert "Bearer" not in str(token_a) and " a" not in str(token_a)
    no_token = {sessionless_grant_key(_Request({}), None) for _ in range(50)}
    assert len(no_token) == 50  # without a token, a grant covers the one call only
