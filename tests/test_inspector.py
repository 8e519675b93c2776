"""The MCP Inspector CLI (pinned in scripts/node.sh) against our stdio server.

`tools/list` and a `tools/call` of `now` must exit 0 with the expected JSON, and the Inspector's
schema-portability lint finds nothing in any tool (issue 13). When the pinned
Node tooling cannot be installed this test fails with the reason (it never skips).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.test_conformance import NODE_SH, ensure_node_tools

CONSOLE_SCRIPT = Path(sys.executable).with_name("generalagent-mcp")


def inspector(tmp_path: Path, *method_args: str) -> Any:
    done = run_inspector(tmp_path, *method_args)
    assert done.returncode == 0, f"inspector exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return json.loads(done.stdout)


def run_inspector(tmp_path: Path, *method_args: str, profile: str = "default",
                  strict: bool = False) -> subprocess.CompletedProcess[str]:
    ensure_node_tools()
    home = tmp_path / "home"  # the Inspector keeps a catalog/secrets file under ~/.mcp-inspector
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GENERALAGENT_")}
    env.update(HOME=str(home), CI="true", NO_COLOR="1")
    passed = [f"PYTHONPATH={env['PYTHONPATH']}"] if env.get("PYTHONPATH") else []  # the Inspector passes few vars
    # the server's start may take longer than the Inspector's default 15 s on a busy machine
    command = [str(NODE_SH), "inspector", "--cli", "--connect-timeout", "90000", *(["--strict"] if strict else []),
               *[arg for var in passed for arg in ("-e", var)],
               "-e", f"GENERALAGENT_DATA_DIR={tmp_path / 'data'}", "-e", f"GENERALAGENT_TOOL_PROFILE={profile}",
               str(CONSOLE_SCRIPT), "serve", *method_args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path,
                          stdin=subprocess.DEVNULL)


def test_inspector_lists_tools(tmp_path: Path) -> None:
    listed = inspector(tmp_path, "--method", "tools/list")
    tools = {tool["name"]: tool for tool in listed["tools"]}
    assert "now" in tools
    assert tools["now"]["annotations"]["readOnlyHint"] is True
    assert "utc" in tools["now"]["outputSchema"]["properties"]


def test_inspector_finds_no_schema_portability_problems(tmp_path: Path) -> None:
    """Every tool (full profile): the Inspector's schema lint (type arrays, untyped nodes, remote refs,
    boolean schemas) reports nothing; with --strict it would print each finding."""
    done = run_inspector(tmp_path, "--method", "tools/list", profile="full", strict=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(json.loads(done.stdout)["tools"]) >= 30
    assert "Warning:" not in done.stderr and "Error:" not in done.stderr, done.stderr[-5000:]
    assert "Schema portability" not in done.stderr, done.stderr[-5000:]


def test_inspector_calls_now(tmp_path: Path) -> None:
    result = inspector(tmp_path, "--method", "tools/call", "--tool-name", "now")
    assert result["isError"] is False
    assert result["structuredContent"]["utc"].endswith("Z")
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
