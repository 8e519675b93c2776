"""The audit log: one JSON line per policy decision in `<data_dir>/audit.jsonl` (with PostgreSQL:
one row per decision in the append-only table audit_log, the same masked JSON).

Each line: time, tool, caller (client or sub-agent), an arguments summary with secrets
masked, the decision (allow/ask/deny), its rule, risk and reason, the outcome (executed,
approval_required, denied, rejected) and who approved (elicitation, session-grant, cli,
http-page) - with the scope of an out-of-band approval (once, today, file, folder, tool and the
file or folder it covers) on its grant line and on every call it let through. Secrets never reach the file: values under secret-looking keys and
secret-looking strings anywhere are replaced by `***`.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import re
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from pydantic_core import to_jsonable_python

from foundation.storage import Database, Row, Schema, Table, ensure_data_dir
from foundation.storage.transfer import rows_of

if TYPE_CHECKING:
    from mcp_server.approval.store import Approval

AUDIT_FILE = "audit.jsonl"
MASK = "***"
MAX_BYTES = 20 * 1024 * 1024
_MAX_VALUE_CHARS = 300
_MASK_WINDOW_CHARS = 16_384
_MAX_ITEMS = 20

_SECRET_KEY = re.compile(r"pass(word|wd|phrase)?|secret|token|api[_-]?key|apikey|private[_-]?key|credential|"
                         r"auth|cookie|session[_-]?id|access[_-]?key", re.IGNORECASE)
_SECRET_VALUES = [
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(-----END [A-Z ]*PRIVATE KEY-----|$)", re.DOTALL),
    re.compile(r"\b(sk|rk|pk)-[A-Za-z0-9_-]{16,}"),                 # OpenAI/Stripe-style keys
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"),                     # GitHub tokens
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"),
    re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),                   # Slack tokens
    re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b"),                      # AWS access key ids
    re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"),                        # Google API keys
    re.compile(r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{5,}"),  # JWTs
    re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(r"(?i)(?<=://)[^/\s:@]+:[^/\s@]+(?=@)"),              # user:password@ in URLs
]
_SECRET_ASSIGNMENT = re.compile(
    r"(?i)\b([A-Z0-9_]*(?:PASSWORD|PASSWD|SECRET|TOKEN|API_?KEY|PRIVATE_?KEY|ACCESS_?KEY)[A-Z0-9_]*)"
    r"(\s*[=:]\s*|\s+)(['\"]?)[^\s'\"]+\3")


def _scoped(pattern: re.Pattern[str]) -> str:
    """`pattern` as a group that keeps its own flags inside an alternation (`(?i)x` -> `(?i:x)`). Only
    patterns without back-references (their numbers would shift) and with flags i/s qualify."""
    text = pattern.pattern.removeprefix("(?i)")
    if re.search(r"\\[1-9]|\(\?P=", text) or pattern.flags & ~(re.IGNORECASE | re.DOTALL | re.UNICODE):
        raise ValueError(f"cannot join {pattern.pattern!r} into the quick secret check")
    flags = "i" * bool(pattern.flags & re.IGNORECASE) + "s" * bool(pattern.flags & re.DOTALL)
    return f"(?{flags}:{text})" if flags else f"(?:{text})"


_ANY_SECRET_VALUE = re.compile("|".join(_scoped(p) for p in _SECRET_VALUES))
"""Matches where one of _SECRET_VALUES matches (the assignment pattern, with its back-reference, is
checked on its own): text that neither matches has nothing to mask."""


_HINTS = ("-----BEGIN", "sk-", "rk-", "pk-", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "xox", "AKIA",
          "ASIA", "AIza", "eyJ", "://")
"""A literal that every match of a case-sensitive secret pattern contains (one per pattern, or per branch)."""
_HINTS_ANY_CASE = ("bearer", "basic", "passw", "secret", "token", "apikey", "api_key", "privatekey", "private_key",
                   "accesskey", "access_key")
"""The same for the case-blind patterns (bearer/basic, the assignment), lower-cased."""
_FOLDING = ("\u0130", "\u0131", "\u017f", "\u212a")
"""The four non-ASCII letters a case-blind `re` pattern matches for ASCII ones (İ ı ſ K, the `re` docs)."""


def _may_hold_secret(text: str) -> bool:
    """False only when no secret pattern can match `text`: it holds none of their literals (substring
    tests, ~3 us for a 100-character question, where the patterns' scan costs ~35 us)."""
    for hint in _HINTS:
        if hint in text:
            return True
    if not text.isascii() and any(letter in text for letter in _FOLDING):
        return True  # rare: the patterns decide
    folded = text.lower()
    return any(hint in folded for hint in _HINTS_ANY_CASE)


def mask_text(text: str) -> str:
    """Replace secret-looking substrings (keys, tokens, `PASSWORD=...`) with ***."""
    if not _may_hold_secret(text) or (not _ANY_SECRET_VALUE.search(text) and not _SECRET_ASSIGNMENT.search(text)):
        return text
    for pattern in _SECRET_VALUES:
        text = pattern.sub(MASK, text)
    return _SECRET_ASSIGNMENT.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)


