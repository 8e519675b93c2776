"""Transports: stdio (stdout is the protocol, logs go to stderr) and Streamable HTTP."""

from __future__ import annotations

import ipaddress
import logging
import os
import re
import socket
import sys
from collections.abc import Callable
from functools import partial
from typing import Any

from foundation.errors import GeneralAgentError, SettingsError
from foundation.settings import Settings

log = logging.getLogger("generalagent.transport")

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def configure_logging(level: str, *, with_pid: bool = False) -> None:
    """All logging goes to stderr: on stdio, stdout belongs to the protocol. `with_pid`: each line
    names its process (several workers share one stderr)."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    pid = " [%(process)d]" if with_pid else ""
    handler.setFormatter(logging.Formatter(f"%(asctime)s %(levelname)s{pid} %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(level)


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_HOSTS:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


_HOSTNAME = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)*[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?")
_ORIGIN = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<authority>[^/?#]*)")
DEFAULT_PORTS = {"http": 80, "https": 443}


def parse_authority(text: str) -> tuple[str, int | None] | None:
    """`host[:port]` of a Host header or an origin, parsed strictly: a DNS name, an IPv4 address or a
    bracketed IPv6 address (lower-cased, IPv6 compressed), then an optional decimal port 1-65535.
    Anything else (userinfo `a@b`, paths, spaces, empty parts) gives None."""
    if text.startswith("["):
        end = text.find("]")
        try:
            host = f"[{ipaddress.IPv6Address(text[1:end]).compressed}]" if end > 0 else ""
        except ValueError:
            return None
        rest = text[end + 1 :]
    else:
        host, sep, port_text = text.partition(":")
        rest = sep + port_text
        if not _HOSTNAME.fullmatch(host):
            return None
    if not host:
        return None
    if not rest:
        return host.lower(), None
    if not re.fullmatch(r":[0-9]{1,5}", rest) or not 0 < int(rest[1:]) < 65536:
        return None
    return host.lower(), int(rest[1:])


def parse_origin(text: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an Origin header (`scheme://host[:port]`, nothing after), port defaulted."""
    m = _ORIGIN.fullmatch(text.strip())
    if m is None:
        return None
    scheme = m["scheme"].lower()
    authority = parse_authority(m["authority"])
    if authority is None or scheme not in DEFAULT_PORTS:
        return None
    host, port = authority
    return scheme, host, port if port is not None else DEFAULT_PORTS[scheme]


def allowed_host_names(settings: Settings) -> frozenset[str]:
    """The host names MCP requests may be addressed to: loopback, plus GENERALAGENT_HTTP_ALLOWED_HOSTS."""
    names = {"127.0.0.1", "localhost", "[::1]"}
    for extra in settings.http_allowed_hosts:
        parsed = parse_authority(extra)
        if parsed is not None:
            names.add(parsed[0])
    return frozenset(names)


class HeaderCheckMiddleware:
    """Host and Origin of requests to the MCP endpoint, parsed and compared exactly (host name from the
    allowed set, any valid port; Origin scheme http/https): `Host: 127.0.0.1:80@evil` or
    `Origin: http://127.0.0.1.evil.com` are refused (421 / 403). Accepted values are passed on in their
    canonical form (lower case), so the SDK's own string checks behind this one agree with it.
    The approval page (its own, stricter checks) and /health are left alone."""

    def __init__(self, app: Any, hosts: frozenset[str], skip: tuple[str, ...] = ("/health", "/approvals")) -> None:
        self.app, self.hosts, self.skip = app, hosts, skip

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and not any(path == p or path.startswith(p + "/") for p in self.skip):
            checked = self._check(scope)
            if isinstance(checked, tuple):
                await refusal_response(*checked)(scope, receive, send)
                return
            scope = {**scope, "headers": checked}
        await self.app(scope, receive, send)

    def _check(self, scope: Any) -> list[tuple[bytes, bytes]] | tuple[int, str]:
        """The request's headers with Host/Origin canonical, or (status, message) when refused."""
        out: list[tuple[bytes, bytes]] = []
        seen_host = False
        for key, value in scope.get("headers", []):
            name, text = key.decode("latin-1").lower(), value.decode("latin-1")
            if name == "host":
                host = parse_authority(text)
                if host is None or host[0] not in self.hosts or seen_host:
                    return 421, self._refusal("Host")
                seen_host, text = True, host[0] + (f":{host[1]}" if host[1] is not None else "")
            elif name == "origin":
                origin = parse_origin(text)
                if origin is None or origin[1] not in self.hosts:
                    return 403, self._refusal("Origin")
                text = f"{origin[0]}://{origin[1]}:{origin[2]}"
            out.append((key, text.encode("latin-1")))
        return out if seen_host else (421, self._refusal("Host"))

    @staticmethod
    def _refusal(header: str) -> str:
        """Why a request was refused and how to allow a name on purpose (the names are not listed)."""
        return (f"Invalid {header} header: this server only answers requests whose {header} names a loopback "
                "address (127.0.0.1, localhost, [::1]) or a name in GENERALAGENT_HTTP_ALLOWED_HOSTS "
                "(DNS-rebinding protection). To use another name, add it there (or serve --allow-host) "
                "and restart the server.")


