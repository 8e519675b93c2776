"""Per-conversation context state in the deployment's database: summaries, the prompt-layout
reminder state, and result pages shared by every server process.

A stored summary records how many of the caller's leading messages it covers and a hash of
them, so a client that keeps sending its full history still gets incremental summaries.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any

from foundation.storage import Database, Schema, Table

PAGE_SECONDS = 900.0  # a paged result stays fetchable this long (from any server process)
SCHEMA = Schema(
    name="context",
    sqlite_file="context.sqlite3",
    sqlite=(
        """
        CREATE TABLE summaries (
            conversation_id TEXT PRIMARY KEY,
            summary TEXT NOT NULL,
            covered_messages INTEGER NOT NULL,
            prefix_hash TEXT NOT NULL,
            source TEXT NOT NULL,
            updated_at REAL NOT NULL
        );
        """,
        """
        CREATE TABLE layout_state (
            conversation_id TEXT PRIMARY KEY,
            state TEXT NOT NULL,
            updated_at REAL NOT NULL
        );
        """,
        """
        CREATE TABLE result_pages (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL,
            created_at REAL NOT NULL
        );
        """,
    ),
    postgres=(
        """
        CREATE TABLE summaries (
            conversation_id text PRIMARY KEY,
            summary text NOT NULL,
            covered_messages bigint NOT NULL,
            prefix_hash text NOT NULL,
            source text NOT NULL,
            updated_at double precision NOT NULL
        );
        CREATE TABLE layout_state (
            conversation_id text PRIMARY KEY,
            state text NOT NULL,
            updated_at double precision NOT NULL
        );
        CREATE TABLE result_pages (
            key text PRIMARY KEY,
            value text NOT NULL,
            created_at double precision NOT NULL
        );
        """,
    ),
    # result_pages is a cache: not exported
    tables=(
        Table("summaries", ("conversation_id", "summary", "covered_messages", "prefix_hash", "source", "updated_at"),
              ("conversation_id",)),
        Table("layout_state", ("conversation_id", "state", "updated_at"), ("conversation_id",)),
    ),
)


@dataclass(frozen=True)
class StoredSummary:
    conversation_id: str
    summary: str
    covered_messages: int
    prefix_hash: str
    source: str
    updated_at: float


def prefix_hash(messages: list[Any], count: int) -> str:
    """A stable hash of the first `count` caller messages."""
    digest = hashlib.sha256()
    for message in messages[:count]:
        digest.update(json.dumps(message, sort_keys=True, ensure_ascii=False, default=str).encode())
        digest.update(b"\x00")
    return digest.hexdigest()


class ContextStore:
    def __init__(self, database: Database) -> None:
        self._db = database.open(SCHEMA)

    def get(self, conversation_id: str) -> StoredSummary | None:
        with self._db.read() as conn:
            row = conn.one(
                "SELECT conversation_id, summary, covered_messages, prefix_hash, source, updated_at "
                "FROM summaries WHERE conversation_id = ?",
                (conversation_id,),
            )
        return StoredSummary(*row) if row else None

    def put(self, conversation_id: str, summary: str, covered: int, digest: str, source: str) -> None:
        summary = summary.replace("\x00", "")  # derived text; PostgreSQL text cannot hold NUL
        self._db.write(lambda conn: conn.execute(
            "INSERT INTO summaries VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(conversation_id) DO UPDATE SET "
            "summary=excluded.summary, covered_messages=excluded.covered_messages, "
            "prefix_hash=excluded.prefix_hash, source=excluded.source, updated_at=excluded.updated_at",
            (conversation_id, summary, covered, digest, source, time.time()),
        ))

    def get_state(self, conversation_id: str) -> dict[str, Any]:
        with self._db.read() as conn:
            state = conn.scalar("SELECT state FROM layout_state WHERE conversation_id = ?", (conversation_id,))
        return json.loads(state) if state is not None else {}

    def put_state(self, conversation_id: str, state: dict[str, Any]) -> None:
        self._db.write(lambda conn: conn.execute(
            "INSERT INTO layout_state VALUES (?, ?, ?) ON CONFLICT(conversation_id) DO UPDATE SET "
            "state=excluded.state, updated_at=excluded.updated_at",
            (conversation_id, json.dumps(state, ensure_ascii=False), time.time()),
        ))

    # -- result pages: a paged tool result computed by one process, read page by page from any

    def get_page(self, key: str) -> Any | None:
        with self._db.read() as conn:
            value = conn.scalar("SELECT value FROM result_pages WHERE key = ? AND created_at > ?",
                                (key, time.time() - PAGE_SECONDS))
        return None if value is None else json.loads(value)

    def put_page(self, key: str, value: Any) -> None:
        """Keep `value` (JSON-able) under `key`; pages older than PAGE_SECONDS are dropped."""
        text, now = json.dumps(value, ensure_ascii=False), time.time()

        def put(conn: Any) -> None:
            conn.execute("DELETE FROM result_pages WHERE created_at < ?", (now - PAGE_SECONDS,))
            conn.execute("INSERT INTO result_pages VALUES (?, ?, ?) ON CONFLICT(key) DO UPDATE SET "
                         "value=excluded.value, created_at=excluded.created_at", (key, text, now))

        self._db.write(put)

    def close(self) -> None:
        self._db.close()
