"""The shared SQLite helpers: connection settings, write transactions, ordered migrations."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from foundation import sqlite_db

V1 = "CREATE TABLE a(x INTEGER); CREATE INDEX a_x ON a(x);"
V2 = "CREATE TABLE b(y TEXT)"


def test_connect_sets_wal_busy_timeout_and_extra_pragmas(tmp_path: Path) -> None:
    conn = sqlite_db.connect(tmp_path / "t.db", timeout=7, pragmas=["foreign_keys=ON"], row_factory=sqlite3.Row)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 7000
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert conn.isolation_level is None
    assert isinstance(conn.execute("SELECT 1 AS one").fetchone(), sqlite3.Row)
    conn.close()


def test_write_commits_or_rolls_back(tmp_path: Path) -> None:
    conn = sqlite_db.connect(tmp_path / "t.db", timeout=1)
    conn.execute("CREATE TABLE a(x INTEGER)")
    with sqlite_db.write(conn):
        conn.execute("INSERT INTO a VALUES (1)")
    with pytest.raises(RuntimeError), sqlite_db.write(conn):
        conn.execute("INSERT INTO a VALUES (2)")
        raise RuntimeError("boom")
    assert not conn.in_transaction
    assert [r[0] for r in conn.execute("SELECT x FROM a")] == [1]
    conn.close()


def test_write_takes_the_write_lock_up_front(tmp_path: Path) -> None:
    first = sqlite_db.connect(tmp_path / "t.db", timeout=1)
    second = sqlite_db.connect(tmp_path / "t.db", timeout=0.1)
    with sqlite_db.write(first), pytest.raises(sqlite3.OperationalError, match="locked"), sqlite_db.write(second):
        pass
    assert not second.in_transaction
    first.close()
    second.close()


def test_migrate_applies_only_new_steps_in_order(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    conn = sqlite_db.connect(path, timeout=1)
    sqlite_db.migrate(conn, [V1])
    conn.execute("INSERT INTO a VALUES (5)")
    sqlite_db.migrate(conn, [V1, V2])  # an existing database gains step 2 only
    sqlite_db.migrate(conn, [V1, V2])  # nothing left to do
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 2
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    assert names == {"a", "a_x", "b"}
    assert conn.execute("SELECT x FROM a").fetchall() == [(5,)]
    conn.close()


def test_failed_migration_leaves_the_database_as_it_was(tmp_path: Path) -> None:
    conn = sqlite_db.connect(tmp_path / "t.db", timeout=1)
    sqlite_db.migrate(conn, [V1])
    with pytest.raises(sqlite3.OperationalError):
        sqlite_db.migrate(conn, [V1, "CREATE TABLE c(z); CREATE TABLE a(x)"])
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
    assert "c" not in {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    conn.close()


OPENER = r"""
import sys, time
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from foundation import sqlite_db
start = float(sys.argv[3])
while time.time() < start:
    pass
conn = sqlite_db.connect(Path(sys.argv[2]), timeout=30.0)
sqlite_db.migrate(conn, ["CREATE TABLE IF NOT EXISTS t(x)"])
with sqlite_db.write(conn):
    conn.execute("INSERT INTO t VALUES (1)")
"""


def test_processes_opening_a_new_database_together_all_get_wal(tmp_path: Path) -> None:
    """Switching a new file to WAL fails at once, without the busy handler, when others race it."""
    root = str(Path(__file__).resolve().parent.parent)
    for attempt in range(6):
        path = tmp_path / f"race{attempt}.db"
        start = time.time() + 0.4
        procs = [subprocess.Popen([sys.executable, "-c", OPENER, root, str(path), str(start)],
                                  stderr=subprocess.PIPE, text=True) for _ in range(5)]
        errors = [p.communicate(timeout=60)[1] for p in procs]
        assert [p.returncode for p in procs] == [0] * 5, "\n".join(errors)
        with sqlite3.connect(path) as conn:
            assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 5
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
