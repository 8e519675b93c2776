"""Clients over Streamable HTTP (one real server on a loopback port): per-session tool lists, and the
OpenAI Agents SDK and pydantic-ai with strict schemas, a search and an approval-gated write."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.test_http import HttpServer, server_env, start_http_server
from tests.test_third_party_clients import approve, every_argument

# one pytest-xdist worker runs this module (--dist loadgroup), so its module-scoped server starts once
pytestmark = [pytest.mark.anyio, pytest.mark.xdist_group("test_clients_http")]


@pytest.fixture(scope="module")
def http_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[HttpServer, Path]]:
    tmp = tmp_path_factory.mktemp("clients-http")
    workspace = tmp / "workspace"
    workspace.mkdir()
    (workspace / "fox.txt").write_text("The quick brown fox jumps over the lazy dog.\n", encoding="utf-8")
    server = start_http_server(tmp, GENERALAGENT_ROOTS=str(workspace), GENERALAGENT_TOOL_PROFILE="default")
    try:
        yield server, tmp
    finally:
        server.stop()


def cli_env(tmp: Path) -> dict[str, str]:
    return server_env(tmp / "data")


async def test_enable_tools_is_per_session_over_http(http_server: tuple[HttpServer, Path]) -> None:
    from mcp.client import Client

    server, _ = http_server
    async with Client(server.url, mode="legacy") as first, Client(server.url, mode="legacy") as second:
        result = await first.call_tool("enable_tools", {"names": ["find_files"]})
        assert result.structured_content["enabled"] == ["find_files"], result
        assert "find_files" in {t.name for t in (await first.list_tools()).tools}
        assert "find_files" not in {t.name for t in (await second.list_tools()).tools}
        hidden = await second.call_tool("find_files", {"pattern": "*.txt"})
        assert hidden.is_error and 'enable_tools(["find_files"])' in hidden.content[0].text


async def test_openai_agents_sdk_over_http(http_server: tuple[HttpServer, Path]) -> None:
    from agents.mcp import MCPServerStreamableHttp
    from agents.mcp.util import MCPUtil

    server, tmp = http_server
    client = MCPServerStreamableHttp(params={"url": server.url, "timeout": 60, "sse_read_timeout": 120},
                                     client_session_timeout_seconds=120, name="generalagent-http")
    async with client:
        tools = {tool.name: tool for tool in await client.list_tools()}
        for tool in tools.values():
            assert MCPUtil.to_function_tool(tool, client, convert_schemas_to_strict=True).strict_json_schema

        def call(name: str, **given: Any) -> Any:
            return client.call_tool(name, every_argument(tools[name].input_schema, given))

        assert not (await call("index_path", path="fox.txt")).is_error
        found = await call("search_documents", query="fox")
        assert found.structured_content["hits"][0]["path"] == "fox.txt"
        refused = await call("write_file", path="agents.txt", content="via http")
        assert refused.is_error
        approve(cli_env(tmp), refused.content[0].text)
        assert not (await call("write_file", path="agents.txt", content="via http")).is_error
    assert (tmp / "workspace" / "agents.txt").read_text(encoding="utf-8") == "via http"


async def test_pydantic_ai_over_http(http_server: tuple[HttpServer, Path]) -> None:
    from fastmcp.exceptions import ToolError
    from pydantic_ai.mcp import MCPToolset
    from pydantic_ai.profiles.openai import OpenAIJsonSchemaTransformer

    server, tmp = http_server
    toolset = MCPToolset(server.url, tool_error_behavior="error", init_timeout=120, read_timeout=120)
    async with toolset:
        tools = await toolset.list_tools()
        for tool in tools:
            transformer = OpenAIJsonSchemaTransformer(copy.deepcopy(tool.input_schema), strict=None)
            transformer.walk()
            assert transformer.is_strict_compatible, tool.name
        await toolset.direct_call_tool("index_path", {"path": "fox.txt"})
        found = await toolset.direct_call_tool("search_documents", {"query": "fox"})
        assert found["hits"][0]["path"] == "fox.txt"
        with pytest.raises(ToolError) as refused:
            await toolset.direct_call_tool("write_file", {"path": "pai.txt", "content": "via http"})
        approve(cli_env(tmp), str(refused.value))
        written = await toolset.direct_call_tool("write_file", {"path": "pai.txt", "content": "via http"})
        assert written["bytes_written"] == len("via http")
