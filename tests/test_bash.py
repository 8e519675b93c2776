"""run_bash_command on a real shell: disabled by default, scrubbed env, bounded output,
process-group kill at the timeout, no stdin, cancellation."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from foundation.errors import Cancelled, InvalidInput, NotConfigured
from tests.conftest import shell_runtime
from tools import bash
from tools.bash import run_bash_command, scrubbed_env
from tools.runtime import CallContext, Runtime


@pytest.fixture
def rt(make_settings: Any) -> Runtime:
    return shell_runtime(make_settings(bash_enabled=True))


@pytest.fixture
def call() -> CallContext:
    return CallContext(tool="run_bash_command", consent="person")  # a person let these run


def _running_with(marker: str) -> list[int]:
    """Host pids whose command line contains `marker` (sandboxed commands have their own pid
    namespace, so a pid printed inside the sandbox is not a host pid)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and entry.name != str(os.getpid()):
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if marker in cmdline and state != "Z":
                found.append(int(entry.name))
    return found


def assert_none_running(marker: str) -> None:
    deadline = time.monotonic() + 30  # killed processes leave at once; a loaded machine may take a while
    while time.monotonic() < deadline:
        if not _running_with(marker):
            return
        time.sleep(0.05)
    pytest.fail(f"processes with {marker!r} are still alive: {_running_with(marker)}")


def test_disabled_by_default(settings: Any, call: CallContext) -> None:
    with pytest.raises(NotConfigured, match="GENERALAGENT_BASH_ENABLED=1.*--enable-bash"):
        run_bash_command("echo hi", rt=shell_runtime(settings), call=call)


def test_runs_in_workspace_with_exit_code_and_streams(rt: Runtime, call: CallContext, workspace: Path) -> None:
    result = run_bash_command('pwd; echo "$HOME"; ls -A "$HOME"; echo oops >&2; printf "é"; exit 7', rt=rt, call=call)
    root = str(workspace.resolve())
    assert result.exit_code == 7 and not result.timed_out
    cwd, home, rest = result.stdout.split("\n", 2)
    assert cwd == root and rest == "é" and result.stderr == "oops\n"
    assert "generalagent-home-" in home and not Path(home).exists()  # private, empty, removed after
    assert result.cwd == root and result.stdout_bytes == len(result.stdout.encode())


def test_environment_is_scrubbed(rt: Runtime, call: CallContext, monkeypatch: Any) -> None:
    secrets = {
        "FAKE_API_KEY": "k1", "GITHUB_TOKEN": "t1", "DB_PASSWORD": "p1", "AWS_SECRET_ACCESS_KEY": "s1",
        "GOOGLE_APPLICATION_CREDENTIALS": "/c.json", "GENERALAGENT_HTTP_TOKEN": "h1",
        "GENERALAGENT_LLM_BASE_URL": "http://x", "SSH_AUTH_SOCK": "/tmp/agent",
    }
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("FAVORITE_COLOR", "teal")
    result = run_bash_command("env", rt=rt, call=call)
    names = {line.split("=", 1)[0] for line in result.stdout.splitlines() if "=" in line}
    assert not names & set(secrets), names & set(secrets)
    assert "FAVORITE_COLOR" in names and "PATH" in names
    for value in ("k1", "t1", "p1", "s1", "h1"):
        assert f"={value}\n" not in result.stdout


def test_scrubbed_env_unit(tmp_path: Path) -> None:
    env = scrubbed_env({
        "PATH": "/bin", "my_key": "x", "Session_Token": "y", "LANG": "de_DE.UTF-8", "MYSQL_PWD": "p",
        "DATABASE_URL": "postgres://app:hunter2@db/app", "CI_VALUE": "ghp_abcdefghijklmnop",
        "CERT": "-----BEGIN RSA PRIVATE KEY-----", "DOCS_URL": "https://example.org/x", "EDITOR": "vi",
    }, tmp_path, tmp_path / "home")
    assert env == {"PATH": "/bin", "LANG": "de_DE.UTF-8", "DOCS_URL": "https://example.org/x", "EDITOR": "vi",
                   "HOME": str(tmp_path / "home"), "PWD": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "home/.config"),
                   "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def test_timeout_kills_the_whole_group(rt: Runtime, call: CallContext, workspace: Path) -> None:
    started = time.monotonic()
    result = run_bash_command("sleep 101.25 & sleep 100", timeout=1, rt=rt, call=call)
    assert time.monotonic() - started < 5
    assert result.timed_out and result.exit_code is None and "killed after 1 s" in result.stderr
    assert_none_running("sleep 101.25")


