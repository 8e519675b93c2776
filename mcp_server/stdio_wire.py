"""The stdio wire around the SDK's own transport (`mcp.server.stdio.stdio_server`, given our two streams).

The SDK reads lines, parses them and runs every request; this module only watches the lines go by, for two
gaps of the SDK's transport (both reported upstream, see ARCHITECTURE.md):

- at the end of input the SDK cancels what still runs, so `echo '{...}' | generalagent-mcp` and scripted
  clients that close stdin after their last request get "Connection closed"; here the end of input reaches
  the SDK once every request read has its answer written (at most EOF_WAIT_MAX_S);
- a request whose JSON holds a lone surrogate (`"\\ud800"`) is refused by the SDK's parser and answered with
  nothing, so its client waits forever; here it gets an invalid-params error naming the fix.

While serving, fd 0 reads the null device and fd 1 writes to stderr (as the SDK does for the streams it
opens itself), so stray reads and prints of handlers and child processes miss the protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from io import TextIOWrapper
from typing import Any, BinaryIO, cast

import anyio
from mcp.server.stdio import stdio_server

from mcp_server.dispatch import NOT_UNICODE, lone_surrogate_in

EOF_WAIT_MAX_S = 5.0
"""How long the end of input waits for the answers to the requests already read."""
ANSWER = re.compile(r'\{"jsonrpc":"2\.0","id":(-?\d+|"(?:[^"\\]|\\.)*"),"(?:result|error)"')
"""How the SDK writes a response (pydantic's field order: jsonrpc, id, result or error)."""
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
INVALID_PARAMS = -32602


def request_key(request_id: object) -> str:
    """One spelling of a JSON-RPC id: "7" and 7 are one id, as the SDK treats them."""
    return str(request_id)


class InFlight:
    """The ids of requests read and not yet answered, from the lines themselves."""

    def __init__(self) -> None:
        self.ids: set[str] = set()
        self.changed = asyncio.Event()

    def read(self, line: str) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            return
        if not isinstance(message, dict) or not isinstance(message.get("method"), str):
            return
        if isinstance(message.get("id"), (int, str)) and not isinstance(message.get("id"), bool):
            self.ids.add(request_key(message["id"]))
        elif message["method"] == "notifications/cancelled" and isinstance(message.get("params"), dict):
            self.done(request_key(message["params"].get("requestId")))  # a cancelled request gets no answer

    def written(self, text: str) -> None:
        found = ANSWER.match(text)
        if found is not None:
            self.done(request_key(json.loads(found.group(1))))

    def done(self, key: str) -> None:
        self.ids.discard(key)
        self.changed.set()

    async def answered(self) -> None:
        """Until every request read has its answer written (at most EOF_WAIT_MAX_S)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(EOF_WAIT_MAX_S):
                while self.ids:
                    self.changed.clear()
                    await self.changed.wait()


class Output:
    """stdout as the SDK's transport writes it (`await write(text)`, then `await flush()`), one line at a
    time: the SDK's writer and our own refusals share it."""

    def __init__(self, file: Any, in_flight: InFlight) -> None:
        self._file, self._in_flight = file, in_flight
        self._lock = asyncio.Lock()

    async def write(self, text: str) -> None:
        async with self._lock:
            await self._file.write(text)
        self._in_flight.written(text)

    async def flush(self) -> None:
        await self._file.flush()

    async def write_line(self, text: str) -> None:
        await self.write(text)
        await self.flush()


class Lines:
    """stdin as the SDK's transport reads it (`async for line in stdin`); see the module doc."""

    def __init__(self, readline: Callable[[], Awaitable[str]], in_flight: InFlight, output: Output) -> None:
        self._readline, self._in_flight, self._output = readline, in_flight, output

    def __aiter__(self) -> Lines:
        return self

    async def __anext__(self) -> str:
        while True:
            line = await self._readline()
            if not line:
                await self._in_flight.answered()
                raise StopAsyncIteration
            refusal = not_unicode(line)
            if refusal is not None:
                await self._output.write_line(refusal)  # the SDK would drop the line unanswered
                continue
            self._in_flight.read(line)
            return line


def not_unicode(line: str) -> str | None:
    """The error answer to a request whose JSON holds a lone surrogate, else None."""
    if not _SURROGATE_ESCAPE.search(line):
        return None
    try:
        message = json.loads(line)
    except ValueError:
        return None
    if not isinstance(message, dict) or not isinstance(message.get("id"), (int, str)):
        return None  # a notification or an answer: nobody waits for a reply
    params = message.get("params")
    arguments = params.get("arguments") if isinstance(params, dict) else None
    where = lone_surrogate_in(arguments if isinstance(arguments, dict) else params)
    if where is None:
        return None
    error = {"code": INVALID_PARAMS, "message": NOT_UNICODE.format(where=where)}
    return json.dumps({"jsonrpc": "2.0", "id": message["id"], "error": error}, separators=(",", ":")) + "\n"


def line_reader(stream: TextIOWrapper) -> Callable[[], Awaitable[str]]:
    """`await readline()` over `stream`, read by a daemon thread: a blocked read never holds up the
    server's exit (anyio's worker threads are joined at exit, so a client that stops reading our answers
    but keeps stdin open would leave the server waiting on its read forever)."""
    loop = asyncio.get_running_loop()
    lines: asyncio.Queue[str] = asyncio.Queue()
    wanted = threading.Semaphore(0)

    def pump() -> None:
        line = "x"
        while line:
            wanted.acquire()
            try:
                line = stream.readline()
            except (OSError, ValueError):
                line = ""
            try:
                loop.call_soon_threadsafe(lines.put_nowait, line)
            except RuntimeError:  # the server has stopped: nobody reads on
                return

    threading.Thread(target=pump, name="stdin reader", daemon=True).start()

    async def readline() -> str:
        wanted.release()
        return await lines.get()

    return readline


def _claim(fd: int, mode: str, diversion: Callable[[], int]) -> tuple[BinaryIO, Callable[[], None]]:
    """A private duplicate of `fd` for the wire; `fd` itself points at `diversion` until restored."""
    private = os.dup(fd)
    divert = diversion()
    os.dup2(divert, fd)
    os.close(divert)

    def restore() -> None:
        with contextlib.suppress(OSError):
            os.dup2(private, fd)

    return cast(BinaryIO, os.fdopen(private, mode, closefd=False)), restore


@asynccontextmanager
async def stdio_streams() -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's `stdio_server()` streams over this process's stdin and stdout (see the module doc)."""
    restores: list[Callable[[], None]] = []
    try:
        stdin, restore = _claim(0, "rb", lambda: os.open(os.devnull, os.O_RDONLY))
        restores.append(restore)
        stdout, restore = _claim(1, "wb", lambda: os.dup(2))
        restores.append(restore)
        sys.stdout.flush()
        text_out = anyio.wrap_file(TextIOWrapper(stdout, encoding="utf-8"))
        in_flight = InFlight()
        output = Output(text_out, in_flight)
        lines = Lines(line_reader(TextIOWrapper(stdin, encoding="utf-8", errors="replace")), in_flight, output)
        async with stdio_server(stdin=cast(Any, lines), stdout=cast(Any, output)) as streams:
            yield streams
    finally:
        for restore in reversed(restores):
            restore()
