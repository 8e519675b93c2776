"""No elicitation (Claude Desktop, Inspector CLI): approval id -> `generalagent-mcp approve` -> identical call runs once."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from mcp_server.approval.store import ApprovalStore
from tests import approval_helpers as helpers
from tests.conftest import MODES, connect

pytestmark = [pytest.mark.anyio, pytest.mark.storage]

CLI = Path(sys.executable).parent / "generalagent-mcp"
APPROVAL_ID = re.compile(r"Approval id: (ap-[a-z2-9]{6})")


def approve(settings: Any, approval_id: str, answer: str = "y\n", *extra: str) -> subprocess.CompletedProcess[str]:
    """`generalagent-mcp approve` in a terminal whose environment names the server's state."""
    env = helpers.cli_env(settings)
    return subprocess.run([str(CLI), "approve", *extra, approval_id], input=answer, env=env,
                          capture_output=True, text=True, timeout=60)


def approval_id_of(result: Any) -> str:
    assert result.is_error
    text = result.content[0].text
    assert "Approval required" in text and "was NOT executed" in text
    match = APPROVAL_ID.search(text)
    assert match, text
    assert f"approve {match.group(1)}" in text  # the exact command to run
    return match.group(1)


@pytest.mark.parametrize("mode", MODES)
async def test_cli_approval_end_to_end(settings: Any, monkeypatch: Any, mode: str) -> None:
    helpers.install(monkeypatch)
    async with connect(settings, mode) as client:
        await client.list_tools()
        first = await client.call_tool("poke", {"text": "deploy"})
        approval_id = approval_id_of(first)
        assert helpers.CALLS == []
        again = await client.call_tool("poke", {"text": "deploy"})
        assert approval_id_of(again) == approval_id  # the same pending approval, not a new one

        done = approve(settings, approval_id)
        assert done.returncode == 0, done.stderr
        assert "poke" in done.stdout and '"text": "deploy"' in done.stdout and "Risk:" in done.stdout
        assert "Approve this call? [y/N]" in done.stdout and "Approved" in done.stdout

        changed = await client.call_tool("poke", {"text": "deploy --everything"})
        assert approval_id_of(changed) != approval_id and helpers.CALLS == []

        ok = await client.call_tool("poke", {"text": "deploy"})
        assert not ok.is_error and helpers.CALLS == ["deploy"]

        repeat = await client.call_tool("poke", {"text": "deploy"})
        assert approval_id_of(repeat) != approval_id and helpers.CALLS == ["deploy"]  # single use
    entries = [e for e in helpers.audit_entries(settings) if e["tool"] == "poke"]
    assert any(e["outcome"] == "granted" and e["approved_by"] == "cli" for e in entries)
    assert any(e["outcome"] == "approved" and e["approved_by"] == "cli" and e["approval_id"] == approval_id
               for e in entries)


async def test_cli_no_or_empty_answer_changes_nothing(settings: Any, monkeypatch: Any) -> None:
    helpers.install(monkeypatch)
    async with connect(settings) as client:
        approval_id = approval_id_of(await client.call_tool("poke", {"text": "a"}))
        for answer in ("n\n", "\n", "", "yes please\n"):
            done = approve(settings, approval_id, answer)
            assert done.returncode == 1 and "Approved" not in done.stdout
        assert approval_id_of(await client.call_tool("poke", {"text": "a"})) == approval_id
        listing = subprocess.run([str(CLI), "--data-dir", str(settings.data_dir), "approve", "--list"],
                                 capture_output=True, text=True, timeout=60, env=helpers.cli_env(settings))
        assert approval_id in listing.stdout and "poke" in listing.stdout
        rejected = approve(settings, approval_id, "y\n", "--reject")
        assert rejected.returncode == 0 and "Rejected" in rejected.stdout
        assert approve(settings, approval_id).returncode == 1  # already decided
    assert helpers.CALLS == []


async def test_unknown_approval_id_is_a_clear_error(settings: Any) -> None:
    done = approve(settings, "ap-zzzzzz")
    assert done.returncode == 1 and "No approval" in done.stderr and "--list" in done.stderr


async def test_expired_approvals_are_not_honoured(settings: Any, monkeypatch: Any) -> None:
    helpers.install(monkeypatch)
    async with connect(settings) as client:
        approval_id = approval_id_of(await client.call_tool("poke", {"text": "late"}))
        assert approve(settings, approval_id).returncode == 0
        with helpers.approvals(settings) as store:  # the clock moves on past the expiry
            store._db.write(lambda c: c.execute("UPDATE approvals SET expires=? WHERE id=?",
                                                (time.time() - 1, approval_id)))
        later = await client.call_tool("poke", {"text": "late"})
        assert approval_id_of(later) != approval_id and helpers.CALLS == []


def test_store_expiry_with_a_short_ttl(database: Any, monkeypatch: Any) -> None:
    """The store's clock is moved on by hand: with the real one, a machine that takes more than the 0.3 s
    ttl between a request and its decision (loaded, or PostgreSQL round trips) found the fresh one expired."""
    from types import SimpleNamespace

    from mcp_server.approval import store as store_module

    now = [time.time()]
    monkeypatch.setattr(store_module, "time", SimpleNamespace(time=lambda: now[0]))
    store = ApprovalStore(database, ttl_seconds=0.3)
    pending = store.request("poke", {"text": "t"}, risk="medium", reason="r", rule_id="x", origin="client:test")
    now[0] += 0.35
    with pytest.raises(Exception, match="expired"):
        store.decide(pending.id, True, by="cli")
    fresh = store.request("poke", {"text": "t"}, risk="medium", reason="r", rule_id="x", origin="client:test")
    assert fresh.id != pending.id
    now[0] += 0.25  # still within the ttl, however long the machine took
    store.decide(fresh.id, True, by="cli")
    now[0] += 0.35
    assert store.consume("poke", {"text": "t"}) is None


def test_store_grant_is_single_use_and_bound_to_the_call(database: Any) -> None:
    store = ApprovalStore(database, ttl_seconds=60)
    pending = store.request("poke", {"text": "t", "n": 1}, risk="medium", reason="r", rule_id="x", origin="c")
    store.decide(pending.id, True, by="cli")
    assert store.consume("poke", {"text": "t", "n": 2}) is None
    assert store.consume("zap", {"text": "t", "n": 1}) is None
    assert store.consume("poke", {"n": 1, "text": "t"}) is not None  # key order does not matter
    assert store.consume("poke", {"text": "t", "n": 1}) is None
    assert re.fullmatch(r"ap-[a-z2-9]{6}", pending.id)
