"""Streamable HTTP for real: the installed console script serving on a free loopback port.

Covers both protocol eras through the SDK's HTTP client, DNS-rebinding protection (foreign
Origin 403, foreign Host 421), the bearer token (401), the body limit (413), `/health`, and
the refusal to bind a non-loopback address without `--allow-host`.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import MODES, assert_lists_and_calls_now

CONSOLE_SCRIPT = Path(sys.executable).with_name("generalagent-mcp")
TOKEN = "test-token-7f3a"
INIT_BODY = json.dumps({
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "raw-http-test", "version": "0"}},
})
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}

# one pytest-xdist worker runs this module (--dist loadgroup), so its module-scoped server starts once
pytestmark = pytest.mark.xdist_group("test_http")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GENERALAGENT_")}
    env["GENERALAGENT_DATA_DIR"] = str(data_dir)
    env.update(extra)
    return env


@dataclass
class HttpServer:
    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)


def start_http_server(tmp: Path, *args: str, host: str = "127.0.0.1", **env: str) -> HttpServer:
    """Spawn `generalagent-mcp serve --transport http` and wait until `/health` answers (on a new port
    when another test process, e.g. a pytest-xdist worker, took the free port first)."""
    for attempt in range(3):
        try:
            return _start_http_server(tmp, *args, host=host, **env)
        except PortTaken:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


class PortTaken(AssertionError):
    """The server could not listen: the free port was taken before it bound it."""


def _start_http_server(tmp: Path, *args: str, host: str = "127.0.0.1", **env: str) -> HttpServer:
    port = free_port()
    tmp.mkdir(parents=True, exist_ok=True)
    log = tmp / f"server-{port}.log"
    command = [str(CONSOLE_SCRIPT), "serve", "--transport", "http", "--host", host, "--port", str(port), *args]
    with log.open("wb") as sink:
        process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT,
                                   env=server_env(tmp / "data", **env), cwd=tmp)
    server = HttpServer(process, port, log)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            if f"Cannot listen on {host}:{port}" in server.stderr():
                raise PortTaken(server.stderr())
            raise AssertionError(f"server exited with {process.returncode}:\n{server.stderr()}")
        if _answers_health(port, process.pid):
            return server
        time.sleep(0.1)
    server.stop()
    raise AssertionError(f"server did not answer /health within 30 s:\n{server.stderr()}")


def _answers_health(port: int, pid: int) -> bool:
    """`/health` on `port` answers from process `pid` (not from another test's server on that port)."""
    try:
        status, body = request(port, "GET", "/health")
    except OSError:
        return False
    return status == 200 and json.loads(body).get("pid") == pid


def request(port: int, method: str, path: str, body: bytes | str | None = None,
            headers: dict[str, str] | None = None, chunked: bool = False) -> tuple[int, bytes]:
    """One raw HTTP request with full control over Host/Origin; returns (status, body)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        hdrs = dict(headers or {})
        conn.putrequest(method, path, skip_host="Host" in hdrs, skip_accept_encoding=True)
        for key, value in hdrs.items():
            conn.putheader(key, value)
        data = body.encode() if isinstance(body, str) else body
        if chunked:
            conn.putheader("Transfer-Encoding", "chunked")
            conn.endheaders()
            for start in range(0, len(data or b""), 16384):
                piece = (data or b"")[start:start + 16384]
                conn.send(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            conn.send(b"0\r\n\r\n")
        else:
            if data is not None:
                conn.putheader("Content-Length", str(len(data)))
            conn.endheaders(data)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    srv = start_http_server(tmp_path_factory.mktemp("http"), GENERALAGENT_HTTP_MAX_BODY_BYTES="65536")
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def token_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    srv = start_http_server(tmp_path_factory.mktemp("http-token"), GENERALAGENT_HTTP_TOKEN=TOKEN)
    yield srv
    srv.stop()


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_sdk_client_lists_and_calls_over_http(server: HttpServer, mode: str) -> None:
    from mcp.client import Client

    async with Client(server.url, mode=mode) as client:
        assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
        await assert_lists_and_calls_now(client)


def test_health_is_open(server: HttpServer) -> None:
    status, body = request(server.port, "GET", "/health")
    assert status == 200
    assert json.loads(body)["status"] == "ok"


def test_loopback_origin_is_accepted(server: HttpServer) -> None:
    headers = {**MCP_HEADERS, "Origin": f"http://localhost:{server.port}"}
    status, _ = request(server.port, "POST", "/mcp", INIT_BODY, headers)
    assert status == 200


DISCOVER_BODY = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}})
MODERN_HEADERS = {**MCP_HEADERS, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"}
ERAS = [pytest.param(INIT_BODY, MCP_HEADERS, id="2025-11-25"), pytest.param(DISCOVER_BODY, MODERN_HEADERS, id="2026-07-28")]


@pytest.mark.parametrize(("body", "base"), ERAS)
def test_foreign_origin_is_forbidden(server: HttpServer, body: str, base: dict[str, str]) -> None:
    status, answer = request(server.port, "POST", "/mcp", body, {**base, "Origin": "http://evil.example"})
    assert status == 403, answer
    assert b"GENERALAGENT_HTTP_ALLOWED_HOSTS" in answer, answer  # says what to do


@pytest.mark.parametrize(("body", "base"), ERAS)
def test_foreign_host_is_misdirected(server: HttpServer, body: str, base: dict[str, str]) -> None:
    status, answer = request(server.port, "POST", "/mcp", body, {**base, "Host": f"evil.example:{server.port}"})
    assert status == 421, answer
    assert b"GENERALAGENT_HTTP_ALLOWED_HOSTS" in answer, answer


def test_modern_discover_from_loopback_is_answered(server: HttpServer) -> None:
    status, answer = request(server.port, "POST", "/mcp", DISCOVER_BODY, MODERN_HEADERS)
    assert status == 200, answer
    assert b"2026-07-28" in answer


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_body_over_the_limit_is_rejected(server: HttpServer, chunked: bool) -> None:
    padding = "x" * 70_000  # the fixture's limit is 65536 bytes
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"_meta": {"pad": padding}}})
    status, answer = request(server.port, "POST", "/mcp", body, MCP_HEADERS, chunked=chunked)
    assert status == 413
    assert b"GENERALAGENT_HTTP_MAX_BODY_BYTES" in answer and b"65536" in answer, answer  # says what to do
    assert json.loads(answer)["error"]["message"]  # a JSON-RPC error, which MCP clients show
    assert request(server.port, "GET", "/health")[0] == 200  # still serving


@pytest.mark.parametrize("authorization", [None, "Bearer wrong", f"Basic {TOKEN}", TOKEN])
def test_token_required(token_server: HttpServer, authorization: str | None) -> None:
    headers = dict(MCP_HEADERS)
    if authorization is not None:
        headers["Authorization"] = authorization
    status, body = request(token_server.port, "POST", "/mcp", INIT_BODY, headers)
    assert status == 401, body
    assert b"GENERALAGENT_HTTP_TOKEN" in body


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_sdk_client_without_token_is_told_what_to_send(token_server: HttpServer, mode: str) -> None:
    """The 401 body is a JSON-RPC error, so MCP clients show its message (they hid it as 'Server returned
    an error response')."""
    from mcp.client import Client

    with pytest.raises(Exception) as refused:
        async with Client(token_server.url, mode=mode) as client:
            await client.list_tools()
    assert any("GENERALAGENT_HTTP_TOKEN" in str(e) for e in leaf_errors(refused.value)), repr(refused.value)


def leaf_errors(error: BaseException) -> list[BaseException]:
    """The errors inside (nested) exception groups, or the error itself."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaf_errors(inner)]
    return [error]


@pytest.mark.parametrize("authorization", [f"bearer {TOKEN}", f"BEARER  {TOKEN}"])
def test_token_scheme_is_case_insensitive(token_server: HttpServer, authorization: str) -> None:
    """The auth scheme is case-insensitive (RFC 9110 11.1), so `bearer <token>` is the same credential."""
    status, body = request(token_server.port, "POST", "/mcp", INIT_BODY, {**MCP_HEADERS, "Authorization": authorization})
    assert status == 200, body


def test_token_server_health_needs_no_token(token_server: HttpServer) -> None:
    assert request(token_server.port, "GET", "/health")[0] == 200


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_sdk_client_with_token(token_server: HttpServer, mode: str) -> None:
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    async with (
        create_mcp_http_client(headers={"Authorization": f"Bearer {TOKEN}"}) as http,
        Client(streamable_http_client(token_server.url, http_client=http), mode=mode) as client,
    ):
        await assert_lists_and_calls_now(client)


def test_non_loopback_bind_is_refused_without_allow_host(tmp_path: Path) -> None:
    port = free_port()
    done = subprocess.run(
        [str(CONSOLE_SCRIPT), "serve", "--transport", "http", "--host", "0.0.0.0", "--port", str(port)],
        capture_output=True, text=True, timeout=60, env=server_env(tmp_path / "data"), stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 2, done.stderr
    assert "0.0.0.0" in done.stderr and "--allow-host" in done.stderr and "loopback" in done.stderr
    assert done.stdout == ""


def test_non_loopback_bind_with_allow_host_warns(tmp_path: Path) -> None:
    srv = start_http_server(tmp_path, "--allow-host", "mcp.test", host="0.0.0.0")
    try:
        assert "WARNING" in srv.stderr() and "0.0.0.0" in srv.stderr()
        allowed = {**MCP_HEADERS, "Host": f"mcp.test:{srv.port}", "Origin": f"http://mcp.test:{srv.port}"}
        assert request(srv.port, "POST", "/mcp", INIT_BODY, allowed)[0] == 200
        foreign = {**MCP_HEADERS, "Host": f"evil.example:{srv.port}"}
        assert request(srv.port, "POST", "/mcp", INIT_BODY, foreign)[0] == 421
    finally:
        srv.stop()


def test_busy_port_is_a_clear_error(server: HttpServer, tmp_path: Path) -> None:
    done = subprocess.run(
        [str(CONSOLE_SCRIPT), "serve", "--transport", "http", "--port", str(server.port)],
        capture_output=True, text=True, timeout=60, env=server_env(tmp_path / "data"), stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 1
    assert f"Cannot listen on 127.0.0.1:{server.port}" in done.stderr and "--port" in done.stderr


def test_the_http_server_parses_requests_with_httptools() -> None:
    """uvicorn picks its C parser when httptools is installed (a dependency): h11, its pure-Python
    fallback, cost about 1.5 ms more per call (bench.mcp_overhead, todo_read over HTTP)."""
    import uvicorn
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    config = uvicorn.Config(app=lambda scope, receive, send: None, log_config=None)
    config.load()
    assert config.http_protocol_class is HttpToolsProtocol


@pytest.mark.anyio
async def test_each_http_session_has_its_own_workspace(server: HttpServer) -> None:
    """Without roots, each 2025-era HTTP session works in `<data dir>/workspaces/<session>/` (README), so
    a second client's files are not the first one's (both used `workspaces/default`)."""
    from mcp.client import Client

    async def workspace(client: Client) -> str:
        missing = await client.call_tool("read_file", {"path": "missing.txt"})
        assert missing.is_error
        found = re.search(r"in the workspace \(([^)]*)\)", missing.content[0].text)
        assert found, missing.content[0].text
        return found.group(1)

    async with Client(server.url, mode="legacy") as first, Client(server.url, mode="legacy") as second:
        one, two = await workspace(first), await workspace(second)
        assert one != two
        assert Path(one).parent == Path(two).parent and Path(one).parent.name == "workspaces"