def _secret_key(key: str) -> bool:
    """An argument name whose value is masked whole (names repeat: short ones are tested once)."""
    return _short_secret_key(key) if len(key) <= 64 else _SECRET_KEY.search(key) is not None


@functools.lru_cache(maxsize=1024)
def _short_secret_key(key: str) -> bool:
    return _SECRET_KEY.search(key) is not None


def mask_args(value: Any, key: str | None = None) -> Any:
    """A bounded copy of tool arguments with secrets masked (for logs and the audit file)."""
    if key is not None and _secret_key(key) and value not in (None, "", False):
        return MASK
    if isinstance(value, dict):
        items = list(value.items())[:_MAX_ITEMS]
        return {str(k): mask_args(v, str(k)) for k, v in items}
    if isinstance(value, list | tuple):
        return [mask_args(v) for v in list(value)[:_MAX_ITEMS]]
    if isinstance(value, str):  # only the kept start is masked (a window wide enough for a whole key)
        masked = mask_text(value[:_MASK_WINDOW_CHARS])
        more = len(masked) - _MAX_VALUE_CHARS + max(0, len(value) - _MASK_WINDOW_CHARS)
        return masked if more <= 0 else masked[:_MAX_VALUE_CHARS] + f"...(+{more} chars)"
    return to_jsonable_python(value, fallback=str)


AUDIT_SCHEMA = Schema(
    name="audit",
    sqlite_file="",  # with SQLite the audit log is the file audit.jsonl in the data dir
    sqlite=(),
    postgres=(
        """CREATE TABLE audit_log (
            id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
            entry text NOT NULL
        );
        CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            RAISE EXCEPTION 'the audit log is append-only';
        END $$;
        CREATE TRIGGER audit_log_no_change BEFORE UPDATE OR DELETE ON audit_log
            FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();
        CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
            FOR EACH STATEMENT EXECUTE FUNCTION audit_log_append_only()""",
    ),
)


def entry_line(*, tool: str, args: dict[str, Any], action: str, rule_id: str, risk: str, reason: str,
               outcome: str, origin: str, approved_by: str | None = None, approval_id: str | None = None,
               scope: str | None = None, scope_path: str | None = None, expires: float | None = None) -> str:
    """One audit entry as a JSON line (no newline), secrets masked."""
    entry = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "tool": tool,
        "origin": origin,
        "args": mask_args(args),
        "action": action,
        "rule_id": rule_id,
        "risk": risk,
        "reason": mask_text(reason),
        "outcome": outcome,
        "approved_by": approved_by,
        "approval_id": approval_id,
    }
    if scope is not None:
        entry["scope"] = scope
        if scope_path:
            entry["scope_path"] = scope_path
        if expires is not None:
            entry["expires"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expires))
    return json.dumps(entry, ensure_ascii=False, separators=(",", ":"))


