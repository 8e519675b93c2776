"""ask_human inside a sub-agent, by default: its question reaches the user through the parent call's
client (elicitation, the path approvals take), and the answer comes back to the sub-agent's model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import MODES
from tests.fake_llm import FakeLLM, fake_llm  # noqa: F401  (fixture)
from tests.test_delegate import allow_tools, client_for, tool_names

pytestmark = [pytest.mark.anyio, pytest.mark.storage]
LONG = "The user said the report to summarise is the Q3 one, so the summary covers Q3 revenue only. " * 3


@pytest.mark.parametrize("mode", MODES)
async def test_a_subagent_asks_the_user_through_the_parent_call(make_settings: Any, fake_llm: FakeLLM,  # noqa: F811
                                                                data_dir: Path, mode: str) -> None:
    from mcp_types import ElicitResult

    allow_tools(data_dir, "delegate_task")
    fake_llm.reply_tool_calls([("ask_human", {"question": "Which quarter's report?", "context": "Two are indexed."})])
    fake_llm.reply_text(LONG)
    asked: list[str] = []

    async def user(context: Any, params: Any) -> Any:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"answer": "Q3"})

    async with client_for(make_settings(**fake_llm.settings_overrides()), mode, elicitation_callback=user) as (client, _):
        result = await client.call_tool("delegate_task", {"task": "Summarise the quarterly report."})
    assert not result.is_error, result.content
    assert "ask_human" in tool_names(fake_llm.requests[0])  # offered by default
    answer = [m["content"] for m in fake_llm.requests[1]["messages"] if m["role"] == "tool"][0].replace(" ", "")
    if mode == "legacy":  # a 2025-era connection: the parent call asks mid-call, as for approvals
        assert asked == ["Which quarter's report?\n\nTwo are indexed."]
        assert '"answer":"Q3"' in answer and '"status":"answered"' in answer
    else:  # 2026-07-28 cannot pause a call for a form (approvals then give an approval id): the sub-agent is told
        assert asked == [] and '"status":"ask_in_chat"' in answer and "yourfinalanswer" in answer


async def test_without_a_form_the_subagent_is_told_to_leave_it_to_the_chat(make_settings: Any, fake_llm: FakeLLM,  # noqa: F811
                                                                           data_dir: Path) -> None:
    allow_tools(data_dir, "delegate_task")
    fake_llm.reply_tool_calls([("ask_human", {"question": "Which quarter?"})])
    fake_llm.reply_text(LONG)
    async with client_for(make_settings(**fake_llm.settings_overrides())) as (client, _):  # no elicitation
        result = await client.call_tool("delegate_task", {"task": "Summarise the quarterly report."})
    assert not result.is_error, result.content
    answer = [m["content"] for m in fake_llm.requests[1]["messages"] if m["role"] == "tool"][0]
    assert '"status":"ask_in_chat"' in answer.replace(" ", "") and "Which quarter?" in answer
    assert "put this question in your final answer" in answer
