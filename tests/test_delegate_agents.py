"""Agent cards (TOML), list_agents, handoff protection and delegate_task without MCP."""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest

from foundation.calls import CallOrigin
from foundation.errors import Conflict, InvalidInput, LimitExceeded, NotFound, SettingsError
from mcp_server import registry
from mcp_server.dispatch import Dispatcher
from tests.fake_llm import FakeLLM, fake_llm  # noqa: F401  (fixture)
from tools.agents import MAX_DEPTH, check_handoff, load_agents
from tools.delegate import THREAD_STORE
from tools.runtime import Runtime

LONG = "A detailed answer from the specialised agent, with enough words to pass the short-answer check. " * 3
CARDS = """
[agents.researcher]
description = "Finds and quotes sources."
system_prompt = "You are a meticulous researcher. Quote exact passages."
tools = ["now"]
model = "research-model"

[agents.planner]
description = "Keeps the todo list."
tools = ["todo_read", "todo_write"]
"""


def runtime_with_dispatcher(settings: Any) -> tuple[Runtime, Dispatcher]:
    rt = Runtime(settings)
    dispatcher = Dispatcher(rt, registry.TOOLS)  # no gate: these tests are about delegation itself
    rt.tool_runner = dispatcher
    return rt, dispatcher


@pytest.fixture
def agents_settings(make_settings: Any, fake_llm: FakeLLM, data_dir: Path) -> Any:  # noqa: F811
    (data_dir / "agents.toml").write_text(CARDS)
    return make_settings(**fake_llm.settings_overrides())


def test_cards_load_and_validate(make_settings: Any, tmp_path: Path) -> None:
    settings = make_settings()
    assert load_agents(settings) == {}
    path = tmp_path / "cards.toml"
    settings = make_settings(agents_file=path)
    path.write_text(CARDS)
    cards = load_agents(settings)
    assert sorted(cards) == ["planner", "researcher"]
    assert cards["researcher"].model == "research-model" and cards["planner"].model is None
    for text, message in [
        ("[agents.x\n", "Cannot read the agents file"),
        ('[agents.x]\ndescription = "d"\ntools = ["delegate_task"]\n', "sub-agents cannot delegate"),
        ('[agents."bad id"]\ndescription = "d"\n', "must be letters"),
        ("[agents.x]\ntools = 3\n", "is invalid"),
    ]:
        path.write_text(text)
        with pytest.raises(SettingsError, match=message):
            load_agents(settings)


def test_handoff_protection() -> None:
    check_handoff((), "researcher")
    check_handoff(("planner",), "researcher")
    with pytest.raises(Conflict, match=r"'researcher' is already on the call stack \(planner > researcher\)"):
        check_handoff(("planner", "researcher"), "researcher")
    stack = tuple(f"a{i}" for i in range(MAX_DEPTH))
    with pytest.raises(LimitExceeded, match="Delegation depth limit reached \\(5"):
        check_handoff(stack, "other")


@pytest.mark.anyio
async def test_agent_card_sets_prompt_tools_and_model(agents_settings: Any, fake_llm: FakeLLM) -> None:  # noqa: F811
    rt, dispatcher = runtime_with_dispatcher(agents_settings)
    listed = await dispatcher.run("list_agents", {}, CallOrigin())
    assert [a.id for a in listed.agents] == ["researcher", "planner"]  # type: ignore[attr-defined]
    assert "system_prompt" not in json.dumps(listed.model_dump())
    fake_llm.reply_tool_calls([("now", {})])
    fake_llm.reply_text(LONG)
    result = await dispatcher.run("delegate_task", {"task": "Find sources", "agent": "researcher"}, CallOrigin())
    assert result.agent == "researcher" and result.ok  # type: ignore[attr-defined]
    request = fake_llm.requests[0]
    assert request["model"] == "research-model"
    assert [t["function"]["name"] for t in request["tools"]] == ["now", "transfer_to_planner"]  # handoff offered
    assert request["messages"][0]["content"].startswith("You are a meticulous researcher.")
    with pytest.raises(NotFound, match="Known agents: planner, researcher"):
        await dispatcher.run("delegate_task", {"task": "x", "agent": "nobody"}, CallOrigin())
    with (agents_settings.data_dir / "agents.toml").open("a") as cards:
        cards.write('[agents.broken]\ndescription = "d"\ntools = ["no_such_tool"]\n')
    with pytest.raises(InvalidInput, match="Unknown tool\\(s\\) \\['no_such_tool'\\] in agent card 'broken'"):
        await dispatcher.run("delegate_task", {"task": "x", "agent": "broken"}, CallOrigin())
    rt.close()


