"""export/import: a SQLite data dir -> a file -> PostgreSQL -> a file -> SQLite again, nothing lost;
and the commands as a person runs them (migrate, doctor, export, import; a bad URL or a stopped server)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from foundation.storage import StorageError, open_database
from foundation.storage.transfer import import_
from mcp_server.stores import store_kinds

CLI = Path(sys.executable).parent / "generalagent-mcp"


def fill(data_dir: Path, url: str | None = None) -> None:
    """Something in every store, through the stores' own APIs (ids, versions, deletions, odd text)."""
    from context.memory import MemoryStore
    from context.store import ContextStore
    from context.subagent import StepDelta, ThreadStore
    from context.todos import TodoStore
    from mcp_server.approval.audit import audit_log_for
    from mcp_server.approval.store import ApprovalStore
    from mcp_server.http_state import SharedToolLists

    db = open_database(data_dir, url)
    todos = TodoStore(db)
    todos.write("list-1", [{"content": "Write the 'tests' — 测试", "status": "in_progress", "active_form": "Writing"},
                           {"content": "Ship 100% of it", "status": "pending", "priority": "high"}])
    todos.write("list-1", [{"content": "Only this one", "status": "completed", "id": "keep-1"}])
    todos.write("other", [])
    memory = MemoryStore(db)
    facts = [memory.remember(text, 0.25 + 0.1 * i, "pref" if i % 2 else None)[0]
             for i, text in enumerate(["Prefers pytest", "用户喜欢喝绿茶", "Deploys on Fridays", "Uses vim"])]
    memory.delete([facts[-1].id])  # the highest id is gone: the id counter must still move past it
    context = ContextStore(db)
    context.put("conv-1", "Summary of the first part.\nSecond line.", 12, "ab" * 32, "llm")
    context.put_state("conv-1", {"turn": 3, "nested": {"x": [1, 2.5, None]}})
    threads = ThreadStore(db)
    threads.create("subagent-0001", "researcher", ["now", "read_file"], "client-a")
    threads.save_step("subagent-0001", StepDelta([{"role": "user", "content": "hi"},
                                                  {"role": "assistant", "content": "done ✓"}], 1, 0, 42),
                      status="done", result="done ✓")
    approvals = ApprovalStore(db, 600)
    first = approvals.request("poke", {"text": "a", "path": "/w/x.txt"}, risk="medium", reason="r",
                              rule_id="rule.a", origin="client:c", target="/w/x.txt")
    approvals.decide(first.id, True, by="cli", scope="folder")
    second = approvals.request("poke", {"text": "b"}, risk="high", reason="r2", rule_id="rule.b", origin="client:c")
    approvals.decide(second.id, True, by="http-page")
    assert approvals.consume("poke", {"text": "b"}) is not None
    approvals.request("zap", {"n": 1}, risk="high", reason="still pending", rule_id="rule.c", origin="subagent:s")
    audit = audit_log_for(db, data_dir)
    audit.record(tool="poke", args={"api_key": "secret-value", "n": 1}, action="ask", rule_id="rule.a", risk="medium",
                 reason="r", outcome="approved", origin="client:c", approved_by="cli", approval_id=first.id)
    audit.record_decision(approvals.get(first.id))
    fill_index(db, data_dir)
    SharedToolLists(lambda: db).add("client:claude-code", ["count_tokens", "forget"])
    db.close()


def fill_index(db: Any, data_dir: Path) -> None:
    """Two indexed files (English and Chinese), a failed one, a vector and a finished index run."""
    import numpy as np

    from indexing.indexer import Indexer
    from indexing.store import JobRow
    from indexing.vectors import VectorStore
    from tools.index_services import open_index

    folder = data_dir.parent / f"{data_dir.name}-docs"
    folder.mkdir()
    (folder / "keeper.md").write_text("# Lighthouse\n\nThe keeper's log — end of the season.\n", encoding="utf-8")
    (folder / "tea.txt").write_text("绿茶怎么泡才不苦：水温八十度。\n", encoding="utf-8")
    (folder / "bad.pdf").write_bytes(b"%PDF-1.4 not really")
    store = open_index(db)
    Indexer(store).index_tree(folder)
    vectors = VectorStore(store)
    vectors.use_model("stub-model")
    vectors.put(vectors.missing(1), np.array([[0.5, -0.25, 1.0]], dtype=np.float32))
    store.save_job(JobRow(id="job-1", path=str(folder), state="done", done=3, total=3, indexed=2, failed=1,
                          chunks_added=2, started_at=1.5, finished_at=2.25))
    store.close()


def dump(data_dir: Path, url: str | None) -> dict[str, Any]:
    """Every exported row of every store, plus the id counters."""
    db = open_database(data_dir, url)
    try:
        out: dict[str, Any] = {}
        for kind in store_kinds():
            store = kind.portable(db, data_dir)
            for table in store.tables():
                out[f"{kind.name}.{table.name}"] = (store.identity_high(table), list(store.rows(table)))
        return out
    finally:
        db.close()


