"""Other MCP servers as tool sources for sub-agents, through the SDK's own client (`mcp.Client` over
`mcp.client.stdio` or `mcp.client.streamable_http`).

Each server gets one connection, started on first use: a thread of its own runs an event loop that
holds the client open (its transport's tasks stay in one task, as anyio wants), and calls from the
server's loop are handed to it. A connection that is unused for `mcp_server_idle_seconds`, that times
out or whose server dies is stopped (the process too); the next use starts it again. At exit every
connection is stopped. Failures are GeneralAgentErrors whose message says what happened and what to
change; a server never makes a caller wait longer than its start or call timeout.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import json
import logging
import re
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import IO, Any, TextIO, cast

import anyio
import anyio.to_thread
from pydantic import BaseModel, Field

from foundation.errors import GeneralAgentError
from foundation.settings import Settings
from foundation.toolspec import ToolSpec
from tools.mcp_servers import SEPARATOR, ServerConfig, get_server, load_servers, servers_file

log = logging.getLogger("generalagent.external")

MAX_TOOLS = 64  # per server: more would crowd the model's context
MAX_SCHEMA_CHARS = 16_000  # a larger input schema is replaced by a plain object schema
MAX_DESCRIPTION_CHARS = 1024
MAX_RESULT_CHARS = 60_000  # before the dispatcher's token bound
STDERR_TAIL_CHARS = 600
FUNCTION_NAME = re.compile(r"[^A-Za-z0-9_-]")
STOP_GRACE_SECONDS = 10.0


class ExternalToolError(GeneralAgentError):
    """Another MCP server did not start, did not answer in time, stopped, or its tool failed."""


class ExternalToolResult(BaseModel):
    server: str = Field(description="The MCP server that answered.")
    tool: str = Field(description="Its tool (as that server names it).")
    content: str = Field(description="The tool's text output (other content is described in brackets).")
    structured: dict[str, Any] | None = Field(default=None, description="Its structured output, when it gave one.")


class _Connection:
    """One server: a thread with its own event loop holding the SDK client open."""

    def __init__(self, config: ServerConfig, settings: Settings) -> None:
        self.config = config
        self.settings = settings
        self.tools: list[Any] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._ready: concurrent.futures.Future[list[Any]] | None = None
        self._client: Any = None
        self._busy = 0
        self._last_used = time.monotonic()
        self._stderr: IO[str] | None = None
        self._starting = threading.Lock()

    async def ready(self) -> list[Any]:
        """The server's tools, starting it when it is not running (bounded by its start timeout)."""
        future = await anyio.to_thread.run_sync(self.start)
        return await _wait(future, self.config.start_timeout_seconds + STOP_GRACE_SECONDS)  # type: ignore[no-any-return]

    def start(self) -> concurrent.futures.Future[list[Any]]:
        """The future of the tool list: the running connection's, or a new connection's (may wait for a
        stopping one to end: call it from a worker thread)."""
        with self._starting:  # two sub-agents at once start one connection
            thread = self._thread
            if thread is not None and thread.is_alive() and self._stop is not None and self._stop.is_set():
                thread.join(STOP_GRACE_SECONDS)  # stopping: let it end before a new one starts
            if self._ready is not None and self._thread is not None and self._thread.is_alive():
                return self._ready
            ready: concurrent.futures.Future[list[Any]] = concurrent.futures.Future()
            self._ready, self._loop, self._stop = ready, None, None
            self._thread = threading.Thread(target=self._run, args=(ready,), daemon=True,
                                            name=f"mcp-server-{self.config.name}")
            self._thread.start()
            return ready

    def _run(self, ready: concurrent.futures.Future[list[Any]]) -> None:
        with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as stderr:
            self._stderr = stderr  # a stdio server's error output: its tail goes into a start error
            try:
                asyncio.run(self._main(ready))
            except BaseException as exc:  # noqa: BLE001 - reported through the future, logged
                log.info("MCP server %s: connection ended: %r", self.config.name, exc)
                if not ready.done():
                    ready.set_exception(self._start_error(exc))
            finally:
                if not ready.done():
                    ready.set_exception(ExternalToolError(
                        f"MCP server {self.config.name!r} stopped while starting.{self._stderr_tail()}"))
                self._client = None

    async def _main(self, ready: concurrent.futures.Future[list[Any]]) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        timed_out = False
        async with anyio.create_task_group() as tg:
            async def watchdog() -> None:
                nonlocal timed_out
                await anyio.sleep(self.config.start_timeout_seconds)
                if not ready.done():
                    timed_out = True
                    tg.cancel_scope.cancel()

            tg.start_soon(watchdog)
            async with self._connect() as client:
                self._client = client
                self.tools = await _all_tools(client)
                ready.set_result(self.tools)
                await self._serve()
                self._client = None
            tg.cancel_scope.cancel()
        if timed_out:
            raise TimeoutError

    @contextlib.asynccontextmanager
    async def _connect(self) -> AsyncIterator[Any]:
        """The SDK's client, connected (stdio: the program started; HTTP: our own httpx2 client, closed after)."""
        from mcp import Client

        if self.config.command is not None:
            from mcp.client.stdio import StdioServerParameters, stdio_client

            params = StdioServerParameters(command=self.config.command, args=self.config.args,
                                           env=self.config.env or None,
                                           cwd=self.config.cwd or str(self.settings.data_dir))
            async with Client(stdio_client(params, errlog=cast(TextIO, self._stderr or sys.stderr)),
                              mode="auto") as client:
                yield client
            return
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        assert self.config.url is not None
        async with httpx2.AsyncClient(headers=self.config.headers, timeout=httpx2.Timeout(30.0, read=300.0)) as http, \
                Client(streamable_http_client(self.config.url, http_client=http), mode="auto") as client:
            yield client

    async def _serve(self) -> None:
        """Until stopped, or idle for mcp_server_idle_seconds with no call running."""
        assert self._stop is not None
        idle = self.settings.mcp_server_idle_seconds
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), timeout=min(idle, 5.0))
            if self._busy == 0 and time.monotonic() - self._last_used >= idle:
                log.info("MCP server %s: idle for %g s, stopping it", self.config.name, idle)
                return

    async def call(self, tool: str, args: dict[str, Any]) -> Any:
        """Call `tool` from the caller's event loop; the work runs on this connection's loop."""
        await self.ready()
        loop = self._loop
        if loop is None or loop.is_closed():
            raise ExternalToolError(f"MCP server {self.config.name!r} stopped before {tool} ran; it is started again "
                                    "on the next call.")
        future = asyncio.run_coroutine_threadsafe(self._call(tool, args), loop)
        return await _wait(future, self.config.call_timeout_seconds + STOP_GRACE_SECONDS)

    async def _call(self, tool: str, args: dict[str, Any]) -> Any:
        from mcp.shared.exceptions import MCPError

        if self._client is None:
            raise ExternalToolError(f"MCP server {self.config.name!r} stopped before {tool} ran; it is started again "
                                    "on the next call.")
        self._busy += 1
        self._last_used = time.monotonic()
        try:
            with anyio.fail_after(self.config.call_timeout_seconds):
                return await self._client.call_tool(tool, args)
        except TimeoutError:
            self.stop()  # a hung server is restarted on the next call rather than trusted again
            raise ExternalToolError(
                f"{self.config.name}{SEPARATOR}{tool} did not answer within {self.config.call_timeout_seconds:g} s "
                f"(call_timeout_seconds of [servers.{self.config.name}]); the call was abandoned and the server "
                "restarts on the next call. Try other arguments or another way.") from None
        except MCPError as exc:
            if exc.code == _connection_closed():
                self.stop()
                raise ExternalToolError(
                    f"MCP server {self.config.name!r} stopped while running {tool} ({exc.error.message}); it is "
                    f"started again on the next call.{self._stderr_tail()}") from None
            raise ExternalToolError(f"{self.config.name}{SEPARATOR}{tool} failed: {exc.error.message}") from None
        finally:
            self._busy -= 1
            self._last_used = time.monotonic()

    def stop(self) -> None:
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(stop.set)

    def join(self, timeout: float) -> None:
        thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def _start_error(self, exc: BaseException) -> ExternalToolError:
        name, where = self.config.name, f"[servers.{self.config.name}] in {servers_file(self.settings)}"
        if isinstance(exc, TimeoutError):
            return ExternalToolError(
                f"MCP server {name!r} did not start within {self.config.start_timeout_seconds:g} s "
                f"(start_timeout_seconds of {where}).{self._stderr_tail()}")
        reason = _reason(exc)
        if self.config.url is not None and "Connect" in type(_innermost(exc)).__name__:
            reason = f"cannot connect to {self.config.url} ({reason})"
        return ExternalToolError(f"MCP server {name!r} did not start: {reason}. Check {where}."
                                 f"{self._stderr_tail()}")

    def _stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        with contextlib.suppress(OSError, ValueError):
            self._stderr.flush()
            self._stderr.seek(0)
            text = self._stderr.read()[-STDERR_TAIL_CHARS:].strip()
            return f" Its last error output: {text}" if text else ""
        return ""