@pytest.mark.anyio
async def test_nesting_and_loops_are_refused_at_the_dispatch_point(agents_settings: Any) -> None:
    rt, dispatcher = runtime_with_dispatcher(agents_settings)
    sub = CallOrigin(kind="subagent", subagent_id="subagent-12345678", agent_stack=("planner",))
    with pytest.raises(InvalidInput, match="no nesting"):
        await dispatcher.run("delegate_task", {"task": "x"}, sub, validate=True)
    with pytest.raises(Conflict, match="already on the call stack"):
        await dispatcher.run("delegate_task", {"task": "x", "agent": "planner"}, sub, validate=True)
    deep = CallOrigin(kind="client", agent_stack=tuple(f"a{i}" for i in range(MAX_DEPTH)))
    with pytest.raises(LimitExceeded, match="depth limit"):
        await dispatcher.run("delegate_task", {"task": "x"}, deep, validate=True)
    rt.close()


@pytest.mark.anyio
async def test_continue_keeps_the_agent_and_adds_tools(agents_settings: Any, fake_llm: FakeLLM) -> None:  # noqa: F811
    rt, dispatcher = runtime_with_dispatcher(agents_settings)
    fake_llm.reply_text(LONG)
    first = await dispatcher.run("delegate_task", {"task": "t", "agent": "researcher"}, CallOrigin())
    context_id = first.context_id  # type: ignore[attr-defined]
    with pytest.raises(InvalidInput, match="belongs to agent researcher"):
        await dispatcher.run("delegate_task", {"task": "t2", "agent": "planner", "continue_id": context_id}, CallOrigin())
    fake_llm.reply_text(LONG)
    again = await dispatcher.run("delegate_task", {"task": "t2", "continue_id": context_id, "tools": ["todo_read"]},
                                 CallOrigin())
    assert again.agent == "researcher"  # type: ignore[attr-defined]
    request = fake_llm.requests[-1]
    assert [t["function"]["name"] for t in request["tools"]] == ["now", "todo_read", "transfer_to_planner"]
    assert "You now also have these tools: todo_read" in request["messages"][-1]["content"]
    status = await dispatcher.run("delegate_status", {"context_id": context_id}, CallOrigin())
    assert status.tools == ["now", "todo_read"] and status.loops == 2  # type: ignore[attr-defined]
    rt.close()


@pytest.mark.storage
def test_a_thread_whose_server_died_reads_as_interrupted(database: Any, make_settings: Any, fake_llm: FakeLLM) -> None:  # noqa: F811
    import subprocess
    import sys

    from context.subagent import StepDelta, ThreadStore

    store = ThreadStore(database)
    store.create("subagent-0000dead", None, ["now"], "c")
    store.save_step("subagent-0000dead", StepDelta([{"role": "system", "content": "s"}]))
    assert store.load("subagent-0000dead").status == "running"  # this process runs it
    rt, dispatcher = runtime_with_dispatcher(make_settings(**fake_llm.settings_overrides()))
    THREAD_STORE.provide(rt, store)
    with pytest.raises(Conflict, match="still running"):
        anyio.run(partial(dispatcher.run, "delegate_task", {"task": "t", "continue_id": "subagent-0000dead"},
                          CallOrigin()))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    store._db.write(lambda conn: conn.execute("UPDATE threads SET runner_pid=? WHERE context_id=?",
                                              (int(dead.stdout), "subagent-0000dead")))
    assert store.load("subagent-0000dead").status == "interrupted"
    fake_llm.reply_text(LONG)
    resumed = anyio.run(partial(dispatcher.run, "delegate_task", {"task": "t", "continue_id": "subagent-0000dead"},
                                CallOrigin()))
    assert resumed.ok and store.load("subagent-0000dead").status == "done"  # type: ignore[attr-defined]
    rt.close()
