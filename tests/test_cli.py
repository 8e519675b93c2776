"""The installed `generalagent-mcp` console script: help, default subcommand, exit codes, doctor."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mcp_server.cli import SUBCOMMANDS

CONSOLE_SCRIPT = Path(sys.executable).with_name("generalagent-mcp")


def run(tmp_path: Path, *args: str, stdin: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("GENERALAGENT_")}
    full_env.setdefault("GENERALAGENT_DATA_DIR", str(tmp_path / "data"))
    full_env.update(env)
    return subprocess.run([str(CONSOLE_SCRIPT), *args], input=stdin, capture_output=True, text=True,
                          timeout=120, env=full_env, cwd=tmp_path)


def test_console_script_is_installed() -> None:
    assert CONSOLE_SCRIPT.is_file() and os.access(CONSOLE_SCRIPT, os.X_OK)


def test_help_lists_every_subcommand(tmp_path: Path) -> None:
    done = run(tmp_path, "--help")
    assert done.returncode == 0
    for name in SUBCOMMANDS:
        assert name in done.stdout


def test_no_subcommand_means_serve_over_stdio(tmp_path: Path) -> None:
    request = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    done = run(tmp_path, "--log-level", "WARNING", stdin=json.dumps(request) + "\n")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[0]) == {"jsonrpc": "2.0", "id": 1, "result": {}}


@pytest.mark.parametrize("command", [["serve"], ["doctor"]])
def test_malformed_setting_exits_2_naming_the_key(tmp_path: Path, command: list[str]) -> None:
    done = run(tmp_path, *command, GENERALAGENT_MAX_RESULT_TOKENS="abc")
    assert done.returncode == 2
    assert "GENERALAGENT_MAX_RESULT_TOKENS" in done.stderr
    assert done.stdout == ""  # nothing on the protocol channel


def test_bad_arguments_exit_2(tmp_path: Path) -> None:
    assert run(tmp_path, "no-such-command").returncode == 2
    assert run(tmp_path, "serve", "--port", "eighty").returncode == 2
    assert run(tmp_path, "serve", "--transport", "carrier-pigeon").returncode == 2


def test_doctor_ok_exits_0(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    done = run(tmp_path, "--root", str(workspace), "doctor")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[ok  ] data dir" in done.stdout
    assert "[warn] LLM endpoint" in done.stdout  # optional: a warning, not a failure
    assert "FAIL" not in done.stdout


def test_doctor_json(tmp_path: Path) -> None:
    done = run(tmp_path, "doctor", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    checks = {check["name"]: check for check in json.loads(done.stdout)}
    for name in ("data dir", "sqlite fts5", "jieba dictionary", "tiktoken encoding", "PyMuPDF", "LLM endpoint"):
        assert name in checks
    assert checks["LLM endpoint"]["required"] is False


def test_doctor_reports_configured_llm(tmp_path: Path) -> None:
    done = run(tmp_path, "doctor", GENERALAGENT_LLM_BASE_URL="http://127.0.0.1:9/v1", GENERALAGENT_LLM_MODEL="m")
    assert done.returncode == 0
    assert "[ok  ] LLM endpoint: http://127.0.0.1:9/v1 model m" in done.stdout


def test_doctor_broken_data_dir_exits_1(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    done = run(tmp_path, "doctor", GENERALAGENT_DATA_DIR=str(blocker / "data"))
    assert done.returncode == 1
    assert "[FAIL] data dir" in done.stdout and "GENERALAGENT_DATA_DIR" in done.stdout
    assert "Broken: data dir" in done.stdout


def test_doctor_missing_root_exits_1(tmp_path: Path) -> None:
    done = run(tmp_path, "--root", str(tmp_path / "missing"), "doctor")
    assert done.returncode == 1
    assert "[FAIL] workspace roots" in done.stdout
