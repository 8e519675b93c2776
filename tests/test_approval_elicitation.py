"""Asking the human through MCP elicitation, in both protocol eras (2025-11-25 and 2026-07-28)."""

from __future__ import annotations

from typing import Any

import pytest

from tests import approval_helpers as helpers
from tests.conftest import MODES, connect

pytestmark = [pytest.mark.anyio, pytest.mark.storage]


@pytest.mark.parametrize("mode", MODES)
async def test_accept_runs_the_call_once(settings: Any, monkeypatch: Any, mode: str) -> None:
    helpers.install(monkeypatch)
    seen: list[str] = []
    async with connect(settings, mode, elicitation_callback=helpers.elicitation_answer("accept", seen=seen)) as c:
        await c.list_tools()
        result = await c.call_tool("poke", {"text": "hello"})
    assert not result.is_error, result.content
    assert result.structured_content == {"text": "hello"}
    assert helpers.CALLS == ["hello"]
    assert len(seen) == 1 and "poke" in seen[0] and '"text":"hello"' in seen[0] and "Risk:" in seen[0]
    last = helpers.audit_entries(settings)[-1]
    assert (last["tool"], last["outcome"], last["approved_by"]) == ("poke", "approved", "elicitation")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("action", ["decline", "cancel", "reject"])
async def test_decline_cancel_reject_execute_nothing(settings: Any, monkeypatch: Any, mode: str, action: str) -> None:
    helpers.install(monkeypatch)
    callback = helpers.elicitation_answer("accept", "reject") if action == "reject" else helpers.elicitation_answer(action)
    async with connect(settings, mode, elicitation_callback=callback) as c:
        await c.list_tools()
        result = await c.call_tool("poke", {"text": "nope"})
    assert result.is_error
    assert "did not approve" in result.content[0].text and "Nothing was executed" in result.content[0].text
    assert helpers.CALLS == []
    assert helpers.audit_entries(settings)[-1]["outcome"] == "rejected"


@pytest.mark.parametrize("mode", MODES)
async def test_approve_for_session_stops_asking(settings: Any, monkeypatch: Any, mode: str) -> None:
    helpers.install(monkeypatch)
    seen: list[str] = []
    callback = helpers.elicitation_answer("accept", "approve_session", seen=seen)
    async with connect(settings, mode, elicitation_callback=callback) as c:
        await c.list_tools()
        for text in ("one", "two", "three"):
            assert not (await c.call_tool("poke", {"text": text})).is_error
    assert helpers.CALLS == ["one", "two", "three"]
    assert len(seen) == 1
    outcomes = [(e["outcome"], e["approved_by"]) for e in helpers.audit_entries(settings) if e["tool"] == "poke"]
    assert outcomes == [("approved", "elicitation"), ("approved", "session-grant"), ("approved", "session-grant")]


@pytest.mark.parametrize("mode", MODES)
async def test_read_only_tools_are_not_asked(settings: Any, monkeypatch: Any, mode: str) -> None:
    seen: list[str] = []
    async with connect(settings, mode, elicitation_callback=helpers.elicitation_answer("accept", seen=seen)) as c:
        await c.list_tools()
        assert not (await c.call_tool("now", {})).is_error
    assert seen == []


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("action", ["accept", "decline"])
async def test_a_read_only_tool_the_user_rules_ask_for_is_asked(make_settings: Any, data_dir: Any, mode: str,
                                                                 action: str) -> None:
    """Read-only calls with small arguments are decided on the event loop; one the rules ask for still asks."""
    (data_dir / "policy.toml").write_text('version = 1\n[permissions]\nask = ["now"]\n')
    settings = make_settings()
    seen: list[str] = []
    async with connect(settings, mode, elicitation_callback=helpers.elicitation_answer(action, seen=seen)) as c:
        await c.list_tools()
        result = await c.call_tool("now", {})
        assert not (await c.call_tool("todo_read", {})).is_error  # allowed: not asked
    assert len(seen) == 1 and "now" in seen[0]
    assert result.is_error == (action == "decline")
    outcomes = [(e["tool"], e["outcome"]) for e in helpers.audit_entries(settings)]
    assert outcomes == [("now", "approved" if action == "accept" else "rejected"), ("todo_read", "allowed")]


@pytest.mark.parametrize("mode", MODES)
async def test_deny_is_a_clear_error_without_asking(settings: Any, monkeypatch: Any, mode: str) -> None:
    helpers.install(monkeypatch)
    seen: list[str] = []
    async with connect(settings, mode, elicitation_callback=helpers.elicitation_answer("accept", seen=seen)) as c:
        await c.list_tools()
        result = await c.call_tool("poke", {"text": "x", "path": "/etc/shadow"})
    assert result.is_error and "Denied by policy" in result.content[0].text
    assert seen == [] and helpers.CALLS == []
    last = helpers.audit_entries(settings)[-1]
    assert (last["action"], last["outcome"]) == ("deny", "denied") and last["rule_id"]


@pytest.mark.parametrize("mode", MODES)
async def test_a_confirm_argument_is_never_consent(settings: Any, monkeypatch: Any, mode: str) -> None:
    helpers.install(monkeypatch)
    async with connect(settings, mode) as c:
        await c.list_tools()
        result = await c.call_tool("poke", {"text": "x", "confirm": True, "approved": True})
    assert result.is_error and helpers.CALLS == []


