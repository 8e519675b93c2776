"""Per-conversation context state in SQLite (in the data directory): summaries and the
prompt-layout reminder state.

A stored summary records how many of the caller's leading messages it covers and a hash of
them, so a client that keeps sending its full history still gets incremental summaries.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from foundation import sqlite_db

_SCHEMA = (
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
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite_db.connect(path, timeout=10)
        self._lock = threading.Lock()
        with self._lock:
            sqlite_db.migrate(self._db, _SCHEMA)

    def get(self, conversation_id: str) -> StoredSummary | None:
        with self._lock:
            row = self._db.execute(
                "SELECT conversation_id, summary, covered_messages, prefix_hash, source, updated_at "
                "FROM summaries WHERE conversation_id = ?",
                (conversation_id,),
            ).fetchone()
        return StoredSummary(*row) if row else None

    def put(self, conversation_id: str, summary: str, covered: int, digest: str, source: str) -> None:
        with self._lock, sqlite_db.write(self._db):
            self._db.execute(
                "INSERT INTO summaries VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(conversation_id) DO UPDATE SET "
                "summary=excluded.summary, covered_messages=excluded.covered_messages, "
                "prefix_hash=excluded.prefix_hash, source=excluded.source, updated_at=excluded.updated_at",
                (conversation_id, summary, covered, digest, source, time.time()),
            )

    def get_state(self, conversation_id: str) -> dict[str, Any]:
        with self._lock:
            row = self._db.execute(
                "SELECT state FROM layout_state WHERE conversation_id = ?", (conversation_id,)
            ).fetchone()
        return json.loads(row[0]) if row else {}

    def put_state(self, conversation_id: str, state: dict[str, Any]) -> None:
        with self._lock, sqlite_db.write(self._db):
            self._db.execute(
                "INSERT INTO layout_state VALUES (?, ?, ?) ON CONFLICT(conversation_id) DO UPDATE SET "
                "state=excluded.state, updated_at=excluded.updated_at",
                (conversation_id, json.dumps(state, ensure_ascii=False), time.time()),
            )

    def close(self) -> None:
        with self._lock:
            self._db.close()
