"""Issue 11: a sync tool's gate check and the tool itself cross to a worker thread once (together);
a refusal by the gate still stops the tool, is announced and raised as before; an async gate (no
`check_blocking`) is still awaited before the tool."""

from __future__ import annotations

import threading
from typing import Annotated, Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from foundation.calls import CallOrigin
from foundation.errors import ApprovalRequired, PolicyDenied
from foundation.toolspec import ToolSpec
from mcp_server.dispatch import BaseGate, Dispatcher
from tests.json_strategies import json_values
from tools.runtime import Runtime

pytestmark = pytest.mark.anyio
ORIGIN = CallOrigin(kind="client", client_id="test")


class Seen(BaseModel):
    thread: int


ran: list[int] = []


def where(note: Annotated[str, Field(description="anything")] = "") -> Seen:
    """Report the thread the tool runs in."""
    ran.append(threading.get_ident())
    return Seen(thread=threading.get_ident())


SPEC = ToolSpec(where, title="Where", read_only=True)


class BlockingGate(BaseGate):
    def __init__(self, refuse: Exception | None = None) -> None:
        self.refuse = refuse
        self.threads: list[int] = []

    async def check(self, spec: ToolSpec, args: dict[str, Any], origin: CallOrigin) -> None:
        raise AssertionError("a gate with check_blocking is called from the tool's thread")

    def check_blocking(self, spec: ToolSpec, args: dict[str, Any], origin: CallOrigin) -> None:
        self.threads.append(threading.get_ident())
        if self.refuse is not None:
            raise self.refuse


class AsyncGate(BaseGate):
    def __init__(self) -> None:
        self.checked = 0

    async def check(self, spec: ToolSpec, args: dict[str, Any], origin: CallOrigin) -> None:
        self.checked += 1


@pytest.fixture(autouse=True)
def clear() -> None:
    ran.clear()


async def test_the_check_and_a_sync_tool_share_one_worker_thread(settings: Any) -> None:
    gate = BlockingGate()
    result = await Dispatcher(Runtime(settings), [SPEC], gate=gate).run("where", {}, ORIGIN)
    assert isinstance(result, Seen)
    assert gate.threads == [result.thread] and result.thread != threading.get_ident()


@pytest.mark.parametrize("refusal", [PolicyDenied("Denied by policy (x, high risk): no."),
                                     ApprovalRequired("Approval required: ap-abcdef.")])
async def test_a_refusal_stops_the_tool(settings: Any, refusal: Exception) -> None:
    gate = BlockingGate(refuse=refusal)
    with pytest.raises(type(refusal)):
        await Dispatcher(Runtime(settings), [SPEC], gate=gate).run("where", {}, ORIGIN)
    assert len(gate.threads) == 1 and ran == []


async def test_an_async_gate_is_awaited_first(settings: Any) -> None:
    gate = AsyncGate()
    await Dispatcher(Runtime(settings), [SPEC], gate=gate).run("where", {}, ORIGIN)
    assert gate.checked == 1 and len(ran) == 1


JSON = json_values(max_leaves=40)


def _size(value: Any) -> int:
    """The whole count small_arguments stops early on: strings, keys and items by length, other values 8."""
    if isinstance(value, dict):
        return len(value) + sum(_size(k) + _size(v) for k, v in value.items())
    if isinstance(value, list):
        return len(value) + sum(_size(v) for v in value)
    return len(value) if isinstance(value, str) else 8


@settings(max_examples=300, deadline=None)
@given(args=st.dictionaries(st.text(max_size=8), JSON, max_size=5), limit=st.integers(0, 400))
def test_small_arguments_is_the_size_bound(args: dict[str, Any], limit: int) -> None:
    """Which read-only calls the approval resolver decides on the event loop (mcp_server.server)."""
    from mcp_server.approval.gate import small_arguments

    assert small_arguments(args, limit) == (sum(_size(v) for v in args.values()) <= limit)
