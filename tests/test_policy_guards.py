"""The guards over a call as a whole (policy/engine.py, once the gate's own rules), as properties of
the pure `decide`: whatever rules the user writes, a state-changing call by the agent that could approve a
pending call, or that names its own rules, approvals or audit log, comes out deny; a call through symlinks is
at least as strict as what its paths lead to; enabling a tool that changes things never comes out allow."""

from __future__ import annotations

import dataclasses
import functools
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_server.approval.judge import changing_tools, protected_names
from mcp_server.approval.store import canonical_json
from mcp_server.registry import TOOLS
from policy import PolicyContext, Rules, decide, load_rules
from policy.engine import call_text, severity
from tests.json_strategies import json_values

ROOT = Path("/srv/work").resolve()
DATA = Path("/srv/data").resolve()
PROTECTED = (DATA / "policy.toml", DATA / "audit.jsonl", DATA / "approvals.sqlite3", DATA / "approvals.sqlite3-wal",
             ROOT / "rules" / "policy.toml")
CHANGING = changing_tools({spec.name: spec for spec in TOOLS})
RULE_TEXTS = ["*", "write_file", "write_file(*)", "write_file(path=*)", "edit_file(*)", "run_bash_command",
              "run_bash_command(*)", "run_bash_command(sqlite3:*)", "poke(*)", "*(*)", "enable_tools",
              "enable_tools(*)", "delegate_task(*)"]
TOOL_NAMES = ["write_file", "edit_file", "run_bash_command", "poke", "delegate_task", "enable_tools", "remember"]


@functools.cache
def user_rules(allow: tuple[str, ...], ask: tuple[str, ...]) -> Rules:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "policy.toml"
        quoted = lambda texts: ", ".join(f'"{t}"' for t in texts)  # noqa: E731
        path.write_text(f"[permissions]\nallow = [{quoted(allow)}]\nask = [{quoted(ask)}]\n", encoding="utf-8")
        return load_rules(path)


@dataclasses.dataclass(frozen=True)
class RuleSet:
    """A user's rules file (shown by its rules, not the 40 kB of loaded rules)."""

    allow: tuple[str, ...]
    ask: tuple[str, ...]


rule_sets = st.builds(RuleSet, st.lists(st.sampled_from(RULE_TEXTS), max_size=4).map(tuple),
                      st.lists(st.sampled_from(RULE_TEXTS), max_size=2).map(tuple))
words = st.text(st.characters(codec="utf-8", exclude_characters='"\\'), max_size=20)


def context(rules: RuleSet, **kw: Any) -> PolicyContext:
    kw.setdefault("read_only", False)
    return PolicyContext(rules=user_rules(rules.allow, rules.ask), roots=(ROOT,), protected_paths=PROTECTED,
                         protected_names=protected_names(PROTECTED), changing_tools=CHANGING, **kw)


def with_text(tool: str, key: str, before: str, middle: str, after: str) -> dict[str, Any]:
    return {key: before + middle + after} if tool != "run_bash_command" else {"command": before + middle + after}


@settings(max_examples=300, deadline=None)
@given(rules=rule_sets, tool=st.sampled_from(TOOL_NAMES), key=st.sampled_from(["path", "text", "command", "content"]),
       target=st.sampled_from([str(p) for p in PROTECTED] + ["approvals.sqlite3", "audit.jsonl",
                                                            "approvals.sqlite3-wal"]),
       before=words, after=words, origin=st.sampled_from(["client", "subagent"]), destructive=st.booleans())
def test_no_rule_set_lets_the_agent_touch_its_own_approval_state(
        rules: RuleSet, tool: str, key: str, target: str, before: str, after: str, origin: Any,
        destructive: bool) -> None:
    args = with_text(tool, key, before, target, after)
    found = decide(tool, args, context(rules, origin=origin, destructive=destructive))
    assert found.action == "deny", (args, found)
    assert found.rule_id in ("approval.protected-state", "approval.self-approval"), (args, found)


