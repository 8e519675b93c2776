"""stdio served by the event loop itself when stdin and stdout are pipes (POSIX).

The SDK's stdio transport reads stdin and writes stdout through worker threads: a thread crossing
for every line read, and two for every message written (write, flush), so three per tool call on top
of the tool's own. Here the loop reads and writes the pipes directly (asyncio pipe transports) and the
SDK's `stdio_server` does the rest unchanged: the same framing (one JSON-RPC message per UTF-8 line)
and the same protection of the wire (while serving, fd 0 reads the null device and fd 1 writes to
stderr, so stray reads and prints of handlers and child processes miss the protocol). Anywhere else
(Windows, sockets, a terminal, a regular file) stdin and stdout are read and written in worker
threads, as the SDK does.

Either way, at the end of input the requests already read are answered before the SDK cancels what
still runs (at most EOF_WAIT_MAX_S): `echo '{...}' | generalagent-mcp` gets its answer, which the SDK's
own transport gave only when its reader thread lost a race.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import stat
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, cast

import pydantic_core
from mcp.shared.dispatcher import as_request_id

from mcp_server.dispatch import NOT_UNICODE, lone_surrogate_in
from mcp_server.stdio_fast import QuickCalls, request_key

READ_BUFFER_BYTES = 1 << 20
"""Input buffered ahead of the server (reading pauses at twice this); a longer line is read in parts."""
CLOSE_WAIT_S = 30.0
"""How long the answers already written may take to reach a slow client before the server exits."""
EOF_WAIT_MAX_S = 5.0
"""How long the end of input waits for the answers to the requests already read."""
ANSWER = re.compile(r'\{"jsonrpc":"2\.0","id":(-?\d+|"(?:[^"\\]|\\.)*"),"(?:result|error)"')
"""How the SDK writes a response (pydantic's field order: jsonrpc, id, result or error)."""


def loop_can_serve(fd: int) -> bool:
    """True for a pipe on POSIX. Not a socket (a socket as both stdin and stdout reads as closed to
    asyncio's write side), not a terminal (its non-blocking mode would outlive us)."""
    if sys.platform == "win32":
        return False
    try:
        return stat.S_ISFIFO(os.fstat(fd).st_mode)
    except OSError:
        return False


class _InFlight:
    """The ids of requests read and not yet answered, from the lines themselves."""

    def __init__(self) -> None:
        self.ids: set[str] = set()
        self.changed = asyncio.Event()

    def read(self, message: Any) -> None:
        if not isinstance(message, dict) or not isinstance(message.get("method"), str):
            return
        request_id = as_request_id(message.get("id"))
        if request_id is not None:  # else the SDK answers none
            self.ids.add(request_key(request_id))
        elif message["method"] == "notifications/cancelled" and isinstance(message.get("params"), dict):
            self._done(request_key(message["params"].get("requestId")))  # a cancelled request gets no answer

    def written(self, text: str) -> str | None:
        """The id (as a key) of the request `text` answers, if it is an answer."""
        found = ANSWER.match(text)
        if found is None:
            return None
        key = request_key(json.loads(found.group(1)))
        self._done(key)
        return key

    def _done(self, key: str) -> None:
        self.ids.discard(key)
        self.changed.set()

    async def answered(self) -> None:
        """Until every request read has its answer written (at most EOF_WAIT_MAX_S)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(EOF_WAIT_MAX_S):
                while self.ids:
                    self.changed.clear()
                    await self.changed.wait()


class _Output:
    """stdout as the SDK's transport writes it: `await write(text)`, then `await flush()`."""

    def __init__(self, write: Callable[[str], Awaitable[None]], flush: Callable[[], Awaitable[None]],
                 in_flight: _InFlight) -> None:
        self._write, self.flush, self._in_flight = write, flush, in_flight
        self.quick: QuickCalls | None = None

    async def write(self, text: str) -> None:
        await self._write(text)
        key = self._in_flight.written(text)
        if key is not None and self.quick is not None:
            self.quick.answered(key, text)

    async def write_line(self, text: str) -> None:
        """A whole message of ours (a quick call's answer or log line), written as the SDK writes one."""
        await self.write(text)
        await self.flush()


class _Lines:
    """stdin as the SDK's transport reads it: `async for line in stdin` (text lines with their newline);
    the end of input comes once the requests read are answered (see the module doc). Quick calls
    (mcp_server.stdio_fast) are answered without reaching the SDK."""

    def __init__(self, readline: Callable[[], Awaitable[str]], in_flight: _InFlight,
                 quick: QuickCalls | None = None, answer: Callable[[str], Awaitable[None]] | None = None) -> None:
        self._readline, self._in_flight, self._quick, self._answer = readline, in_flight, quick, answer

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        while True:
            line = await self._readline()
            if not line:
                await self._in_flight.answered()
                if self._quick is not None:
                    await self._quick.close()
                raise StopAsyncIteration
            message = _parsed(line)
            if message is None and self._answer is not None and (refusal := _not_unicode(line)) is not None:
                await self._answer(refusal)  # the SDK would drop the line unanswered
                continue
            taken = self._quick is not None and self._quick.read(message)  # before the message counts in flight
            self._in_flight.read(message)
            if not taken:
                return line
            await asyncio.sleep(0)  # a burst of quick calls read at once lets the loop's other tasks run


def _parsed(line: str) -> Any:
    """The message on a line, parsed as the SDK's transport parses it (pydantic-core's JSON: the same
    nesting limit, lone surrogates refused); None for a line it refuses (the SDK answers it, or not)."""
    try:
        return pydantic_core.from_json(line)
    except ValueError:
        return None


def _not_unicode(line: str) -> str | None:
    """The error answer to a request whose JSON holds a lone surrogate (`"\\ud800"`: pydantic-core refuses the
    line and the SDK answers nothing, so its client would wait forever), else None."""
    if not _SURROGATE_ESCAPE.search(line):
        return None
    try:
        message = json.loads(line)
    except ValueError:
        return None
    if not isinstance(message, dict) or as_request_id(message.get("id")) is None:
        return None  # a notification or an answer: nobody waits for a reply
    params = message.get("params")
    arguments = params.get("arguments") if isinstance(params, dict) else None
    where = lone_surrogate_in(arguments if isinstance(arguments, dict) else params)
    if where is None:
        return None
    error = {"code": INVALID_PARAMS, "message": NOT_UNICODE.format(where=where)}
    return json.dumps({"jsonrpc": "2.0", "id": message["id"], "error": error}, separators=(",", ":")) + "\n"


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
INVALID_PARAMS = -32602


@asynccontextmanager
async def stdio_streams(server: Any = None) -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's `stdio_server()` streams over this process's stdin and stdout (see the module doc);
    with `server` (ours, built by build_server), its quick calls are answered by the reader when the
    loop serves the pipes (mcp_server.stdio_fast; in worker threads two writers could interleave)."""
    from mcp.server import stdio as sdk

    on_loop = all(loop_can_serve(fd) and sdk._is_backed_by_fd(stream, fd)
                  for fd, stream in ((0, sys.stdin), (1, sys.stdout)))
    restores: list[Callable[[], None] | None] = []
    close: Callable[[], Awaitable[None]] | None = None
    try:
        stdin, restore = sdk._claim_fd(0, sys.stdin, "rb", sdk._open_stdin_diversion)
        restores.append(restore)
        stdout, restore = sdk._claim_fd(1, sys.stdout, "wb", sdk._open_stdout_diversion)
        restores.append(restore)
        in_flight = _InFlight()
        if on_loop and stdin.fileno() > 2 and stdout.fileno() > 2:  # private duplicates (the claim held)
            lines, output, close = await _on_loop(stdin, stdout, in_flight, server)
        else:
            lines, output = _in_threads(stdin, stdout, in_flight)
        async with sdk.stdio_server(stdin=cast(Any, lines), stdout=cast(Any, output)) as streams:
            yield streams
    finally:
        if close is not None:
            await close()
        for restore in reversed(restores):
            if restore is not None:
                restore()


async def _on_loop(stdin: Any, stdout: Any, in_flight: _InFlight,
                   server: Any) -> tuple[_Lines, _Output, Callable[[], Awaitable[None]]]:
    loop = asyncio.get_running_loop()
    fds = (stdin.fileno(), stdout.fileno())  # read now: the read transport closes its file at end of input
    blocking = [os.get_blocking(fd) for fd in fds]
    reader = asyncio.StreamReader(limit=READ_BUFFER_BYTES, loop=loop)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader, loop=loop), stdin)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, stdout)
    writer = asyncio.StreamWriter(transport, protocol, None, loop)

    async def readline() -> str:
        return (await _whole_line(reader)).decode("utf-8", errors="replace")

    async def write(text: str) -> None:
        writer.write(text.encode("utf-8"))

    async def close() -> None:
        with contextlib.suppress(TimeoutError):  # what is written reaches a slow reader before we exit
            async with asyncio.timeout(CLOSE_WAIT_S):
                while transport.get_write_buffer_size() and not transport.is_closing():
                    await asyncio.sleep(0.01)
        transport.close()
        for fd, was in zip(fds, blocking, strict=True):  # the pipes are shared with the client: as found
            with contextlib.suppress(OSError):
                os.set_blocking(fd, was)

    output = _Output(write, writer.drain, in_flight)
    if getattr(server, "dispatcher", None) is not None:  # ours (any other MCPServer: the SDK answers all)
        output.quick = QuickCalls(server, output.write_line, in_flight.ids)
    return _Lines(readline, in_flight, output.quick, output.write_line), output, close


async def _whole_line(reader: asyncio.StreamReader) -> bytes:
    """The next line with its newline, of any length (b"" at the end of input; a last line without one)."""
    parts: list[bytes] = []
    while True:
        try:
            parts.append(await reader.readuntil(b"\n"))
            return b"".join(parts)
        except asyncio.IncompleteReadError as end:
            parts.append(end.partial)
            return b"".join(parts)
        except asyncio.LimitOverrunError as longer:  # more than the buffer without a newline: take it, go on
            parts.append(await reader.readexactly(longer.consumed))


def _in_threads(stdin: Any, stdout: Any, in_flight: _InFlight) -> tuple[_Lines, _Output]:
    import anyio
    from mcp.server.stdio import _UnownedTextWrapper

    text_in = anyio.wrap_file(_UnownedTextWrapper(stdin, encoding="utf-8", errors="replace"))
    text_out = anyio.wrap_file(_UnownedTextWrapper(stdout, encoding="utf-8"))

    lock = asyncio.Lock()  # two writers (the SDK's, an answer of the reader's): one line at a time

    async def write(text: str) -> None:
        async with lock:
            await text_out.write(text)

    output = _Output(write, text_out.flush, in_flight)
    return _Lines(text_in.readline, in_flight, answer=output.write_line), output
