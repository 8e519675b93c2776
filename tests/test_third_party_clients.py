"""Third-party MCP clients against our stdio server: the OpenAI Agents SDK and pydantic-ai.

No LLM is involved: the tests drive each library's own MCP objects (the Agents SDK's
`MCPServerStdio`, pydantic-ai's `MCPToolset`) the way the library does for a model. Each lists
every tool (full profile) and converts it to the strict function schema the library would send
to OpenAI, without fallback; calls a search; and makes an approval-gated write: without a form
the call is refused with "Approval required" and an approval id, the user approves it out of
band with `generalagent-mcp approve`, and the repeated call succeeds; and reads a background index
job (`index_path(wait=false)`) to its end through `index_status`. Both libraries are dev
dependencies pinned in constraints.txt (their pins agree with ours, so they share the venv).
"""

from __future__ import annotations

import copy
import os
import re
import subprocess
import sys
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

pytestmark = pytest.mark.anyio

CONSOLE_SCRIPT = Path(sys.executable).with_name("generalagent-mcp")
JOB_FILES = 60
POLL_SECONDS, POLL_LIMIT = 0.25, 2400  # a background index job is read to its end (bounded: 10 minutes)
APPROVAL_ID = re.compile(r"Approval id: (ap-[a-z2-9]{6})")