def _innermost(exc: BaseException) -> BaseException:
    """The first real exception inside ExceptionGroups (task groups wrap what failed in them)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _reason(exc: BaseException) -> str:
    """The innermost useful message of an exception."""
    exc = _innermost(exc)
    if isinstance(exc, FileNotFoundError):
        return f"program not found ({exc.filename or exc})"
    if getattr(exc, "code", None) == _connection_closed():
        return "it closed the connection before answering (a stdio server: its program ended)"
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]


def _connection_closed() -> int:
    from mcp.types import CONNECTION_CLOSED

    return int(CONNECTION_CLOSED)


async def _all_tools(client: Any) -> list[Any]:
    tools: list[Any] = []
    cursor: str | None = None
    for _ in range(20):  # pages
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor or len(tools) >= MAX_TOOLS:
            break
    return tools[:MAX_TOOLS]


async def _wait(future: concurrent.futures.Future[Any], timeout: float) -> Any:
    """A future of another thread's loop, awaited from ours without blocking it (cancellable)."""
    try:
        return await anyio.to_thread.run_sync(future.result, timeout, abandon_on_cancel=True)
    except concurrent.futures.TimeoutError:
        future.cancel()
        raise ExternalToolError("Another MCP server did not answer in time; try again later.") from None
    except concurrent.futures.CancelledError:  # its connection ended under the call
        raise ExternalToolError("Another MCP server stopped during the call; it is started again on the next "
                                "call.") from None
    except anyio.get_cancelled_exc_class():
        future.cancel()
        raise


