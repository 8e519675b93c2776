"""Shell path words are judged as read_file judges them: through their symlinks (issue 30, finding 2).

`cat link/…`, `head`, `grep -R`, `date -f link`, `cd link && cat …` returned files outside the roots that
read_file refuses. The gate now resolves a shell command's path words (operands, path-option values,
redirections, cd targets, and so what follows `cd link &&`) as it does the file tools' paths: a word
leading outside the roots asks, one leading to a secret store is denied, one to / only makes the commands
that name it ask (random link layouts, and end to end through the MCP client)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foundation.calls import CallOrigin
from mcp_server.approval.gate import PolicyGate
from mcp_server.approval.links import real_path_resolver
from mcp_server.registry import TOOLS
from policy import PolicyContext, decide, load_rules
from tests.conftest import connect

BASH = next(spec for spec in TOOLS if spec.name == "run_bash_command")
RULES = load_rules(None)
MARKER = "OUTSIDE-FILE-CONTENT-42"


def _layout(base: Path) -> Path:
    root = base / "ws"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "a.md").write_text("inside\n")
    (base / "outside").mkdir()
    (base / "outside" / "f.txt").write_text(MARKER + "\n")
    (base / "keys").mkdir()
    (base / "keys" / "config").write_text("Host x\n")
    (base / ".ssh").mkdir()
    (base / ".ssh" / "config").write_text("Host y\n")
    (root / "out").symlink_to(base / "outside")
    (root / "toroot").symlink_to("/")
    (root / "sshdir").symlink_to(base / ".ssh")
    (root / "in").symlink_to(root / "docs")
    (root / "chain").symlink_to("out")
    return root


COMMANDS = {  # command (paths relative to the root) -> the verdict through links
    "cat out/f.txt": "ask", "head -n 1 out/f.txt": "ask", "grep -R x out": "ask", "date -f out/f.txt": "ask",
    "cd out && cat f.txt": "ask", "cat chain/f.txt": "ask", "wc -l < out/f.txt": "ask", "ls toroot": "ask",
    "cat toroot/etc/hostname": "ask", "cat sshdir/config": "deny", "grep -r Host sshdir": "deny",
    "cd sshdir && cat config": "deny", "cat in/a.md": "allow", "cd in && cat a.md": "allow", "ls": "allow",
    "grep -rn x .": "allow", "git status": "allow", "cat docs/a.md": "allow", "tree -L 1 .": "allow",
}


def _decide(root: Path, command: str, resolve: bool = True) -> str:
    ctx = PolicyContext(rules=RULES, roots=(root,), read_only=False,
                        real_path=real_path_resolver() if resolve else None)
    return decide("run_bash_command", {"command": command}, ctx).action


@pytest.mark.parametrize(("command", "expected"), sorted(COMMANDS.items()))
def test_shell_paths_are_judged_through_their_links(tmp_path: Path, command: str, expected: str) -> None:
    root = _layout(Path(os.path.realpath(tmp_path)))
    assert _decide(root, command) == expected, command


def test_one_link_to_the_root_of_the_file_system_changes_only_commands_that_name_it(tmp_path: Path) -> None:
    root = _layout(Path(os.path.realpath(tmp_path)))
    everyday = ["ls -la", "cat docs/a.md", "grep -rn inside docs", "wc -l docs/a.md", "head docs/a.md", "find . -name x"]
    assert all(_decide(root, c) == "allow" for c in everyday)


WORDS = st.sampled_from(["out", "toroot", "sshdir", "in", "chain", "docs", "."])
TAILS = st.sampled_from(["", "/f.txt", "/a.md", "/config", "/etc/hostname", "/x/.."])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(program=st.sampled_from(["cat", "head", "wc -l", "grep -r x", "ls", "date -f", "tail -n 2", "stat"]),
       first=WORDS, tail=TAILS, via_cd=st.booleans())
def test_an_allowed_path_word_really_leads_inside_the_roots(tmp_path_factory: Any, program: str, first: str,
                                                            tail: str, via_cd: bool) -> None:
    """Whatever the layout: when the verdict is allow, every path the command names really is in the root."""
    root = _layout(Path(os.path.realpath(tmp_path_factory.mktemp("links"))))
    word = first + tail
    command = f"cd {first} && {program} .{tail}" if via_cd else f"{program} {word}"
    if _decide(root, command) == "allow":
        real = os.path.realpath(root / word)
        assert real == str(root) or real.startswith(str(root) + os.sep), (command, real)


def test_the_gate_hands_its_resolver_to_shell_verdicts(make_settings: Any, workspace: Path, tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (workspace / "link").symlink_to(tmp_path / "elsewhere")
    gate = PolicyGate(make_settings(bash_enabled=True))
    verdict = gate.verdict(BASH, {"command": "cat link/x"}, CallOrigin())
    assert verdict.action == "ask" and "symlink" in verdict.reason, verdict


@pytest.mark.anyio
async def test_reads_through_a_link_out_of_the_roots_do_not_run_unasked(make_settings: Any, workspace: Path,
                                                                        tmp_path: Path) -> None:
    """End to end: before, `cat link/f.txt` ran unasked and printed a file outside the roots."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.txt").write_text(MARKER + "\n")
    (workspace / "link").symlink_to(outside)
    async with connect(make_settings(bash_enabled=True)) as client:
        for command in ("cat link/f.txt", "cd link && cat f.txt", "head -n1 link/f.txt", "grep -R OUTSIDE link"):
            result = await client.call_tool("run_bash_command", {"command": command})
            text = " ".join(getattr(c, "text", "") for c in result.content)
            assert MARKER not in text and "Approval required" in text, (command, text)
        read = await client.call_tool("read_file", {"path": "link/f.txt"})
        assert read.is_error
