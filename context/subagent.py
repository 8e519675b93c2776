"""Persisted sub-agent threads: one row per thread, its transcript as ordered OpenAI-format messages.

The loop saves after every step, so `delegate_status` and `delegate_task(continue_id=...)` work
after a server restart. In the deployment's database (SQLite file subagents.sqlite3, or PostgreSQL).
Plain library code: no MCP imports.
"""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import dataclass, field
from typing import Any

from foundation.errors import NotFound
from foundation.storage import Conn, Database, Schema, Table

_THREAD_COLUMNS = ("context_id", "agent", "tools", "status", "created_at", "updated_at", "loops", "tool_calls",
                   "tokens", "result", "client_id", "runner_pid", "runner_host")
SCHEMA = Schema(
    name="subagents",
    sqlite_file="subagents.sqlite3",
    sqlite=(
        """
        CREATE TABLE threads (
            context_id TEXT PRIMARY KEY,
            agent TEXT,
            tools TEXT NOT NULL,
            status TEXT NOT NULL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            loops INTEGER NOT NULL DEFAULT 0,
            tool_calls INTEGER NOT NULL DEFAULT 0,
            tokens INTEGER NOT NULL DEFAULT 0,
            result TEXT,
            client_id TEXT
        );
        CREATE TABLE thread_messages (
            context_id TEXT NOT NULL REFERENCES threads(context_id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            message TEXT NOT NULL,
            PRIMARY KEY (context_id, seq)
        );
        """,
        "ALTER TABLE threads ADD COLUMN runner_pid INTEGER",
        # which machine runs it: a process id means something only there (several servers, one database)
        "ALTER TABLE threads ADD COLUMN runner_host TEXT",
    ),
    postgres=(
        """
        CREATE TABLE threads (
            context_id text PRIMARY KEY,
            agent text,
            tools text NOT NULL,
            status text NOT NULL,
            created_at double precision NOT NULL,
            updated_at double precision NOT NULL,
            loops bigint NOT NULL DEFAULT 0,
            tool_calls bigint NOT NULL DEFAULT 0,
            tokens bigint NOT NULL DEFAULT 0,
            result text,
            client_id text,
            runner_pid bigint,
            runner_host text
        );
        CREATE TABLE thread_messages (
            context_id text NOT NULL REFERENCES threads(context_id) ON DELETE CASCADE,
            seq bigint NOT NULL,
            message text NOT NULL,
            PRIMARY KEY (context_id, seq)
        );
        """,
    ),
    tables=(Table("threads", _THREAD_COLUMNS, ("context_id",)),
            Table("thread_messages", ("context_id", "seq", "message"), ("context_id", "seq"))),
    sqlite_pragmas=("foreign_keys=ON",),
)
HOST = socket.gethostname()

STATUSES = ("running", "done", "incomplete", "failed", "cancelled", "interrupted")


@dataclass
class Thread:
    """A sub-agent thread as stored (totals over all its runs)."""

    context_id: str
    agent: str | None
    tools: list[str]
    status: str
    created_at: float
    updated_at: float
    loops: int = 0
    tool_calls: int = 0
    tokens: int = 0
    result: str | None = None
    client_id: str | None = None
    messages: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class StepDelta:
    """What one step adds to a thread: new messages and counter increments."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    loops: int = 0
    tool_calls: int = 0
    tokens: int = 0


class ThreadStore:
    def __init__(self, database: Database) -> None:
        self._db = database.open(SCHEMA)

    def create(self, context_id: str, agent: str | None, tools: list[str], client_id: str | None) -> None:
        now = time.time()
        self._db.write(lambda conn: conn.execute(
            "INSERT INTO threads(context_id, agent, tools, status, created_at, updated_at, client_id, runner_pid, "
            "runner_host) VALUES(?,?,?,?,?,?,?,?,?)",
            (context_id, agent, json.dumps(tools), "running", now, now, client_id, os.getpid(), HOST),
        ))

    def save_step(self, context_id: str, delta: StepDelta, status: str = "running", result: str | None = None) -> None:
        """Append the step's messages and add its counters, in one transaction."""
        messages = [json.dumps(m, ensure_ascii=False) for m in delta.messages]
        if result is not None:
            result = result.replace("\x00", "")  # PostgreSQL text cannot hold NUL

        def save(conn: Conn) -> None:
            seq = int(conn.scalar("SELECT COALESCE(MAX(seq), -1) FROM thread_messages WHERE context_id=?",
                                  (context_id,))) + 1
            conn.executemany("INSERT INTO thread_messages(context_id, seq, message) VALUES(?,?,?)",
                             [(context_id, seq + i, m) for i, m in enumerate(messages)])
            conn.execute(
                "UPDATE threads SET loops=loops+?, tool_calls=tool_calls+?, tokens=tokens+?, status=?, "
                "result=COALESCE(?, result), updated_at=?, runner_pid=?, runner_host=? WHERE context_id=?",
                (delta.loops, delta.tool_calls, delta.tokens, status, result, time.time(), os.getpid(), HOST,
                 context_id),
            )

        self._db.write(save)

    def set_tools(self, context_id: str, tools: list[str]) -> None:
        self._db.write(lambda conn: conn.execute(
            "UPDATE threads SET tools=? WHERE context_id=?", (json.dumps(tools), context_id)))

    def set_agent(self, context_id: str, agent: str | None, tools: list[str]) -> None:
        """After a handoff: the thread now belongs to `agent` with its tools."""
        self._db.write(lambda conn: conn.execute(
            "UPDATE threads SET agent=?, tools=? WHERE context_id=?", (agent, json.dumps(tools), context_id)))

    def load(self, context_id: str, with_messages: bool = True) -> Thread:
        with self._db.read() as conn:
            row = conn.one(
                "SELECT context_id, agent, tools, status, created_at, updated_at, loops, tool_calls, tokens, "
                "result, client_id, runner_pid, runner_host FROM threads WHERE context_id=?",
                (context_id,),
            )
            if row is None:
                recent = [r[0] for r in conn.all("SELECT context_id FROM threads ORDER BY updated_at DESC LIMIT 5")]
                hint = f" Recent threads: {', '.join(recent)}." if recent else " No threads are stored yet."
                raise NotFound(f"No sub-agent thread {context_id!r}.{hint}")
            messages = []
            if with_messages:
                messages = [json.loads(m[0]) for m in conn.all(
                    "SELECT message FROM thread_messages WHERE context_id=? ORDER BY seq", (context_id,))]
        status = row[3]
        if status == "running" and not _alive(row[11], row[12]):
            status = "interrupted"  # its server process ended mid-run; continue_id resumes it
        return Thread(row[0], row[1], json.loads(row[2]), status, row[4], row[5], row[6], row[7], row[8],
                      row[9], row[10], messages)

    def close(self) -> None:
        self._db.close()


def _alive(pid: int | None, host: str | None = None) -> bool:
    """Whether the process that last ran a thread still exists (unknown counts as alive; a process
    on another machine sharing the database cannot be checked from here, so it counts as alive)."""
    if not pid:
        return False
    if host is not None and host != HOST:
        return True
    if pid == os.getpid() or os.name == "nt":  # on Windows os.kill(pid, 0) would terminate it
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists but not ours (EPERM)
        return True
    return True
