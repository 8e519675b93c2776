"""stdio served by the event loop itself when stdin and stdout are pipes or sockets (POSIX).

The SDK's stdio transport reads stdin and writes stdout through worker threads: a thread crossing
for every line read, and two for every message written (write, flush), so three per tool call on top
of the tool's own. Here the loop reads and writes the descriptors directly (asyncio pipe transports)
and the SDK's `stdio_server` does the rest unchanged: the same framing (one JSON-RPC message per
UTF-8 line) and the same protection of the wire (while serving, fd 0 reads the null device and fd 1
writes to stderr, so stray reads and prints of handlers and child processes miss the protocol).
Anywhere else (Windows, a terminal, a regular file) stdin and stdout are read and written in worker
threads, as the SDK does.

Either way the end of input waits for the answers to stop coming before the SDK cancels what still
runs (`_Output.settle`): a request piped in just before the end (`echo '{...}' | generalagent-mcp`)
is answered, where the SDK's own transport answered it only when its thread lost the race.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, cast

MAX_LINE_BYTES = 1 << 30
"""The longest message line read (the SDK's transport has no limit; a line is one whole message)."""
CLOSE_WAIT_S = 5.0
EOF_QUIET_S = 0.25
EOF_WAIT_MAX_S = 5.0


def loop_can_serve(fd: int) -> bool:
    """True for a pipe or socket on POSIX: what the loop can watch without changing a terminal's mode."""
    if sys.platform == "win32":
        return False
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class _Output:
    """stdout as the SDK's transport writes it: `await write(text)`, then `await flush()`."""

    def __init__(self, write: Callable[[str], Awaitable[None]], flush: Callable[[], Awaitable[None]]) -> None:
        self._write, self.flush = write, flush
        self.last_write = 0.0

    async def write(self, text: str) -> None:
        await self._write(text)
        self.last_write = asyncio.get_running_loop().time()

    async def settle(self) -> None:
        """Wait until nothing was written for EOF_QUIET_S (at most EOF_WAIT_MAX_S)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + EOF_WAIT_MAX_S
        await asyncio.sleep(EOF_QUIET_S)
        while loop.time() - self.last_write < EOF_QUIET_S and loop.time() < deadline:
            await asyncio.sleep(EOF_QUIET_S / 2)


class _Lines:
    """stdin as the SDK's transport reads it: `async for line in stdin` (text lines with their newline);
    the end of input comes once the answers stopped (see the module doc)."""

    def __init__(self, readline: Callable[[], Awaitable[str]], output: _Output) -> None:
        self._readline, self._output = readline, output

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        line = await self._readline()
        if not line:
            await self._output.settle()
            raise StopAsyncIteration
        return line


@asynccontextmanager
async def stdio_streams() -> AsyncIterator[tuple[Any, Any]]:
    """The SDK's `stdio_server()` streams over this process's stdin and stdout (see the module doc)."""
    from mcp.server import stdio as sdk

    on_loop = all(loop_can_serve(fd) and sdk._is_backed_by_fd(stream, fd)
                  for fd, stream in ((0, sys.stdin), (1, sys.stdout)))
    stdin, restore_stdin = sdk._claim_fd(0, sys.stdin, "rb", sdk._open_stdin_diversion)
    stdout, restore_stdout = sdk._claim_fd(1, sys.stdout, "wb", sdk._open_stdout_diversion)
    close: Callable[[], Awaitable[None]] | None = None
    try:
        if on_loop:
            lines, output, close = await _on_loop(stdin, stdout)
        else:
            lines, output = _in_threads(stdin, stdout)
        async with sdk.stdio_server(stdin=cast(Any, lines), stdout=cast(Any, output)) as streams:
            yield streams
    finally:
        if close is not None:
            await close()
        for restore in (restore_stdout, restore_stdin):
            if restore is not None:
                restore()


async def _on_loop(stdin: Any, stdout: Any) -> tuple[_Lines, _Output, Callable[[], Awaitable[None]]]:
    loop = asyncio.get_running_loop()
    fds = (stdin.fileno(), stdout.fileno())  # read now: the read transport closes its file at end of input
    reader = asyncio.StreamReader(limit=MAX_LINE_BYTES, loop=loop)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader, loop=loop), stdin)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, stdout)
    writer = asyncio.StreamWriter(transport, protocol, None, loop)

    async def readline() -> str:
        return (await reader.readline()).decode("utf-8", errors="replace")

    async def write(text: str) -> None:
        writer.write(text.encode("utf-8"))

    async def close() -> None:
        with contextlib.suppress(Exception):  # write out what is buffered (a last answer), then close
            writer.close()
            await asyncio.wait_for(writer.wait_closed(), CLOSE_WAIT_S)
        for fd in fds:  # the pipes are shared with the client: leave them blocking, as they were
            with contextlib.suppress(OSError):
                os.set_blocking(fd, True)

    output = _Output(write, writer.drain)
    return _Lines(readline, output), output, close


def _in_threads(stdin: Any, stdout: Any) -> tuple[_Lines, _Output]:
    import anyio
    from mcp.server.stdio import _UnownedTextWrapper

    text_in = anyio.wrap_file(_UnownedTextWrapper(stdin, encoding="utf-8", errors="replace"))
    text_out = anyio.wrap_file(_UnownedTextWrapper(stdout, encoding="utf-8"))

    async def write(text: str) -> None:
        await text_out.write(text)

    output = _Output(write, text_out.flush)
    return _Lines(text_in.readline, output), output
