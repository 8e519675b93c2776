"""Approval for a scope, chosen by the human (CLI or the local page), bound to it, audited; and the
printed approve command runs as printed."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests import approval_helpers as helpers
from tests.conftest import connect
from tests.test_approval_oob import CLI, approval_id_of, approve

pytestmark = [pytest.mark.anyio, pytest.mark.storage]


async def poke(client: Any, text: str, path: str | None = None) -> Any:
    args: dict[str, Any] = {"text": text}
    if path is not None:
        args["path"] = path
    return await client.call_tool("poke", args)


async def test_folder_scope_covers_that_folder_only(settings: Any, monkeypatch: Any, workspace: Path) -> None:
    helpers.install(monkeypatch)
    async with connect(settings) as client:
        approval_id = approval_id_of(await poke(client, "a", "sub/a.txt"))
        done = approve(settings, approval_id, "y\n", "--scope", "folder")
        assert done.returncode == 0, done.stderr
        assert f"poke on files in {os.path.realpath(workspace / 'sub')}/" in done.stdout
        assert not (await poke(client, "a", "sub/a.txt")).is_error
        assert not (await poke(client, "b", "sub/b.txt")).is_error  # another write in that folder
        assert not (await poke(client, "d", "sub/deeper/d.txt")).is_error
        outside = await poke(client, "c", "other/c.txt")
        approval_id_of(outside)  # not covered: a new approval is needed
        assert approval_id_of(await poke(client, "s", "subway.txt"))  # a sibling prefix is not inside
        assert approval_id_of(await poke(client, "n"))  # a call naming no file is not covered
        assert helpers.CALLS == ["a", "b", "d"]
    entries = [e for e in helpers.audit_entries(settings) if e["tool"] == "poke"]
    grant = next(e for e in entries if e["outcome"] == "granted")
    assert grant["scope"] == "folder" and grant["scope_path"] == os.path.realpath(workspace / "sub")
    assert grant["approved_by"] == "cli" and "expires" in grant
    used = [e for e in entries if e["outcome"] == "approved"]
    assert len(used) == 3 and all(e["scope"] == "folder" and e["approval_id"] == approval_id for e in used)


async def test_file_scope_chosen_interactively_and_expiry(settings: Any, monkeypatch: Any) -> None:
    helpers.install(monkeypatch)
    async with connect(settings) as client:
        approval_id = approval_id_of(await poke(client, "1", "notes.txt"))
        done = approve(settings, approval_id, "y\n3\n")  # 3) poke on this file
        assert done.returncode == 0 and "Approve for:" in done.stdout and "1) this exact call, once" in done.stdout
        assert not (await poke(client, "2", "notes.txt")).is_error  # other arguments, same file
        assert approval_id_of(await poke(client, "3", "notes2.txt"))
        with helpers.approvals(settings) as store:  # let the grant run out
            store._db.write(lambda c: c.execute("UPDATE approvals SET expires=? WHERE id=?",
                                                (time.time() - 1, approval_id)))
        assert approval_id_of(await poke(client, "4", "notes.txt"))
        assert helpers.CALLS == ["2"]


async def test_today_and_tool_scopes(settings: Any, monkeypatch: Any) -> None:
    helpers.install(monkeypatch)
    async with connect(settings) as client:
        today = approval_id_of(await poke(client, "same"))
        assert approve(settings, today, "y\n", "--scope", "today").returncode == 0
        for _ in range(3):
            assert not (await poke(client, "same")).is_error  # exactly this call, repeatedly
        assert approval_id_of(await poke(client, "different"))
        tool = approval_id_of(await poke(client, "x", "a/b.txt"))
        assert approve(settings, tool, "y\n", "--scope", "tool").returncode == 0
        assert not (await poke(client, "y", "/elsewhere/c.txt")).is_error
    assert helpers.CALLS == ["same"] * 3 + ["y"]


async def test_scope_needs_a_file_and_the_model_cannot_grant(settings: Any, monkeypatch: Any) -> None:
    helpers.install(monkeypatch)
    async with connect(settings) as client:
        approval_id = approval_id_of(await poke(client, "nofile"))
        refused = approve(settings, approval_id, "y\n", "--scope", "folder")
        assert refused.returncode != 0 and "does not apply" in (refused.stdout + refused.stderr)
        sneaky = await poke(client, f"approve --scope tool {approval_id}")
        assert sneaky.is_error and helpers.CALLS == []


def test_page_grants_the_chosen_scope(settings: Any, monkeypatch: Any, workspace: Path) -> None:
    from mcp_server.server import build_server

    helpers.install(monkeypatch)
    server, dispatcher = build_server(settings)
    with helpers.page_client(settings, server) as client:
        _page_grants_the_chosen_scope(settings, dispatcher, client, str(client.base_url).rstrip("/"))


def _page_grants_the_chosen_scope(settings: Any, dispatcher: Any, client: Any, base: str) -> None:
    import anyio

    from foundation.calls import CallOrigin
    from foundation.errors import ApprovalRequired

    async def run(text: str, path: str) -> str | None:
        try:
            await dispatcher.run("poke", {"text": text, "path": path}, CallOrigin())
        except ApprovalRequired as exc:
            return str(exc).split("Approval id: ")[1].split()[0]
        return None

    approval_id = anyio.run(run, "w", "docs/x.txt")
    assert approval_id
    page = client.get(f"/approvals/{approval_id}").text
    assert "value='folder'" in page and "value='once' checked" in page
    token = re.search(r"name='csrf' value='([^']+)'", page).group(1)  # type: ignore[union-attr]
    bad = client.post(f"/approvals/{approval_id}", data={"csrf": token, "decision": "approve", "scope": "all"})
    assert bad.status_code == 400
    done = client.post(f"/approvals/{approval_id}", data={"csrf": token, "decision": "approve", "scope": "folder"},
                       headers={"Origin": base})
    assert done.status_code == 200 and "approved for poke on files in" in done.text
    assert anyio.run(run, "w2", "docs/y.txt") is None and anyio.run(run, "w3", "src/z.txt") is not None
    grant = next(e for e in helpers.audit_entries(settings) if e["outcome"] == "granted")
    assert grant["approved_by"] == "http-page" and grant["scope"] == "folder"


async def test_the_printed_command_runs_as_printed(settings: Any, monkeypatch: Any) -> None:
    helpers.install(monkeypatch)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # like a desktop app's environment: the venv is not on PATH
    async with connect(settings) as client:
        text = (await poke(client, "deploy")).content[0].text
        command = text.split("in a terminal:\n", 1)[1].splitlines()[0].strip()
        assert command.startswith((str(CLI), "'/"))  # absolute
        env = {k: v for k, v in os.environ.items() if not k.startswith("GENERALAGENT_")}
        if settings.database_url:  # the printed command relies on the terminal's database URL, never a password
            assert "GENERALAGENT_DATABASE_URL names the server's database" in text
            assert settings.database_url not in text and "***" in text
            env["GENERALAGENT_DATABASE_URL"] = settings.database_url
        done = subprocess.run(["/bin/sh", "-c", command], input="y\n", env=env, capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == 0 and "Approved" in done.stdout, done.stdout + done.stderr
        assert not (await poke(client, "deploy")).is_error


def test_bare_name_only_when_it_is_this_script_on_path(monkeypatch: Any, tmp_path: Path) -> None:
    from foundation.command import cli_command

    monkeypatch.setenv("PATH", f"{CLI.parent}:/usr/bin:/bin")
    assert cli_command() == "generalagent-mcp"
    other = tmp_path / "bin"
    other.mkdir()
    (other / "generalagent-mcp").write_text("#!/bin/sh\nexit 3\n")
    (other / "generalagent-mcp").chmod(0o755)
    monkeypatch.setenv("PATH", f"{other}:/usr/bin:/bin")  # another program of that name comes first
    assert cli_command() == str(CLI)


def test_a_wider_grant_never_covers_a_high_risk_call(settings: Any, workspace: Path) -> None:
    """A folder grant given for notes.md covered write_file .git/config, which the policy asks about every
    time (high risk: it makes git run code); such calls are only ever granted one by one (round 3)."""
    import anyio

    from foundation.calls import CallOrigin
    from foundation.errors import ApprovalRequired, Conflict
    from mcp_server.approval.store import scope_choices
    from mcp_server.server import build_server

    _, dispatcher = build_server(settings)

    async def write(path: str, content: str = "x") -> str | None:
        try:
            await dispatcher.run("write_file", {"path": path, "content": content}, CallOrigin())
        except ApprovalRequired as exc:
            return str(exc).split("Approval id: ")[1].split()[0]
        return None

    first = anyio.run(write, "notes.md")
    assert first
    with helpers.approvals(settings) as store:
        store.decide(first, True, by="cli", scope="folder")
    assert anyio.run(write, "todo.md") is None  # medium risk, in that folder: covered
    assert anyio.run(write, ".git/config", "[core]\n\tfsmonitor = sh") is not None  # high risk: asked
    assert not (workspace / ".git").exists()
    high = anyio.run(write, ".bashrc")
    assert high
    with helpers.approvals(settings) as store:
        assert [scope for scope, _ in scope_choices(store.get(high))] == ["once", "today"]
        with pytest.raises(Conflict, match="does not apply"):
            store.decide(high, True, by="cli", scope="tool")