class BodyLimitMessage:
    """The SDK answers a body over the limit with a bare 413 'Request body too large'; this says which
    limit and what to do, as a JSON-RPC error (the SDK's own body is dropped)."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        replaced = False

        async def send_or_replace(message: Any) -> None:
            nonlocal replaced
            if message["type"] == "http.response.start" and message["status"] == 413:
                replaced = True
                response = refusal_response(413, (
                    f"Request body too large: this server accepts at most {self.limit} bytes "
                    "(GENERALAGENT_HTTP_MAX_BODY_BYTES). Send less in one call (split the input, or pass a "
                    "workspace file's path instead of its content), or raise the limit and restart the server."))
                await response(scope, receive, send)
            elif not replaced:
                await send(message)

        await self.app(scope, receive, send_or_replace)


def refusal_response(status: int, message: str) -> Any:
    """A refused HTTP request as a JSON-RPC error body (id null): MCP clients show its message, where
    they hide any other body behind 'Server returned an error response'."""
    from starlette.responses import JSONResponse

    body = {"jsonrpc": "2.0", "id": None, "error": {"code": -32001 if status == 401 else -32600, "message": message}}
    return JSONResponse(body, status_code=status)


def transport_security(settings: Settings, host: str) -> Any:
    """DNS-rebinding protection, always passed explicitly (the SDK leaves it off otherwise)."""
    from mcp.server.transport_security import TransportSecuritySettings

    if not is_loopback(host) and not settings.http_allowed_hosts:
        raise SettingsError(
            f"Refusing to bind {host}: it is not a loopback address. Set GENERALAGENT_HTTP_ALLOWED_HOSTS "
            "(or --allow-host) to the Host names clients will use, and set GENERALAGENT_HTTP_TOKEN."
        )
    hosts = ["127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost", "[::1]"]
    origins = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
    for extra in settings.http_allowed_hosts:
        hosts += [extra, f"{extra}:*"]
        origins += [f"http://{extra}:*", f"https://{extra}:*", f"http://{extra}", f"https://{extra}"]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


class BearerTokenMiddleware:
    """Reject requests to the MCP endpoint without `Authorization: Bearer <token>` (401)."""

    def __init__(self, app: Any, token: str, open_paths: tuple[str, ...] = ("/health",)) -> None:
        self.app, self.token, self.open_paths = app, token, open_paths

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope.get("path") not in self.open_paths and not self._authorized(scope):
            response = refusal_response(401, "Unauthorized: send the header Authorization: Bearer "
                                        "<GENERALAGENT_HTTP_TOKEN> (the token the server was started with).")
            response.headers["WWW-Authenticate"] = "Bearer"
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _authorized(self, scope: Any) -> bool:
        import hmac

        for key, value in scope.get("headers", []):
            if key == b"authorization":
                scheme, _, credentials = value.decode("latin-1").strip().partition(" ")
                given = credentials.strip() if scheme.lower() == "bearer" else ""  # the scheme ignores case
                return hmac.compare_digest(given.encode(), self.token.encode())
        return False


def http_app(server: Any, settings: Settings, host: str, *, stateless: bool = False) -> Any:
    """The ASGI app: the SDK's Streamable HTTP endpoint behind our Host/Origin checks and the token.
    `stateless`: 2025-era requests get no session either (any request may reach any worker); the
    2026-07-28 era is stateless anyway."""
    from mcp_server.session_limit import SessionRoom, sdk_limit

    server.stateless_http = stateless  # 2025-era tool lists then follow the client, not the request
    app = server.streamable_http_app(
        max_sessions=sdk_limit(),
        streamable_http_path="/mcp",
        stateless_http=stateless,
        transport_security=transport_security(settings, host),
        max_request_body_size=settings.http_max_body_bytes,
        host=host,
    )
    app = BodyLimitMessage(app, settings.http_max_body_bytes)
    if not stateless:  # 2025-era sessions: a flood of `initialize` ends the flooder's own sessions, not others'
        app = SessionRoom(app, max_body=settings.http_max_body_bytes)
    app = HeaderCheckMiddleware(app, allowed_host_names(settings) | _bound_name(host))
    return BearerTokenMiddleware(app, settings.http_token) if settings.http_token else app


def _bound_name(host: str) -> frozenset[str]:
    """A loopback address we bind to (e.g. 127.0.0.2) is a valid Host name too."""
    parsed = parse_authority(f"[{host.strip('[]')}]" if ":" in host else host)
    return frozenset({parsed[0]}) if parsed is not None and is_loopback(host) else frozenset()


def bind_socket(host: str, port: int, *, reuse_port: bool = False) -> socket.socket:
    """Listen on host:port before starting uvicorn (same address rules as uvicorn), so that a busy
    port or an unknown host is a clear error instead of a log line. `reuse_port`: one of several
    sockets on that port among which the kernel spreads new connections (Linux SO_REUSEPORT)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto named explicitly: asyncio sets TCP_NODELAY only on sockets whose proto is IPPROTO_TCP; with
    # proto 0 every response of headers + body waits ~40 ms for the client's delayed ACK (Nagle)
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host.strip("[]"), port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise GeneralAgentError(
            f"Cannot listen on {host}:{port}: {exc.strerror or exc}. "
            "Choose another --port (or --host), or stop what uses it."
        ) from None
    sock.set_inheritable(True)
    return sock


