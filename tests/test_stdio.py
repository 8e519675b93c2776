"""stdio for real: the installed console script as a subprocess, driven by the SDK's stdio client.

Covers both protocol eras, a working directory with its own `tools/`, `context/`, `indexing/`,
`mcp_server/` and `mcp/` packages (which raise on import: ours must still load), and that
stdout carries nothing but JSON-RPC while the logs go to stderr.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import MODES, assert_lists_and_calls_now

CONSOLE_SCRIPT = Path(sys.executable).with_name("generalagent-mcp")
SHADOWING_PACKAGES = ("tools", "context", "indexing", "mcp_server", "mcp")


def stdio_params(tmp_path: Path, cwd: Path | None = None, **env: str) -> Any:
    from mcp.client.stdio import StdioServerParameters

    return StdioServerParameters(
        command=str(CONSOLE_SCRIPT),
        args=["serve"],
        env={"GENERALAGENT_DATA_DIR": str(tmp_path / "data"), **env},
        cwd=str(cwd or tmp_path),
    )


async def _list_and_call(params: Any, mode: str, errlog: Path) -> None:
    from mcp.client import Client
    from mcp.client.stdio import stdio_client

    with errlog.open("w") as err:
        async with Client(stdio_client(params, errlog=err), mode=mode) as client:
            assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
            await assert_lists_and_calls_now(client)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_console_script_over_stdio(tmp_path: Path, mode: str) -> None:
    await _list_and_call(stdio_params(tmp_path), mode, tmp_path / "stderr.txt")


@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES)
async def test_cwd_with_its_own_packages_does_not_shadow_ours(tmp_path: Path, mode: str) -> None:
    project = tmp_path / "someone-elses-project"
    for name in SHADOWING_PACKAGES:
        package = project / name
        package.mkdir(parents=True)
        (package / "__init__.py").write_text(f"raise ImportError('the cwd {name}/ package was imported')\n")
    (project / "tools" / "meta.py").write_text("raise ImportError('the cwd tools/meta.py was imported')\n")
    errlog = tmp_path / "stderr.txt"
    await _list_and_call(stdio_params(tmp_path, cwd=project), mode, errlog)
    assert "was imported" not in errlog.read_text()


def _frame(message: dict[str, Any]) -> bytes:
    return (json.dumps(message) + "\n").encode()


class RawStdioServer:
    """The console script with raw pipes: send one JSON-RPC frame, read stdout lines as they come."""

    def __init__(self, tmp_path: Path, **env: str) -> None:
        full_env = {k: v for k, v in os.environ.items() if not k.startswith("GENERALAGENT_")}
        full_env.update(GENERALAGENT_DATA_DIR=str(tmp_path / "data"), **env)
        self.stderr_path = tmp_path / "stderr.txt"
        with self.stderr_path.open("wb") as err:
            self.process = subprocess.Popen([str(CONSOLE_SCRIPT), "serve"], stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, stderr=err, env=full_env, cwd=tmp_path)
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.stdout: list[bytes] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)

    def send(self, raw: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(raw)
        self.process.stdin.flush()

    def ask(self, message: dict[str, Any]) -> dict[str, Any]:
        """Send a request and return its response (other lines, e.g. notifications, are kept)."""
        self.send(_frame(message))
        while True:
            line = self.lines.get(timeout=120)  # seconds; a loaded machine took over 30 s to start
            self.stdout.append(line)
            answer = json.loads(line)
            if answer.get("id") == message["id"]:
                return dict(answer)

    def close(self) -> int:
        assert self.process.stdin is not None
        self.process.stdin.close()
        code = self.process.wait(timeout=120)
        while not self.lines.empty():
            self.stdout.append(self.lines.get())
        return code


INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                         "clientInfo": {"name": "raw-stdio-test", "version": "0"}}}


def test_stdout_carries_only_protocol(tmp_path: Path) -> None:
    server = RawStdioServer(tmp_path, GENERALAGENT_LOG_LEVEL="DEBUG")
    try:
        assert server.ask(INITIALIZE)["result"]["serverInfo"]["name"] == "generalagent-mcp"
        server.send(_frame({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        assert any(t["name"] == "now" for t in server.ask({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
                   ["result"]["tools"])
        called = server.ask({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                             "params": {"name": "now", "arguments": {}}})
        assert called["result"]["structuredContent"]["utc"].endswith("Z")
        unknown = server.ask({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                              "params": {"name": "no_such_tool", "arguments": {}}})
        assert unknown.get("error") or unknown["result"]["isError"]
    finally:
        code = server.close()
    assert code == 0
    for line in server.stdout:  # every stdout line is one JSON-RPC message, nothing else
        assert json.loads(line)["jsonrpc"] == "2.0", line
    stderr = server.stderr_path.read_text(errors="replace")
    assert "tool now ok" in stderr  # the dispatch log line went to stderr
    assert "DEBUG" in stderr


def test_malformed_line_does_not_kill_the_server(tmp_path: Path) -> None:
    server = RawStdioServer(tmp_path)
    try:
        server.send(b"this is not json\n")
        assert "result" in server.ask(INITIALIZE)
    finally:
        assert server.close() == 0
    for line in server.stdout:
        assert json.loads(line)["jsonrpc"] == "2.0", line


def test_serve_script_keeps_stdout_for_the_protocol(tmp_path: Path) -> None:
    """./scripts/serve.sh (the README's command) checks the venv first; none of that may reach stdout."""
    script = Path(__file__).resolve().parents[1] / "scripts" / "serve.sh"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GENERALAGENT_")}
    env["GENERALAGENT_DATA_DIR"] = str(tmp_path / "data")
    done = subprocess.run([str(script)], input=_frame({"jsonrpc": "2.0", "id": 7, "method": "ping"}),
                          capture_output=True, timeout=300, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert [json.loads(line) for line in done.stdout.splitlines()] == [{"jsonrpc": "2.0", "id": 7, "result": {}}]


def test_a_request_with_a_lone_surrogate_gets_an_error_answer(tmp_path: Path) -> None:
    """Red team: `"\\ud800"` in a call's arguments made pydantic-core refuse the line and the SDK answered
    nothing (the client waited forever for that id). Now: invalid params, naming the fix; the next call runs."""
    server = RawStdioServer(tmp_path, GENERALAGENT_TOOL_PROFILE="full")
    try:
        server.ask(INITIALIZE)
        server.send(_frame({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        for request_id, arguments in ((2, '{"text":"\\ud800"}'), ("x", '{"todos":[{"content":"a\\udfff",'
                                                                      '"status":"pending"}]}')):
            name = "count_tokens" if request_id == 2 else "todo_write"
            server.send(f'{{"jsonrpc":"2.0","id":{json.dumps(request_id)},"method":"tools/call","params":'
                        f'{{"name":"{name}","arguments":{arguments}}}}}\n'.encode())
            answer = json.loads(server.lines.get(timeout=30))
            assert answer["id"] == request_id and answer["error"]["code"] == -32602, answer
            assert "text must be valid Unicode" in answer["error"]["message"]
        paired = server.ask({"jsonrpc": "2.0", "id": 5, "method": "tools/call",  # a whole pair is text: runs
                             "params": {"name": "count_tokens", "arguments": {"text": "\U0001f600"}}})
        assert paired["result"]["isError"] is False, paired
    finally:
        assert server.close() == 0


@pytest.mark.anyio
async def test_each_stdio_connection_without_roots_has_its_own_workspace(tmp_path: Path) -> None:
    """Without roots, two stdio connections (two processes: Claude Desktop and Claude Code, say) do not share
    `workspaces/default`: each works in `workspaces/stdio-<start>-<pid>/`; a workspace nothing was put in is removed when its connection ends, one with a file is kept."""
    from mcp.client import Client
    from mcp.client.stdio import stdio_client

    from tests.approval_helpers import elicitation_answer

    async def roots(client: Client) -> list[str]:
        listing = await client.call_tool("list_workspace_files", {})
        return listing.structured_content["roots"]

    data = tmp_path / "data"
    with (tmp_path / "err1.txt").open("w") as e1, (tmp_path / "err2.txt").open("w") as e2:
        params = stdio_params(tmp_path, GENERALAGENT_TOOL_PROFILE="full")
        async with Client(stdio_client(params, errlog=e1), mode="legacy",
                          elicitation_callback=elicitation_answer("accept")) as first, \
                Client(stdio_client(params, errlog=e2), mode="auto") as second:
            one, two = await roots(first), await roots(second)
            assert one != two and len(one) == len(two) == 1
            for root in one + two:
                assert Path(root).parent == (data / "workspaces").resolve() and Path(root).name.startswith("stdio-")
            wrote = await first.call_tool("write_file", {"path": "mine.txt", "content": "only mine"})
            assert not wrote.is_error, wrote.content[0].text
            theirs = await second.call_tool("read_file", {"path": "mine.txt"})
            assert theirs.is_error and "only mine" not in theirs.content[0].text
    assert (Path(one[0]) / "mine.txt").read_text() == "only mine"
    assert not Path(two[0]).exists() and not (data / "workspaces" / "default").exists()
