"""Approvals and the audit log hold against someone holding the database (issue 30, finding 4).

A grant is sealed with a key in the data directory (which neither the database nor the sandbox holds): a
plain `UPDATE approvals SET status='granted'` from another connection with the server's URL grants nothing.
On PostgreSQL, served by a role that does not own the tables (migrated by another), the server's role can
neither change nor delete audit rows nor turn the audit log's triggers off; and `doctor` says when the
server's role could (it owns the table, or is a superuser)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests import approval_helpers as helpers
from tests.conftest import connect

pytestmark = [pytest.mark.anyio, pytest.mark.storage]
CLI = Path(sys.executable).parent / "generalagent-mcp"


def _plain_sql(settings: Any, sql: str, params: tuple[Any, ...] = ()) -> None:
    """What someone with the database (not the data directory's key) can do: SQL on another connection."""
    if settings.database_url:
        import psycopg

        with psycopg.connect(settings.database_url, autocommit=True) as conn:
            conn.execute(sql.replace("?", "%s"), params)
    else:
        import sqlite3

        with sqlite3.connect(settings.data_dir / "approvals.sqlite3") as conn:
            conn.execute(sql, params)


async def test_a_plain_update_grants_nothing_but_the_person_does(make_settings: Any, monkeypatch: Any) -> None:
    helpers.install(monkeypatch)
    settings = make_settings()
    async with connect(settings) as client:
        held = await client.call_tool("poke", {"text": "x"})
        assert held.is_error
        with helpers.approvals(settings) as store:
            approval_id = store.pending()[0].id
        _plain_sql(settings, "UPDATE approvals SET status='granted', approved_by='cli', scope='tool', "
                             "expires=expires+3600 WHERE id=?", (approval_id,))
        still = await client.call_tool("poke", {"text": "x"})
        assert still.is_error and "Approval required" in still.content[0].text and helpers.CALLS == []
        with helpers.approvals(settings) as store:  # a seal copied from another grant does not fit either
            other = store.request("poke", {"text": "y"}, risk="medium", reason="r", rule_id="x", origin="t")
            store.decide(other.id, True, by="cli")
            seal = store.get(other.id).seal
        assert seal
        _plain_sql(settings, "UPDATE approvals SET seal=? WHERE tool='poke' AND args_hash<>'' AND id<>?", (seal, other.id))
        assert (await client.call_tool("poke", {"text": "x"})).is_error and helpers.CALLS == []
        env = helpers.cli_env(settings)
        fresh = await client.call_tool("poke", {"text": "z"})
        fresh_id = fresh.content[0].text.split("Approval id: ")[1].split()[0]
        done = subprocess.run([str(CLI), "approve", fresh_id], input="y\n", env=env, capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0, done.stderr
        ok = await client.call_tool("poke", {"text": "z"})
        assert not ok.is_error and helpers.CALLS == ["z"]
