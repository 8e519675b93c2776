"""The tools a client without a session enabled (`enable_tools`), by client key.

A session (stdio, a 2025-era HTTP session) keeps its list on its own connection. Requests without
one (the 2026-07-28 era; 2025-era requests on stateless HTTP workers) keep it per client name here:
in the process (`MemoryToolLists`), or, with PostgreSQL, in the database (`SharedToolLists`), so
that every server process on that database lists the same tools for the same client whichever one
a request reaches.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from foundation.storage import Conn, Database, Schema, StoreDb, Table

ENABLED_KEY = "generalagent.enabled_tools"

SCHEMA = Schema(
    name="client_tools",
    sqlite_file="client_tools.sqlite3",
    sqlite=("""
        CREATE TABLE client_tools (
            client TEXT NOT NULL,
            tool TEXT NOT NULL,
            enabled_at REAL NOT NULL,
            PRIMARY KEY (client, tool)
        );
        """,),
    postgres=("""
        CREATE TABLE client_tools (
            client text NOT NULL,
            tool text NOT NULL,
            enabled_at double precision NOT NULL,
            PRIMARY KEY (client, tool)
        );
        """,),
    tables=(Table("client_tools", ("client", "tool", "enabled_at"), ("client", "tool")),),
)


class MemoryToolLists:
    """In this process: `state[client key][ENABLED_KEY]` (the SessionToolServer's sessionless state)."""

    def __init__(self, state: dict[str, dict[str, Any]]) -> None:
        self.state = state
        self._lock = threading.Lock()

    def names(self, client: str) -> set[str]:
        with self._lock:
            return set(self.state.setdefault(client, {}).setdefault(ENABLED_KEY, set()))

    def add(self, client: str, names: Iterable[str]) -> None:
        with self._lock:
            self.state.setdefault(client, {}).setdefault(ENABLED_KEY, set()).update(names)


class SharedToolLists:
    """In the database (table `client_tools`), opened on first use."""

    def __init__(self, database: Callable[[], Database]) -> None:
        self._database = database
        self._db: StoreDb | None = None
        self._lock = threading.Lock()

    def _store(self) -> StoreDb:
        with self._lock:
            if self._db is None:
                self._db = self._database().open(SCHEMA)
            return self._db

    def names(self, client: str) -> set[str]:
        with self._store().read() as conn:
            return {str(row[0]) for row in conn.all("SELECT tool FROM client_tools WHERE client = ?", (client,))}

    def add(self, client: str, names: Iterable[str]) -> None:
        rows = [(client, name, time.time()) for name in dict.fromkeys(names)]
        if not rows:
            return

        def insert(conn: Conn) -> None:
            conn.executemany("INSERT INTO client_tools (client, tool, enabled_at) VALUES (?, ?, ?) "
                             "ON CONFLICT (client, tool) DO NOTHING", rows)

        self._store().write(insert)
