"""delegate_task end to end: the real SDK client -> our server -> the real `openai` client -> a scripted
OpenAI-compatible endpoint on 127.0.0.1 (tests/fake_llm.py)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from pydantic import BaseModel

from context.subagent import ThreadStore
from foundation.bounding import estimate_tokens
from foundation.errors import ApprovalRequired
from foundation.toolspec import ToolSpec
from mcp_server import registry
from mcp_server.dispatch import BaseGate
from tests.conftest import MODES
from tests.fake_llm import FakeLLM, Reply, completion, error_body, fake_llm  # noqa: F401  (fixture)
from tools.subagent_loop import DEFAULT_TOOLS, MAX_CALLS_PER_STEP, SUBAGENT_RESULT_TOKENS

pytestmark = [pytest.mark.anyio, pytest.mark.storage]
LONG = "The sub-agent found that the quarterly report lists revenue of 4.2M in Q3. " * 4
DEFAULT_OFFERED = [name for name in DEFAULT_TOOLS if any(spec.name == name for spec in registry.TOOLS)
                   and name not in ("fetch_url", "web_search")]  # off until the web is turned on


def allow_tools(data_dir: Path, *tools: str) -> None:
    """A user approval rules file allowing these tools (the shipped default asks for state-changing ones)."""
    (data_dir / "policy.toml").write_text(f"version = 1\n[permissions]\nallow = {json.dumps(list(tools))}\n")


@pytest.fixture
def llm_settings(make_settings: Any, fake_llm: FakeLLM, data_dir: Path) -> Any:  # noqa: F811
    allow_tools(data_dir, "delegate_task")
    return make_settings(**fake_llm.settings_overrides())


@asynccontextmanager
async def client_for(settings: Any, mode: str = "legacy", **kwargs: Any) -> AsyncIterator[tuple[Any, Any]]:
    from mcp.client import Client

    from mcp_server.server import build_server

    server, dispatcher = build_server(settings)
    async with Client(server, mode=mode, **kwargs) as client:
        yield client, dispatcher


def threads(database: Any) -> ThreadStore:
    return ThreadStore(database)


def tool_names(request: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in request.get("tools") or []]


@pytest.mark.parametrize("mode", MODES)
async def test_isolation_parent_sees_only_the_result(llm_settings: Any, fake_llm: FakeLLM, mode: str) -> None:  # noqa: F811
    fake_llm.reply_tool_calls([("now", {}), ("todo_read", {})])
    fake_llm.reply_text(LONG, prompt_tokens=100, completion_tokens=50)
    async with client_for(llm_settings, mode) as (client, _):
        result = await client.call_tool("delegate_task", {"task": "What time is it?", "context": "The user is in Berlin."})
    assert not result.is_error, result.content
    data = result.structured_content
    assert data["result"] == LONG.strip() and data["ok"] is True and data["incomplete"] is False
    assert data["context_id"].startswith("subagent-") and len(data["context_id"]) == len("subagent-") + 8
    assert (data["loops"], data["tool_calls"], data["tokens"]) == (2, 2, 15 + 150)
    parent_text = result.content[0].text
    assert "weekday" not in parent_text and "in progress" not in parent_text  # no tool traffic leaks
    first, second = fake_llm.requests
    assert [m["role"] for m in first["messages"]] == ["system", "user"]  # a fresh history
    assert "What time is it?" in first["messages"][1]["content"] and "Berlin" in first["messages"][1]["content"]
    tool_results = [m["content"] for m in second["messages"] if m["role"] == "tool"]
    assert len(tool_results) == 2 and "weekday" in tool_results[0]  # the sub-agent did see them


async def test_tool_parity_and_no_nesting(llm_settings: Any, fake_llm: FakeLLM) -> None:  # noqa: F811
    fake_llm.reply_tool_calls([("delegate_task", {"task": "nested"})])
    fake_llm.reply_text(LONG)
    async with client_for(llm_settings.model_copy(update={"tool_profile": "full"})) as (client, _):
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        result = await client.call_tool("delegate_task", {"task": "t", "tools": ["todo_write"]})
        assert not result.is_error, result.content
        refused = await client.call_tool("delegate_task", {"task": "t", "tools": ["delegate_task"]})
        assert refused.is_error and "no nesting" in refused.content[0].text
        unknown = await client.call_tool("delegate_task", {"task": "t", "tools": ["rm_rf"]})
        assert unknown.is_error and "Unknown tool(s) ['rm_rf']" in unknown.content[0].text
    request = fake_llm.requests[0]
    offered = tool_names(request)
    assert offered == [*DEFAULT_OFFERED, "todo_write"] and "delegate_task" not in offered
    for tool in request["tools"]:  # exactly the schema and description the MCP client lists
        fn = tool["function"]
        assert fn["parameters"] == listed[fn["name"]].input_schema, fn["name"]
        assert fn["description"] == listed[fn["name"]].description
    system = request["messages"][0]["content"]
    assert "cannot delegate" in system and "no nesting" in system
    nested_answer = [m for m in fake_llm.requests[1]["messages"] if m["role"] == "tool"][0]["content"]
    assert nested_answer.startswith("Error: delegate_task is not available to sub-agents (no nesting)")


class Big(BaseModel):
    lines: list[str]


def huge_listing() -> Big:
    """Returns far more than a sub-agent's context should take."""
    return Big(lines=[f"line {i} " + "x" * 200 for i in range(3000)])


