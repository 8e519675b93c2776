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
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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
        _plain_sql(settings, "UPDATE approvals SET status='granted' WHERE id=?", (fresh_id,))  # re-arm a used one
        again = await client.call_tool("poke", {"text": "z"})
        assert again.is_error and helpers.CALLS == ["z"]


def _as_role(url: str, role: str, password: str) -> str:
    """`url` (the test server's superuser URL of one schema) for another role."""
    from urllib.parse import quote, urlsplit, urlunsplit

    parts = urlsplit(url)
    host = parts.netloc.split("@", 1)[1]
    return urlunsplit((parts.scheme, f"{role}:{quote(password, safe='')}@{host}", parts.path, parts.query, ""))


def test_served_by_a_role_that_does_not_own_it_the_audit_log_cannot_be_undone(pg_server: Any, data_dir: Path,
                                                                              workspace: Path) -> None:
    """The owner role migrates; the server's role gets only the grants `doctor` prints. Then the server works,
    writes its audit rows, and its role can neither delete nor change them nor disable the triggers (before,
    the server's role owned the table: `ALTER TABLE audit_log DISABLE TRIGGER` then let it delete rows).
    `doctor` warns about the owner's URL and not about the server role's."""
    import psycopg

    from foundation.settings import load_settings
    from foundation.storage import open_database
    from mcp_server.approval.audit import audit_log_for, audit_weaknesses
    from mcp_server.stores import store_kinds

    owner_url, schema = pg_server.fresh_schema()
    owner_db = open_database(data_dir, owner_url)
    try:
        for kind in store_kinds():
            owner_db.open(kind.schema)
        assert "is a superuser" in audit_weaknesses(owner_db)
    finally:
        owner_db.close()
    role, password = f"server_{schema}", "role-pw-1"
    with psycopg.connect(owner_url, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
        from mcp_server.approval.audit import GRANTS

        for statement in GRANTS.replace("<schema>", schema).replace("<server role>", role).split("; "):
            conn.execute(statement)
    server_url = _as_role(owner_url, role, password)
    settings = load_settings({"data_dir": data_dir, "roots": [workspace], "database_url": server_url}, environ={})
    database = open_database(data_dir, server_url)
    try:
        assert audit_weaknesses(database) == []
        audit_log_for(database, data_dir).record(tool="poke", args={"x": 1}, action="ask", rule_id="r", risk="low",
                                                 reason="r", outcome="approval_required", origin="client:t",
                                                 approved_by=None, approval_id=None, scope=None)
        with helpers.approvals(settings) as store:  # the approvals work under this role too
            pending = store.request("poke", {"x": 1}, risk="medium", reason="r", rule_id="x", origin="t")
            assert store.decide(pending.id, True, by="cli").status == "granted"
    finally:
        database.close()
    with psycopg.connect(server_url, autocommit=True) as conn:
        for attack in ("ALTER TABLE audit_log DISABLE TRIGGER ALL", "DELETE FROM audit_log", "TRUNCATE audit_log",
                       "UPDATE audit_log SET entry = 'x'", "DROP TABLE audit_log",
                       "ALTER TABLE audit_log OWNER TO CURRENT_USER"):
            with pytest.raises(psycopg.Error):
                conn.execute(attack)
        assert conn.execute("SELECT count(*) FROM audit_log").fetchone() == (1,)
    env = {**helpers.cli_env(settings)}
    doctor = subprocess.run([str(CLI), "doctor"], env={**env, "GENERALAGENT_DATABASE_URL": owner_url},
                            capture_output=True, text=True, timeout=120)
    assert "[warn] audit log: the server's database role is a superuser" in doctor.stdout, doctor.stdout
    doctor = subprocess.run([str(CLI), "doctor"], env={**env, "GENERALAGENT_DATABASE_URL": server_url},
                            capture_output=True, text=True, timeout=120)
    assert "[ok  ] audit log: append-only by privilege" in doctor.stdout, doctor.stdout


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field=st.sampled_from(["id", "tool", "args_hash", "scope", "scope_path", "expires", "approved_by"]),
       value=st.text(max_size=12))
def test_changing_any_field_a_grant_is_judged_by_breaks_its_seal(tmp_path_factory: Any, field: str,
                                                               value: str) -> None:
    import dataclasses

    from foundation.settings import load_settings
    from foundation.storage import open_database
    from mcp_server.approval.store import ApprovalStore

    data = tmp_path_factory.mktemp("seal")
    settings = load_settings({"data_dir": data}, environ={})
    database = open_database(data)
    try:
        store = ApprovalStore(database, 60, settings)
        pending = store.request("poke", {"n": 1}, risk="medium", reason="r", rule_id="x", origin="t",
                                target="/w/a.txt")
        granted = store.decide(pending.id, True, by="cli", scope="file")
        assert store.sealed(granted)
        changed = dataclasses.replace(granted, **{field: float(len(value)) + 1e9 if field == "expires" else value})
        if getattr(changed, field) != getattr(granted, field):
            assert not store.sealed(changed), field
        assert not ApprovalStore(database, 60, load_settings({"data_dir": data / "other"}, environ={})).sealed(granted)
    finally:
        database.close()
