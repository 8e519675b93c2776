"""Host and Origin headers are parsed and compared exactly (scheme, host, port), on the MCP endpoint
and on the local approval page: look-alike hosts, userinfo tricks, bad ports, IPv6 and case."""

from __future__ import annotations

import re
from typing import Any

import pytest
from starlette.testclient import TestClient

from mcp_server.server import build_server
from mcp_server.transports import http_app, parse_authority, parse_origin
from tests import approval_helpers as helpers

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}

AUTHORITIES = [
    ("127.0.0.1:8000", ("127.0.0.1", 8000)), ("localhost", ("localhost", None)), ("LOCALHOST:80", ("localhost", 80)),
    ("[::1]:8000", ("[::1]", 8000)), ("[0:0:0:0:0:0:0:1]", ("[::1]", None)), ("127.0.0.1.evil.com", ("127.0.0.1.evil.com", None)),
    ("localhost@evil", None), ("127.0.0.1:80@evil.com", None), ("127.0.0.1:", None), ("127.0.0.1:0", None),
    ("127.0.0.1:65536", None), ("127.0.0.1:8000:1", None), ("127.0.0.1/x", None), ("[::1", None), ("[evil]:80", None),
    (" localhost", None), ("", None), ("local host", None), ("127.0.0.1:+80", None), ("127.0.0.1:８０", None),
]


@pytest.mark.parametrize(("text", "expected"), AUTHORITIES)
def test_parse_authority(text: str, expected: Any) -> None:
    assert parse_authority(text) == expected


ORIGINS = [
    ("http://127.0.0.1:8000", ("http", "127.0.0.1", 8000)), ("HTTP://LocalHost", ("http", "localhost", 80)),
    ("https://[::1]", ("https", "[::1]", 443)), ("http://127.0.0.1.evil.com", ("http", "127.0.0.1.evil.com", 80)),
    ("http://localhost@evil", None), ("http://localhost:8000@evil.com", None), ("http://localhost:8000/", None),
    ("null", None), ("file://", None), ("ftp://localhost", None), ("http://[::1]:99999", None), ("localhost:8000", None),
]


@pytest.mark.parametrize(("text", "expected"), ORIGINS)
def test_parse_origin(text: str, expected: Any) -> None:
    assert parse_origin(text) == expected


@pytest.fixture
def mcp_client(settings: Any) -> Any:
    server, _ = build_server(settings)
    with TestClient(http_app(server, settings, "127.0.0.1"), base_url="http://127.0.0.1:8765") as client:
        yield client


BAD_HOSTS = ["127.0.0.1.evil.com", "localhost@evil", "127.0.0.1:80@evil.com", "localhost:evil.com", "evil.com:8765",
             "127.0.0.1:99999", "[::1]x", "localhost.:8765"]
BAD_ORIGINS = ["http://127.0.0.1.evil.com", "http://localhost@evil", "http://localhost:8765@evil.com",
               "http://localhost:1.evil.com", "http://evil.com:8765", "null", "http://localhost:8765/path",
               "javascript://localhost"]


@pytest.mark.parametrize("host", BAD_HOSTS)
def test_mcp_endpoint_refuses_look_alike_hosts(mcp_client: Any, host: str) -> None:
    answer = mcp_client.post("/mcp", json=INIT, headers={**MCP_HEADERS, "Host": host})
    assert answer.status_code == 421, (host, answer.status_code)


@pytest.mark.parametrize("origin", BAD_ORIGINS)
def test_mcp_endpoint_refuses_look_alike_origins(mcp_client: Any, origin: str) -> None:
    answer = mcp_client.post("/mcp", json=INIT, headers={**MCP_HEADERS, "Origin": origin})
    assert answer.status_code == 403, (origin, answer.status_code)


@pytest.mark.parametrize(("host", "origin"), [("127.0.0.1:8765", "http://127.0.0.1:8765"),
                                              ("LOCALHOST:8765", "http://localhost:3000"), ("[::1]:8765", None)])
def test_mcp_endpoint_accepts_loopback_spellings(mcp_client: Any, host: str, origin: str | None) -> None:
    headers = {**MCP_HEADERS, "Host": host, **({"Origin": origin} if origin else {})}
    answer = mcp_client.post("/mcp", json=INIT, headers=headers)
    assert answer.status_code not in (403, 421), (host, origin, answer.text)


CSRF = re.compile(r"name='csrf' value='([^']+)'")


def test_approval_page_compares_origin_scheme_host_and_port(settings: Any, monkeypatch: Any) -> None:
    from foundation.calls import CallOrigin
    from foundation.errors import ApprovalRequired

    helpers.install(monkeypatch)
    server, dispatcher = build_server(settings)
    import anyio

    with pytest.raises(ApprovalRequired):
        anyio.run(lambda: dispatcher.run("poke", {"text": "web"}, CallOrigin()))
    with helpers.page_client(settings, server) as client:
        port = client.base_url.port
        approval_id = re.search(r"ap-[a-z2-9]{6}", client.get("/approvals").text).group(0)  # type: ignore[union-attr]
        token = CSRF.search(client.get(f"/approvals/{approval_id}").text).group(1)  # type: ignore[union-attr]
        url = f"/approvals/{approval_id}"
        for origin in (f"http://127.0.0.1:{port + 1}", f"https://127.0.0.1:{port}", f"http://127.0.0.1.evil.com:{port}",
                       f"http://localhost:{port}", f"http://127.0.0.1:{port}@evil.com", "http://127.0.0.1"):
            refused = client.post(url, data={"csrf": token, "decision": "approve"}, headers={"Origin": origin})
            assert refused.status_code == 403, origin
        for host in (f"127.0.0.1.evil.com:{port}", "localhost@evil", f"127.0.0.1:{port}@evil.com"):
            assert client.get(url, headers={"Host": host}).status_code == 403, host
        same = client.post(url, data={"csrf": token, "decision": "approve"},
                           headers={"Origin": f"HTTP://127.0.0.1:{port}"})
        assert same.status_code == 200 and "approved" in same.text
