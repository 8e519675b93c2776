"""Context and memory tools through the real SDK client, in both protocol eras."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench.context_bench import make_transcript
from tests.conftest import MODES, connect
from tests.context_checks import api_problems
from tests.fake_llm import FakeLLM, fake_llm  # noqa: F401

pytestmark = pytest.mark.anyio

CONTEXT_TOOLS = {"count_tokens", "context_status", "optimize_context", "compact_context", "assemble_context"}


@pytest.fixture
def settings(make_settings: Any) -> Any:
    """The context tools are in the `full` tier (enabled on demand); these tests list them all."""
    return make_settings(tool_profile="full")


@pytest.mark.parametrize("mode", MODES)
async def test_tiers_and_schemas(make_settings: Any, settings: Any, mode: str) -> None:
    async with connect(make_settings(tool_profile="default"), mode) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
    assert {"remember", "recall"} <= names  # core
    assert not (CONTEXT_TOOLS | {"forget", "list_memories"}) & names  # full tier: kept out of the default list
    async with connect(settings.model_copy(update={"tool_profile": "full"}), mode) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert tools["forget"].annotations.destructive_hint is True
    assert tools["compact_context"].annotations.open_world_hint is True
    assert tools["optimize_context"].annotations.read_only_hint is True
    assert "messages" in tools["optimize_context"].input_schema["properties"]


@pytest.mark.parametrize("mode", MODES)
async def test_count_optimize_and_page(settings: Any, mode: str) -> None:
    messages = make_transcript(400)
    async with connect(settings.model_copy(update={"max_result_tokens": 2000}), mode) as client:
        counted = await client.call_tool("count_tokens", {"messages": messages[:5], "model": "gpt-4"})
        assert not counted.is_error and counted.structured_content["tokens"] > 0
        args = {"messages": messages, "context_window": 40_000, "tool_output_max_tokens": 100}
        first = await client.call_tool("optimize_context", args)
        assert not first.is_error, first.content
        data = first.structured_content
        assert data["report"]["tokens_after"] < data["report"]["tokens_before"] and "truncated" not in data
        out, offset = list(data["messages"]), data["next_offset"]
        assert offset is not None  # 2,000-token result limit: several pages
        while offset is not None:
            page = (
                await client.call_tool("optimize_context", {**args, "page_offset": offset})
            ).structured_content
            assert page["offset"] == offset and "truncated" not in page
            out += page["messages"]
            offset = page["next_offset"]
        assert len(out) == data["total_messages"] == data["report"]["messages_after"]
        assert api_problems(out, "openai") == []
        bad = await client.call_tool(
            "optimize_context", {"messages": [{"role": "bot", "content": "x"}], "context_window": 8000}
        )
        assert bad.is_error and "messages[0]: unknown role 'bot'" in bad.content[0].text


def _allowing(make_settings: Any, tmp_path: Path, **overrides: Any) -> Any:
    """Settings whose user policy allows the state-changing tools under test (no approval prompt)."""
    policy = tmp_path / "policy.toml"
    policy.write_text('version = 1\n[permissions]\nallow = ["remember", "compact_context"]\n')
    return make_settings(policy_file=policy, **overrides)


@pytest.mark.parametrize("mode", MODES)
async def test_remember_and_recall(make_settings: Any, tmp_path: Path, mode: str) -> None:
    async with connect(_allowing(make_settings, tmp_path), mode) as client:
        for fact in ("Prefers pytest for testing", "Uses Docker for containerization"):
            result = await client.call_tool("remember", {"fact": fact, "confidence": 0.8})
            assert not result.is_error and result.structured_content["action"] == "created"
        recalled = await client.call_tool("recall", {"query": "writing tests for a FastAPI app in Python"})
        facts = recalled.structured_content["facts"]
        assert [f["content"] for f in facts] == ["Prefers pytest for testing"]


@pytest.mark.parametrize("mode", MODES)
async def test_compact_through_mcp_with_fake_llm(
    make_settings: Any,
    tmp_path: Path,
    fake_llm: FakeLLM,  # noqa: F811
    mode: str,
) -> None:
    fake_llm.reply_text("## Primary request and intent\nRefactor the parser.")
    settings = _allowing(make_settings, tmp_path, **fake_llm.settings_overrides())
    async with connect(settings, mode) as client:
        result = await client.call_tool(
            "compact_context",
            {"messages": make_transcript(200), "context_window": 16_000, "strategy": "compact"},
        )
        assert not result.is_error, result.content
        data = result.structured_content
        assert data["report"]["source"] == "llm" and data["messages"][1]["content"].startswith(
            "# Conversation"
        )
    fake_llm.reply_error(500, "down")
    async with connect(settings, mode) as client:
        result = await client.call_tool(
            "compact_context", {"messages": make_transcript(200), "context_window": 16_000}
        )
        assert not result.is_error and result.structured_content["report"]["source"] == "fallback"


async def test_compact_without_an_endpoint_names_settings_that_exist(settings: Any) -> None:
    """The fallback reason tells the user what to set, in variable names that work as printed."""
    import re

    from foundation.settings import Settings

    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} " + "word " * 3000}
                for i in range(24)]
    async with connect(settings) as client:
        result = await client.call_tool("compact_context", {"messages": messages, "context_window": 8000})
    assert not result.is_error, result.content[0].text
    reason = result.structured_content["report"]["fallback_reason"]
    named = set(re.findall(r"\b[A-Z_]*GENERALAGENT_[A-Z_]+", reason))
    assert {"GENERALAGENT_LLM_BASE_URL", "GENERALAGENT_LLM_MODEL"} <= named, reason
    assert named <= {f"GENERALAGENT_{field.upper()}" for field in Settings.model_fields}, reason


async def test_auto_compacts_a_short_conversation_over_its_window(settings: Any) -> None:
    """12 messages of about 36k tokens for an 8,000-token window: the auto triggers (20+ messages) only
    decide when compaction is optional; without an endpoint the code's summary is used, and it fits."""
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} " + "word " * 3000}
                for i in range(12)]
    async with connect(settings) as client:
        result = await client.call_tool("compact_context", {"messages": messages, "context_window": 8000})
    assert not result.is_error, result.content[0].text
    report = result.structured_content["report"]
    assert (report["action"], report["source"], report["reason"]) == ("compacted", "fallback", "")
    assert report["tokens_before"] > 30_000 and report["tokens_after"] <= 8000 and report["fits_window"]
    assert "Made without an LLM" in result.structured_content["messages"][0]["content"]


async def test_assemble_with_an_empty_system_prompt(settings: Any) -> None:
    """A blank system prompt adds nothing: the system message is the start time alone, no leading blank line."""
    async with connect(settings) as client:
        for prompt in ("", "  \n"):
            result = await client.call_tool(
                "assemble_context", {"system_prompt": prompt, "messages": [{"role": "user", "content": "hi"}]}
            )
            assert not result.is_error, result.content[0].text
            system = result.structured_content["messages"][0]
            assert system["role"] == "system" and system["content"].startswith("Conversation started: ")