def listen_sockets(host: str, port: int, count: int) -> list[socket.socket]:
    """The listening socket(s) of `count` workers. On Linux each worker gets its own socket on the one
    port (SO_REUSEPORT), so the kernel spreads connections evenly over the workers (on one shared
    socket, the few workers that win the accept race would get nearly every long-lived connection).
    The port is first bound without SO_REUSEPORT, so a port that anything else uses is still an error.
    Elsewhere: one socket that every worker accepts on."""
    first = bind_socket(host, port)
    if count == 1 or not sys.platform.startswith("linux") or not hasattr(socket, "SO_REUSEPORT"):
        return [first]
    bound = first.getsockname()[1]
    first.close()
    return [bind_socket(host, bound, reuse_port=True) for _ in range(count)]


def run_http(build: Callable[[], Any], settings: Settings, host: str, port: int, workers: int = 1) -> None:
    """Serve `build()`'s server over Streamable HTTP on host:port; with `workers` > 1, that many
    processes (mcp_server/workers.py), each building its own server, accept on that port."""
    if not is_loopback(host):
        print(f"WARNING: serving MCP on non-loopback host {host}; anyone who can reach it can call tools"
              + ("" if settings.http_token else " (no GENERALAGENT_HTTP_TOKEN set!)"), file=sys.stderr)
    sockets = listen_sockets(host, port, workers)
    shown = f"[{host}]" if ":" in host else host
    address = f"http://{shown}:{sockets[0].getsockname()[1]}/mcp"
    if is_loopback(host) and not settings.http_token:  # the approval page, with its key: for the person only
        from mcp_server.approval_keys import remember_url

        page = remember_url(address[: -len("/mcp")], settings.data_dir)
        print(f"generalagent-mcp: approval page (open it in a browser on this computer): {page}", file=sys.stderr,
              flush=True)
    if workers == 1:
        server = build()
        print(f"generalagent-mcp: Streamable HTTP on {address}", file=sys.stderr, flush=True)
        serve_socket(sockets[0], server, settings, host)
        return
    from mcp_server.workers import SETTINGS_EXIT, Supervisor

    print(f"generalagent-mcp: Streamable HTTP on {address} ({workers} worker processes)", file=sys.stderr, flush=True)
    code = Supervisor(workers + 1, partial(_worker_or_watcher, build, sockets, settings, host, workers)).run()
    if code == SETTINGS_EXIT:
        raise SettingsError("The HTTP workers cannot start: a setting is wrong (see the error above).")
    if code != 0:
        raise GeneralAgentError("The HTTP workers keep failing at start-up (see the errors above); fix the cause "
                                "and start the server again.")


