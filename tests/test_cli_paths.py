"""The people-facing commands: one path rule (relative to the current directory, like every command line
tool; what they print works as input again), true reasons for a refused path, and command line words in
their messages (never a tool's name or parameter)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foundation.errors import PathNotAllowed
from foundation.paths import resolve_path
from foundation.settings import Settings
from mcp_server.registry import TOOLS
from tests.test_cli import CONSOLE_SCRIPT, REPO


def run(cwd: Path, data: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("GENERALAGENT_")}
    full_env["PYTHONPATH"] = str(REPO)
    full_env.update(env)
    return subprocess.run([str(CONSOLE_SCRIPT), "--data-dir", str(data), *args], capture_output=True, text=True,
                          timeout=120, env=full_env, cwd=cwd)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "ws" / "docs").mkdir(parents=True)
    (tmp_path / "ws" / "docs" / "report.md").write_text("Revenue grew strongly this year.\n", encoding="utf-8")
    (tmp_path / "docs").mkdir()  # a folder of the same name outside the root
    return tmp_path


def test_relative_paths_start_at_the_current_directory_and_printed_paths_work_again(tree: Path) -> None:
    ws, data = tree / "ws", tree / "data"
    indexed = run(tree, data, "--root", str(ws), "index", "ws/docs")  # cwd outside the root: relative to cwd
    assert indexed.returncode == 0, indexed.stderr
    assert indexed.stdout.startswith(f"{ws / 'docs'}: 1 indexed"), indexed.stdout

    for cwd, scope in ((tree, "ws/docs"), (ws, "docs"), (ws / "docs", "."), (ws, "docs/*.md"), (ws / "docs", "*.md"),
                       (tree, str(ws / "docs" / "report.md"))):
        found = run(cwd, data, "--root", str(ws), "search", "revenue", "--path", scope)
        assert found.returncode == 0 and f"1. {ws / 'docs' / 'report.md'}  score" in found.stdout, (cwd, scope, found)
    found = run(ws, data, "--root", str(ws), "search", "revenue")
    printed = re.search(r"^1\. (\S+)  score", found.stdout, re.M)
    assert printed is not None, found.stdout
    for command in (["search", "revenue", "--path", printed[1]], ["status", printed[1]], ["index", printed[1]]):
        again = run(tree / "docs", data, "--root", str(ws), *command)  # from anywhere: the printed path works
        assert again.returncode == 0, (command, again.stderr)
        assert str(ws / "docs" / "report.md") in again.stdout, (command, again.stdout)

    status = run(ws, data, "--root", str(ws), "status", "docs")
    assert f"{ws / 'docs'}: indexed" in status.stdout, status.stdout
    none_here = run(ws, data, "--root", str(ws), "search", "revenue", "--path", "docs/missing")
    assert none_here.returncode == 1 and "report.md" not in none_here.stdout  # cwd-relative, not root-relative


def test_a_path_outside_the_root_is_refused_with_its_true_reason(tree: Path) -> None:
    ws, data = tree / "ws", tree / "data"
    (ws / "link").symlink_to(tree / "docs")
    assert run(tree, data, "--root", str(ws), "index", "ws").returncode == 0  # search checks paths in an index
    cases = {
        "docs": "it is outside the workspace roots",  # from tree: /tree/docs, no symlink, no '..'
        "ws/link": "a symlink in it leads outside the workspace roots",
        "ws/docs/../../docs": "its '..' leads outside the workspace roots",
    }
    for path, reason in cases.items():
        for command in (["index", path], ["status", path], ["search", "revenue", "--path", path]):
            done = run(tree, data, "--root", str(ws), *command)
            assert done.returncode == 1, (command, done.stdout)
            assert reason in done.stderr, (command, done.stderr)
            assert "relative paths start at" not in done.stderr, done.stderr  # the CLI gave an absolute path
            assert repr(str(tree / path)) in done.stderr, done.stderr


NAMES = st.sampled_from(["a", "b", "..", ".", "docs"])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(NAMES, min_size=1, max_size=6), absolute=st.booleans())
def test_a_refusal_names_a_symlink_or_dotdot_only_when_one_is_there(tmp_path: Path, parts: list[str],
                                                                    absolute: bool) -> None:
    """No symlinks in this tree: a refused path is blamed on '..' only when it has one, never on a symlink."""
    root = tmp_path / "root"
    (root / "a" / "b").mkdir(parents=True, exist_ok=True)
    (tmp_path / "docs").mkdir(exist_ok=True)
    path = "/".join(parts)
    given_path = str(tmp_path / path) if absolute else path
    try:
        resolve_path(Settings(data_dir=tmp_path / "data", roots=(root,)), given_path)
    except PathNotAllowed as exc:
        message = str(exc)
        assert "a symlink in it" not in message, message
        assert ("its '..' leads" in message) <= (".." in parts), message
        assert ("relative paths start at" in message) == (not absolute), message


def assert_cli_words(done: subprocess.CompletedProcess[str]) -> None:
    text = done.stdout + done.stderr
    assert "Traceback" not in text, text
    for spec in TOOLS:
        assert spec.name not in text, (spec.name, text)
    for parameter in ("use_regex", "mode=", "enable_tools", "offset="):
        assert parameter not in text, (parameter, text)


def test_messages_use_the_command_line_words(tree: Path) -> None:
    ws, data = tree / "ws", tree / "data"
    missing = run(tree, data, "index", "/nonexistent")
    assert missing.returncode == 1 and "Check the path" in missing.stderr, missing.stderr
    assert_cli_words(missing)
    empty = run(tree, data, "search", "revenue")
    assert "generalagent-mcp index PATH" in empty.stderr, empty.stderr
    assert_cli_words(empty)
    assert run(tree, data, "--root", str(ws), "index", str(ws)).returncode == 0
    lexical = {"GENERALAGENT_EMBEDDING_PROVIDER": "off"}  # else the nearest passage by meaning is a hit
    for args, words in ((["search", "zebra"], "generalagent-mcp status"), (["search", "zebra", "--mode", "all"],
                        "--mode natural"), (["search", "", "--regex"], "search without --regex")):
        done = run(ws, data, "--root", str(ws), *args, **lexical)
        assert done.returncode in (1, 2) and words in done.stdout + done.stderr, (args, done)
        assert_cli_words(done)
    assert_cli_words(run(ws, data, "--root", str(ws), "search", "zebra"))  # meaning-aware, where installed


def test_a_global_option_after_the_sub_command_says_where_it_goes(tree: Path) -> None:
    done = run(tree, tree / "data", "approve", "--list", "--data-dir", str(tree / "d2"))
    assert done.returncode == 2
    assert "go before the sub-command" in done.stderr and "--data-dir" in done.stderr, done.stderr
    other = run(tree, tree / "data", "approve", "--list", "--bogus")
    assert "go before the sub-command" not in other.stderr, other.stderr  # only when a global option is misplaced


def test_a_root_that_is_a_file_and_a_policy_file_that_is_a_folder(tree: Path) -> None:
    report = tree / "ws" / "docs" / "report.md"
    done = run(tree, tree / "data", "--root", str(report), "status")
    assert done.returncode == 1 and "is a file, not a folder" in done.stderr, done.stderr
    assert "restart" not in done.stderr, done.stderr
    folder = run(tree, tree / "data", "policy", "check", "--tool", "now", GENERALAGENT_POLICY_FILE=str(tree / "docs"))
    assert "is a folder, not a file" in folder.stderr and "permissions" not in folder.stderr, folder.stderr


def test_the_no_llm_warning_is_one_sentence_naming_both_settings(tree: Path) -> None:
    doctor = run(tree, tree / "data", "doctor")
    line = next(text for text in doctor.stdout.splitlines() if "LLM endpoint" in text)
    served = run(tree, tree / "data", "serve")  # stdin closed at once: serves nothing, exits
    warning = next(text for text in served.stderr.splitlines() if "LLM endpoint" in text)
    for text in (line, warning):
        assert "GENERALAGENT_LLM_BASE_URL and GENERALAGENT_LLM_MODEL" in text, text
        assert text.count(".") == 1 and text.endswith("."), text  # one sentence, no "(x: ...; y: ...)" list
        for spec in TOOLS:
            if spec.without_llm:
                assert spec.name in text, (spec.name, text)
