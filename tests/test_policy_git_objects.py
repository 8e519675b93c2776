"""git reads the repository, not the file system: `git show HEAD:../x` prints a file the path checks never see,
and in a repository whose top lies above the workspace root `git log -p` prints every file of it. The gate
finds the work tree top at the edge; the policy judges `rev:path` words as git resolves them and asks for
content-printing git sub-commands when the repository reaches outside the roots (red team, MEDIUM)."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foundation.calls import CallOrigin
from mcp_server.approval.gate import PolicyGate
from mcp_server.approval.links import git_tops
from mcp_server.registry import TOOLS
from policy.git_objects import object_path
from tests.conftest import connect

BASH = next(spec for spec in TOOLS if spec.name == "run_bash_command")
MARKER = "outside-root-content-777"


def _git(*args: str, cwd: Path) -> str:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True).stdout


def _repository(top: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (top / name).parent.mkdir(parents=True, exist_ok=True)
        (top / name).write_text(text)
    _git("init", "-q", cwd=top)
    _git("add", "-A", cwd=top)
    _git("-c", "user.name=a", "-c", "user.email=a@b", "commit", "-q", "-m", "x: y", cwd=top)


@pytest.fixture
def outer(tmp_path: Path) -> Path:
    """proj/ is the repository; proj/public is the workspace root."""
    proj = Path(os.path.realpath(tmp_path)) / "proj"
    proj.mkdir()
    _repository(proj, {"private/plan.txt": MARKER + "\n", "public/readme.txt": "hi\n"})
    return proj


@pytest.mark.anyio
async def test_a_repository_above_the_root_is_not_read_unasked(make_settings: Any, outer: Path) -> None:
    settings = make_settings(roots=[outer / "public"], bash_enabled=True)
    async with connect(settings) as client:
        for command in ("git show HEAD:../private/plan.txt", "git log -p", "git log --stat -p", "git diff HEAD~0",
                        "git show HEAD", "git log --pat"):
            result = await client.call_tool("run_bash_command", {"command": command})
            text = result.content[0].text
            assert result.is_error and "NOT executed" in text and MARKER not in text, (command, text)
            assert "outside the workspace roots" in text, text
    gate = PolicyGate(settings)
    for names_only in ("git log --oneline --stat", "git status", "git log -n 3 --format=%H:%s", "git shortlog -sn"):
        assert gate.verdict(BASH, {"command": names_only}, CallOrigin()).action == "allow", names_only


@pytest.mark.anyio
async def test_a_repository_at_the_root_is_read_as_before(make_settings: Any, tmp_path: Path) -> None:
    top = Path(os.path.realpath(tmp_path)) / "repo"
    top.mkdir()
    _repository(top, {"notes.txt": "NOTES-MARKER\n", "sub/a.txt": "A-MARKER\n", ".env": "SECRET=1\n"})
    async with connect(make_settings(roots=[top], bash_enabled=True)) as client:
        for command, expected in (("git show HEAD:notes.txt", "NOTES-MARKER"), ("git log -p", "A-MARKER"),
                                  ("cd sub && git show HEAD:./a.txt", "A-MARKER"),
                                  ("cd sub && git show HEAD:notes.txt", "NOTES-MARKER")):
            result = await client.call_tool("run_bash_command", {"command": command})
            assert not result.is_error and expected in result.content[0].text, (command, result.content[0].text)
        secret = await client.call_tool("run_bash_command", {"command": "cd sub && git show HEAD:../.env"})
    assert secret.is_error and "bash.secret_denied" in secret.content[0].text


def test_the_gate_finds_the_work_tree_top(outer: Path, tmp_path: Path) -> None:
    public = outer / "public"
    assert git_tops((public, outer, Path("/"))) == ((public, outer), (outer, outer))
    nowhere = Path(os.path.realpath(tempfile.mkdtemp(dir="/var/tmp")))  # tmp_path may lie in a checkout (CI's does)
    try:
        assert git_tops((nowhere,)) == ()
    finally:
        os.rmdir(nowhere)


def test_both_roots_cover_the_repository(make_settings: Any, outer: Path) -> None:
    """A repository whose top is itself a root is inside the roots."""
    gate = PolicyGate(make_settings(roots=[outer / "public", outer]))
    assert gate.verdict(BASH, {"command": "git log -p"}, CallOrigin()).action == "allow"


SEGMENT = st.sampled_from([".", "..", "a", "b", "f", "g"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rev=st.sampled_from(["HEAD", "HEAD~0", "HEAD^{tree}", "HEAD^{/x: y}", "", "0"]),
       prefix=st.sampled_from(["", "./", "../", "../../"]), parts=st.lists(SEGMENT, min_size=1, max_size=4))
def test_rev_path_names_the_file_git_reads(tmp_path_factory: Any, rev: str, prefix: str, parts: list[str]) -> None:
    """Whenever git reads a blob for `rev:path` (or the index `:path`), it is the file `object_path` names."""
    top = Path(os.path.realpath(tmp_path_factory.mktemp("objects")))
    files = {p: f"<{p}>" for p in ("f", "g", "a/f", "a/g", "a/b/f", "a/b/g", "b/f")}
    _repository(top, files)
    cwd = top / "a" / "b"
    word = f"{rev}:{prefix}{'/'.join(parts)}" if rev != "0" else f":0:{prefix}{'/'.join(parts)}"
    found = object_path(word, str(cwd), str(top))
    assert found is not None
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    shown = subprocess.run(["git", "cat-file", "-p", word], cwd=cwd, env=env, capture_output=True, text=True)
    if shown.returncode == 0 and not shown.stdout.startswith(("040000", "100644")):  # a blob, not a tree
        assert shown.stdout == (Path(found[0])).read_text(), (word, found)


@settings(max_examples=200, deadline=None)
@given(rev=st.text(alphabet="HEAD^~{}:/@.0", max_size=12), path=st.text(alphabet="./ab:", max_size=12),
       index=st.booleans())
def test_object_path_model(rev: str, path: str, index: bool) -> None:
    """`./` and `../` start at the current folder, anything else at the top; the first `:` outside `{}` ends
    the revision; `:/...` names a commit."""
    cwd, top = "/t/a/b", "/t"
    word = f":{path}" if index else f"{rev}:{path}"
    found = object_path(word, cwd, top)
    if word.startswith(":"):  # the index (`:path`, `:N:path`) or a commit message search (`:/text`)
        after = word[1:]
        rest = after[2:] if len(after) >= 2 and after[0] in "0123" and after[1] == ":" else after
        if after.startswith("/") or not rest:
            assert found is None
            return
        expected = rest
    else:
        depth, cut = 0, None
        for i, c in enumerate(word):
            depth += c == "{"
            depth -= c == "}" and depth > 0
            if c == ":" and not depth:
                cut = i
                break
        if not cut or not word[cut + 1 :]:
            assert found is None
            return
        expected = word[cut + 1 :]
    base = cwd if expected.startswith(("./", "../")) else top
    assert found == (os.path.normpath(os.path.join(base, expected)), expected)
