"""Todo lists: the rules, persistence across a restart, and the MCP tool + resource surface."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from context.todos import TodoStore, normalize_items
from foundation.errors import InvalidInput, LimitExceeded
from tests.conftest import MODES, connect
from tools.runtime import CallContext, Runtime
from tools.todos import default_list_id, reminder_for, todo_read, todo_write

pytestmark = pytest.mark.storage


@pytest.fixture(autouse=True)
def allow_todo_write(data_dir: Path) -> None:
    """The shipped approval rules ask before any state-changing tool; these tests allow todo_write."""
    (data_dir / "policy.toml").write_text('version = 1\n[permissions]\nallow = ["todo_write"]\n')


def _store(database: Any) -> TodoStore:
    return TodoStore(database)


def test_rules_one_in_progress_names_the_items(database: Any) -> None:
    items = [
        {"content": "Write parser", "status": "in_progress"},
        {"content": "Fix tests", "status": "pending"},
        {"content": "Ship release", "status": "in_progress"},
    ]
    with pytest.raises(InvalidInput, match="At most one item may be in_progress") as err:
        _store(database).write("l1", items)
    assert "'Write parser'" in str(err.value) and "'Ship release'" in str(err.value)
    assert "Fix tests" not in str(err.value)


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ({"content": "x", "status": "done"}, "unknown status 'done'. Use one of: pending, in_progress, completed"),
        ({"content": "x", "status": None}, "unknown status None"),
        ({"content": "   ", "status": "pending"}, "empty content"),
        ({"status": "pending"}, "empty content"),
        ({"content": "x", "status": "pending", "priority": "urgent"}, "unknown priority 'urgent'"),
        ({"content": "x", "status": "pending", "id": "has space"}, "invalid id"),
    ],
)
def test_rules_reject_bad_items(database: Any, item: dict[str, Any], message: str) -> None:
    store = _store(database)
    store.write("l1", [{"content": "keep me", "status": "pending"}])
    with pytest.raises(InvalidInput, match=message.replace("(", r"\(").replace(")", r"\)")):
        store.write("l1", [{"content": "first", "status": "pending"}, item])
    assert [i.content for i in store.read("l1").items] == ["keep me"]  # a rejected write changes nothing


def test_ids_are_kept_or_generated_and_unique(database: Any) -> None:
    store = _store(database)
    first = store.write("l1", [{"content": "a", "status": "pending", "id": "keep-1"}, {"content": "b", "status": "pending"}])
    assert first.items[0].id == "keep-1"
    generated = first.items[1].id
    assert len(generated) == 8 and generated != "keep-1"
    second = store.write("l1", [{"content": "b", "status": "completed", "id": generated}])
    assert second.items[0].id == generated and second.version == 2
    with pytest.raises(InvalidInput, match="repeats id 'x1'"):
        store.write("l1", [{"content": "a", "status": "pending", "id": "x1"}, {"content": "b", "status": "pending", "id": "x1"}])


def test_summary_defaults_and_limits(database: Any) -> None:
    store = _store(database)
    todo = store.write(
        "l1",
        [{"content": c, "status": s} for c, s in
         [("a", "pending"), ("b", "pending"), ("c", "pending"), ("d", "in_progress"), ("e", "completed"), ("f", "completed")]],
    )
    assert todo.summary == "3 pending, 1 in progress, 2 completed"
    assert todo.items[0].priority == "medium" and todo.items[0].active_form is None
    empty = store.read("never-written")
    assert empty.items == [] and empty.version == 0 and empty.summary == "0 pending, 0 in progress, 0 completed"
    with pytest.raises(LimitExceeded, match="at most 200 items"):
        normalize_items([{"content": str(i), "status": "pending"} for i in range(201)])
    for bad in ("../etc", "a:b", "", "x" * 121):
        with pytest.raises(InvalidInput, match="Invalid list_id"):
            store.read(bad)


def test_reminder_and_open_items(database: Any) -> None:
    store = _store(database)
    assert store.reminder_text("l1") is None
    store.write("l1", [
        {"content": "Done thing", "status": "completed"},
        {"content": "Later thing", "status": "pending"},
        {"content": "Run tests", "status": "in_progress", "active_form": "Running tests"},
    ])
    assert [i.content for i in store.open_items("l1")] == ["Run tests", "Later thing"]
    text = store.reminder_text("l1")
    assert text is not None and "Running tests" in text and "Later thing" in text and "Done thing" not in text
    assert "1 pending, 1 in progress, 1 completed" in text
    store.write("l1", [{"content": "Done thing", "status": "completed"}])
    assert store.reminder_text("l1") is None


def test_tools_without_mcp_and_persistence_across_restart(settings: Any) -> None:
    rt = Runtime(settings)
    call = CallContext(tool="todo_write", client_id="claude-code")
    written = todo_write([{"content": "Index docs", "status": "in_progress"}], rt=rt, call=call)  # type: ignore[list-item]
    assert written.list_id == default_list_id(settings, "claude-code")
    assert written.list_id.startswith("claude-code@")
    rt.close()
    again = Runtime(settings)  # a new server on the same data dir
    read = todo_read(rt=again, call=CallContext(tool="todo_read", client_id="claude-code"))
    assert [(i.id, i.content) for i in read.items] == [(written.items[0].id, "Index docs")]
    reminder = reminder_for(again, "claude-code")
    assert reminder is not None and "Index docs" in reminder and reminder_for(again, "cursor") is None
    other_client = todo_read(rt=again, call=CallContext(tool="todo_read", client_id="cursor"))
    assert other_client.items == [] and other_client.list_id != read.list_id
    again.close()


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_tools_and_resource_through_the_client(settings: Any, mode: str) -> None:
    async with connect(settings, mode) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert tools["todo_read"].annotations.read_only_hint is True
        assert tools["todo_write"].annotations.read_only_hint is False
        item_schema = tools["todo_write"].input_schema["properties"]["todos"]["items"]["properties"]
        assert item_schema["status"]["enum"] == ["pending", "in_progress", "completed"]
        result = await client.call_tool("todo_write", {"todos": [
            {"content": "Read spec", "status": "completed"},
            {"content": "Write code", "status": "in_progress", "active_form": "Writing code", "priority": "high"},
        ]})
        assert not result.is_error, result.content
        assert result.structured_content["summary"] == "0 pending, 1 in progress, 1 completed"
        bad = await client.call_tool("todo_write", {"todos": [{"content": "a", "status": "in_progress"},
                                                              {"content": "b", "status": "in_progress"}]})
        assert bad.is_error and "At most one item may be in_progress" in bad.content[0].text
        templates = (await client.list_resource_templates()).resource_templates
        assert any(t.uri_template == "todo://{list_id}" for t in templates)
        resource = await client.read_resource("todo://default")
        data = json.loads(resource.contents[0].text)
        assert data["list_id"] == result.structured_content["list_id"]
        by_id = json.loads((await client.read_resource(f"todo://{data['list_id']}")).contents[0].text)
        assert by_id == data
        assert [i["content"] for i in data["items"]] == ["Read spec", "Write code"]
        named = await client.call_tool("todo_write", {"list_id": "release-1.0", "todos": [{"content": "Tag", "status": "pending"}]})
        assert not named.is_error
        other = json.loads((await client.read_resource("todo://release-1.0")).contents[0].text)
        assert other["items"][0]["content"] == "Tag"


@pytest.mark.anyio
async def test_list_survives_a_server_restart_through_the_client(settings: Any) -> None:
    async with connect(settings) as client:
        await client.call_tool("todo_write", {"todos": [{"content": "Survive restart", "status": "pending"}]})
    async with connect(settings) as client:  # a fresh server on the same data dir
        result = await client.call_tool("todo_read", {})
        assert [i["content"] for i in result.structured_content["items"]] == ["Survive restart"]
