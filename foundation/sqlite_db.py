"""The one way our stores open a SQLite database, write to it and migrate its schema.

WAL for readers, a busy timeout, one writer at a time (`BEGIN IMMEDIATE`), autocommit otherwise,
schema changes as ordered migrations counted in `PRAGMA user_version`. Plain sqlite3: no MCP
imports, so `context/` and `indexing/` use it too.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def connect(
    path: Path, *, timeout: float, pragmas: Iterable[str] = (), row_factory: Any = None
) -> sqlite3.Connection:
    """An autocommit connection in WAL mode that waits up to `timeout` seconds for a lock.

    `pragmas` are extra settings such as "foreign_keys=ON"; the connection may be used from
    any thread (callers serialise access with their own lock or keep one per thread).
    """
    conn = sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=False)
    if row_factory is not None:
        conn.row_factory = row_factory
    conn.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
    _use_wal(conn, deadline=time.monotonic() + timeout)
    for pragma in pragmas:
        conn.execute(f"PRAGMA {pragma}")
    return conn


def _use_wal(conn: sqlite3.Connection, *, deadline: float) -> None:
    """Switch to WAL, retrying while another process creates or converts the same file.

    Changing the journal mode can fail with "database is locked" at once, without waiting for
    the busy handler, when several processes open a new database together.
    """
    delay = 0.005
    while True:
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            contended = "locked" in str(exc) or "busy" in str(exc)
            if not contended or time.monotonic() > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


@contextmanager
def write(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction: BEGIN IMMEDIATE ... COMMIT, ROLLBACK when anything fails."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:  # SQLite may already have rolled back (e.g. disk full)
            conn.execute("ROLLBACK")
        raise


def migrate(conn: sqlite3.Connection, migrations: Sequence[str]) -> None:
    """Apply the migrations after `PRAGMA user_version`, in order, in one write transaction.

    Migration N (1-based) may hold several statements separated by ';'; the version becomes N.
    """
    with write(conn):
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        for number, script in enumerate(migrations[version:], start=version + 1):
            for statement in statements(script):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version={number}")


def statements(script: str) -> Iterator[str]:
    """The non-empty statements of a ';'-separated script (no ';' inside literals or triggers)."""
    return (s.strip() for s in script.split(";") if s.strip())
