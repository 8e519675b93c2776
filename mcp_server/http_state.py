"""What HTTP server processes on one PostgreSQL database must share so that any request may reach
any of them (`serve --workers N`, or several servers behind a load balancer):

- the tools a client without a session enabled (`enable_tools`), by client key. A session (stdio,
  a 2025-era HTTP session) keeps its list on its own connection; requests without one (the
  2026-07-28 era; 2025-era requests on stateless HTTP workers) keep it per client name: in the
  process (`MemoryToolLists`, SQLite) or in the database (`SharedToolLists`);
- the key that seals the 2026-07-28 `requestState` (a form's answer comes back in a new request,
  perhaps to another process): with PostgreSQL one random key in the database (`SharedKeyCodec`),
  made by whichever process needs it first; without, the SDK's per-process key.

The key table is not exported (`Schema.tables` lists only client_tools): a moved deployment makes
a new key, which only voids forms answered across the move.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from foundation.storage import Conn, Database, Schema, StoreDb, Table

if TYPE_CHECKING:  # the SDK is imported when a key is first used: `doctor`, `migrate` and `export` list SCHEMA
    from mcp.server.request_state import AESGCMRequestStateCodec

ENABLED_KEY = "generalagent.enabled_tools"

SCHEMA = Schema(
    name="http_state",
    sqlite_file="http_state.sqlite3",
    sqlite=("""
        CREATE TABLE client_tools (
            client TEXT NOT NULL,
            tool TEXT NOT NULL,
            enabled_at REAL NOT NULL,
            PRIMARY KEY (client, tool)
        );
        CREATE TABLE request_state_keys (
            name TEXT PRIMARY KEY,
            secret TEXT NOT NULL,
            created_at REAL NOT NULL
        );
        """,),
    postgres=("""
        CREATE TABLE client_tools (
            client text NOT NULL,
            tool text NOT NULL,
            enabled_at double precision NOT NULL,
            PRIMARY KEY (client, tool)
        );
        CREATE TABLE request_state_keys (
            name text PRIMARY KEY,
            secret text NOT NULL,
            created_at double precision NOT NULL
        );
        """,),
    private=True,  # the key
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


class _Store:
    """The http_state store of the deployment's database, opened on first use."""

    def __init__(self, database: Callable[[], Database]) -> None:
        self._database = database
        self._db: StoreDb | None = None
        self._lock = threading.Lock()

    def _store(self) -> StoreDb:
        with self._lock:
            if self._db is None:
                self._db = self._database().open(SCHEMA)
            return self._db


class SharedToolLists(_Store):
    """In the database (table `client_tools`)."""

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


class SharedKeyCodec(_Store):
    """The SDK's AES-GCM `requestState` codec under the deployment's key (table `request_state_keys`),
    read (or made) once, on first use."""

    def __init__(self, database: Callable[[], Database]) -> None:
        super().__init__(database)
        self._codec: AESGCMRequestStateCodec | None = None

    def _current(self) -> AESGCMRequestStateCodec:
        if self._codec is None:
            from mcp.server.request_state import AESGCMRequestStateCodec

            self._codec = AESGCMRequestStateCodec([self._store().write(_key)])
        return self._codec

    def seal(self, payload: bytes) -> str:
        return self._current().seal(payload)

    def unseal(self, token: str) -> bytes:
        return self._current().unseal(token)


def _key(conn: Conn) -> str:
    """The shared key; the first process to ask makes it (racing processes agree: one insert wins)."""
    conn.execute("INSERT INTO request_state_keys (name, secret, created_at) VALUES ('default', ?, ?) "
                 "ON CONFLICT (name) DO NOTHING", (secrets.token_hex(32), time.time()))
    return str(conn.scalar("SELECT secret FROM request_state_keys WHERE name = 'default'"))
