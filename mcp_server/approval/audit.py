"""The audit log: one JSON line per policy decision in `<data_dir>/audit.jsonl`.

Each line: time, tool, caller (client or sub-agent), an arguments summary with secrets
masked, the decision (allow/ask/deny), its rule, risk and reason, the outcome (executed,
approval_required, denied, rejected) and who approved (elicitation, session-grant, cli,
http-page) - with the scope of an out-of-band approval (once, today, file, folder, tool and the
file or folder it covers) on its grant line and on every call it let through. Secrets never reach the file: values under secret-looking keys and
secret-looking strings anywhere are replaced by `***`.
"""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic_core import to_jsonable_python

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


def mask_text(text: str) -> str:
    """Replace secret-looking substrings (keys, tokens, `PASSWORD=...`) with ***."""
    for pattern in _SECRET_VALUES:
        text = pattern.sub(MASK, text)
    return _SECRET_ASSIGNMENT.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)


def mask_args(value: Any, key: str | None = None) -> Any:
    """A bounded copy of tool arguments with secrets masked (for logs and the audit file)."""
    if key is not None and _SECRET_KEY.search(key) and value not in (None, "", False):
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


class AuditLog:
    """Append-only JSONL audit log; safe to call from several threads."""

    def __init__(self, data_dir: Path, max_bytes: int = MAX_BYTES) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        self.path = data_dir / AUDIT_FILE
        self.max_bytes = max_bytes
        self._lock = threading.Lock()

    def record_decision(self, approval: Approval) -> None:
        """The line for an approval granted or rejected out of band (CLI or approval page)."""
        self.record(
            tool=approval.tool, args=approval.args, action="ask", rule_id=approval.rule_id, risk=approval.risk,
            reason=approval.reason, outcome="granted" if approval.status == "granted" else "rejected",
            origin=approval.origin, approved_by=approval.approved_by, approval_id=approval.id,
            scope=approval.scope if approval.status == "granted" else None, scope_path=approval.scope_path,
            expires=approval.expires if approval.status == "granted" else None,
        )

    def record(self, *, tool: str, args: dict[str, Any], action: str, rule_id: str, risk: str, reason: str,
               outcome: str, origin: str, approved_by: str | None = None, approval_id: str | None = None,
               scope: str | None = None, scope_path: str | None = None, expires: float | None = None) -> None:
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
        line = json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n"
        with self._lock:
            self._rotate_if_large()
            fresh = not self.path.exists()
            with self.path.open("a", encoding="utf-8") as handle:
                handle.write(line)
            if fresh:
                from mcp_server.approval.store import private

                private(self.path)

    def _rotate_if_large(self) -> None:
        """Keep the log bounded: past MAX_BYTES it moves to audit.jsonl.1 (the previous .1 is dropped)."""
        try:
            if self.path.stat().st_size < self.max_bytes:
                return
        except FileNotFoundError:
            return
        self.path.replace(self.path.with_name(self.path.name + ".1"))

    def read(self, limit: int = 100) -> list[dict[str, Any]]:
        """The last `limit` entries (oldest first)."""
        if not self.path.exists():
            return []
        lines = self.path.read_text(encoding="utf-8").splitlines()[-limit:]
        return [json.loads(line) for line in lines if line.strip()]
