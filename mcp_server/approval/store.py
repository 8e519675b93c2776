"""Pending and granted approvals (SQLite in the data dir) and per-session grants (in memory).

An approval is bound to one exact call: the tool name plus the SHA-256 of its canonical JSON
arguments. It is created `pending` when a call needs a human and no elicitation is possible,
turned `granted` by a human out of band (`generalagent-mcp approve <id>` or the local HTTP
page), and consumed (`used`) by the first identical call after that: single use. Pending and
granted approvals expire `ttl` seconds after they were created / granted.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic_core import to_jsonable_python

from foundation import sqlite_db
from foundation.errors import Conflict, NotFound

APPROVALS_FILE = "approvals.sqlite3"
_KEEP_SECONDS = 7 * 24 * 3600  # decided/expired approvals are kept a week (the audit log keeps the history)
_ID_ALPHABET = "abcdefghijkmnpqrstuvwxyz23456789"  # no 0/o/1/l: easy to read and type

_MIGRATIONS = (
    """CREATE TABLE approvals (
        id TEXT PRIMARY KEY, tool TEXT NOT NULL, args_hash TEXT NOT NULL, args_json TEXT NOT NULL,
        risk TEXT NOT NULL, reason TEXT NOT NULL, rule_id TEXT NOT NULL, origin TEXT NOT NULL,
        status TEXT NOT NULL, created REAL NOT NULL, expires REAL NOT NULL,
        approved_by TEXT, decided_at REAL, csrf TEXT NOT NULL)""",
    "CREATE INDEX approvals_call ON approvals (tool, args_hash, status)",
)


def canonical_json(value: Any) -> str:
    """Deterministic JSON: sorted keys, no whitespace, UTF-8 kept."""
    return json.dumps(to_jsonable_python(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def call_hash(tool: str, args: dict[str, Any]) -> str:
    """The identity of one exact call: SHA-256 over the tool name and canonical arguments."""
    return hashlib.sha256(canonical_json({"tool": tool, "args": args}).encode()).hexdigest()


def private(path: Path) -> None:
    """Owner-only permissions (the file holds exact tool arguments); best effort on non-POSIX systems."""
    with contextlib.suppress(OSError):
        os.chmod(path, 0o600)


def new_approval_id() -> str:
    return "ap-" + "".join(secrets.choice(_ID_ALPHABET) for _ in range(6))


@dataclass(frozen=True)
class Approval:
    id: str
    tool: str
    args_hash: str
    args: dict[str, Any]
    risk: str
    reason: str
    rule_id: str
    origin: str
    status: str  # pending | granted | used | rejected
    created: float
    expires: float
    approved_by: str | None
    csrf: str

    def expired(self, now: float | None = None) -> bool:
        return (now if now is not None else time.time()) >= self.expires

    @property
    def pretty_args(self) -> str:
        return json.dumps(self.args, indent=2, ensure_ascii=False, sort_keys=True)


class ApprovalStore:
    """Out-of-band approvals in `<data_dir>/approvals.sqlite3`; session grants in memory."""

    def __init__(self, data_dir: Path, ttl_seconds: float) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        self.path = data_dir / APPROVALS_FILE
        self.ttl = float(ttl_seconds)
        self._lock = threading.Lock()
        self._session_grants: set[tuple[str, str, str]] = set()
        self._migrate()
        private(self.path)

    def _connect(self) -> sqlite3.Connection:
        return sqlite_db.connect(self.path, timeout=10, row_factory=sqlite3.Row)

    def _migrate(self) -> None:
        with self._lock:
            conn = self._connect()
            try:
                sqlite_db.migrate(conn, _MIGRATIONS)
            finally:
                conn.close()

    def _write(self, sql: str, params: tuple[Any, ...]) -> int:
        with self._lock:
            conn = self._connect()
            try:
                with sqlite_db.write(conn):
                    return conn.execute(sql, params).rowcount
            finally:
                conn.close()

    def _query(self, sql: str, params: tuple[Any, ...]) -> list[Approval]:
        conn = self._connect()
        try:
            return [_row_to_approval(row) for row in conn.execute(sql, params).fetchall()]
        finally:
            conn.close()

    # -- pending approvals

    def request(self, tool: str, args: dict[str, Any], *, risk: str, reason: str, rule_id: str,
                origin: str) -> Approval:
        """The live pending approval for this exact call, or a new one."""
        digest = call_hash(tool, args)
        now = time.time()
        existing = self._query(
            "SELECT * FROM approvals WHERE tool=? AND args_hash=? AND status='pending' AND expires>? "
            "ORDER BY created DESC LIMIT 1", (tool, digest, now))
        if existing:
            return existing[0]
        approval_id = new_approval_id()
        self._write("DELETE FROM approvals WHERE expires < ?", (now - _KEEP_SECONDS,))
        self._write(
            "INSERT INTO approvals (id, tool, args_hash, args_json, risk, reason, rule_id, origin, status, "
            "created, expires, csrf) VALUES (?,?,?,?,?,?,?,?, 'pending', ?,?,?)",
            (approval_id, tool, digest, canonical_json(args), risk, reason, rule_id, origin, now,
             now + self.ttl, secrets.token_urlsafe(24)))
        return self.get(approval_id)

    def get(self, approval_id: str) -> Approval:
        found = self._query("SELECT * FROM approvals WHERE id=?", (approval_id.strip().lower(),))
        if not found:
            raise NotFound(f"No approval {approval_id!r} in {self.path.parent}. Run `generalagent-mcp approve "
                           "--list` to see pending ones; if the server uses another data dir, pass the same "
                           "--data-dir (or GENERALAGENT_DATA_DIR).")
        return found[0]

    def pending(self) -> list[Approval]:
        return self._query("SELECT * FROM approvals WHERE status='pending' AND expires>? ORDER BY created",
                           (time.time(),))

    def live_ids(self) -> set[str]:
        """Ids of approvals that are still pending or granted (not expired)."""
        return {a.id for a in self._query(
            "SELECT * FROM approvals WHERE status IN ('pending','granted') AND expires>?", (time.time(),))}

    def decide(self, approval_id: str, approve: bool, by: str) -> Approval:
        """Grant or reject a pending approval; raises when it is unknown, decided or expired."""
        approval = self.get(approval_id)
        if approval.status != "pending":
            raise Conflict(f"Approval {approval.id} is already {approval.status}; nothing to do.")
        if approval.expired():
            raise Conflict(f"Approval {approval.id} has expired. Ask the assistant to repeat the call "
                           "to get a new approval id.")
        now = time.time()
        status = "granted" if approve else "rejected"
        changed = self._write(
            "UPDATE approvals SET status=?, approved_by=?, decided_at=?, expires=? WHERE id=? AND status='pending'",
            (status, by, now, now + self.ttl if approve else approval.expires, approval.id))
        if changed != 1:
            raise Conflict(f"Approval {approval.id} was decided concurrently; run `approve --list`.")
        return self.get(approval.id)

    def consume(self, tool: str, args: dict[str, Any]) -> Approval | None:
        """Use up a granted, unexpired approval for exactly this call (single use)."""
        digest = call_hash(tool, args)
        now = time.time()
        for approval in self._query(
                "SELECT * FROM approvals WHERE tool=? AND args_hash=? AND status='granted' AND expires>? "
                "ORDER BY decided_at", (tool, digest, now)):
            if self._write("UPDATE approvals SET status='used' WHERE id=? AND status='granted'", (approval.id,)) == 1:
                return approval
        return None

    def has_grant(self, tool: str, args: dict[str, Any]) -> bool:
        digest = call_hash(tool, args)
        return bool(self._query(
            "SELECT * FROM approvals WHERE tool=? AND args_hash=? AND status='granted' AND expires>? LIMIT 1",
            (tool, digest, time.time())))

    # -- per-session grants ("approve for this session")

    def grant_session(self, session_key: str, tool: str, rule_id: str) -> None:
        with self._lock:
            self._session_grants.add((session_key, tool, rule_id))

    def session_granted(self, session_key: str, tool: str, rule_id: str) -> bool:
        with self._lock:
            return (session_key, tool, rule_id) in self._session_grants


def _row_to_approval(row: sqlite3.Row) -> Approval:
    return Approval(
        id=row["id"], tool=row["tool"], args_hash=row["args_hash"], args=json.loads(row["args_json"]),
        risk=row["risk"], reason=row["reason"], rule_id=row["rule_id"], origin=row["origin"],
        status=row["status"], created=row["created"], expires=row["expires"],
        approved_by=row["approved_by"], csrf=row["csrf"])
