"""ask_human: elicitation in both eras when the client supports it, else 'ask in chat'."""

from __future__ import annotations

from typing import Any

import pytest
from mcp_types import ElicitResult

from tests.conftest import MODES, connect

pytestmark = pytest.mark.anyio


def answering(action: str, answer: str | None = None, seen: list[Any] | None = None) -> Any:
    async def callback(context: Any, params: Any) -> Any:
        if seen is not None:
            seen.append(params)
        if action == "accept":
            return ElicitResult(action="accept", content={"answer": answer} if answer is not None else {})
        return ElicitResult(action=action)

    return callback


@pytest.mark.parametrize("mode", MODES)
async def test_question_is_answered_through_the_form(settings: Any, mode: str) -> None:
    seen: list[Any] = []
    async with connect(settings, mode, elicitation_callback=answering("accept", "blue", seen)) as c:
        await c.list_tools()
        result = await c.call_tool("ask_human", {"question": "Which colour?", "context": "For the chart."})
    assert result.structured_content["answered"] is True and result.structured_content["answer"] == "blue"
    assert "Which colour?" in seen[0].message and "For the chart." in seen[0].message
    assert "answer" in seen[0].requested_schema["properties"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_skipped_question(settings: Any, mode: str, action: str) -> None:
    async with connect(settings, mode, elicitation_callback=answering(action)) as c:
        await c.list_tools()
        required = await c.call_tool("ask_human", {"question": "Name?"})
        optional = await c.call_tool("ask_human", {"question": "Name?", "default": "Ann", "required": False})
    assert required.structured_content["answered"] is False
    assert required.structured_content["status"] == ("cancelled" if action == "cancel" else "declined")
    assert optional.structured_content["answer"] == "Ann" and optional.structured_content["status"] == "default_used"


@pytest.mark.parametrize("mode", MODES)
async def test_without_elicitation_the_model_is_told_to_ask_in_chat(settings: Any, mode: str) -> None:
    async with connect(settings, mode) as c:
        await c.list_tools()
        result = await c.call_tool("ask_human", {"question": "Ship it today?"})
    data = result.structured_content
    assert not result.is_error and data["status"] == "ask_in_chat" and data["answered"] is False
    assert "Ask the user in the chat: Ship it today?" in data["instruction"]