class ExternalServers:
    """The configured servers (read from the file on each use) and their live connections."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._connections: dict[str, _Connection] = {}
        self._lock = threading.Lock()
        atexit.register(self.close)

    def names(self) -> list[str]:
        return sorted(name for name, config in load_servers(self.settings).items() if config.enabled)

    async def tools(self, server: str) -> list[ToolSpec]:
        connection = self._connection(server)
        return specs_for(connection, await connection.ready())

    def _connection(self, server: str) -> _Connection:
        config = get_server(self.settings, server)
        with self._lock:
            found = self._connections.get(server)
            if found is None or found.config != config:  # new, or its table was edited
                if found is not None:
                    found.stop()
                found = self._connections[server] = _Connection(config, self.settings)
            return found

    def close(self) -> None:
        with self._lock:
            connections = list(self._connections.values())
            self._connections.clear()
        for connection in connections:
            connection.stop()
        for connection in connections:
            connection.join(STOP_GRACE_SECONDS)


def specs_for(connection: _Connection, tools: list[Any]) -> list[ToolSpec]:
    """ToolSpecs named `server__tool` (made safe for function-calling names, at most 64 characters)."""
    specs: list[ToolSpec] = []
    seen: set[str] = set()
    for tool in tools:
        name = FUNCTION_NAME.sub("_", f"{connection.config.name}{SEPARATOR}{tool.name}")[:64]
        if name in seen:
            continue
        seen.add(name)
        fn = _caller(connection, tool.name)
        fn.__doc__ = _description(tool)
        # never read-only, whatever its hints say: only a rule naming it lets it run without asking
        specs.append(ToolSpec(fn, title=(tool.title or tool.name)[:100], read_only=False, open_world=True,
                              tier="full", name_override=name, input_schema=_schema(tool.input_schema)))
    return specs


def _description(tool: Any) -> str:
    text = (tool.description or tool.title or tool.name).strip()
    return text[:MAX_DESCRIPTION_CHARS]


def _schema(schema: Any) -> dict[str, Any]:
    if not isinstance(schema, dict) or schema.get("type") != "object" or len(json.dumps(schema)) > MAX_SCHEMA_CHARS:
        return {"type": "object"}
    return schema


def _caller(connection: _Connection, tool: str) -> Callable[..., Awaitable[ExternalToolResult]]:
    async def call_external_tool(**arguments: Any) -> ExternalToolResult:
        result = await connection.call(tool, arguments)
        text = _text(result.content)
        if result.is_error:
            raise ExternalToolError(f"{connection.config.name}{SEPARATOR}{tool} failed: {text or 'no details'}")
        structured = result.structured_content if isinstance(result.structured_content, dict) else None
        if structured is not None and (len(json.dumps(structured, default=str)) > MAX_RESULT_CHARS
                                       or structured == {"result": text}):  # (the text again, as SDK servers send it)
            structured = None
        return ExternalToolResult(server=connection.config.name, tool=tool, content=text, structured=structured)

    return call_external_tool


def _text(content: list[Any]) -> str:
    parts: list[str] = []
    for block in content:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            parts.append(f"[{kind} {block.mime_type}, {len(block.data) * 3 // 4:,} bytes, not shown]")
        elif kind == "resource":
            inner = block.resource
            parts.append(getattr(inner, "text", None) or f"[resource {inner.uri}, binary, not shown]")
        elif kind == "resource_link":
            parts.append(f"[resource link {block.uri}]")
    text = "\n".join(parts)
    if len(text) > MAX_RESULT_CHARS:
        text = text[:MAX_RESULT_CHARS] + f"\n…[{len(text) - MAX_RESULT_CHARS:,} more characters cut]"
    return text


@dataclass(frozen=True)
class Probe:
    """Whether one configured server starts, and its tool names (for `doctor`)."""

    config: ServerConfig
    error: str | None
    tools: list[str]


def probe_servers(settings: Settings) -> list[Probe]:
    """Start every enabled server (at the same time), list its tools, stop it."""
    servers = ExternalServers(settings)
    configs = [c for c in load_servers(settings).values() if c.enabled]
    found: dict[str, Probe] = {}

    async def probe(config: ServerConfig) -> None:
        try:
            specs = await servers.tools(config.name)
        except GeneralAgentError as exc:
            found[config.name] = Probe(config, str(exc), [])
        else:
            found[config.name] = Probe(config, None, [spec.name for spec in specs])

    async def probe_all() -> None:
        async with anyio.create_task_group() as tg:
            for config in configs:
                tg.start_soon(probe, config)

    try:
        anyio.run(probe_all)
    finally:
        servers.close()
    return [found[c.name] for c in configs]