class AuditSink(ABC):
    """Where audit entries go: the JSONL file (SQLite deployments) or the audit_log table (PostgreSQL)."""

    def record_decision(self, approval: Approval) -> None:
        """The line for an approval granted or rejected out of band (CLI or approval page)."""
        self.record(
            tool=approval.tool, args=approval.args, action="ask", rule_id=approval.rule_id, risk=approval.risk,
            reason=approval.reason, outcome="granted" if approval.status == "granted" else "rejected",
            origin=approval.origin, approved_by=approval.approved_by, approval_id=approval.id,
            scope=approval.scope if approval.status == "granted" else None, scope_path=approval.scope_path,
            expires=approval.expires if approval.status == "granted" else None,
        )

    def record(self, **fields: Any) -> None:
        """One entry (the keyword arguments of `entry_line`)."""
        self.append([entry_line(**fields)])

    def read(self, limit: int = 100) -> list[dict[str, Any]]:
        """The last `limit` entries (oldest first)."""
        return [json.loads(line) for line in self.tail(limit)]

    @abstractmethod
    def append(self, lines: list[str]) -> None:
        """Add entries (JSON lines without newline), in order."""

    @abstractmethod
    def tail(self, limit: int) -> list[str]: ...

    @abstractmethod
    def lines(self) -> Iterator[str]:
        """Every entry kept, oldest first (export)."""


class AuditLog(AuditSink):
    """Append-only JSONL audit log in `<data_dir>/audit.jsonl`; safe to call from several threads."""

    def __init__(self, data_dir: Path, max_bytes: int = MAX_BYTES) -> None:
        ensure_data_dir(data_dir)
        self.path = data_dir / AUDIT_FILE
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._handle: TextIO | None = None  # kept open between entries; reopened when the file changed

    def append(self, lines: list[str]) -> None:
        with self._lock:
            handle = self._current()
            handle.write("".join(line + "\n" for line in lines))
            handle.flush()
            if os.name == "nt":  # an open file cannot be renamed there: other processes rotate it too
                self._close()

    def _current(self) -> TextIO:
        """The open log file: the one at `path` now (another process may have rotated or removed it),
        moved to audit.jsonl.1 first when it is past max_bytes (the previous .1 is dropped)."""
        try:
            info: os.stat_result | None = os.stat(self.path)
        except FileNotFoundError:
            info = None
        if info is not None and info.st_size >= self.max_bytes:
            self._close()
            with contextlib.suppress(OSError):  # e.g. held open by another process on Windows: rotate later
                self.path.replace(self.path.with_name(self.path.name + ".1"))
            info = None
        if self._handle is not None and (info is None or os.fstat(self._handle.fileno()).st_ino != info.st_ino):
            self._close()
        if self._handle is None:
            self._handle = self.path.open("a", encoding="utf-8")
            if info is None:
                from mcp_server.approval.store import private

                private(self.path)
        return self._handle

    def _close(self) -> None:
        if self._handle is not None:
            with contextlib.suppress(OSError):
                self._handle.close()
            self._handle = None

    def tail(self, limit: int) -> list[str]:
        if not self.path.exists():
            return []
        return [line for line in self.path.read_text(encoding="utf-8").splitlines()[-limit:] if line.strip()]

    def lines(self) -> Iterator[str]:
        for path in (self.path.with_name(self.path.name + ".1"), self.path):
            if path.exists():
                with path.open(encoding="utf-8") as handle:
                    yield from (line.rstrip("\n") for line in handle if line.strip())


