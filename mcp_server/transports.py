"""Transports: stdio (stdout is the protocol, logs go to stderr) and Streamable HTTP."""

from __future__ import annotations

import ipaddress
import logging
import socket
import sys
from functools import partial
from typing import Any

from foundation.errors import GeneralAgentError, SettingsError
from foundation.settings import Settings

log = logging.getLogger("generalagent.transport")

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def configure_logging(level: str) -> None:
    """All logging goes to stderr: on stdio, stdout belongs to the protocol."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(level)


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_HOSTS:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


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
            from starlette.responses import JSONResponse

            response = JSONResponse(
                {"error": "unauthorized", "message": "Send Authorization: Bearer <GENERALAGENT_HTTP_TOKEN>."},
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _authorized(self, scope: Any) -> bool:
        import hmac

        for key, value in scope.get("headers", []):
            if key == b"authorization":
                given = value.decode("latin-1")
                return hmac.compare_digest(given.encode(), f"Bearer {self.token}".encode())
        return False


def http_app(server: Any, settings: Settings, host: str) -> Any:
    app = server.streamable_http_app(
        streamable_http_path="/mcp",
        transport_security=transport_security(settings, host),
        max_request_body_size=settings.http_max_body_bytes,
        host=host,
    )
    return BearerTokenMiddleware(app, settings.http_token) if settings.http_token else app


def bind_socket(host: str, port: int) -> socket.socket:
    """Listen on host:port before starting uvicorn (same address rules as uvicorn), so that a busy
    port or an unknown host is a clear error instead of a log line."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
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


def run_http(server: Any, settings: Settings, host: str, port: int) -> None:
    import anyio
    import uvicorn

    if not is_loopback(host):
        print(f"WARNING: serving MCP on non-loopback host {host}; anyone who can reach it can call tools"
              + ("" if settings.http_token else " (no GENERALAGENT_HTTP_TOKEN set!)"), file=sys.stderr)
    sock = bind_socket(host, port)
    app = http_app(server, settings, host)
    config = uvicorn.Config(app, host=host, port=port, log_level=settings.log_level.lower(), log_config=None)
    bound_port = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    print(f"generalagent-mcp: Streamable HTTP on http://{shown}:{bound_port}/mcp", file=sys.stderr, flush=True)
    anyio.run(partial(uvicorn.Server(config).serve, sockets=[sock]))


def run_stdio(server: Any) -> None:
    server.run("stdio")
