"""Handoff between agent cards inside delegated work (transfer_to_<agent>), its depth and cycle limits,
and model slots — through the real MCP client and the scripted endpoint (tests/fake_llm.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.context_bench import make_events, to_openai
from context.llm import LLMConfig, slot_values
from foundation.errors import InvalidInput
from tests.conftest import connect
from tests.fake_llm import FakeLLM, fake_llm  # noqa: F401  (fixture)
from tests.test_delegate import allow_tools
from tools.context_compact import compact_context
from tools.runtime import CallContext, Runtime

pytestmark = pytest.mark.anyio
LONG = "The planner wrote a three-step plan: gather the reports, compare Q3 with Q2, draft the summary. " * 3
CARDS = """
[agents.researcher]
description = "Finds and quotes sources."
system_prompt = "You are a meticulous researcher."
tools = ["now"]
slot = "reasoning"

[agents.planner]
description = "Plans the work as a todo list."
system_prompt = "You are a careful planner."
tools = ["todo_read"]

[agents.hidden]
description = "Not offered."
enabled = false
"""


@pytest.fixture
def handoff_settings(make_settings: Any, fake_llm: FakeLLM, data_dir: Path) -> Any:  # noqa: F811
    allow_tools(data_dir, "delegate_task")
    (data_dir / "agents.toml").write_text(CARDS)
    return make_settings(**fake_llm.settings_overrides(), llm_reasoning_model="reasoning-model")


def names(request: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools") or []]


def last_tool_result(request: dict[str, Any]) -> str:
    return next(m["content"] for m in reversed(request["messages"]) if m["role"] == "tool")


async def test_transfer_carries_the_thread_and_a_cycle_is_refused(handoff_settings: Any, fake_llm: FakeLLM) -> None:  # noqa: F811
    fake_llm.reply_tool_calls([("transfer_to_planner", {"note": "Plan the comparison."})])
    fake_llm.reply_tool_calls([("transfer_to_researcher", {"note": "back to you"})])  # A > B > A
    fake_llm.reply_text(LONG)
    async with connect(handoff_settings) as c:
        result = await c.call_tool("delegate_task", {"task": "Compare Q3 with Q2.", "agent": "researcher"})
        assert not result.is_error, result
        out = result.structured_content
        assert out["agent"] == "planner" and out["handoffs"] == ["planner"] and out["ok"]
        status = (await c.call_tool("delegate_status", {"context_id": out["context_id"]})).structured_content
        assert status["agent"] == "planner" and status["tools"] == ["todo_read"]
    first, second, third = fake_llm.requests
    assert first["model"] == "reasoning-model"  # the researcher's slot
    assert names(first) == ["now", "transfer_to_planner"]  # the disabled card is not offered
    assert second["model"] == "fake-model" and names(second) == ["todo_read", "transfer_to_researcher"]
    system = second["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("You are a careful planner.")
    assert "(chain: researcher > planner). Its note: Plan the comparison." in system["content"]
    assert [m["role"] for m in second["messages"]].count("system") == 1  # only the newest system prompt
    assert second["messages"][1]["content"].startswith("Task:\nCompare Q3 with Q2.")  # the thread carries over
    assert last_tool_result(second) == "Transferred to agent 'planner'; it continues this task."
    refused = last_tool_result(third)
    assert refused.startswith("Error: Agent 'researcher' is already on the call stack (researcher > planner)")
    assert "would loop" in refused


async def test_handoff_depth_is_capped(make_settings: Any, fake_llm: FakeLLM, data_dir: Path) -> None:  # noqa: F811
    allow_tools(data_dir, "delegate_task")
    (data_dir / "agents.toml").write_text("".join(
        f'[agents.{n}]\ndescription = "Agent {n}."\ntools = ["now"]\n' for n in ("alpha", "beta", "gamma")))
    settings = make_settings(**fake_llm.settings_overrides(), handoff_max_depth=2)
    fake_llm.reply_tool_calls([("transfer_to_alpha", {})])  # subagent > alpha
    fake_llm.reply_tool_calls([("transfer_to_beta", {}), ("now", {})])  # would be a third: refused
    fake_llm.reply_text(LONG)
    async with connect(settings) as c:
        out = (await c.call_tool("delegate_task", {"task": "Plan it."})).structured_content
    assert out["agent"] == "alpha" and out["handoffs"] == ["alpha"]
    assert names(fake_llm.requests[0])[-3:] == ["transfer_to_alpha", "transfer_to_beta", "transfer_to_gamma"]
    assert names(fake_llm.requests[1]) == ["now", "transfer_to_beta", "transfer_to_gamma"]
    tool_results = [m["content"] for m in fake_llm.requests[2]["messages"] if m["role"] == "tool"]
    assert tool_results[-2].startswith("Error: Delegation depth limit reached (2: subagent > alpha)")
    assert "handoff_max_depth" in tool_results[-2]
    assert tool_results[-1].startswith("{")  # the other call of that step still ran


async def test_transfer_ends_the_step_and_unknown_transfers_are_refused(
    handoff_settings: Any, fake_llm: FakeLLM,  # noqa: F811
) -> None:
    fake_llm.reply_tool_calls([("transfer_to_hidden", {}), ("transfer_to_planner", {}), ("now", {})])
    fake_llm.reply_text(LONG)
    async with connect(handoff_settings) as c:
        out = (await c.call_tool("delegate_task", {"task": "t", "agent": "researcher"})).structured_content
    assert out["handoffs"] == ["planner"]
    results = [m["content"] for m in fake_llm.requests[1]["messages"] if m["role"] == "tool"]
    assert results[0].startswith("Error: tool 'transfer_to_hidden' is not available to you.")
    assert results[1] == "Transferred to agent 'planner'; it continues this task."
    assert results[2] == "Error: not run; the task was handed over to agent 'planner'."


def test_model_slots_fall_back_to_the_base_slot(make_settings: Any) -> None:
    base = {"llm_base_url": "http://base/v1", "llm_model": "base-m", "llm_api_key": "base-key"}
    settings = make_settings(**base, llm_chat_model="chat-m", llm_code_base_url="http://code/v1",
                             llm_code_model="code-m")
    chat = LLMConfig.from_settings(settings, slot="chat")
    assert (chat.base_url, chat.model, chat.api_key) == ("http://base/v1", "chat-m", "base-key")
    code = LLMConfig.from_settings(settings, slot="code")
    assert (code.base_url, code.model, code.api_key) == ("http://code/v1", "code-m", None)  # key not sent elsewhere
    assert LLMConfig.from_settings(settings, slot="vision") == LLMConfig.from_settings(settings)
    assert slot_values(settings, "chat").inherits == ("base_url",)
    with pytest.raises(InvalidInput, match="Unknown model slot 'huge'"):
        LLMConfig.from_settings(settings, slot="huge")


def test_compact_context_uses_the_chat_slot(make_settings: Any, fake_llm: FakeLLM) -> None:  # noqa: F811
    rt = Runtime(make_settings(**fake_llm.settings_overrides(), llm_chat_model="chat-model"))
    fake_llm.reply_text("## Primary request and intent\nRefactor the parser.\n## Next step\nRun pytest.")
    result = compact_context(to_openai(make_events(300, seed=1)), strategy="compact", context_window=32_000, rt=rt,
                             call=CallContext(tool="compact_context"))
    assert result.report.source == "llm"
    assert fake_llm.requests[0]["model"] == "chat-model"
    rt.close()
