"""Pending and granted approvals (in the deployment's database) and per-session grants (in memory).

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
The wider scopes (file, folder, tool) are offered for, and cover, only low- and medium-risk calls.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import hmac
import json
import os
import secrets
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic_core import to_jsonable_python

from foundation.errors import Conflict, NotFound
from foundation.storage import Conn, Database, Schema, Table

if TYPE_CHECKING:
    from foundation.settings import Settings

APPROVALS_FILE = "approvals.sqlite3"
_KEEP_SECONDS = 7 * 24 * 3600  # decided/expired approvals are kept a week (the audit log keeps the history)
_ID_ALPHABET = "abcdefghijkmnpqrstuvwxyz23456789"  # no 0/o/1/l: easy to read and type

_COLUMNS = ("id", "tool", "args_hash", "args_json", "risk", "reason", "rule_id", "origin", "status", "created",
            "expires", "approved_by", "decided_at", "csrf", "scope", "target", "scope_path", "seal")
SCHEMA = Schema(
    name="approvals",
    sqlite_file=APPROVALS_FILE,
    sqlite=(
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
        "ALTER TABLE approvals ADD COLUMN seal TEXT",  # the grant's seal (ApprovalStore: a MAC only deciders make)
    ),
    postgres=(
        """CREATE TABLE approvals (
            id text PRIMARY KEY, tool text NOT NULL, args_hash text NOT NULL, args_json text NOT NULL,
            risk text NOT NULL, reason text NOT NULL, rule_id text NOT NULL, origin text NOT NULL,
            status text NOT NULL, created double precision NOT NULL, expires double precision NOT NULL,
            approved_by text, decided_at double precision, csrf text NOT NULL,
            scope text NOT NULL DEFAULT 'once', target text, scope_path text);
        CREATE INDEX approvals_call ON approvals (tool, args_hash, status)""",
        "ALTER TABLE approvals ADD COLUMN seal text",
    ),
    tables=(Table("approvals", _COLUMNS, ("id",)),),
    private=True,
)
CHANNEL = "approvals"  # notified with an approval's id when it is decided

Scope = Literal["once", "today", "file", "folder", "tool"]
SCOPES: tuple[Scope, ...] = ("once", "today", "file", "folder", "tool")
FILE_SCOPE_SECONDS = 3600
TOOL_SCOPE_SECONDS = 600
WIDE_SCOPE_RISKS = ("low", "medium")
"""Only calls of these risks are covered by a grant wider than the call itself (file, folder, tool), as only
they may be approved for a session: a grant given for notes.md does not cover .git/hooks/x (high risk)."""


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
    """The scopes a human may grant for `approval`, with a one-line description each (a high-risk call:
    only this exact call)."""
    minutes = TOOL_SCOPE_SECONDS // 60
    out: list[tuple[Scope, str]] = [("once", "this exact call, once"),
                                    ("today", "this exact call, any number of times today")]
    if approval.risk not in WIDE_SCOPE_RISKS:
        return out
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
    seal: str | None = None  # a grant's MAC (ApprovalStore.sealed)

    def sealed_text(self) -> str:
        """What a grant's seal covers: everything that says which calls it lets through, and until when."""
        return "|".join(str(v) for v in (self.id, self.tool, self.args_hash, "granted", self.scope, self.scope_path,
                                         repr(float(self.expires)), self.approved_by))

    def covers(self, tool: str, digest: str, target: str | None, risk: str | None = None) -> bool:
        """True when this granted approval covers a call (tool, args hash, target file, the call's risk:
        a wider scope covers only low and medium ones; None: unknown, only the exact call)."""
        if tool != self.tool:
            return False
        if self.scope in ("once", "today"):
            return digest == self.args_hash
        if risk not in WIDE_SCOPE_RISKS:
            return False
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
    """Out-of-band approvals in the deployment's database (SQLite file approvals.sqlite3, or PostgreSQL:
    then a grant made through any process, or the CLI, is seen by every server process).

    Session grants ("approve for this session", given by elicitation) stay in this process's memory:
    an MCP session lives in one server process, and a grant must not outlive it.

    With the deployment's settings, a grant is sealed (HMAC with a key in the data directory, which neither
    the database nor the sandbox holds) and only a sealed grant lets a call through: another connection
    holding the database's URL cannot grant an approval with a plain UPDATE (issue 30, finding 4)."""

    def __init__(self, database: Database, ttl_seconds: float, settings: Settings | None = None) -> None:
        self.database = database
        self.settings = settings  # the deployment's, for the commands messages print
        self._seal_key: bytes | None = None
        self.ttl = float(ttl_seconds)
        self._db = database.open(SCHEMA)  # first: a data dir that cannot be made is its clear error
        if settings is not None:
            from mcp_server.approval_keys import GRANT_KEY_FILE, data_key

            self._seal_key = data_key(settings.data_dir, GRANT_KEY_FILE).encode()
        self._lock = threading.Lock()
        self._session_grants: set[tuple[str, str, str]] = set()

    def _query(self, sql: str, params: tuple[Any, ...]) -> list[Approval]:
        with self._db.read() as conn:
            return [_row_to_approval(row) for row in conn.dicts(sql, params)]

    # -- pending approvals

    def request(self, tool: str, args: dict[str, Any], *, risk: str, reason: str, rule_id: str,
                origin: str, target: str | None = None) -> Approval:
        """The live pending approval for this exact call, or a new one (one transaction: concurrent
        identical calls, in any process, share one approval id)."""
        digest = call_hash(tool, args)
        now = time.time()
        approval_id = new_approval_id()
        args_json = canonical_json(args)

        def pending_or_new(conn: Conn) -> str:
            existing = conn.scalar(
                "SELECT id FROM approvals WHERE tool=? AND args_hash=? AND status='pending' AND expires>? "
                "ORDER BY created DESC LIMIT 1", (tool, digest, now))
            if existing is not None:
                return str(existing)
            conn.execute("DELETE FROM approvals WHERE expires < ?", (now - _KEEP_SECONDS,))
            conn.execute(
                "INSERT INTO approvals (id, tool, args_hash, args_json, risk, reason, rule_id, origin, status, "
                "created, expires, csrf, target) VALUES (?,?,?,?,?,?,?,?, 'pending', ?,?,?,?)",
                (approval_id, tool, digest, args_json, risk, reason.replace("\x00", ""), rule_id, origin, now,
                 now + self.ttl, secrets.token_urlsafe(24), target))
            return approval_id

        return self.get(self._db.write(pending_or_new))

    def get(self, approval_id: str) -> Approval:
        found = self._query("SELECT * FROM approvals WHERE id=?", (approval_id.strip().lower(),))
        if not found:
            from foundation.command import run_hint

            raise NotFound(f"No approval {approval_id!r} in {self.database.describe()}. Run "
                           f"{run_hint(self.settings, 'approve', '--list')} to see pending ones; if the server keeps "
                           "its state elsewhere, pass the same --data-dir (or GENERALAGENT_DATA_DIR) and "
                           "--database-url (or GENERALAGENT_DATABASE_URL) before `approve`.")
        return found[0]

    def pending(self) -> list[Approval]:
        return self._query("SELECT * FROM approvals WHERE status='pending' AND expires>? ORDER BY created",
                           (time.time(),))

    def live_ids(self) -> set[str]:
        """Ids of approvals that are still pending or granted (not expired)."""
        with self._db.read() as conn:
            return {str(r[0]) for r in conn.all(
                "SELECT id FROM approvals WHERE status IN ('pending','granted') AND expires>?", (time.time(),))}

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
        expires = _scope_end(scope, now, self.ttl) if approve else approval.expires
        granted = dataclasses.replace(approval, approved_by=by, expires=expires, scope=scope if approve else "once",
                                      scope_path=scope_path if scope in ("file", "folder") else None)
        seal = self._seal(granted) if approve else None
        params = (status, by, now, expires, granted.scope, granted.scope_path, seal, approval.id)

        def update(conn: Conn) -> int:
            changed = int(conn.execute(
                "UPDATE approvals SET status=?, approved_by=?, decided_at=?, expires=?, scope=?, scope_path=?, "
                "seal=? WHERE id=? AND status='pending'", params).rowcount)
            conn.notify(CHANNEL, approval.id)  # wakes whoever waits for this decision, in any process
            return changed

        if self._db.write(update) != 1:
            raise Conflict(f"Approval {approval.id} was decided concurrently; run `approve --list`.")
        return self.get(approval.id)

    def wait_for_decision(self, approval_id: str, timeout: float) -> Approval:
        """The approval once it is no longer pending (granted, rejected, used) or has expired, or as it is
        after `timeout` seconds. Woken by the decision's notification (PostgreSQL: from any process);
        re-checked at least every `database.poll_seconds` (SQLite: other processes are seen by polling)."""

        def decided() -> Approval | None:
            approval = self.get(approval_id)
            return approval if approval.status != "pending" or approval.expired() else None

        return self.database.wait_until(decided, CHANNEL, timeout) or self.get(approval_id)

    def consume(self, tool: str, args: dict[str, Any], target: str | None = None,
                risk: str | None = None) -> Approval | None:
        """The granted, unexpired approval that covers this call: an exact once-grant is used up (single
        use, also across processes); the wider scopes stay until they expire. Exact grants are preferred."""
        for approval in self._covering(tool, args, target, risk):
            if approval.scope != "once":
                return approval
            if self._db.write(partial(_use_up, approval_id=approval.id)) == 1:
                return approval
        return None

    def has_grant(self, tool: str, args: dict[str, Any], target: str | None = None, risk: str | None = None) -> bool:
        return bool(self._covering(tool, args, target, risk))

    def _covering(self, tool: str, args: dict[str, Any], target: str | None, risk: str | None) -> list[Approval]:
        digest = call_hash(tool, args)
        granted = self._query(  # once/today grants cover only their own call: fetch those by hash
            "SELECT * FROM approvals WHERE tool=? AND status='granted' AND expires>? "
            "AND (args_hash=? OR scope IN ('file', 'folder', 'tool')) ORDER BY decided_at, id",
            (tool, time.time(), digest))
        order: dict[str, int] = {name: i for i, name in enumerate(SCOPES)}  # narrowest first
        return sorted((a for a in granted if a.covers(tool, digest, target, risk) and self.sealed(a)),
                      key=lambda a: order.get(a.scope, 9))

    def _seal(self, approval: Approval) -> str | None:
        if self._seal_key is None:
            return None
        return hmac.new(self._seal_key, approval.sealed_text().encode(), hashlib.sha256).hexdigest()

    def sealed(self, approval: Approval) -> bool:
        """The grant was made by a decider holding the data directory's key (without settings, as in a bare
        store of a test or a migration, every grant counts)."""
        expected = self._seal(approval)
        return expected is None or hmac.compare_digest(expected, approval.seal or "")

    # -- per-session grants ("approve for this session"): this process only (see the class docstring)

    def grant_session(self, session_key: str, tool: str, rule_id: str) -> None:
        with self._lock:
            self._session_grants.add((session_key, tool, rule_id))

    def session_granted(self, session_key: str, tool: str, rule_id: str) -> bool:
        with self._lock:
            return (session_key, tool, rule_id) in self._session_grants

    def close(self) -> None:
        self._db.close()


def _use_up(conn: Conn, approval_id: str) -> int:
    # the seal goes with the use: a row set back to 'granted' by hand is no grant
    return int(conn.execute("UPDATE approvals SET status='used', seal=NULL WHERE id=? AND status='granted'",
                            (approval_id,)).rowcount)


def _row_to_approval(row: dict[str, Any]) -> Approval:
    return Approval(
        id=row["id"], tool=row["tool"], args_hash=row["args_hash"], args=json.loads(row["args_json"]),
        risk=row["risk"], reason=row["reason"], rule_id=row["rule_id"], origin=row["origin"],
        status=row["status"], created=row["created"], expires=row["expires"],
        approved_by=row["approved_by"], csrf=row["csrf"], scope=row["scope"], target=row["target"],
        scope_path=row["scope_path"], seal=row.get("seal"))
