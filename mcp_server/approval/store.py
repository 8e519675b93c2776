"""Pending and granted approvals (SQLite in the data dir) and per-session grants (in memory).

An approval is bound to one exact call: the tool name plus the SHA-256 of its canonical JSON
arguments. It is created `pending` when a call needs a human and no elicitation is possible,
turned `granted` by a human out of band (`generalagent-mcp approve <id>` or the local HTTP
page), and consumed (`used`) by the first identical call after that: single use. Pending and
granted approvals expire `ttl` seconds after they were created / granted.

The human may grant a wider scope instead (never the model: only the CLI and the local page
decide), each bound to the approved call's tool and, for file/folder, to the file it targets:
  once   - this exact call, one time (the default);
  today  - this exact call, any number of times until midnight (local time);
  file   - this tool on this file (the call's `path`), any arguments, for FILE_SCOPE_SECONDS;
  folder - this tool on files in this file's folder (and below), for FILE_SCOPE_SECONDS;
  tool   - this tool with any arguments, for TOOL_SCOPE_SECONDS.
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
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal

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
    # what a granted approval covers (see the module docstring) and the file the call targets
    "ALTER TABLE approvals ADD COLUMN scope TEXT NOT NULL DEFAULT 'once'",
    "ALTER TABLE approvals ADD COLUMN target TEXT",
    "ALTER TABLE approvals ADD COLUMN scope_path TEXT",
)

Scope = Literal["once", "today", "file", "folder", "tool"]
SCOPES: tuple[Scope, ...] = ("once", "today", "file", "folder", "tool")
FILE_SCOPE_SECONDS = 3600
TOOL_SCOPE_SECONDS = 600


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


def call_target(args: dict[str, Any], roots: Sequence[Path]) -> str | None:
    """The real absolute file a call acts on (its `path` argument), or None when it names none."""
    raw = args.get("path")
    if not isinstance(raw, str) or not raw.strip() or "\x00" in raw:
        return None
    path = Path(raw).expanduser()
    if not path.is_absolute():
        if not roots:
            return None
        path = Path(roots[0]) / path
    return os.path.realpath(path)


def scope_choices(approval: Approval) -> list[tuple[Scope, str]]:
    """The scopes a human may grant for `approval`, with a one-line description each."""
    minutes = TOOL_SCOPE_SECONDS // 60
    out: list[tuple[Scope, str]] = [("once", "this exact call, once"),
                                    ("today", "this exact call, any number of times today")]
    if approval.target:
        hours = FILE_SCOPE_SECONDS // 3600
        out.append(("file", f"{approval.tool} on {approval.target}, any arguments, for {hours} h"))
        out.append(("folder", f"{approval.tool} on files in {os.path.dirname(approval.target)}/, for {hours} h"))
    out.append(("tool", f"{approval.tool} with any arguments, for {minutes} min"))
    return out


def _scope_end(scope: Scope, now: float, ttl: float) -> float:
    if scope == "today":
        midnight = datetime.fromtimestamp(now).replace(hour=0, minute=0, second=0, microsecond=0) + timedelta(days=1)
        return midnight.timestamp()
    return now + {"once": ttl, "file": FILE_SCOPE_SECONDS, "folder": FILE_SCOPE_SECONDS,
                  "tool": TOOL_SCOPE_SECONDS}[scope]


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
    scope: str = "once"
    target: str | None = None  # the real file the call acts on (its path argument)
    scope_path: str | None = None  # the file or folder a file/folder grant covers

    def covers(self, tool: str, digest: str, target: str | None) -> bool:
        """True when this granted approval covers a call (tool, args hash, target file)."""
        if tool != self.tool:
            return False
        if self.scope in ("once", "today"):
            return digest == self.args_hash
        if self.scope == "tool":
            return True
        if target is None or self.scope_path is None:
            return False
        if self.scope == "file":
            return target == self.scope_path
        return target.startswith(self.scope_path.rstrip("/") + "/")

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
                origin: str, target: str | None = None) -> Approval:
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
            "created, expires, csrf, target) VALUES (?,?,?,?,?,?,?,?, 'pending', ?,?,?,?)",
            (approval_id, tool, digest, canonical_json(args), risk, reason, rule_id, origin, now,
             now + self.ttl, secrets.token_urlsafe(24), target))
        return self.get(approval_id)

    def get(self, approval_id: str) -> Approval:
        found = self._query("SELECT * FROM approvals WHERE id=?", (approval_id.strip().lower(),))
        if not found:
            from foundation.command import cli_command

            raise NotFound(f"No approval {approval_id!r} in {self.path.parent}. Run `{cli_command()} approve "
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

    def decide(self, approval_id: str, approve: bool, by: str, scope: Scope = "once") -> Approval:
        """Grant (for `scope`) or reject a pending approval; raises when it is unknown, decided or expired,
        or when `scope` does not apply to it (file/folder scopes need a call that names a file)."""
        approval = self.get(approval_id)
        if scope not in dict(scope_choices(approval)):
            raise Conflict(f"Scope {scope!r} does not apply to {approval.id}; choose one of "
                           f"{', '.join(name for name, _ in scope_choices(approval))}.")
        if approval.status != "pending":
            raise Conflict(f"Approval {approval.id} is already {approval.status}; nothing to do.")
        if approval.expired():
            raise Conflict(f"Approval {approval.id} has expired. Ask the assistant to repeat the call "
                           "to get a new approval id.")
        now = time.time()
        status = "granted" if approve else "rejected"
        scope_path = approval.target if scope == "file" else os.path.dirname(approval.target or "") or None
        changed = self._write(
            "UPDATE approvals SET status=?, approved_by=?, decided_at=?, expires=?, scope=?, scope_path=? "
            "WHERE id=? AND status='pending'",
            (status, by, now, _scope_end(scope, now, self.ttl) if approve else approval.expires,
             scope if approve else "once", scope_path if scope in ("file", "folder") else None, approval.id))
        if changed != 1:
            raise Conflict(f"Approval {approval.id} was decided concurrently; run `approve --list`.")
        return self.get(approval.id)

    def consume(self, tool: str, args: dict[str, Any], target: str | None = None) -> Approval | None:
        """The granted, unexpired approval that covers this call: an exact once-grant is used up (single
        use); the wider scopes stay until they expire. Exact grants are preferred over wider ones."""
        for approval in self._covering(tool, args, target):
            if approval.scope != "once":
                return approval
            if self._write("UPDATE approvals SET status='used' WHERE id=? AND status='granted'", (approval.id,)) == 1:
                return approval
        return None

    def has_grant(self, tool: str, args: dict[str, Any], target: str | None = None) -> bool:
        return bool(self._covering(tool, args, target))

    def _covering(self, tool: str, args: dict[str, Any], target: str | None) -> list[Approval]:
        digest = call_hash(tool, args)
        granted = self._query(  # once/today grants cover only their own call: fetch those by hash
            "SELECT * FROM approvals WHERE tool=? AND status='granted' AND expires>? "
            "AND (args_hash=? OR scope IN ('file', 'folder', 'tool')) ORDER BY decided_at",
            (tool, time.time(), digest))
        order: dict[str, int] = {name: i for i, name in enumerate(SCOPES)}  # narrowest first
        return sorted((a for a in granted if a.covers(tool, digest, target)), key=lambda a: order.get(a.scope, 9))

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
        approved_by=row["approved_by"], csrf=row["csrf"], scope=row["scope"], target=row["target"],
        scope_path=row["scope_path"])
