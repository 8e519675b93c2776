"""MCP logging: `logging/setLevel` on 2025-era sessions, `notifications/message` during tool calls.

While a client's call runs, these go to that client as `notifications/message`: what a tool says
through `CallContext.log` (its `log_sink` is `send_to_client`), approval events (the dispatch
point), and records of the loggers in `FORWARDED` (e.g. the indexer's per-file failures). Sent:

- 2025-era sessions: at or above the level the client chose with `logging/setLevel` (per
  session; `info` until it chooses);
- 2026-07-28: only when the request carries the `io.modelcontextprotocol/logLevel` opt-in, at or
  above that level (the SDK's session enforces it; there is no `logging/setLevel` in that era).

Sending is best effort: a failure to deliver never fails the call.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import warnings
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from mcp.server import MCPServer
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types import EmptyResult, SetLevelRequestParams

from mcp_server.eras import is_modern
from mcp_server.loop_calls import run_on_loop
from mcp_server.sdk_adapter import lowlevel
from mcp_server.tool_surface import session_state

LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
DEFAULT_LEVEL = "info"
LEVEL_KEY = "generalagent.log_level"
FORWARDED = ("generalagent.index",)
"""Loggers whose records reach the client (an allow-list: per-call timing logs stay on stderr)."""

_log = logging.getLogger("generalagent.server")
_current: ContextVar[ClientLog | None] = ContextVar("generalagent_client_log", default=None)
_pending: set[asyncio.Task[Any]] = set()


def mcp_level(levelno: int) -> str:
    if levelno >= logging.CRITICAL:
        return "critical"
    if levelno >= logging.ERROR:
        return "error"
    if levelno >= logging.WARNING:
        return "warning"
    if levelno > logging.INFO:
        return "notice"
    return "info" if levelno >= logging.INFO else "debug"


@dataclass
class ClientLog:
    """Where one call's log records go: its request's session, at or above `threshold`."""

    ctx: Any  # the SDK's tool Context
    threshold: str | None  # None: the session enforces the request's opt-in (2026-07-28)

    def wants(self, level: str) -> bool:
        return self.threshold is None or LEVELS.index(level) >= LEVELS.index(self.threshold)

    async def send(self, level: str, data: Any, logger: str) -> None:
        with contextlib.suppress(Exception), warnings.catch_warnings():
            warnings.simplefilter("ignore", MCPDeprecationWarning)  # logging is deprecated in 2026, served in 2025
            session = self.ctx.request_context.session
            await session.send_log_message(level=level, data=data, logger=logger,  # type: ignore[arg-type]
                                           related_request_id=self.ctx.request_id)


def send_to_client(level: str, message: str, logger: str = "generalagent") -> None:
    """Send `message` to the client whose call is running (when it listens at `level`); from the
    event loop or from a sync tool's worker thread. A no-op outside a client's call."""
    target = _current.get()
    if target is None or not target.wants(level):
        return
    data = {"message": message}
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # a worker thread of a sync tool
        with contextlib.suppress(Exception):
            run_on_loop(target.send, level, data, logger)
        return
    task = loop.create_task(target.send(level, data, logger))
    _pending.add(task)
    task.add_done_callback(_pending.discard)


async def asend_to_client(level: str, message: str, logger: str = "generalagent") -> None:
    """`send_to_client` from async code: delivered before it returns."""
    target = _current.get()
    if target is not None and target.wants(level):
        await target.send(level, {"message": message}, logger)


class ClientLogHandler(logging.Handler):
    """Forwards records of FORWARDED loggers to the client whose call is running (if any)."""

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.startswith(FORWARDED):
            send_to_client(mcp_level(record.levelno), record.getMessage(), record.name)


@contextlib.contextmanager
def forwarding(ctx: Any, fallback: dict[str, dict[str, Any]]) -> Iterator[None]:
    """Forward log records to the client of `ctx` while the call runs."""
    try:
        request_context = ctx.request_context
    except Exception:  # no request (in-process call)
        yield
        return
    threshold = None if is_modern(request_context) else session_state(request_context, fallback).get(
        LEVEL_KEY, DEFAULT_LEVEL)
    with forwarding_to(ClientLog(ctx, threshold)):
        yield


@contextlib.contextmanager
def forwarding_to(target: ClientLog) -> Iterator[None]:
    """Forward log records to `target` while the call runs."""
    token = _current.set(target)
    try:
        yield
    finally:
        _current.reset(token)


def install(server: MCPServer[Any], fallback: dict[str, dict[str, Any]]) -> None:
    """Declare the logging capability (2025 era) and attach the forwarding handler once."""

    async def set_level(ctx: Any, params: SetLevelRequestParams) -> EmptyResult:
        session_state(ctx, fallback)[LEVEL_KEY] = str(params.level)
        _log.info("client log level set to %s", params.level)
        return EmptyResult()

    lowlevel(server).add_request_handler("logging/setLevel", SetLevelRequestParams, set_level)
    root = logging.getLogger("generalagent")
    if not any(isinstance(h, ClientLogHandler) for h in root.handlers):
        root.addHandler(ClientLogHandler())