async def test_tool_errors_and_big_results_are_fed_back(
    llm_settings: Any, fake_llm: FakeLLM, monkeypatch: Any  # noqa: F811
) -> None:
    monkeypatch.setattr(registry, "TOOLS", [*registry.TOOLS, ToolSpec(huge_listing, title="Huge", read_only=True)])
    bad_json = completion(tool_calls=[("now", {})])
    bad_json["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = "{not json"
    fake_llm.reply_raw(bad_json)
    fake_llm.reply_tool_calls([("todo_read", {"nope": 1}), ("rm_rf", {"path": "/"}), ("huge_listing", {})])
    fake_llm.reply_text(LONG)
    async with client_for(llm_settings) as (client, _):
        result = await client.call_tool("delegate_task", {"task": "t", "tools": ["huge_listing"]})
    assert result.structured_content["ok"] is True and result.structured_content["tool_calls"] == 4
    second = [m["content"] for m in fake_llm.requests[1]["messages"] if m["role"] == "tool"]
    assert second[0].startswith("Error: The model called now with invalid JSON arguments")
    third = [m["content"] for m in fake_llm.requests[2]["messages"] if m["role"] == "tool"][1:]
    assert third[0].startswith("Error: Unknown argument 'nope' for todo_read. Valid arguments: list_id.")
    assert third[1].startswith("Error: tool 'rm_rf' is not available to you.")
    assert estimate_tokens(third[2]) <= SUBAGENT_RESULT_TOKENS and '"truncated":true' in third[2]


async def test_too_many_calls_in_one_step_are_not_run(llm_settings: Any, fake_llm: FakeLLM) -> None:  # noqa: F811
    fake_llm.reply_tool_calls([("now", {})] * (MAX_CALLS_PER_STEP + 2))
    fake_llm.reply_text(LONG)
    async with client_for(llm_settings) as (client, _):
        result = await client.call_tool("delegate_task", {"task": "t"})
    answers = [m["content"] for m in fake_llm.requests[1]["messages"] if m["role"] == "tool"]
    assert len(answers) == MAX_CALLS_PER_STEP + 2 and result.structured_content["ok"] is True
    assert all("utc" in a for a in answers[:MAX_CALLS_PER_STEP])
    assert all(a.startswith("Error: not run; at most") for a in answers[MAX_CALLS_PER_STEP:])


class RecordingGate(BaseGate):
    """A test gate: records every call's origin; todo_write needs approval."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []

    async def check(self, spec: ToolSpec, args: dict[str, Any], origin: Any) -> None:
        self.seen.append((spec.name, origin))
        if spec.name == "todo_write":
            raise ApprovalRequired("Approval required: todo_write was NOT executed. Ask the user to approve it.")


async def test_subagent_calls_pass_the_gate_with_a_subagent_origin(llm_settings: Any, fake_llm: FakeLLM) -> None:  # noqa: F811
    fake_llm.reply_tool_calls([("now", {}), ("todo_write", {"todos": [{"content": "x", "status": "pending"}]})])
    fake_llm.reply_text(LONG)
    gate = RecordingGate()
    async with client_for(llm_settings) as (client, dispatcher):
        dispatcher.gate = gate
        result = await client.call_tool("delegate_task", {"task": "t", "tools": ["todo_write"]})
        todo = await client.call_tool("todo_read", {})
    data = result.structured_content
    assert todo.structured_content["items"] == []  # never executed
    assert any("Approval required" in note for note in data["notes"])
    fed_back = [m["content"] for m in fake_llm.requests[1]["messages"] if m["role"] == "tool"]
    assert fed_back[1].startswith("Error: Approval required")
    by_tool = {name: origin for name, origin in gate.seen}
    assert by_tool["delegate_task"].kind == "client"
    for name in ("now", "todo_write"):
        origin = by_tool[name]
        assert origin.kind == "subagent" and origin.subagent_id == data["context_id"]
        assert origin.agent_stack == ("subagent",) and origin.mcp_context is not None


@pytest.mark.parametrize("mode", MODES)
async def test_real_approval_gate_stops_a_subagent_write(
    llm_settings: Any, fake_llm: FakeLLM, mode: str, workspace: Path  # noqa: F811
) -> None:
    pytest.importorskip("mcp_server.approval.gate")
    fake_llm.reply_tool_calls([("write_file", {"path": "note.txt", "content": "from the sub-agent"})])
    fake_llm.reply_text(LONG)
    async with client_for(llm_settings, mode) as (client, _):
        result = await client.call_tool("delegate_task", {"task": "t", "tools": ["write_file"]})
    assert not result.is_error, result.content
    assert not (workspace / "note.txt").exists()  # asked by default: never executed
    fed_back = [m["content"] for m in fake_llm.requests[1]["messages"] if m["role"] == "tool"][0]
    assert "approv" in fed_back.lower() and "not executed" in fed_back.lower()
    assert result.structured_content["notes"]


@pytest.mark.parametrize(("decision", "written"), [("approve_once", True), ("reject", False)])
async def test_human_is_asked_through_the_parent_call(
    llm_settings: Any, fake_llm: FakeLLM, decision: str, written: bool, workspace: Path  # noqa: F811
) -> None:
    pytest.importorskip("mcp_server.approval.gate")
    from mcp_types import ElicitResult

    asked: list[str] = []

    async def human(context: Any, params: Any) -> Any:
        asked.append(params.message)
        return ElicitResult(action="accept", content={"decision": decision})

    fake_llm.reply_tool_calls([("write_file", {"path": "note.txt", "content": "from the sub-agent"})])
    fake_llm.reply_text(LONG)
    async with client_for(llm_settings, "legacy", elicitation_callback=human) as (client, _):
        result = await client.call_tool("delegate_task", {"task": "t", "tools": ["write_file"]})
    assert not result.is_error, result.content
    assert len(asked) == 1 and "write_file" in asked[0]
    note = workspace / "note.txt"
    assert (note.read_text() if note.exists() else None) == ("from the sub-agent" if written else None)


async def test_max_loops_returns_a_wrap_up_marked_incomplete(llm_settings: Any, fake_llm: FakeLLM) -> None:  # noqa: F811
    for _ in range(3):
        fake_llm.reply_tool_calls([("now", {})])
    fake_llm.reply_text("Partial: I checked the time three times; the report is not read yet.")
    async with client_for(llm_settings) as (client, _):
        result = await client.call_tool("delegate_task", {"task": "t", "max_loops": 3})
    data = result.structured_content
    assert data["incomplete"] is True and data["ok"] is False and data["stop_reason"] == "max_loops"
    assert data["result"].startswith("Partial:") and data["tool_calls"] == 3
    assert len(fake_llm.requests) == 4 and fake_llm.requests[-1]["tool_choice"] == "none"
    assert "used all 3 steps" in fake_llm.requests[-1]["messages"][-1]["content"]


async def test_short_answer_gets_one_detail_request(llm_settings: Any, fake_llm: FakeLLM) -> None:  # noqa: F811
    fake_llm.reply_text("Done.")
    fake_llm.reply_text(LONG)
    async with client_for(llm_settings) as (client, _):
        result = await client.call_tool("delegate_task", {"task": "t", "max_loops": 1})
        assert result.structured_content["result"] == LONG.strip()
        assert result.structured_content["ok"] is True
        fake_llm.reply_text("Short again, a few words.")
        fake_llm.reply_text("Still short.")
        again = await client.call_tool("delegate_task", {"task": "t"})
        assert again.structured_content["result"] == "Short again, a few words."  # asked once, kept the longer
    assert "more detailed" in fake_llm.requests[1]["messages"][-1]["content"]
    assert len(fake_llm.requests) == 4


async def test_restart_and_continue(llm_settings: Any, fake_llm: FakeLLM) -> None:  # noqa: F811
    fake_llm.reply_tool_calls([("now", {})])
    fake_llm.reply_text(LONG)
    async with client_for(llm_settings) as (client, _):
        first = await client.call_tool("delegate_task", {"task": "Find the Q3 revenue."})
    context_id = first.structured_content["context_id"]
    fake_llm.reply_text("Follow-up: " + LONG)
    async with client_for(llm_settings) as (client, _):  # a new server on the same data dir
        status = await client.call_tool("delegate_status", {"context_id": context_id})
        assert status.structured_content["status"] == "done"
        assert [m["role"] for m in status.structured_content["messages"]] == [
            "system", "user", "assistant", "tool", "assistant"]
        follow = await client.call_tool("delegate_task", {"task": "And Q4?", "continue_id": context_id})
        after = await client.call_tool("delegate_status", {"context_id": context_id, "offset": 5})
        missing = await client.call_tool("delegate_status", {"context_id": "subagent-00000000"})
        resource = json.loads((await client.read_resource(f"subagent://{context_id}")).contents[0].text)
    assert resource["status"] == "done" and resource["total_messages"] == 7 and len(resource["messages"]) == 7
    assert follow.structured_content["context_id"] == context_id
    assert follow.structured_content["result"].startswith("Follow-up:")
    roles = [m["role"] for m in fake_llm.requests[-1]["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert fake_llm.requests[-1]["messages"][-1]["content"] == "Task:\nAnd Q4?"
    assert after.structured_content["loops"] == 3 and after.structured_content["total_messages"] == 7
    assert [m["seq"] for m in after.structured_content["messages"]] == [5, 6]
    assert missing.is_error and context_id in missing.content[0].text  # names recent threads


@pytest.mark.parametrize("mode", MODES)
async def test_cancellation_stops_the_loop(database: Any, llm_settings: Any, fake_llm: FakeLLM, data_dir: Path, mode: str) -> None:  # noqa: F811
    fake_llm.reply_tool_calls([("now", {})])
    fake_llm.reply_text(LONG, delay=60.0)  # the model is slow on step 2 (released when the fake endpoint stops)
    fake_llm.reply_text(LONG)
    async with client_for(llm_settings, mode) as (client, _):
        with anyio.move_on_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(client.call_tool, "delegate_task", {"task": "t"})
                while len(fake_llm.requests) < 2:
                    await anyio.sleep(0.02)
                tg.cancel_scope.cancel()
        store = threads(database)
        context_id = _only_thread(store)
        with anyio.fail_after(30):
            while store.load(context_id).status == "running":
                await anyio.sleep(0.02)
        await anyio.sleep(0.3)
        assert len(fake_llm.requests) == 2  # no further model turns after the cancel
        thread = store.load(context_id)
        assert thread.status == "cancelled"
        assert [m["role"] for m in thread.messages] == ["system", "user", "assistant", "tool"]  # saved per step
        resumed = await client.call_tool("delegate_task", {"task": "Go on.", "continue_id": context_id})
    assert resumed.structured_content["result"] == LONG.strip()
    assert [m["role"] for m in fake_llm.requests[-1]["messages"]] == ["system", "user", "assistant", "tool", "user"]


def _only_thread(store: ThreadStore) -> str:
    with store._db.read() as conn:
        ids = [r[0] for r in conn.all("SELECT context_id FROM threads")]
    assert len(ids) == 1
    return ids[0]


async def test_timeout_returns_incomplete(make_settings: Any, fake_llm: FakeLLM, data_dir: Path) -> None:  # noqa: F811
    allow_tools(data_dir, "delegate_task")
    settings = make_settings(**fake_llm.settings_overrides(), delegate_timeout_seconds=0.5)
    fake_llm.reply_tool_calls([("now", {})])
    fake_llm.reply_text(LONG, delay=60.0)  # released when the fake endpoint stops
    async with client_for(settings) as (client, _):
        with anyio.fail_after(30):  # at the 0.5 s limit, not at the model's answer (a loaded machine: seconds)
            result = await client.call_tool("delegate_task", {"task": "t"})
    data = result.structured_content
    assert data["incomplete"] is True and data["stop_reason"] == "timeout"
    assert "time limit" in data["notes"][0]


async def test_no_endpoint_is_a_clear_error(database: Any, make_settings: Any, data_dir: Path) -> None:
    allow_tools(data_dir, "delegate_task")
    async with client_for(make_settings()) as (client, _):
        result = await client.call_tool("delegate_task", {"task": "t"})
    assert result.is_error
    assert "GENERALAGENT_LLM_BASE_URL" in result.content[0].text and "delegate_task" in result.content[0].text
    assert _count_threads(database) == 0


def _count_threads(database: Any) -> int:
    with threads(database)._db.read() as conn:
        return int(conn.scalar("SELECT COUNT(*) FROM threads"))


async def test_endpoint_error_is_a_clear_error(database: Any, llm_settings: Any, fake_llm: FakeLLM, data_dir: Path) -> None:  # noqa: F811
    fake_llm.set_default(Reply(500, error_body(500, "model overloaded")))  # also for the client's retry
    async with client_for(llm_settings) as (client, _):
        result = await client.call_tool("delegate_task", {"task": "t"})
    assert result.is_error
    text = result.content[0].text
    assert "HTTP 500" in text and "model overloaded" in text and "continue_id='subagent-" in text
    store = threads(database)
    assert store.load(_only_thread(store)).status == "failed"


@pytest.mark.parametrize("mode", MODES)
async def test_progress_notifications_reach_the_client(llm_settings: Any, fake_llm: FakeLLM, mode: str) -> None:  # noqa: F811
    fake_llm.reply_tool_calls([("todo_read", {"list_id": "release-notes"})])
    fake_llm.reply_text(LONG)
    seen: list[tuple[float, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, message))

    async with client_for(llm_settings, mode) as (client, _):
        result = await client.call_tool("delegate_task", {"task": "t"}, progress_callback=on_progress)
    context_id = result.structured_content["context_id"]
    messages = [m for _, m in seen]
    assert f'[{context_id}] step 1: todo_read "release-notes"' in messages
    assert all(m and m.startswith(f"[{context_id}] ") for m in messages)
    assert [p for p, _ in seen] == sorted(p for p, _ in seen)
