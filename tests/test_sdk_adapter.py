"""mcp_server.sdk_adapter names the SDK's private attributes: this fails when an SDK upgrade renames one."""

from __future__ import annotations

import pytest
from mcp.server import MCPServer
from mcp.server.lowlevel.server import Server

from mcp_server import sdk_adapter


def test_the_low_level_server_is_where_the_adapter_looks() -> None:
    server: MCPServer[object] = MCPServer("probe")
    low = sdk_adapter.lowlevel(server)
    assert isinstance(low, Server)
    assert callable(low.run) and callable(low.create_initialization_options)


@pytest.mark.anyio
async def test_a_request_s_connection_holds_what_the_server_keeps_per_client() -> None:
    from mcp.client import Client
    from mcp.server.connection import Connection
    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

    server: MCPServer[object] = MCPServer("probe")
    seen: list[object] = []

    @server.tool()
    def noop() -> str:
        return "ok"

    async def watch(ctx: ServerRequestContext[object, object], call_next: CallNext) -> HandlerResult:
        seen.append(sdk_adapter.connection(ctx.session))
        return await call_next(ctx)

    server.middleware.append(watch)
    async with Client(server, mode="legacy") as client:
        await client.call_tool("noop", {})
        await client.list_tools()
    found = [c for c in seen if c is not None]
    assert found and all(isinstance(c, Connection) for c in found) and len({id(c) for c in found}) == 1
    connection = found[0]
    assert isinstance(connection, Connection) and isinstance(connection.state, dict)
    assert hasattr(connection, "session_id") and hasattr(connection, "client_params")
    assert sdk_adapter.connection(object()) is None


def test_our_tools_go_in_the_sdk_table() -> None:
    import anyio
    from mcp.server.mcpserver.tools.base import Tool

    server: MCPServer[object] = MCPServer("probe")
    sdk_adapter.register_tool(server, Tool.from_function(lambda: "x", name="mine"))
    assert [t.name for t in anyio.run(server.list_tools)] == ["mine"]


def test_the_product_names_at_most_three_private_sdk_attributes_all_here() -> None:
    """Issue 31: the private SDK names live in sdk_adapter only, on at most 3 lines."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    private = re.compile(r"\b(?!self\b)\w+\._(lowlevel_server|tool_manager|resource_manager|prompt_manager|"
                         r"subscriptions|connection|tools|resources|prompts|request_outbound)\b")
    found = [(path.relative_to(root).as_posix(), n) for package in ("mcp_server", "tools", "context", "indexing",
                                                                      "foundation")
             for path in (root / package).rglob("*.py")
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if private.search(line)]
    assert {path for path, _ in found} <= {"mcp_server/sdk_adapter.py"} and len(found) <= 3, found
