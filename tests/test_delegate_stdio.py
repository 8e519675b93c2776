"""Todos and sub-agent threads survive a real server restart: two console-script processes over stdio,
the second continuing what the first saved, with the scripted LLM endpoint on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.fake_llm import MODEL, FakeLLM, fake_llm  # noqa: F401  (fixture)
from tests.test_stdio import stdio_params

pytestmark = pytest.mark.anyio
LONG = "Q3 revenue was 4.2M according to report.pdf page 3; the Q4 figures are not in the documents. " * 3


async def _session(params: Any, errlog: Path, steps: Any) -> Any:
    from mcp.client import Client
    from mcp.client.stdio import stdio_client

    with errlog.open("a") as err:
        async with Client(stdio_client(params, errlog=err), mode="legacy") as client:
            return await steps(client)


async def test_todos_and_threads_survive_a_process_restart(tmp_path: Path, fake_llm: FakeLLM) -> None:  # noqa: F811
    data = tmp_path / "data"
    data.mkdir()
    (data / "policy.toml").write_text('version = 1\n[permissions]\nallow = ["todo_write", "delegate_task"]\n')
    params = stdio_params(tmp_path, GENERALAGENT_LLM_BASE_URL=fake_llm.base_url, GENERALAGENT_LLM_MODEL=MODEL,
                          GENERALAGENT_LLM_API_KEY="test-key", GENERALAGENT_ROOTS=str(tmp_path),
                          GENERALAGENT_TOOL_PROFILE="full")
    errlog = tmp_path / "stderr.txt"
    progress: list[str] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(message or "")

    async def first(client: Any) -> str:
        wrote = await client.call_tool("todo_write", {"todos": [{"content": "Check Q4", "status": "in_progress"}]})
        assert not wrote.is_error, wrote.content
        fake_llm.reply_tool_calls([("todo_read", {})])
        fake_llm.reply_text(LONG)
        result = await client.call_tool("delegate_task", {"task": "Find Q3 revenue."}, progress_callback=on_progress)
        assert not result.is_error, result.content
        return str(result.structured_content["context_id"])

    context_id = await _session(params, errlog, first)
    assert f"[{context_id}] step 1: todo_read" in progress

    async def second(client: Any) -> None:
        todo = await client.call_tool("todo_read", {})
        assert [i["content"] for i in todo.structured_content["items"]] == ["Check Q4"]
        status = await client.call_tool("delegate_status", {"context_id": context_id})
        assert status.structured_content["status"] == "done" and status.structured_content["tool_calls"] == 1
        fake_llm.reply_text("Continued: " + LONG)
        more = await client.call_tool("delegate_task", {"task": "And Q4?", "continue_id": context_id})
        assert more.structured_content["result"].startswith("Continued:")

    await _session(params, errlog, second)
    sub_agent_view = [m for m in fake_llm.requests[1]["messages"] if m["role"] == "tool"][0]["content"]
    assert "Check Q4" in sub_agent_view  # the sub-agent read the parent's (same client's) list
    assert [m["role"] for m in fake_llm.requests[-1]["messages"]] == [
        "system", "user", "assistant", "tool", "assistant", "user"]
