"""The audit log: one JSON line per decision, secrets masked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_server.approval import audit
from mcp_server.approval.audit import MASK, AuditLog, mask_args, mask_text
from tests import approval_helpers as helpers
from tests.conftest import connect

pytestmark = [pytest.mark.anyio, pytest.mark.storage]

OPENAI_KEY = "sk-proj-abcdefghijklmnopqrstuvwxyz123456"
GITHUB_TOKEN = "ghp_" + "a1B2" * 9
AWS_KEY = "AKIAIOSFODNN7EXAMPLE"


@pytest.mark.parametrize(
    "text",
    [
        f"curl -H 'Authorization: Bearer {OPENAI_KEY}' https://x",
        f"export OPENAI_API_KEY={OPENAI_KEY}",
        f"git push https://me:{GITHUB_TOKEN}@github.com/me/repo",
        f"aws configure set aws_access_key_id {AWS_KEY}",
        "mysql -u root PASSWORD=hunter2secret",
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAA\n-----END OPENSSH PRIVATE KEY-----",
    ],
)
def test_mask_text_hides_secrets(text: str) -> None:
    masked = mask_text(text)
    for secret in (OPENAI_KEY, GITHUB_TOKEN, AWS_KEY, "hunter2secret", "b3BlbnNzaC1rZXktdjEAAAA"):
        assert secret not in masked, masked
    assert MASK in masked


def test_mask_args_by_key_and_bounds_size() -> None:
    args = {"api_key": "plain-looking", "nested": {"password": "x"}, "text": "y" * 5000, "items": list(range(100))}
    masked = mask_args(args)
    assert masked["api_key"] == MASK and masked["nested"]["password"] == MASK
    assert len(masked["text"]) < 400 and "more" not in masked["text"][:300]
    assert len(masked["items"]) == 20


async def test_every_decision_is_logged_with_secrets_masked(settings: Any, monkeypatch: Any) -> None:
    helpers.install(monkeypatch)
    async with connect(settings, elicitation_callback=helpers.elicitation_answer("accept")) as client:
        await client.list_tools()
        assert not (await client.call_tool("now", {})).is_error
        assert not (await client.call_tool("poke", {"text": f"token {OPENAI_KEY} PASSWORD=hunter2secret"})).is_error
        assert (await client.call_tool("poke", {"text": "x", "path": "/etc/shadow"})).is_error
    raw = "\n".join(_stored_lines(settings))  # audit.jsonl, or the audit_log table on PostgreSQL
    assert OPENAI_KEY not in raw and "hunter2secret" not in raw
    entries = [json.loads(line) for line in raw.splitlines()]
    assert [(e["tool"], e["action"], e["outcome"]) for e in entries] == [
        ("now", "allow", "allowed"), ("poke", "ask", "approved"), ("poke", "deny", "denied")]
    for entry in entries:
        assert set(entry) >= {"time", "tool", "origin", "args", "action", "rule_id", "risk", "reason", "outcome",
                              "approved_by"}
        assert entry["time"].endswith("Z") and entry["origin"].startswith("client:")
    assert entries[1]["approved_by"] == "elicitation" and MASK in entries[1]["args"]["text"]
    assert helpers.audit_entries(settings, limit=1) == entries[-1:]


def _stored_lines(settings: Any) -> list[str]:
    from foundation.storage import open_database
    from mcp_server.approval.audit import audit_log_for

    database = open_database(settings.data_dir, settings.database_url)
    try:
        return list(audit_log_for(database, settings.data_dir).lines())
    finally:
        database.close()


def test_the_table_log_is_append_only(database: Any, data_dir: Path) -> None:
    from foundation.storage import Schema
    from mcp_server.approval.audit import audit_log_for

    log = audit_log_for(database, data_dir)
    log.record(tool="t", args={"token": "abc"}, action="allow", rule_id="r", risk="low", reason="x",
               outcome="allowed", origin="client:c")
    assert log.read() == [json.loads(line) for line in log.lines()] and log.read()[0]["args"] == {"token": MASK}
    if database.backend == "postgresql":
        probe = database.open(Schema("probe", "", (), ()))
        for statement in ("UPDATE audit_log SET entry = '{}'", "DELETE FROM audit_log", "TRUNCATE audit_log"):
            with pytest.raises(Exception, match="append-only"):
                probe.write(lambda c, q=statement: c.execute(q))
        assert len(list(log.lines())) == 1


def test_the_log_rotates_when_large(data_dir: Path) -> None:
    log = AuditLog(data_dir, max_bytes=2000)
    for i in range(40):
        log.record(tool="t", args={"i": i}, action="allow", rule_id="r", risk="low", reason="x", outcome="allowed",
                   origin="client:c")
    assert (data_dir / "audit.jsonl.1").exists()
    assert (data_dir / "audit.jsonl").stat().st_size < 2500
    assert log.read()[-1]["args"] == {"i": 39}


def test_state_files_are_private(data_dir: Path) -> None:
    import os
    import stat

    from foundation.storage import open_database
    from mcp_server.approval.store import ApprovalStore

    ApprovalStore(open_database(data_dir), 60)
    AuditLog(data_dir).record(tool="t", args={}, action="allow", rule_id="r", risk="low", reason="x",
                              outcome="allowed", origin="client:c")
    if os.name == "posix":
        for name in ("approvals.sqlite3", "audit.jsonl"):
            assert stat.S_IMODE((data_dir / name).stat().st_mode) == 0o600, name


PIECES = ["sk-", "proj-", "ghp_", "github_pat_", "xoxb-", "AKIA", "AIza", "eyJ", "Bearer ", "basic ", "://",
          "user:pw@", "-----BEGIN RSA PRIVATE KEY-----", "-----END RSA PRIVATE KEY-----", "PASSWORD", "api_key",
          "TOKEN", "=", ": ", " ", "'", '"', "\n", "A1b2C3d4E5f6G7h8", "abcdefghij", "0123456789", "_", "-", ".",
          "é", "密码", "bearer ", "ſecret", "toKen", "pasſword", "acceſs_key", "baſic ", "İ", "ı", "ſ", "K", "Key",
          "gho_", "ghu_", "ghs_", "ghr_", "rk-", "pk-", "ASIA", "APIKEY", "private_Key", "PRIVATEKEY", "accesskey",
          "passwd", "SECRET", "xoxp-"]


@settings(max_examples=400, deadline=None)
@given(text=st.lists(st.sampled_from(PIECES), max_size=30).map("".join))
def test_the_quick_check_masks_what_every_pattern_masks(text: str) -> None:
    """mask_text skips text without any of the patterns' literals, then text its one combined pattern does
    not match: the result is the same as applying every pattern (random spellings assembled from the
    patterns' own pieces, with the non-ASCII letters a case-blind pattern matches for ASCII ones)."""
    assert mask_text(text) == masked_by_every_pattern(text)


def masked_by_every_pattern(text: str) -> str:
    """`text` with every secret pattern applied in turn (what mask_text's pre-checks must not change)."""
    for pattern in audit._SECRET_VALUES:
        text = pattern.sub(MASK, text)
    return audit._SECRET_ASSIGNMENT.sub(lambda m: f"{m.group(1)}{m.group(2)}{MASK}", text)


def test_the_log_follows_a_file_rotated_or_removed_by_another_process(data_dir: Path) -> None:
    log = AuditLog(data_dir)

    def record(i: int) -> None:
        log.record(tool="t", args={"i": i}, action="allow", rule_id="r", risk="low", reason="x", outcome="allowed",
                   origin="client:c")

    record(1)
    (data_dir / "audit.jsonl").replace(data_dir / "audit.jsonl.1")  # another process rotated it
    record(2)
    assert [e["args"]["i"] for e in log.read()] == [2]
    (data_dir / "audit.jsonl").unlink()  # removed by hand
    record(3)
    assert [e["args"]["i"] for e in log.read()] == [3]
    assert [json.loads(line)["args"]["i"] for line in (data_dir / "audit.jsonl.1").read_text().splitlines()] == [1]


def test_only_patterns_that_keep_their_meaning_join_the_quick_check() -> None:
    import re

    from mcp_server.approval.audit import _scoped

    assert _scoped(re.compile(r"(?i)\bbearer\s+x")) == r"(?i:\bbearer\s+x)"
    assert _scoped(re.compile("a.b", re.DOTALL)) == "(?s:a.b)"
    for bad in (re.compile(r"(a)\1"), re.compile(r"(?P<k>a)(?P=k)"), re.compile("^a", re.MULTILINE)):
        with pytest.raises(ValueError):
            _scoped(bad)


@pytest.mark.parametrize("index", range(len(audit._SECRET_VALUES) + 1))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_text_any_secret_pattern_matches_holds_one_of_its_literals(index: int, data: st.DataObject) -> None:
    """The literal pre-check never skips text a secret pattern matches (hypothesis writes text each
    pattern matches, in any case the pattern allows)."""
    pattern = [*audit._SECRET_VALUES, audit._SECRET_ASSIGNMENT][index]
    text = data.draw(st.from_regex(pattern))
    assert audit._may_hold_secret(text), text


@pytest.mark.parametrize("text", ["ſecret=hunter2hunter2", "Baſic QWxhZGRpbjpvcGVuIHNlc2FtZQ==",
                                  "toKen: abcdefgh12345678", "apİ_key=abcdefgh12345678", "prıvate_key=abcdefgh1234",
                                  "acceſs_KEY abcdefgh12345678", "PASſWORD='hunter2hunter2'"])
def test_secrets_spelt_with_letters_that_fold_to_ascii_are_masked(text: str) -> None:
    """The four non-ASCII letters a case-blind pattern matches for ASCII ones (ſ K İ ı) do not get a
    secret past the literal pre-check: masked as the patterns alone mask it."""
    slow = masked_by_every_pattern(text)
    assert MASK in slow and mask_text(text) == slow
