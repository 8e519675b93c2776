"""The shipped asks are a lower tier (issue 34): other MCP servers' tools (`server__tool`) and a sub-agent's
web calls ask by default, an allow rule in the user's file that names the call lifts that, and the user's own
asks and denies always stand. `[permissions.subagent]` rules apply to sub-agents' calls only."""

from __future__ import annotations

import functools
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foundation.errors import SettingsError
from policy import Decision, PolicyContext, Rules, decide, load_rules

ROOT = Path("/srv/work").resolve()


@functools.cache
def rules_from(text: str) -> Rules:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "policy.toml"
        path.write_text(text, encoding="utf-8")
        return load_rules(path)


def decided(text: str, tool: str, args: dict[str, str], origin: str = "client", read_only: bool = False) -> Decision:
    rules = rules_from(text) if text else load_rules(None)
    ctx = PolicyContext(rules=rules, roots=(ROOT,), read_only=read_only, origin=origin)  # type: ignore[arg-type]
    return decide(tool, args, ctx)


def test_other_servers_tools_ask_by_default() -> None:
    found = decided("", "ext__lookup", {"key": "x"})
    assert (found.action, found.rule_id) == ("ask", "default.ask[0]")
    assert "an allow rule in your rules file" in found.reason
    assert decided("", "ext__lookup", {"key": "x"}, read_only=True).action == "ask"  # whatever its hints say


@pytest.mark.parametrize(("user", "action", "rule_id"), [
    ('[permissions]\nallow = ["ext__*"]\n', "allow", "user.allow[0]"),
    ('[permissions]\nallow = ["ext__lookup(key=capital-*)"]\n', "allow", "user.allow[0]"),
    ('[permissions]\nallow = ["ext__lookup(key=other)"]\n', "ask", "default.ask[0]"),  # names another call
    ('[permissions]\nallow = ["web__*"]\n', "ask", "default.ask[0]"),  # another server
    ('[permissions]\nallow = ["ext__*"]\ndeny = ["ext__lookup"]\n', "deny", "user.deny[0]"),
    ('[permissions]\nallow = ["ext__*"]\nask = ["ext__lookup(key=capital-*)"]\n', "ask", "user.ask[0]"),
    ('[permissions.subagent]\nallow = ["ext__*"]\n', "allow", "user.subagent.allow[0]"),  # a sub-agent calls
])
def test_a_users_allow_rule_lifts_the_shipped_ask_and_the_users_own_rules_stand(
        user: str, action: str, rule_id: str) -> None:
    found = decided(user, "ext__lookup", {"key": "capital-of-france"}, origin="subagent")
    assert (found.action, found.rule_id) == (action, rule_id), found


def test_a_subagents_web_calls_ask_unless_the_user_allows_them() -> None:
    url = {"url": "https://docs.python.org/3/"}
    assert decided("", "fetch_url", url, read_only=True).action == "allow"  # the client's call
    found = decided("", "fetch_url", url, origin="subagent", read_only=True)
    assert (found.action, found.rule_id) == ("ask", "default.subagent.ask[0]")
    assert decided("", "web_search", {"query": "q"}, origin="subagent", read_only=True).rule_id \
        == "default.subagent.ask[1]"
    trusted = '[permissions]\nallow = ["fetch_url(https://docs.python.org/*)"]\n'
    assert decided(trusted, "fetch_url", url, origin="subagent", read_only=True).action == "allow"
    assert decided(trusted, "fetch_url", {"url": "https://evil.example/?q=secret"}, origin="subagent",
                   read_only=True).action == "ask"
    only_subagents = '[permissions.subagent]\ndeny = ["fetch_url"]\n'
    assert decided(only_subagents, "fetch_url", url, origin="subagent", read_only=True).action == "deny"
    assert decided(only_subagents, "fetch_url", url, read_only=True).action == "allow"


def test_a_bad_key_under_permissions_subagent_names_it() -> None:
    with pytest.raises(SettingsError, match=r"permissions\.subagent\.alow"):
        rules_from('[permissions.subagent]\nalow = ["fetch_url"]\n')
    with pytest.raises(SettingsError, match=r"permissions\.subagent"):
        rules_from('[permissions]\nsubagent = ["fetch_url"]\n')


GLOBS = ["ext__*", "ext__lookup", "ext__lookup(*)", "ext__lookup(key=a*)", "ext__lookup(key=b*)", "*", "*__*",
         "fetch_url", "fetch_url(https://a.example/*)", "web_search"]
CALLS = [("ext__lookup", {"key": "alpha"}), ("ext__lookup", {"key": "beta"}), ("ext__shout", {"text": "a"}),
         ("fetch_url", {"url": "https://a.example/x"}), ("fetch_url", {"url": "https://b.example/"}),
         ("web_search", {"query": "a"})]


def rules_text(allow: list[str], action: str, strict: list[str], section: str) -> str:
    quoted = lambda globs: "[" + ", ".join(f'"{g}"' for g in globs) + "]"  # noqa: E731
    if section == "permissions":
        return f"[permissions]\nallow = {quoted(allow)}\n{action} = {quoted(strict)}\n"
    return f"[permissions]\nallow = {quoted(allow)}\n[{section}]\n{action} = {quoted(strict)}\n"


@settings(max_examples=300, deadline=None)
@given(allow=st.lists(st.sampled_from(GLOBS), max_size=3), strict=st.lists(st.sampled_from(GLOBS), max_size=2),
       strict_action=st.sampled_from(["ask", "deny"]), section=st.sampled_from(["permissions", "permissions.subagent"]),
       call=st.sampled_from(CALLS), origin=st.sampled_from(["client", "subagent"]))
def test_no_allow_rule_lifts_a_users_own_ask_or_deny(allow: list[str], strict: list[str], strict_action: str,
                                                     section: str, call: tuple[str, dict[str, str]],
                                                     origin: str) -> None:
    tool, args = call
    read_only = not tool.count("__")
    with_strict = decided(rules_text(allow, strict_action, strict, section), tool, args, origin, read_only)
    alone = decided(rules_text([], strict_action, strict, section), tool, args, origin, read_only)
    if alone.rule_id.startswith("user."):  # the user's own ask/deny names this call: it stands
        assert with_strict.action == alone.action, (with_strict, alone)
    if with_strict.action == "allow":  # lifting a shipped ask needs a user allow rule
        assert with_strict.rule_id.startswith("user.") or tool in ("fetch_url", "web_search") and origin == "client"
