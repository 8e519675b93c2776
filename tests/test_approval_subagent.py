"""Sub-agent calls pass the same gate: asked through the parent call when possible, never auto-approved."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import BaseModel, Field

from foundation.calls import CallOrigin
from foundation.errors import ApprovalRequired, PolicyDenied
from foundation.toolspec import ToolSpec
from mcp_server.approval.gate import PolicyGate
from mcp_server.dispatch import Dispatcher
from tests import approval_helpers as helpers
from tests.conftest import connect
from tools.runtime import CallContext, Runtime

pytestmark = pytest.mark.anyio


class ParentResult(BaseModel):
    outcome: str = Field(description="What the sub-agent's call returned or raised.")


async def parent(
    text: Annotated[str, Field(description="Text the sub-agent pokes with.")], rt: Runtime, call: CallContext
) -> ParentResult:
    """Runs poke as a sub-agent would (read-only itself)."""
    origin = call.origin
    dispatcher = rt.runner("parent")
    sub = CallOrigin(kind="subagent", client_id=origin.client_id, session_id=origin.session_id,
                     subagent_id="t1", agent_stack=("root",), channel=origin.channel, mcp_context=origin.mcp_context)
    try:
        result = await dispatcher.run("poke", {"text": text}, sub, validate=True)
    except (ApprovalRequired, PolicyDenied) as exc:
        return ParentResult(outcome=f"{type(exc).__name__}: {exc}")
    return ParentResult(outcome=f"ran: {result.model_dump()}")


PARENT = ToolSpec(parent, title="Parent", read_only=True, tier="default")


def subagent_origin() -> CallOrigin:
    return CallOrigin(kind="subagent", client_id="c", subagent_id="t1", agent_stack=("root",))


async def test_subagent_call_without_a_human_channel_gets_an_approval_id(settings: Any) -> None:
    gate = PolicyGate(settings)
    dispatcher = Dispatcher(Runtime(settings), [helpers.POKE], gate=gate)
    helpers.CALLS.clear()
    with pytest.raises(ApprovalRequired, match=r"Approval id: ap-") as info:
        await dispatcher.run("poke", {"text": "sub"}, subagent_origin(), validate=True)
    approval_id = str(info.value).split("Approval id: ")[1].split()[0]
    assert gate.store.get(approval_id).origin == "subagent:t1"
    assert helpers.CALLS == []
    gate.store.decide(approval_id, True, by="cli")  # the human, out of band
    result = await dispatcher.run("poke", {"text": "sub"}, subagent_origin(), validate=True)
    assert result.model_dump() == {"text": "sub"} and helpers.CALLS == ["sub"]
    with pytest.raises(ApprovalRequired):
        await dispatcher.run("poke", {"text": "sub"}, subagent_origin(), validate=True)


async def test_subagent_deny_and_confirm_arguments(settings: Any) -> None:
    dispatcher = Dispatcher(Runtime(settings), [helpers.POKE], gate=PolicyGate(settings))
    with pytest.raises(PolicyDenied, match="Denied by policy"):
        await dispatcher.run("poke", {"text": "x", "path": "/etc/shadow"}, subagent_origin(), validate=True)
    with pytest.raises(Exception, match="Unknown argument 'confirm'"):
        await dispatcher.run("poke", {"text": "x", "confirm": True}, subagent_origin(), validate=True)


async def test_subagent_is_asked_through_the_parent_call_2025(settings: Any, monkeypatch: Any) -> None:
    helpers.install(monkeypatch, helpers.POKE, PARENT)
    seen: list[str] = []
    async with connect(settings, "legacy", elicitation_callback=helpers.elicitation_answer("accept", seen=seen)) as c:
        await c.list_tools()
        result = await c.call_tool("parent", {"text": "via-parent"})
    assert result.structured_content["outcome"].startswith("ran:"), result.structured_content
    assert helpers.CALLS == ["via-parent"] and len(seen) == 1 and "poke" in seen[0]


async def test_subagent_rejected_through_the_parent_call(settings: Any, monkeypatch: Any) -> None:
    helpers.install(monkeypatch, helpers.POKE, PARENT)
    async with connect(settings, "legacy", elicitation_callback=helpers.elicitation_answer("decline")) as c:
        await c.list_tools()
        result = await c.call_tool("parent", {"text": "no"})
    assert result.structured_content["outcome"].startswith("PolicyDenied: The user did not approve poke")
    assert helpers.CALLS == []


@pytest.mark.parametrize("with_callback", [True, False])
async def test_subagent_on_2026_falls_back_to_an_approval_id(settings: Any, monkeypatch: Any,
                                                             with_callback: bool) -> None:
    helpers.install(monkeypatch, helpers.POKE, PARENT)
    kwargs = {"elicitation_callback": helpers.elicitation_answer("accept")} if with_callback else {}
    async with connect(settings, "auto", **kwargs) as c:
        await c.list_tools()
        result = await c.call_tool("parent", {"text": "modern"})
    assert result.structured_content["outcome"].startswith("ApprovalRequired: Approval required: poke")
    assert helpers.CALLS == []
