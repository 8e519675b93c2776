"""The gate: one verdict per call (the elicitation resolver's verdict is the one check uses), the
`sandboxed` setting, a user's explicit allow rule lifting a default deny, and the issue-14 reproducers
through the real MCP client (no-forms client, default rules, bash enabled): nothing runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import policy
from foundation.calls import CallOrigin
from mcp_server.approval.gate import PolicyGate
from mcp_server.registry import TOOLS
from tests import approval_helpers as helpers
from tests.conftest import MODES, connect

pytestmark = pytest.mark.anyio
BASH = next(spec for spec in TOOLS if spec.name == "run_bash_command")


def counting_decide(monkeypatch: Any) -> list[str]:
    """Count the policy decisions (the real `decide` runs; the gate looks it up on first use)."""
    calls: list[str] = []
    real = policy.decide

    def spy(tool: str, args: Any, context: Any) -> Any:
        calls.append(tool)
        return real(tool, args, context)

    monkeypatch.setattr(policy, "decide", spy)
    return calls


@pytest.mark.parametrize("mode", MODES)
async def test_one_policy_verdict_per_call_with_elicitation(settings: Any, monkeypatch: Any, mode: str) -> None:
    helpers.install(monkeypatch)
    decisions = counting_decide(monkeypatch)
    async with connect(settings, mode, elicitation_callback=helpers.elicitation_answer("accept")) as client:
        await client.list_tools()
        assert not (await client.call_tool("poke", {"text": "a"})).is_error
        assert decisions == ["poke"]
        assert not (await client.call_tool("now", {})).is_error
    assert decisions == ["poke", "now"]
    assert helpers.CALLS == ["a"]


@pytest.mark.parametrize("mode", MODES)
async def test_one_policy_verdict_per_call_without_forms(settings: Any, monkeypatch: Any, mode: str) -> None:
    helpers.install(monkeypatch)
    decisions = counting_decide(monkeypatch)
    async with connect(settings, mode) as client:
        await client.list_tools()
        result = await client.call_tool("poke", {"text": "a"})
    assert result.is_error and "Approval required" in result.content[0].text
    assert decisions == ["poke"]


async def test_sandboxed_setting_of_the_gate(make_settings: Any) -> None:
    settings = make_settings(bash_enabled=True)
    origin = CallOrigin()
    with_sandbox = PolicyGate(settings)  # today's default: an OS sandbox is assumed
    without = PolicyGate(settings, sandboxed=False)
    for command in ("ls -la", "git status", "cat README.md"):
        assert with_sandbox.verdict(BASH, {"command": command}, origin).action == "allow"
        found = without.verdict(BASH, {"command": command}, origin)
        assert (found.action, found.rule_id) == ("ask", "shell.unsandboxed")
    assert without.verdict(BASH, {"command": "rm -rf /"}, origin).action == "deny"
    read = next(spec for spec in TOOLS if spec.name == "read_file")
    assert without.verdict(read, {"path": "README.md"}, origin).action == "allow"  # only shell commands ask


def test_a_users_explicit_allow_rule_lifts_a_default_deny(tmp_path: Path, workspace: Path) -> None:
    rules_file = tmp_path / "policy.toml"
    rules_file.write_text('[permissions]\nallow = ["run_bash_command(cat ~/.ssh/config)", '
                          '"read_file(path=~/.aws/config)", "run_bash_command(docker run --privileged *)"]\n',
                          encoding="utf-8")
    user = policy.load_rules(rules_file)
    ctx = policy.PolicyContext(rules=user, roots=(workspace.resolve(),), read_only=True)
    defaults = policy.PolicyContext(rules=policy.load_rules(None), roots=(workspace.resolve(),), read_only=True)
    cases = [("run_bash_command", {"command": "cat ~/.ssh/config"}, "allow"),
             ("read_file", {"path": "~/.aws/config"}, "allow"),
             ("run_bash_command", {"command": "docker run --privileged img"}, "allow")]
    for tool, args, action in cases:
        assert policy.decide(tool, args, defaults).action == "deny"
        assert policy.decide(tool, args, ctx).action == action, (tool, args)
    # only what the rule names: other secrets and the hard denies stay denied
    assert policy.decide("run_bash_command", {"command": "cat ~/.ssh/id_rsa"}, ctx).action == "deny"
    assert policy.decide("read_file", {"path": "~/.aws/credentials"}, ctx).action == "deny"
    assert policy.decide("run_bash_command", {"command": "cat ~/.ssh/config; rm -rf /"}, ctx).action == "deny"


REPRODUCERS = ["sort --compr=sh -S 1 f f f f", "sort --outp=important.py x", "sort --o=.git/hooks/x payload",
               "sort --o=.bashrc payload", "file -f{outside}", "file -m{outside} x", "du -X{outside} .",
               "git ls-files -X{outside}", "file -f/proc/self/environ"]


@pytest.mark.parametrize("command", REPRODUCERS)
async def test_reproducers_through_the_mcp_client_run_nothing(command: str, make_settings: Any,
                                                              workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("TOP-SECRET-LINE\n", encoding="utf-8")
    (workspace / "f").write_text("touch pwned\n", encoding="utf-8")
    (workspace / "x").write_text("print('replaced')\n", encoding="utf-8")
    (workspace / "payload").write_text("echo owned\n", encoding="utf-8")
    (workspace / "important.py").write_text("KEEP = 1\n", encoding="utf-8")
    (workspace / ".git" / "hooks").mkdir(parents=True)
    settings = make_settings(bash_enabled=True)
    async with connect(settings) as client:  # no elicitation: the no-forms client of the red team
        await client.list_tools()
        result = await client.call_tool("run_bash_command", {"command": command.format(outside=outside)})
    text = result.content[0].text
    assert result.is_error and ("Approval required" in text or "Denied by policy" in text), text
    assert "TOP-SECRET-LINE" not in text
    assert not (workspace / "pwned").exists()
    assert (workspace / "important.py").read_text(encoding="utf-8") == "KEEP = 1\n"
    assert not (workspace / ".git" / "hooks" / "x").exists() and not (workspace / ".bashrc").exists()
