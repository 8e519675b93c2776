"""Quick tool calls run on the event loop itself (no worker thread); such a call must never wait.

The dispatcher marks the call (`on_the_loop`); code that is about to wait for something (a lock other
threads hold, a write, a pool slot) calls `about_to_wait()` first, which raises `MustWait` inside a
marked call. The dispatcher then runs the call again in a worker thread, where waiting is fine. Only
tools that change nothing before such a point are run on the loop (`ToolSpec.quick`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_ON_THE_LOOP: ContextVar[bool] = ContextVar("generalagent_on_the_loop", default=False)


class MustWait(Exception):  # noqa: N818 (control flow between a quick call and the dispatcher, not an error)
    """This call has to wait for something: run it in a worker thread instead."""


def about_to_wait() -> None:
    """Call before anything that may wait; raises MustWait in a call running on the event loop."""
    if _ON_THE_LOOP.get():
        raise MustWait


@contextmanager
def on_the_loop() -> Iterator[None]:
    """Mark the code inside as running on the event loop (it must not wait)."""
    token = _ON_THE_LOOP.set(True)
    try:
        yield
    finally:
        _ON_THE_LOOP.reset(token)


def running_on_the_loop() -> bool:
    """True inside code marked `on_the_loop` (a quick call, on the event loop's thread)."""
    return _ON_THE_LOOP.get()