def test_plain_sleep_pair_times_out(rt: Runtime, call: CallContext) -> None:
    started = time.monotonic()
    result = run_bash_command("sleep 100 & sleep 100", timeout=1, rt=rt, call=call)
    assert result.timed_out and time.monotonic() - started < 5


def test_background_children_do_not_hold_the_call(rt: Runtime, call: CallContext) -> None:
    started = time.monotonic()
    result = run_bash_command("sleep 102.25 & echo $!", timeout=30, rt=rt, call=call)
    assert time.monotonic() - started < 5 and result.exit_code == 0 and not result.timed_out
    assert_none_running("sleep 102.25")


def test_shell_that_closes_its_outputs_is_still_awaited(rt: Runtime, call: CallContext) -> None:
    result = run_bash_command("exec >&- 2>&-; sleep 0.3; exit 4", timeout=10, rt=rt, call=call)
    assert result.exit_code == 4 and not result.timed_out


def test_output_is_bounded_head_and_tail(rt: Runtime, call: CallContext) -> None:
    result = run_bash_command("echo START; head -c 5000000 /dev/zero | tr '\\0' x; echo; echo END", rt=rt, call=call)
    assert result.stdout_bytes > 5_000_000 and result.output_truncated
    assert len(result.stdout) < bash.STDOUT_HEAD + bash.STDOUT_TAIL + 100
    assert result.stdout.startswith("START\n") and result.stdout.endswith("END\n")
    assert "bytes omitted" in result.stdout


def test_stdin_is_closed(rt: Runtime, call: CallContext) -> None:
    result = run_bash_command("cat; read line; echo rc=$?", timeout=5, rt=rt, call=call)
    assert result.stdout == "rc=1\n" and not result.timed_out


def test_cancel_kills_the_command(rt: Runtime, workspace: Path) -> None:
    """Cancelled once the command runs (it wrote sh.log): a cancel at a fixed 0.5 s could come before a
    loaded machine had started the shell, and sh.log was never written."""
    call = CallContext(tool="run_bash_command", consent="person")
    cancelled_at: list[float] = []

    def cancel_once_started() -> None:
        deadline = time.monotonic() + 50  # within the command's 60 s timeout
        while not (workspace / "sh.log").is_file() and time.monotonic() < deadline:
            time.sleep(0.01)
        cancelled_at.append(time.monotonic())
        call.cancel_event.set()

    threading.Thread(target=cancel_once_started, daemon=True).start()
    with pytest.raises(Cancelled):
        run_bash_command("echo started > sh.log; sleep 103.25", timeout=60, rt=rt, call=call)
    assert (workspace / "sh.log").is_file()
    assert time.monotonic() - cancelled_at[0] < 10  # at the cancel, not at the timeout or the sleep's end
    assert_none_running("sleep 103.25")


def test_bad_command(rt: Runtime, call: CallContext) -> None:
    with pytest.raises(InvalidInput, match="NUL"):
        run_bash_command("echo a\x00b", rt=rt, call=call)


def test_default_session_workspace(make_settings: Any, data_dir: Path) -> None:
    rt = shell_runtime(make_settings(roots=[], bash_enabled=True))
    result = run_bash_command("pwd; ls", rt=rt, call=CallContext(tool="x", session_id="s9"))
    assert result.stdout.splitlines() == [str(data_dir.resolve() / "workspaces" / "s9"), "outputs", "temp", "uploads"]


def test_without_a_sandbox_it_says_so_and_how_to_install(
    rt: Runtime, call: CallContext, monkeypatch: Any, tmp_path: Path, capsys: Any
) -> None:
    """No bwrap on PATH: the status says why and how to fix it, doctor warns, commands still run
    (unsandboxed; the policy then asks for every one) with the private HOME and no git config."""
    from mcp_server import cmd_doctor
    from tools import sandbox

    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH without bwrap (bash itself is found by full path)
    monkeypatch.setattr(bash, "_shell", lambda: "/bin/bash" if Path("/bin/bash").exists() else "/bin/sh")
    sandbox.sandbox_status.cache_clear()
    try:
        status = sandbox.sandbox_status()
        assert not status.available and "apt-get install bubblewrap" in status.reason
        check = cmd_doctor.check_sandbox(rt.settings)
        assert not check.ok and not check.required and "NO OS sandbox" in check.detail
        result = run_bash_command('echo "$HOME|$GIT_CONFIG_GLOBAL|$GIT_CONFIG_NOSYSTEM"', rt=rt, call=call)
        home, config, nosystem = result.stdout.strip().split("|")
        assert "generalagent-home-" in home and config == os.devnull and nosystem == "1"
    finally:
        sandbox.sandbox_status.cache_clear()