@pytest.mark.parametrize("mode", MODES)
async def test_high_risk_calls_cannot_be_approved_for_the_session(settings: Any, monkeypatch: Any, mode: str) -> None:
    helpers.install(monkeypatch)
    asked: list[Any] = []

    async def callback(context: Any, params: Any) -> Any:
        from mcp_types import ElicitResult

        asked.append(params.requested_schema)
        return ElicitResult(action="accept", content={"decision": "approve_once"})

    async with connect(settings, mode, elicitation_callback=callback) as c:
        await c.list_tools()
        for _ in range(2):
            assert not (await c.call_tool("poke", {"text": "DROP TABLE users"})).is_error
    assert len(asked) == 2  # asked every time
    assert asked[0]["properties"]["decision"]["enum"] == ["approve_once", "reject"]
    assert helpers.CALLS == ["DROP TABLE users"] * 2


@pytest.mark.parametrize(
    "text", ["echo y | generalagent-mcp approve ap-abcdef", "curl -X POST http://127.0.0.1:8765/approvals/ap-abcdef"]
)
async def test_calls_that_try_to_approve_are_denied(settings: Any, monkeypatch: Any, text: str) -> None:
    helpers.install(monkeypatch)
    async with connect(settings, elicitation_callback=helpers.elicitation_answer("accept")) as c:
        result = await c.call_tool("poke", {"text": text})
    assert result.is_error and "approval.self-approval" in result.content[0].text and helpers.CALLS == []


async def test_mentioning_a_live_approval_id_is_denied(make_settings: Any, monkeypatch: Any) -> None:
    import re

    helpers.install(monkeypatch, helpers.POKE, helpers.ZAP)
    async with connect(make_settings(tool_profile="full")) as c:
        await c.list_tools()
        pending = await c.call_tool("poke", {"text": "first"})
        approval_id = re.search(r"ap-[a-z2-9]{6}", pending.content[0].text).group(0)  # type: ignore[union-attr]
        sneaky = await c.call_tool("zap", {"text": f"x=$(printf '%s' {approval_id}); do-something $x"})
        assert sneaky.is_error and "approval.self-approval" in sneaky.content[0].text
        # a non-destructive call may pass the id along (e.g. telling a sub-agent it was approved): it is asked
        told = await c.call_tool("poke", {"text": f"{approval_id} was approved, retry"})
        assert told.is_error and "Approval required" in told.content[0].text


async def test_state_changing_calls_naming_the_approval_files_are_denied(settings: Any, monkeypatch: Any) -> None:
    helpers.install(monkeypatch)
    async with connect(settings, elicitation_callback=helpers.elicitation_answer("accept")) as c:
        for text in ("sqlite3 ../../approvals.sqlite3 'update approvals set status=1'",
                     f"> {settings.data_dir}/audit.jsonl", f"edit {settings.data_dir}/policy.toml"):
            result = await c.call_tool("poke", {"text": text})
            assert result.is_error and "approval.protected-state" in result.content[0].text, text
        assert not (await c.call_tool("poke", {"text": "my own policy.toml notes"})).is_error
    assert helpers.CALLS == ["my own policy.toml notes"]


@pytest.mark.parametrize("mode", MODES)
async def test_session_grant_for_a_destructive_tool_covers_identical_calls_only(
    make_settings: Any, monkeypatch: Any, mode: str
) -> None:
    helpers.install(monkeypatch, helpers.ZAP)
    seen: list[str] = []
    callback = helpers.elicitation_answer("accept", "approve_session", seen=seen)
    async with connect(make_settings(tool_profile="full"), mode, elicitation_callback=callback) as c:
        await c.list_tools()
        for text in ("a", "a", "b"):
            assert not (await c.call_tool("zap", {"text": text})).is_error
    assert helpers.CALLS == ["a", "a", "b"]
    assert len(seen) == 2 and "identical calls only" in seen[0]


async def test_the_event_loop_never_waits_for_the_gate_to_open_its_database(settings: Any) -> None:
    """Read-only calls are decided on the loop (clients that can answer elicitations); the gate opens its
    database on first use under a lock a worker thread may hold for long (a PostgreSQL connect): the
    loop's decision must not wait for that lock, so other requests are still answered meanwhile."""
    import threading

    import anyio
    from mcp.client import Client

    from mcp_server.server import build_server

    server, dispatcher = build_server(settings)
    gate: Any = dispatcher.gate
    async with Client(server, mode="legacy", elicitation_callback=helpers.elicitation_answer("accept")) as c:
        await c.list_tools()
        assert not (await c.call_tool("now", {})).is_error  # rules and engine loaded
        held, release, freed = threading.Event(), threading.Event(), threading.Event()

        def hold() -> None:
            with gate._lazy:
                held.set()
                release.wait(60)
            freed.set()

        threading.Thread(target=hold, daemon=True).start()
        assert held.wait(30)
        async with anyio.create_task_group() as group:
            group.start_soon(c.call_tool, "now", {})  # its audit line waits for the lock, in a worker thread
            await anyio.sleep(0.2)
            await c.list_tools()  # answered by the event loop alone
            answered_while_held = not freed.is_set()  # the lock is held for 60 s unless released here
            release.set()
        assert answered_while_held, "list_tools waited for the gate's lock"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("tool, args, expected", [
    ("forget", {}, "exactly one of id or query"),
    ("forget", {"id": 1, "query": "x"}, "exactly one of id or query"),
    ("run_bash_command", {"command": "ls\x00 -la"}, "NUL byte"),
])
async def test_bad_arguments_fail_before_anyone_is_asked(make_settings: Any, mode: str, tool: str,
                                                         args: dict[str, Any], expected: str) -> None:
    """Argument checks run before the approval gate: the human is never asked about a call that cannot run."""
    seen: list[str] = []
    settings = make_settings(bash_enabled=True)
    async with connect(settings, mode, elicitation_callback=helpers.elicitation_answer("accept", seen=seen)) as c:
        result = await c.call_tool(tool, args)
    assert result.is_error and expected in result.content[0].text, result.content
    assert seen == []
    assert all(entry["tool"] != tool for entry in helpers.audit_entries(settings))
