"""stdio through the SDK's own transport (mcp_server.transports.run_stdio): long lines both ways, stdin from
a regular file or one socket, the end of input, a slow reader and a client that stops reading."""

from __future__ import annotations

import json
import os
import socket
import subprocess
from pathlib import Path

from tests.test_stdio import CONSOLE_SCRIPT, INITIALIZE, RawStdioServer, _frame


def test_messages_longer_than_a_pipe_buffer_both_ways(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "big.txt").write_text("".join(f"line {i}: " + "x" * 90 + "\n" for i in range(4000)))
    server = RawStdioServer(tmp_path, GENERALAGENT_ROOTS=str(workspace))
    try:
        assert "result" in server.ask(INITIALIZE)
        server.send(_frame({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        huge = server.ask({"jsonrpc": "2.0", "id": 2, "method": "tools/call",  # a 3 MB line in
                           "params": {"name": "no_such_tool", "arguments": {"text": "y" * 3_000_000}}})
        assert huge.get("error") or huge["result"]["isError"]
        read = server.ask({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                           "params": {"name": "read_file", "arguments": {"path": "big.txt"}}})
        assert not read["result"].get("isError"), read
    finally:
        assert server.close() == 0
    assert max(len(line) for line in server.stdout) > 65_536  # an answer longer than a pipe's buffer came out whole
    assert all(json.loads(line)["jsonrpc"] == "2.0" for line in server.stdout)


def test_stdin_from_a_file_is_served_by_the_sdk_transport(tmp_path: Path) -> None:
    requests = tmp_path / "requests.jsonl"
    requests.write_bytes(_frame(INITIALIZE) + _frame({"jsonrpc": "2.0", "id": 2, "method": "ping"}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("GENERALAGENT_")}
    env["GENERALAGENT_DATA_DIR"] = str(tmp_path / "data")
    with requests.open("rb") as stdin:
        done = subprocess.run([str(CONSOLE_SCRIPT), "serve"], stdin=stdin, capture_output=True, timeout=120,
                              env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    answers = {json.loads(line)["id"]: json.loads(line) for line in done.stdout.splitlines()}
    assert answers[2] == {"jsonrpc": "2.0", "id": 2, "result": {}} and "serverInfo" in answers[1]["result"]


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GENERALAGENT_")}
    return {**env, "GENERALAGENT_DATA_DIR": str(tmp_path / "data"), **extra}


def test_one_socket_as_stdin_and_stdout(tmp_path: Path) -> None:
    """inetd, socat EXEC:, systemd socket units: both ends are one socket."""
    ours, theirs = socket.socketpair()
    with (tmp_path / "stderr.txt").open("wb") as err:
        process = subprocess.Popen([str(CONSOLE_SCRIPT), "serve"], stdin=theirs, stdout=theirs, stderr=err,
                                   env=_env(tmp_path), cwd=tmp_path)
    theirs.close()
    try:
        ours.sendall(_frame(INITIALIZE) + _frame({"jsonrpc": "2.0", "id": 2, "method": "ping"}))
        ours.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := ours.recv(65536):
            received += chunk
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
        ours.close()
    answers = {json.loads(line)["id"]: json.loads(line) for line in received.splitlines()}
    assert answers[2]["result"] == {} and "serverInfo" in answers[1]["result"]


def test_requests_read_before_the_end_of_input_are_answered(tmp_path: Path) -> None:
    """A call that takes a while (a first index_path) sent together with the end of input is answered, not
    dropped ("Connection closed" when the server does not wait for it). The server's wait is bounded
    (the SDK's), so the call starts on a server that has answered a call already: cold,
    with Chinese text that loaded jieba, it took 1.5 s on a quiet machine and over 5 s on a loaded one."""
    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / "a.md").write_text("# Tea\nGreen tea brewed at eighty degrees is not bitter.\n")
    server = RawStdioServer(tmp_path, GENERALAGENT_ROOTS=str(folder))
    try:
        assert "result" in server.ask(INITIALIZE)
        server.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        assert "result" in server.ask({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                       "params": {"name": "now", "arguments": {}}})
        server.send(_frame({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                            "params": {"name": "index_path", "arguments": {"path": "."}}}))
        assert server.close() == 0, server.stderr_path.read_text()
    finally:
        if server.process.poll() is None:
            server.process.kill()
    answers = {json.loads(line).get("id"): json.loads(line) for line in server.stdout}
    assert "result" in answers[3] and not answers[3]["result"].get("isError"), answers[3]


def test_the_last_answer_reaches_a_slow_reader_whole(tmp_path: Path) -> None:
    """stdin closes while a long answer is still buffered; the client reads only later."""
    import time

    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "big.txt").write_text("".join(f"line {i}: " + "x" * 90 + "\n" for i in range(4000)))
    read = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "read_file", "arguments": {"path": "big.txt"}}}
    with (tmp_path / "stderr.txt").open("wb") as err:
        process = subprocess.Popen([str(CONSOLE_SCRIPT), "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=err, env=_env(tmp_path, GENERALAGENT_ROOTS=str(workspace)), cwd=tmp_path)
    assert process.stdin is not None and process.stdout is not None
    try:
        process.stdin.write(_frame(INITIALIZE) + _frame(read))
        process.stdin.close()
        time.sleep(3)  # the server has answered and seen the end of input by now
        lines = process.stdout.read().splitlines()
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
    answers = {json.loads(line)["id"]: json.loads(line) for line in lines}
    assert len(lines[-1]) > 65_536 and not answers[2]["result"].get("isError")


def test_empty_input_ends_the_server_cleanly(tmp_path: Path) -> None:
    """stdin closed before anything is read (the read pipe is closed at once by the loop)."""
    from tests.test_cli import run

    served = run(tmp_path, "serve")
    assert served.returncode == 0, served.stderr
    assert served.stdout == ""


def test_a_client_that_stops_reading_stops_the_server_cleanly(tmp_path: Path) -> None:
    """The client closes its end of stdout: the next answer cannot be written; one log line, exit 0."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GENERALAGENT_")}
    env["GENERALAGENT_DATA_DIR"] = str(tmp_path / "data")
    with (tmp_path / "stderr.txt").open("wb") as err:
        process = subprocess.Popen([str(CONSOLE_SCRIPT), "serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=err, env=env, cwd=tmp_path)
    assert process.stdin is not None and process.stdout is not None
    try:
        process.stdin.write(_frame(INITIALIZE))
        process.stdin.flush()
        assert "result" in json.loads(process.stdout.readline())
        process.stdout.close()
        # one request, and stdin stays open: the server's read of the next line is blocked when the
        # answer fails, and must not hold up its exit
        process.stdin.write(_frame({"jsonrpc": "2.0", "id": 10, "method": "tools/list"}))
        process.stdin.flush()
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
    stderr = (tmp_path / "stderr.txt").read_text(errors="replace")
    assert "stdout was closed by the client" in stderr and "Traceback" not in stderr
