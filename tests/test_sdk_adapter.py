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


def test_our_tools_and_resources_go_in_and_out_of_the_sdk_tables() -> None:
    import anyio
    from mcp.server.mcpserver.resources import FunctionResource
    from mcp.server.mcpserver.tools.base import Tool

    server: MCPServer[object] = MCPServer("probe")
    sdk_adapter.register_tool(server, Tool.from_function(lambda: "x", name="mine"))
    assert [t.name for t in anyio.run(server.list_tools)] == ["mine"]
    server.add_resource(FunctionResource.from_function(lambda: "r", uri="probe://r", name="r"))
    sdk_adapter.remove_resource(server, "probe://r")
    assert anyio.run(server.list_resources) == []