def server_env(tmp_path: Path) -> dict[str, str]:
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    (workspace / "fox.txt").write_text("The quick brown fox jumps over the lazy dog.\n", encoding="utf-8")
    docs = workspace / "docs"
    docs.mkdir(exist_ok=True)
    for i in range(JOB_FILES):
        (docs / f"note{i:03d}.txt").write_text(f"Note {i}: the heron waits by the river {i}.\n" * 20, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GENERALAGENT_")}
    env.update(GENERALAGENT_DATA_DIR=str(tmp_path / "data"), GENERALAGENT_ROOTS=str(workspace),
               GENERALAGENT_TOOL_PROFILE="full", GENERALAGENT_LOG_LEVEL="DEBUG",
               GENERALAGENT_SEARCH_MEMORY_MIN_CHUNKS="1")  # in-memory postings: searches become quick calls
    return env


def approve(env: dict[str, str], text: str) -> str:
    """Approve the call named in an "Approval required" text as the user would, in a terminal."""
    assert "Approval required" in text, text
    match = APPROVAL_ID.search(text)
    assert match, text
    done = subprocess.run([str(CONSOLE_SCRIPT), "approve", match.group(1)], input="y\n", env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "Approved" in done.stdout, done.stdout + done.stderr
    return match.group(1)


async def read_job_to_its_end(call: Callable[..., Awaitable[dict[str, Any]]]) -> dict[str, Any]:
    """index_path(wait=false) returns at once with a job id; index_status shows it until it is done."""
    started = await call("index_path", {"path": "docs", "wait": False})
    assert started["job_id"] and started["state"] in ("running", "done"), started
    for _ in range(POLL_LIMIT):
        status = await call("index_status", {"path": "docs"})
        job = next(j for j in status["jobs"] if j["id"] == started["job_id"])
        if job["state"] != "running":
            break
        await anyio.sleep(POLL_SECONDS)
    assert job["state"] == "done" and job["files_done"] == job["files_total"] == JOB_FILES, job
    assert status["path_status"]["fresh"] is True, status
    return job


def every_argument(schema: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """What a strict-mode model sends: every property, null for the ones it does not use."""
    return {name: given.get(name) for name in schema["properties"]}


async def test_openai_agents_sdk_over_stdio(tmp_path: Path) -> None:
    from agents.mcp import MCPServerStdio
    from agents.mcp.util import MCPUtil

    env, server_log = server_env(tmp_path), tmp_path / "server.log"
    # the console script as configured by a user; its stderr to a file (the library has no option for it)
    exec_logging = ["-c", 'exec "$0" serve 2>"$1"', str(CONSOLE_SCRIPT), str(server_log)]
    server = MCPServerStdio(params={"command": "/bin/sh", "args": exec_logging, "env": env},
                            client_session_timeout_seconds=120, name="generalagent")
    async with server:
        tools = {tool.name: tool for tool in await server.list_tools()}
        assert len(tools) >= 30
        for tool in tools.values():  # what an Agent does with convert_schemas_to_strict=True
            function_tool = MCPUtil.to_function_tool(tool, server, convert_schemas_to_strict=True)
            assert function_tool.strict_json_schema, f"{tool.name} fell back to a non-strict schema"
            assert function_tool.params_json_schema == tool.input_schema, tool.name

        def call(name: str, **given: Any) -> Any:
            return server.call_tool(name, every_argument(tools[name].input_schema, given))

        indexed = await call("index_path", path="fox.txt")
        assert not indexed.is_error, indexed
        found = await call("search_documents", query="fox")
        assert not found.is_error and found.structured_content["hits"][0]["path"] == "fox.txt"

        async def structured(name: str, given: dict[str, Any]) -> dict[str, Any]:
            result = await call(name, **given)
            assert not result.is_error, result.content[0].text
            return dict(result.structured_content)

        await read_job_to_its_end(structured)

        refused = await call("write_file", path="out.txt", content="hello")
        assert refused.is_error and not (tmp_path / "workspace" / "out.txt").exists()
        approve(env, refused.content[0].text)
        written = await call("write_file", path="out.txt", content="hello")
        assert not written.is_error, written.content[0].text
    assert (tmp_path / "workspace" / "out.txt").read_text(encoding="utf-8") == "hello"


async def test_pydantic_ai_over_stdio(tmp_path: Path) -> None:
    from fastmcp.client.transports import StdioTransport
    from fastmcp.exceptions import ToolError
    from pydantic_ai.mcp import MCPToolset
    from pydantic_ai.profiles.openai import OpenAIJsonSchemaTransformer

    env, server_log = server_env(tmp_path), tmp_path / "server.log"
    logs: list[Any] = []

    async def on_log(message: Any) -> None:
        logs.append(message)

    toolset = MCPToolset(StdioTransport(str(CONSOLE_SCRIPT), ["serve"], env=env, log_file=server_log), log_level="info",
                         log_handler=on_log, tool_error_behavior="error", init_timeout=120, read_timeout=120)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # whether it could apply log_level on this era
        await toolset.__aenter__()
    try:
        tools = {tool.name: tool for tool in await toolset.list_tools()}
        assert len(tools) >= 30
        for tool in tools.values():  # how pydantic-ai prepares a tool for an OpenAI model (strict auto)
            transformer = OpenAIJsonSchemaTransformer(copy.deepcopy(tool.input_schema), strict=None)
            assert transformer.walk() == tool.input_schema, tool.name
            assert transformer.is_strict_compatible, f"{tool.name} would be sent non-strict"

        await toolset.direct_call_tool("index_path", {"path": "fox.txt"})
        found = await toolset.direct_call_tool("search_documents", {"query": "fox", "max_results": None})
        assert found["hits"][0]["path"] == "fox.txt"

        await read_job_to_its_end(toolset.direct_call_tool)

        with pytest.raises(ToolError) as refused:
            await toolset.direct_call_tool("write_file", {"path": "out.txt", "content": "hello"})
        approve(env, str(refused.value))
        written = await toolset.direct_call_tool("write_file", {"path": "out.txt", "content": "hello"})
        assert written["bytes_written"] == 5
    finally:
        await toolset.__aexit__(None, None, None)
    assert (tmp_path / "workspace" / "out.txt").read_text(encoding="utf-8") == "hello"
    assert any("write_file" in str(getattr(m, "data", m)) for m in logs), logs  # the approval event


async def test_pydantic_ai_default_tool_cache_sees_tools_enable_tools_adds(tmp_path: Path) -> None:
    """pydantic-ai caches the tool list (the default) until the server says it changed. enable_tools on its
    connection (2026-07-28: the era it negotiates) must reach it, or say it could not (notified false)."""
    from fastmcp.client.transports import StdioTransport
    from pydantic_ai.mcp import MCPToolset

    env = server_env(tmp_path) | {"GENERALAGENT_TOOL_PROFILE": "default"}
    toolset = MCPToolset(StdioTransport(str(CONSOLE_SCRIPT), ["serve"], env=env, log_file=tmp_path / "server.log"),
                         init_timeout=120, read_timeout=120)
    await toolset.__aenter__()
    try:
        assert toolset.cache_tools is True
        before = {tool.name for tool in await toolset.list_tools()}
        assert "find_files" not in before
        answer = await toolset.direct_call_tool("enable_tools", {"names": ["find_files"]})
        assert answer["enabled"] == ["find_files"]
        after = {tool.name for tool in await toolset.list_tools()}
        assert answer["notified"] is ("find_files" in after), (answer, sorted(after - before))
        assert "find_files" in after
    finally:
        await toolset.__aexit__(None, None, None)
