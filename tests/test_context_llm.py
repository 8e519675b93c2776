"""The OpenAI-compatible client against the local fake endpoint (real `openai` package, loopback)."""

from __future__ import annotations

from typing import Any

import pytest

from context.llm import LLMConfig, chat, client_for
from foundation.errors import LLMError, LLMNotConfigured
from tests.fake_llm import FakeLLM, fake_llm  # noqa: F401

USER = [{"role": "user", "content": "hi"}]


def test_text_reply_and_request_recorded(fake_llm: FakeLLM) -> None:  # noqa: F811
    fake_llm.reply_text("hello there", prompt_tokens=7, completion_tokens=3)
    reply = chat(fake_llm.config(), USER, max_tokens=50)
    assert reply.content == "hello there" and not reply.tool_calls
    assert (reply.prompt_tokens, reply.completion_tokens, reply.total_tokens) == (7, 3, 10)
    assert fake_llm.requests[0]["messages"] == USER
    assert fake_llm.requests[0]["max_tokens"] == 50
    assert fake_llm.headers[0]["authorization"] == "Bearer test-key"


def test_tool_calls_reply(fake_llm: FakeLLM) -> None:  # noqa: F811
    fake_llm.reply_tool_calls([("search", {"query": "x"}), ("now", {})])
    tools = [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}]
    reply = chat(fake_llm.config(), USER, tools=tools, tool_choice="auto")
    assert [c.name for c in reply.tool_calls] == ["search", "now"]
    assert reply.tool_calls[0].parsed_arguments() == {"query": "x"}
    assert reply.as_message()["tool_calls"][0]["function"]["name"] == "search"
    assert fake_llm.requests[0]["tools"] == tools and fake_llm.requests[0]["tool_choice"] == "auto"


@pytest.mark.parametrize(
    ("status", "fragment"), [(500, "HTTP 500"), (401, "GENERALAGENT_LLM_API_KEY"), (404, "BASE_URL")]
)
def test_http_errors_become_llm_error(fake_llm: FakeLLM, status: int, fragment: str) -> None:  # noqa: F811
    fake_llm.reply_error(status, "scripted failure")
    with pytest.raises(LLMError, match=fragment):
        chat(fake_llm.config(), USER)


def test_timeout_becomes_llm_error(fake_llm: FakeLLM) -> None:  # noqa: F811
    fake_llm.reply_text("too late", delay=3)
    with pytest.raises(LLMError, match="did not answer within"):
        chat(fake_llm.config(timeout_seconds=0.5), USER)


@pytest.mark.parametrize(
    "body",
    [
        "not json",
        {"choices": []},
        {"id": "x", "choices": [{"index": 0, "message": {"role": "assistant", "content": None}}]},
    ],
)
def test_bad_answers_become_llm_error(fake_llm: FakeLLM, body: Any) -> None:  # noqa: F811
    fake_llm.reply_raw(body)
    with pytest.raises(LLMError):
        chat(fake_llm.config(), USER)


def test_connection_refused_is_llm_error() -> None:
    config = LLMConfig("http://127.0.0.1:9/v1", "m", None, 2.0, 0)
    with pytest.raises(LLMError, match="Cannot connect"):
        chat(config, USER)


def test_not_configured_and_client_cache(make_settings: Any, fake_llm: FakeLLM) -> None:  # noqa: F811
    with pytest.raises(LLMNotConfigured, match="GENERALAGENT_LLM_BASE_URL"):
        LLMConfig.from_settings(make_settings())
    config = LLMConfig.from_settings(make_settings(**fake_llm.settings_overrides()))
    assert config.model == "fake-model" and "test-key" not in repr(config)
    assert client_for(config) is client_for(
        LLMConfig.from_settings(make_settings(**fake_llm.settings_overrides()))
    )
