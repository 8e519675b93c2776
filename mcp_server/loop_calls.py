"""Calling the event loop from a sync tool's worker thread.

`anyio.from_thread.run` raises the loop's own cancellation (`asyncio.CancelledError`, a BaseException)
when the call's scope was cancelled meanwhile (a client's `notifications/cancelled` racing a progress
notification). Code in worker threads handles `Exception`, so here that becomes `Cancelled`: a progress
or log message stays best effort, and an index run a client cancelled is recorded as cancelled."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import anyio.from_thread

from foundation.errors import Cancelled

T = TypeVar("T")


def run_on_loop(fn: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> T:
    """`fn(*args)` on the event loop, from a worker thread; a cancellation meanwhile raises Cancelled."""
    try:
        return anyio.from_thread.run(fn, *args)
    except (asyncio.CancelledError, concurrent.futures.CancelledError) as exc:
        raise Cancelled(f"The call was cancelled while the server was talking to the client ({exc}).") from None