def _worker_or_watcher(build: Callable[[], Any], sockets: list[socket.socket], settings: Settings, host: str,
                       workers: int, slot: int) -> None:
    """Slots 0..workers-1 serve HTTP; the last one watches the indexed folders for all of them (`_watcher`)."""
    if slot == workers:
        _watcher(build, sockets)
        return
    from tools.live_index import watch_in_another_process

    watch_in_another_process()
    _worker(build, sockets, settings, host, slot)


WATCHER_NICENESS = 10
"""The watcher process's CPU priority below the workers' (nice): a re-index of many changed files runs on
what searches leave."""


def _watcher(build: Callable[[], Any], sockets: list[socket.socket]) -> None:
    """The process that watches the indexed folders and re-indexes what changes, for every worker: at a
    lower CPU priority, and never inside a process that serves searches (its extraction took the GIL from
    them). Stops on SIGTERM or SIGINT, finishing the file it writes."""
    import signal
    import threading

    from tools.live_index import stop_live_index, warm_up_watcher

    for sock in sockets:
        sock.close()
    try:
        os.nice(WATCHER_NICENESS)
    except OSError:
        log.warning("the folder watcher runs at the workers' priority: os.nice was refused")
    server = build()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    warm_up_watcher(server.runtime)
    while not stop.wait(1.0):
        pass
    stop_live_index(server.runtime)
    server.runtime.close()


def _worker(build: Callable[[], Any], sockets: list[socket.socket], settings: Settings, host: str, slot: int) -> None:
    """Worker number `slot`: its own socket (or the shared one); the others' are closed in this process."""
    mine = sockets[slot % len(sockets)]
    for sock in sockets:
        if sock is not mine:
            sock.close()
    serve_socket(mine, build(), settings, host, stateless=True, grace=WORKER_GRACE_SECONDS)


WORKER_GRACE_SECONDS = 5
"""How long a stopping worker waits for open requests before closing them."""


def serve_socket(sock: socket.socket, server: Any, settings: Settings, host: str, *, stateless: bool = False,
                 grace: int | None = None) -> None:
    """Run uvicorn with the server's app on an already listening socket until it is told to stop."""
    import anyio
    import uvicorn

    app = http_app(server, settings, host, stateless=stateless)
    bound = sock.getsockname()
    config = uvicorn.Config(app, host=host, port=bound[1], log_level=settings.log_level.lower(), log_config=None,
                            timeout_graceful_shutdown=grace)
    try:
        anyio.run(partial(uvicorn.Server(config).serve, sockets=[sock]))
    finally:
        stop_runs(server)


def run_stdio(server: Any) -> None:
    """Serve `server` (an MCPServer) over stdin/stdout until stdin closes: the SDK's own transport on the
    streams of mcp_server.stdio_wire (answers before the end of input, lone surrogates answered)."""
    import anyio

    from mcp_server.sdk_adapter import lowlevel
    from mcp_server.stdio_wire import stdio_streams

    server.stdio_session = stdio_session_id()

    async def serve() -> None:
        low = lowlevel(server)
        async with stdio_streams() as (read_stream, write_stream):
            await low.run(read_stream, write_stream, low.create_initialization_options())

    try:
        anyio.run(serve)
    except* (BrokenPipeError, ConnectionResetError):  # the client stopped reading our answers
        log.warning("stdout was closed by the client; the server stops")
    finally:
        stop_runs(server)
        _drop_if_unused(server)


def stdio_session_id() -> str:
    """This stdio connection's id: `stdio-<UTC start>-<pid>` (a folder name: workspaces/<id>/)."""
    import time

    return f"stdio-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{os.getpid()}"


def _drop_if_unused(server: Any) -> None:
    """The connection's own workspace (no roots configured) is removed at exit when nothing was put in it."""
    from foundation.paths import WORKSPACE_SUBDIRS, session_dir_name

    runtime = getattr(server, "runtime", None)
    if runtime is None or runtime.settings.roots or not server.stdio_session:
        return
    base = runtime.settings.data_dir / "workspaces" / session_dir_name(server.stdio_session)
    try:
        for sub in WORKSPACE_SUBDIRS:
            (base / sub).rmdir()
        base.rmdir()
    except OSError:  # not empty (or already gone): kept
        pass


def stop_runs(server: Any) -> None:
    """The server process stops: the index runs it started stop with it and are recorded as interrupted
    (else they meet the interpreter's shut-down thread pools and are recorded as failed)."""
    from tools.index_services import stop_index_jobs
    from tools.live_index import stop_live_index

    runtime = getattr(server, "runtime", None)
    if runtime is not None:
        stop_index_jobs(runtime)
        stop_live_index(runtime)
