"""A sync tool's worker thread talks to the event loop (progress, log messages, approval prompts) through
`run_on_loop`: when the client cancels the call meanwhile, the loop's cancellation (a BaseException) reaches
the thread as Cancelled, so progress stays best effort and an index run is recorded as cancelled, not as
'failed: stopped unexpectedly' (a CI run met that race)."""

from __future__ import annotations

import asyncio
import threading
from functools import partial

import anyio
import anyio.to_thread
import pytest

from foundation.errors import Cancelled
from mcp_server.loop_calls import run_on_loop
from tools.runtime import CallContext

pytestmark = pytest.mark.anyio


async def test_the_loops_cancellation_reaches_the_thread_as_cancelled() -> None:
    async def cancelled_on_the_loop() -> None:
        raise asyncio.CancelledError("Cancelled via cancel scope")

    def in_thread() -> str:
        try:
            run_on_loop(cancelled_on_the_loop)
        except Cancelled as exc:
            return str(exc)
        return "returned"

    with anyio.fail_after(30):
        said = await anyio.to_thread.run_sync(in_thread)
    assert "cancelled" in said


async def test_progress_after_the_client_cancelled_never_raises_in_the_thread() -> None:
    escaped: list[BaseException] = []
    finished = threading.Event()

    async def sink(done: float, total: float | None, message: str | None) -> None:
        await anyio.sleep(0)

    def tool(call: CallContext, started: threading.Event) -> None:
        try:
            for n in range(400):
                call.report(n, 400, "working")
                if n == 5:
                    started.set()
        except BaseException as exc:  # what a tool body would have met
            escaped.append(exc)
        finally:
            finished.set()

    with anyio.fail_after(60):
        for _ in range(10):
            call = CallContext(tool="t", sink=sink, portal=run_on_loop)
            started = threading.Event()
            with anyio.CancelScope() as scope:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(partial(anyio.to_thread.run_sync, tool, call, started, abandon_on_cancel=True))
                    while not started.is_set():
                        await anyio.sleep(0.001)
                    scope.cancel()
            while not finished.is_set():
                await anyio.sleep(0.005)
            finished.clear()
    assert escaped == []
