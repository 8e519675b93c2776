"""The local approval page: loopback only, Origin checked, CSRF token bound to the approval."""

from __future__ import annotations

import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from starlette.testclient import TestClient

from foundation.calls import CallOrigin
from foundation.errors import ApprovalRequired
from mcp_server.server import build_server
from mcp_server.transports import http_app
from tests import approval_helpers as helpers

BASE = "http://127.0.0.1:8765"
CSRF = re.compile(r"name='csrf' value='([^']+)'")


@pytest.fixture
def served(settings: Any, monkeypatch: Any) -> Iterator[tuple[Any, Any, TestClient]]:
    helpers.install(monkeypatch)
    server, dispatcher = build_server(settings)
    app = http_app(server, settings, "127.0.0.1")
    yield server, dispatcher, TestClient(app, base_url=BASE, client=("127.0.0.1", 50123))


def pending_id(dispatcher: Any, text: str = "web") -> str:
    import anyio

    async def call() -> str:
        try:
            await dispatcher.run("poke", {"text": text}, CallOrigin())
        except ApprovalRequired as exc:
            return str(exc).split("Approval id: ")[1].split()[0]
        raise AssertionError("expected ApprovalRequired")

    return anyio.run(call)


def run_poke(dispatcher: Any, text: str = "web") -> Any:
    import anyio

    return anyio.run(lambda: dispatcher.run("poke", {"text": text}, CallOrigin()))


def test_page_shows_the_call_and_approves_with_the_right_token(served: Any) -> None:
    _, dispatcher, client = served
    approval_id = pending_id(dispatcher)
    page = client.get(f"/approvals/{approval_id}")
    assert page.status_code == 200 and "poke" in page.text and "&quot;text&quot;: &quot;web&quot;" in page.text
    assert page.headers["x-frame-options"] == "DENY" and "no-store" in page.headers["cache-control"]
    token = CSRF.search(page.text).group(1)  # type: ignore[union-attr]
    assert approval_id in client.get("/approvals").text
    done = client.post(f"/approvals/{approval_id}", data={"csrf": token, "decision": "approve"},
                       headers={"Origin": BASE})
    assert done.status_code == 200 and "approved" in done.text
    assert run_poke(dispatcher).model_dump() == {"text": "web"} and helpers.CALLS == ["web"]
    again = client.post(f"/approvals/{approval_id}", data={"csrf": token, "decision": "approve"})
    assert again.status_code == 409


def test_csrf_origin_and_loopback_are_enforced(served: Any, settings: Any) -> None:
    server, dispatcher, client = served
    approval_id = pending_id(dispatcher)
    other_id = pending_id(dispatcher, "other")
    token = CSRF.search(client.get(f"/approvals/{approval_id}").text).group(1)  # type: ignore[union-attr]
    other_token = CSRF.search(client.get(f"/approvals/{other_id}").text).group(1)  # type: ignore[union-attr]
    url = f"/approvals/{approval_id}"
    assert client.post(url, data={"decision": "approve"}).status_code == 403  # no token
    assert client.post(url, data={"csrf": "wrong", "decision": "approve"}).status_code == 403
    assert client.post(url, data={"csrf": other_token, "decision": "approve"}).status_code == 403  # bound per approval
    evil = client.post(url, data={"csrf": token, "decision": "approve"}, headers={"Origin": "http://evil.example"})
    assert evil.status_code == 403
    remote = TestClient(http_app(server, settings, "127.0.0.1"), base_url=BASE, client=("192.168.1.20", 4000))
    assert remote.get(url).status_code == 403
    assert remote.post(url, data={"csrf": token, "decision": "approve"}).status_code == 403
    rebinding = TestClient(http_app(server, settings, "127.0.0.1"), base_url="http://attacker.example:8765",
                           client=("127.0.0.1", 4000))
    assert rebinding.get(url).status_code == 403
    assert client.get("/approvals/ap-zzzzzz").status_code == 404
    assert helpers.CALLS == []
    with pytest.raises(ApprovalRequired):
        run_poke(dispatcher)
    rejected = client.post(url, data={"csrf": token, "decision": "reject"})
    assert rejected.status_code == 200 and "rejected" in rejected.text
    with pytest.raises(ApprovalRequired):
        run_poke(dispatcher)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def real_http_server(settings: Any) -> Iterator[tuple[Any, int]]:
    """Our Streamable HTTP app served by uvicorn on a free loopback port (in a thread)."""
    import uvicorn

    server, _ = build_server(settings)
    port = _free_port()
    config = uvicorn.Config(http_app(server, settings, "127.0.0.1"), host="127.0.0.1", port=port,
                            log_level="warning", log_config=None)
    web = uvicorn.Server(config)
    thread = threading.Thread(target=web.run, daemon=True)
    thread.start()
    try:
        for _ in range(200):
            if web.started:
                break
            time.sleep(0.05)
        yield server, port
    finally:
        web.should_exit = True
        thread.join(timeout=10)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_over_real_http_the_result_names_the_page(settings: Any, monkeypatch: Any, mode: str) -> None:
    from mcp.client import Client

    helpers.install(monkeypatch)
    with real_http_server(settings) as (server, port):
        async with Client(f"http://127.0.0.1:{port}/mcp", mode=mode) as client:
            await client.list_tools()
            result = await client.call_tool("poke", {"text": "http"})
            text = result.content[0].text
            match = re.search(r"http://127\.0\.0\.1:\d+/approvals/(ap-[a-z2-9]{6})", text)
            assert result.is_error and match, text
            approval_id = match.group(1)
            with TestClient(http_app(server, settings, "127.0.0.1"), base_url=f"http://127.0.0.1:{port}",
                            client=("127.0.0.1", 4000)) as page_client:
                page = page_client.get(f"/approvals/{approval_id}")
                token = CSRF.search(page.text).group(1)  # type: ignore[union-attr]
                assert page_client.post(f"/approvals/{approval_id}",
                                        data={"csrf": token, "decision": "approve"}).status_code == 200
            ok = await client.call_tool("poke", {"text": "http"})
            assert not ok.is_error and helpers.CALLS == ["http"]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize("action", ["accept", "decline"])
async def test_elicitation_over_real_http(settings: Any, monkeypatch: Any, mode: str, action: str) -> None:
    from mcp.client import Client

    helpers.install(monkeypatch)
    seen: list[str] = []
    with real_http_server(settings) as (_, port):
        async with Client(f"http://127.0.0.1:{port}/mcp", mode=mode,
                          elicitation_callback=helpers.elicitation_answer(action, seen=seen)) as client:
            await client.list_tools()
            result = await client.call_tool("poke", {"text": "over-http"})
    assert len(seen) == 1
    if action == "accept":
        assert not result.is_error and helpers.CALLS == ["over-http"]
    else:
        assert result.is_error and "did not approve" in result.content[0].text and helpers.CALLS == []