def cli(*args: str, data_dir: Path, url: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GENERALAGENT_")}
    env["GENERALAGENT_DATA_DIR"] = str(data_dir)
    if url:
        env["GENERALAGENT_DATABASE_URL"] = url
    return subprocess.run([str(CLI), *args], env=env, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def test_sqlite_to_postgresql_to_sqlite_loses_nothing(tmp_path: Path, pg_url: str) -> None:
    source, back = tmp_path / "source", tmp_path / "back"
    fill(source)
    original = dump(source, None)
    assert all(rows for key, (_, rows) in original.items()), "every table has rows"
    exported = cli("export", str(tmp_path / "state.jsonl.gz"), data_dir=source)
    assert exported.returncode == 0, exported.stderr
    assert "todo_items: 1" in exported.stdout and "audit_log: 2" in exported.stdout
    imported = cli("import", str(tmp_path / "state.jsonl.gz"), data_dir=tmp_path / "unused", url=pg_url)
    assert imported.returncode == 0, imported.stderr
    assert dump(tmp_path / "unused", pg_url) == original
    assert cli("export", str(tmp_path / "again.jsonl"), data_dir=tmp_path / "unused", url=pg_url).returncode == 0
    assert cli("import", str(tmp_path / "again.jsonl"), data_dir=back).returncode == 0
    assert dump(back, None) == original
    assert (back / "audit.jsonl").read_text() == (source / "audit.jsonl").read_text()  # byte for byte
    # the stores work on after the move: new ids continue past the old ones on both backends
    from context.memory import MemoryStore

    for data_dir, url in ((back, None), (tmp_path / "unused", pg_url)):
        db = open_database(data_dir, url)
        fact, _ = MemoryStore(db).remember("A brand new fact about zebras")
        assert fact.id == original["memory.memories"][0] + 1
        assert_index_searchable(db, data_dir)
        db.close()


def assert_index_searchable(db: Any, data_dir: Path) -> None:
    """The moved index finds what the original found, and takes new documents."""
    from indexing.search import Searcher
    from tools.index_services import open_index

    store = open_index(db)
    searcher = Searcher(store)
    assert [Path(h.path).name for h in searcher.search("lighthouse keeper")] == ["keeper.md"]
    assert [Path(h.path).name for h in searcher.search("绿茶 不苦")] == ["tea.txt"]
    assert store.corpus_stats()[0] == 2 and store.doc_freqs(["keeper"]) == {"keeper": 1}
    store.close()


def test_import_refuses_a_target_with_data_and_a_damaged_file(tmp_path: Path) -> None:
    fill(tmp_path / "a")
    assert cli("export", str(tmp_path / "a.jsonl"), data_dir=tmp_path / "a").returncode == 0
    busy = cli("import", str(tmp_path / "a.jsonl"), data_dir=tmp_path / "a")
    assert busy.returncode == 1 and "already holds data in: todos" in busy.stderr
    lines = (tmp_path / "a.jsonl").read_text().splitlines()
    (tmp_path / "cut.jsonl").write_text("\n".join(lines[: len(lines) // 2]) + "\n")
    db = open_database(tmp_path / "b")
    try:
        with pytest.raises(StorageError, match="cut off|should have"):
            import_([k.portable(db, tmp_path / "b") for k in store_kinds()], tmp_path / "cut.jsonl")
    finally:
        db.close()
    missing = cli("import", str(tmp_path / "nope.jsonl"), data_dir=tmp_path / "c")
    assert missing.returncode == 1 and "No export file" in missing.stderr


def test_migrate_and_doctor_on_postgresql(tmp_path: Path, pg_url: str) -> None:
    check = cli("migrate", "--check", data_dir=tmp_path, url=pg_url)
    assert check.returncode == 1 and "todos: version 0 of 1, 1 pending" in check.stdout
    assert "PostgreSQL 1" in check.stdout  # the server's version
    done = cli("migrate", data_dir=tmp_path, url=pg_url)
    assert done.returncode == 0 and "todos: applied 1 migration(s), version 0 -> 1" in done.stdout
    assert "audit: applied 1" in done.stdout
    assert cli("migrate", "--check", data_dir=tmp_path, url=pg_url).returncode == 0
    again = cli("migrate", data_dir=tmp_path, url=pg_url)
    assert again.returncode == 0 and "applied" not in again.stdout and "up to date" in again.stdout
    doctor = cli("doctor", "--json", data_dir=tmp_path, url=pg_url)
    database = next(c for c in json.loads(doctor.stdout) if c["name"] == "database")
    assert database["ok"] and "PostgreSQL" in database["detail"] and "todos 1/1" in database["detail"]
    password = pg_url.split(":")[2].split("@")[0]
    assert password not in doctor.stdout + doctor.stderr and "***" in database["detail"]


def test_a_wrong_password_or_a_stopped_server_is_a_clear_error(tmp_path: Path, pg_server: Any) -> None:
    wrong = pg_server.url(password="not-the-password")
    # Each fails at once, never after a hang or a pool's 30 s wait: 25 s each (a few on a loaded machine,
    # where three commands took over 30 s together).
    doctor = cli("doctor", data_dir=tmp_path, url=wrong, timeout=25)
    assert doctor.returncode == 1
    assert "[FAIL] database: Cannot use PostgreSQL at" in doctor.stdout and "password authentication failed" in doctor.stdout
    assert "not-the-password" not in doctor.stdout + doctor.stderr and "GENERALAGENT_DATABASE_URL" in doctor.stdout
    nobody = f"postgresql://generalagent:pw@127.0.0.1:{_closed_port()}/tests"  # nothing listens there
    refused = cli("migrate", data_dir=tmp_path, url=nobody, timeout=25)
    assert refused.returncode == 1 and "Cannot use PostgreSQL" in refused.stderr and "server is running" in refused.stderr
    bad = cli("approve", "--list", data_dir=tmp_path, url="mysql://x@y/z", timeout=25)
    assert bad.returncode == 2 and "GENERALAGENT_DATABASE_URL" in bad.stderr and "postgresql://" in bad.stderr


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_export_of_a_fresh_data_dir_creates_nothing(tmp_path: Path) -> None:
    data_dir = tmp_path / "fresh"
    data_dir.mkdir()
    done = cli("export", str(tmp_path / "empty.jsonl"), data_dir=data_dir)
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in data_dir.iterdir()) == []