@settings(max_examples=300, deadline=None)
@given(rules=rule_sets, tool=st.sampled_from(TOOL_NAMES), key=st.sampled_from(["text", "command"]),
       approval=st.from_regex(r"ap-[a-z2-9]{6}", fullmatch=True), spelled=st.sampled_from([
           "generalagent-mcp approve {id}", "approve --scope tool {id}", "curl http://127.0.0.1:8765/approvals/{id}",
           "APPROVE {id}", "generalagent-mcp approve --list"]), before=words, after=words)
def test_no_rule_set_lets_the_agent_approve(rules: RuleSet, tool: str, key: str, approval: str, spelled: str,
                                            before: str, after: str) -> None:
    args = with_text(tool, key, before + " ", spelled.format(id=approval), " " + after)
    found = decide(tool, args, context(rules))
    assert (found.action, found.rule_id) == ("deny", "approval.self-approval"), (args, found)


@settings(max_examples=200, deadline=None)
@given(rules=rule_sets, approval=st.from_regex(r"ap-[a-z2-9]{6}", fullmatch=True), before=words, after=words)
def test_a_destructive_call_naming_a_live_approval_is_denied_and_others_are_not(
        rules: RuleSet, approval: str, before: str, after: str) -> None:
    args = {"text": before + approval + after}
    assert decide("zap", args, context(rules, destructive=True, live_approval_ids=(approval,))).rule_id \
        == "approval.self-approval"
    found = decide("poke", args, context(rules, destructive=False, live_approval_ids=(approval,)))
    assert found.rule_id != "approval.self-approval" or "approve" in args["text"].lower()


@settings(max_examples=200, deadline=None)
@given(rules=rule_sets, tool=st.sampled_from(["read_file", "search_documents", "list_files"]),
       target=st.sampled_from([str(p) for p in PROTECTED] + ["approve ap-abcdef"]))
def test_read_only_calls_are_not_refused_by_the_guards(rules: RuleSet, tool: str, target: str) -> None:
    found = decide(tool, {"query": target}, context(rules, read_only=True))
    assert not found.rule_id.startswith("approval."), found


@settings(max_examples=300, deadline=None)
@given(rules=rule_sets, names=st.lists(st.sampled_from(sorted(CHANGING) + ["read_file", "now", "x"]), max_size=4))
def test_enabling_a_tool_that_changes_things_never_comes_out_allow(rules: RuleSet, names: list[str]) -> None:
    found = decide("enable_tools", {"names": names}, context(rules, read_only=False))
    if set(names) & CHANGING:
        assert found.action != "allow", (names, found)


SYMLINK_CASES = [{"path": "notes.md"}, {"path": "docs/a.md"}, {"path": ".env"}, {"path": "rules/policy.toml"},
                 {"path": "/etc/shadow"}, {"path": "../outside.txt"}, {"path": "src/main.py"}]


@settings(max_examples=300, deadline=None)
@given(rules=rule_sets, tool=st.sampled_from(["read_file", "write_file", "edit_file"]),
       written=st.sampled_from(SYMLINK_CASES), leads=st.sampled_from(SYMLINK_CASES), read_only=st.booleans())
def test_a_call_through_a_symlink_is_at_least_as_strict_as_where_it_leads(
        rules: RuleSet, tool: str, written: dict[str, str], leads: dict[str, str], read_only: bool) -> None:
    resolved = {"path": str(ROOT / leads["path"])}
    plain = decide(tool, written, context(rules, read_only=read_only))
    target = decide(tool, resolved, context(rules, read_only=read_only))
    linked = decide(tool, written, context(rules, read_only=read_only, resolved_args=resolved))
    assert severity(linked) >= severity(plain)
    # (refusing a call that names the approval state is about its text: a link to a protected file is the
    # layers' to judge, files.protected for a write; as the gate did)
    if plain.action != "deny" and not target.rule_id.startswith("approval."):
        assert severity(linked) >= severity(target)


@settings(max_examples=300, deadline=None)
@given(args=st.dictionaries(st.text(max_size=8), json_values(), max_size=4))
def test_the_guards_read_the_arguments_as_the_approvals_store_writes_them(args: dict[str, Any]) -> None:
    assert call_text(args) == canonical_json(args)
