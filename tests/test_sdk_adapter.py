"""mcp_server.sdk_adapter names the SDK's private attributes: this fails when an SDK upgrade renames one."""

from __future__ import annotations

from mcp.server import MCPServer
from mcp.server.lowlevel.server import Server

from mcp_server import sdk_adapter


def test_the_low_level_server_is_where_the_adapter_looks() -> None:
    server: MCPServer[object] = MCPServer("probe")
    low = sdk_adapter.lowlevel(server)
    assert isinstance(low, Server)
    assert callable(low.run) and callable(low.create_initialization_options)
