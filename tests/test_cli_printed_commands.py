"""Every command a message tells a person to run runs exactly as printed: the printed text, split by
shlex, runs the console script (not on PATH here, so by its absolute path) with the options of the
running settings (`--data-dir` with a space in it, `--root`, `--profile`) and does what it says."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONSOLE_SCRIPT = Path(sys.executable).with_name("generalagent-mcp")


def env(**extra: str) -> dict[str, str]:
    """This checkout's code; no GENERALAGENT_ variable; PATH without the virtual environment's bin/."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("GENERALAGENT_")}
    base["PATH"] = "/usr/bin:/bin"
    base["PYTHONPATH"] = str(ROOT)
    base.update(extra)
    return base


def cli(cwd: Path, *args: str, stdin: str = "", **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(CONSOLE_SCRIPT), *args], input=stdin, capture_output=True, text=True, timeout=120,
                          env=env(**extra), cwd=cwd)


def printed(text: str) -> list[str]:
    """The commands in `text`: the backquoted ones that start with the console script."""
    found = [part for part in re.findall(r"`([^`]+)`", text) if part.startswith(str(CONSOLE_SCRIPT))]
    assert found, text
    return found


def run_printed(command: str, elsewhere: Path, stdin: str = "", **extra: str) -> subprocess.CompletedProcess[str]:
    """`command` exactly as printed, from another folder, in a terminal without the server's environment."""
    return subprocess.run(shlex.split(command), input=stdin, capture_output=True, text=True, timeout=120,
                          env=env(**extra), cwd=elsewhere)


@pytest.fixture
def places(tmp_path: Path) -> tuple[Path, Path]:
    data = tmp_path / "my data"  # a space: the printed --data-dir must be quoted
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    return data, elsewhere


def test_migrate_and_doctor_print_a_migrate_that_migrates_this_data_dir(places: tuple[Path, Path]) -> None:
    data, elsewhere = places
    check = cli(elsewhere, "--data-dir", str(data), "migrate", "--check")
    assert check.returncode == 1
    doctor = cli(elsewhere, "--data-dir", str(data), "doctor")
    for command in printed(check.stdout) + printed(doctor.stdout):
        assert shlex.split(command)[1:] == ["--data-dir", str(data), "migrate"]
    done = run_printed(printed(check.stdout)[0], elsewhere)
    assert done.returncode == 0, done.stderr
    assert cli(elsewhere, "--data-dir", str(data), "migrate", "--check").returncode == 0


def test_import_of_a_missing_file_prints_the_export_that_writes_it(places: tuple[Path, Path]) -> None:
    data, elsewhere = places
    missing = data.parent / "state.jsonl"
    done = cli(elsewhere, "--data-dir", str(data), "import", str(missing))
    assert done.returncode == 1 and "No export file" in done.stderr
    (command,) = printed(done.stderr)
    assert run_printed(command, elsewhere).returncode == 0 and missing.is_file()


def test_approve_prints_a_list_and_an_approve_that_work_on_this_data_dir(places: tuple[Path, Path]) -> None:
    from foundation.storage import open_database
    from mcp_server.approval.store import ApprovalStore

    data, elsewhere = places
    database = open_database(data)
    try:
        pending = ApprovalStore(database, 600).request("poke", {"n": 1}, risk="high", reason="r", rule_id="x",
                                                        origin="client:c")
    finally:
        database.close()
    unknown = cli(elsewhere, "--data-dir", str(data), "approve", "ap-nothere")
    assert unknown.returncode == 1
    (listing,) = printed(unknown.stderr)
    listed = run_printed(listing, elsewhere)
    assert listed.returncode == 0 and pending.id in listed.stdout
    hint = cli(elsewhere, "--data-dir", str(data), "approve")
    (approve,) = printed(hint.stdout)
    approved = run_printed(approve, elsewhere, stdin="y\n\n")
    assert approved.returncode == 0 and f"Approved {pending.id}" in approved.stdout, approved.stdout + approved.stderr


def test_an_unreachable_postgresql_prints_a_doctor_that_tests_it(places: tuple[Path, Path]) -> None:
    data, elsewhere = places
    url = "postgresql://u:pw@127.0.0.1:1/x"  # nothing listens on port 1
    done = cli(elsewhere, "--data-dir", str(data), "migrate", GENERALAGENT_DATABASE_URL=url)
    assert done.returncode == 1
    (command,) = printed(done.stderr)
    doctor = run_printed(command, elsewhere, GENERALAGENT_DATABASE_URL=url)
    assert doctor.returncode == 1 and "[FAIL] database: Cannot use PostgreSQL at postgresql://u:***@" in doctor.stdout


def rpc(command: list[str], cwd: Path, *calls: tuple[str, dict[str, object]], **extra: str) -> list[dict[str, object]]:
    """Initialize, then each (method, params), over stdio; the answers in order."""
    lines = [{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    lines += [{"jsonrpc": "2.0", "id": n, "method": m, "params": p} for n, (m, p) in enumerate(calls, 1)]
    done = subprocess.run(command, input="".join(json.dumps(line) + "\n" for line in lines), capture_output=True,
                          text=True, timeout=120, env=env(**extra), cwd=cwd)
    answers = {m["id"]: m for m in map(json.loads, done.stdout.splitlines()) if "id" in m}
    return [answers[n] for n in range(1, len(calls) + 1)]


def text_of(answer: dict[str, object]) -> str:
    result = answer["result"]
    assert isinstance(result, dict)
    return " ".join(part["text"] for part in result["content"])


def test_a_tool_prints_a_doctor_for_the_running_server_and_bash_names_the_flag(places: tuple[Path, Path],
                                                                              tmp_path: Path) -> None:
    data, elsewhere = places
    root = tmp_path / "work space"
    root.mkdir()
    broken = data / "skills" / "broken"
    broken.mkdir(parents=True)
    (broken / "SKILL.md").write_text("no front matter\n")
    server = [str(CONSOLE_SCRIPT), "--data-dir", str(data), "--root", str(root), "--profile", "full", "serve"]
    bash, skills = rpc(server, elsewhere, ("tools/call", {"name": "run_bash_command", "arguments": {"command": "true"}}),
                       ("tools/call", {"name": "list_skills", "arguments": {}}))
    assert "add --enable-bash after `serve`" in text_of(bash)  # the server's own arguments, plus one word
    (listed,) = rpc([*server, "--enable-bash"], elsewhere, ("tools/list", {}))
    assert "run_bash_command" in json.dumps(listed)
    (doctor,) = printed(text_of(skills))
    checked = run_printed(doctor, elsewhere)
    assert "broken" in checked.stdout and str(data) in checked.stdout, checked.stdout
