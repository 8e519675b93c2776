"""Repository config that names a program makes allow-listed git ask (issue 30, finding 6, the policy's half).

`core.fsmonitor`, `diff.external`, `diff.<driver>.textconv` (via `.gitattributes`), `filter.<x>.clean` in the
repository's own config ran on `git status`, `git diff`, `git log -p`, `git show` without approval. The gate
reads the repository's config with git itself and the policy asks for any git command there."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mcp_server.approval.git_config import names_a_program, program_finder, repository_programs
from mcp_server.approval.links import real_path_resolver
from policy import PolicyContext, decide, load_rules
from tests.conftest import connect

RULES = load_rules(None)
GIT_ENV = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"}


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=GIT_ENV)


def repo_with_a_commit(repo: Path) -> None:
    repo.mkdir(parents=True, exist_ok=True)
    git(repo, "init", "-q")
    (repo / "a.txt").write_text("one\n")
    (repo / "pic.bin").write_text("bin\n")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    (repo / "a.txt").write_text("two\n")
    (repo / "pic.bin").write_text("bin2\n")


def verdict(root: Path, command: str) -> str:
    ctx = PolicyContext(rules=RULES, roots=(root,), read_only=False, real_path=real_path_resolver(),
                        repo_programs=program_finder())
    return decide("run_bash_command", {"command": command}, ctx).action


PLANTED = [("core.fsmonitor", "sh -c 'touch {mark}'"), ("diff.external", "sh -c 'touch {mark}'"),
           ("diff.conv.textconv", "sh -c 'touch {mark}; cat'"), ("filter.f.clean", "sh -c 'touch {mark}; cat'"),
           ("core.pager", "sh -c 'touch {mark}; cat'"), ("include.path", "../elsewhere.cfg")]


@pytest.mark.parametrize(("key", "value"), PLANTED)
def test_git_asks_in_a_repository_whose_config_names_a_program(tmp_path: Path, key: str, value: str) -> None:
    root = Path(os.path.realpath(tmp_path))
    repo_with_a_commit(root)
    for command in ("git status", "git diff", "git log -p", "git show", "cd . && git status"):
        assert verdict(root, command) == "allow", command
    git(root, "config", key, value.format(mark=root / "ran"))
    (root / ".gitattributes").write_text("*.bin diff=conv filter=f\n")
    for command in ("git status", "git diff", "git log -p", "git show", "git blame a.txt"):
        assert verdict(root, command) == "ask", (key, command)


def test_a_nested_repository_and_a_worktree_are_read_too(tmp_path: Path) -> None:
    root = Path(os.path.realpath(tmp_path))
    repo_with_a_commit(root / "inner")
    assert verdict(root, "cd inner && git status") == "allow"
    git(root / "inner", "config", "diff.external", "/bin/false")
    assert verdict(root, "cd inner && git status") == "ask"
    git(root / "inner", "worktree", "add", "-q", str(root / "wt"))
    assert repository_programs(str(root / "wt")) == ("diff.external",)
    assert verdict(root, "cd wt && git diff") == "ask"


def test_plain_settings_do_not_ask(tmp_path: Path) -> None:
    root = Path(os.path.realpath(tmp_path))
    repo_with_a_commit(root)
    for key, value in [("core.fsmonitor", "true"), ("core.hooksPath", ".husky/_"), ("merge.conflictStyle", "diff3"),
                       ("remote.origin.url", "https://example.invalid/x.git"), ("diff.algorithm", "patience"),
                       ("user.name", "x"), ("branch.main.remote", "origin")]:
        git(root, "config", key, value)
    assert repository_programs(str(root)) == ()
    assert verdict(root, "git status") == "allow"


SECTIONS = st.sampled_from(["diff", "merge", "filter", "difftool", "mergetool", "pager", "include", "credential"])
SUB = st.from_regex(r"[A-Za-z][A-Za-z0-9_-]{0,8}", fullmatch=True)
PROGRAM_NAMES = st.sampled_from(["textconv", "command", "driver", "clean", "smudge", "process", "program", "helper",
                                 "cmd"])


@settings(max_examples=300, deadline=None)
@given(section=st.from_regex(r"[a-z]{1,8}", fullmatch=True), sub=SUB, name=PROGRAM_NAMES,
       case=st.booleans())
def test_a_program_valued_key_is_found_by_its_name_in_any_section(section: str, sub: str, name: str,
                                                                  case: bool) -> None:
    key = f"{section}.{sub}.{name}"
    assert names_a_program(key.upper() if case else key, "anything")


@settings(max_examples=200, deadline=None)
@given(section=SECTIONS, sub=SUB, name=st.from_regex(r"[a-z]{1,10}", fullmatch=True))
def test_any_key_of_a_program_section_counts_unless_known_harmless(section: str, sub: str, name: str) -> None:
    from mcp_server.approval.git_config import HARMLESS

    key = f"{section}.{sub}.{name}"
    assert names_a_program(key, "x") != bool(HARMLESS.fullmatch(key))


@pytest.mark.anyio
async def test_planted_git_config_programs_do_not_run_unasked_through_the_client(make_settings: Any,
                                                                                 workspace: Path) -> None:
    """End to end: before, `git status` ran the repository's fsmonitor and `git diff` its external diff."""
    repo_with_a_commit(workspace)
    mark = workspace.parent / "ran"
    git(workspace, "config", "core.fsmonitor", f"sh -c 'touch {mark}'")
    git(workspace, "config", "diff.external", f"sh -c 'touch {mark}'")
    async with connect(make_settings(bash_enabled=True)) as client:
        for command in ("git status", "git diff", "git log -p -1", "git show"):
            result = await client.call_tool("run_bash_command", {"command": command})
            text = " ".join(getattr(c, "text", "") for c in result.content)
            assert "Approval required" in text and "bash.git_config_program" in text, (command, text)
    assert not mark.exists()