class TableAuditLog(AuditSink):
    """The audit log as the append-only table audit_log (PostgreSQL: UPDATE, DELETE and TRUNCATE are
    refused by triggers), shared by every server process on the database."""

    def __init__(self, database: Database) -> None:
        self._db = database.open(AUDIT_SCHEMA)
        try:
            weak = audit_weaknesses(database)
        except Exception:  # a check, not a condition of serving
            weak = []
        if weak:
            logging.getLogger("generalagent.approval").warning(
                "the server's database role %s: it (and anyone with its URL) could switch the audit log's "
                "protection off; `generalagent-mcp doctor` says how to serve with a role that cannot", " and ".join(weak))

    def append(self, lines: list[str]) -> None:
        def add(conn: Any) -> None:
            # Like the JSONL file (written, not fsynced): the call does not wait for a disk flush of its
            # audit row; committed rows are visible at once and survive anything but a server crash.
            conn.execute("SET LOCAL synchronous_commit TO OFF")
            conn.copy_rows("audit_log", ("entry",), [(line.replace("\x00", ""),) for line in lines])

        self._db.write(add)

    def tail(self, limit: int) -> list[str]:
        with self._db.read() as conn:
            rows = conn.all("SELECT entry FROM audit_log ORDER BY id DESC LIMIT ?", (limit,))
        return [str(r[0]) for r in reversed(rows)]

    def lines(self) -> Iterator[str]:
        with self._db.read() as conn:
            yield from (str(r[0]) for r in conn.stream("SELECT entry FROM audit_log ORDER BY id"))


GRANTS = ("GRANT USAGE ON SCHEMA <schema> TO <server role>; GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN "
          "SCHEMA <schema> TO <server role>; GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA <schema> TO <server role>; "
          "REVOKE UPDATE, DELETE, TRUNCATE ON audit_log FROM <server role>")
"""How to serve with a role that cannot undo the audit log: the owner role migrates, the server's role gets this."""


def audit_weaknesses(database: Database) -> list[str]:
    """What lets the server's own database role switch the audit log's protection off (PostgreSQL): owning
    the table (ALTER TABLE ... DISABLE TRIGGER), being a superuser, or holding UPDATE/DELETE/TRUNCATE on it.
    Empty when the log is append-only by privilege (or on SQLite: a file in the data directory)."""
    if database.backend == "sqlite":
        return []
    with database.open(AUDIT_SCHEMA).read() as conn:
        rows = conn.all(
            "SELECT r.rolsuper, pg_has_role(current_user, c.relowner, 'MEMBER'), "
            "has_table_privilege(c.oid, 'UPDATE'), has_table_privilege(c.oid, 'DELETE'), "
            "has_table_privilege(c.oid, 'TRUNCATE') FROM pg_class c, pg_roles r "
            "WHERE c.oid = to_regclass('audit_log') AND r.rolname = current_user", ())
    if not rows:
        return ["the audit_log table cannot be found"]
    superuser, owner, *privileges = (bool(v) for v in rows[0])
    found = ["is a superuser"] if superuser else []
    found += ["owns the audit_log table (or is a member of its owner)"] if owner else []
    granted = [name for name, held in zip(("UPDATE", "DELETE", "TRUNCATE"), privileges, strict=True) if held]
    if granted and not (superuser or owner):
        found.append(f"holds {'/'.join(granted)} on audit_log")
    return found


def audit_log_for(database: Database, data_dir: Path) -> AuditSink:
    """The deployment's audit log: the JSONL file with SQLite, the audit_log table with PostgreSQL."""
    return AuditLog(data_dir) if database.backend == "sqlite" else TableAuditLog(database)


class AuditPortable:
    """The audit log for export/import: one table of JSON lines, oldest first, on either backend."""

    name = "audit"
    TABLE = Table("audit_log", ("entry",), ("entry",))

    def __init__(self, sink: AuditSink) -> None:
        self.sink = sink

    def tables(self) -> tuple[Table, ...]:
        return (self.TABLE,)

    def rows(self, table: Table) -> Iterator[Row]:
        return rows_of(self.sink.lines())

    def identity_high(self, table: Table) -> int | None:
        return None

    def is_empty(self) -> bool:
        return not self.sink.tail(1)

    def load(self, tables: Iterator[tuple[Table, int | None, Iterator[Row]]]) -> dict[str, int]:
        counts: dict[str, int] = {}
        for table, _, rows in tables:
            lines = [str(row[0]) for row in rows]
            self.sink.append(lines)
            counts[table.name] = len(lines)
        return counts
