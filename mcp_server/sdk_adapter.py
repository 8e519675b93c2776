"""The SDK's private names this product relies on, each in one place, for what its public API lacks.

Every line here names a private attribute of `mcp.server.MCPServer` (checked by tests/test_sdk_adapter.py,
which fails when the SDK renames or removes one): upgrade the SDK, run that test, and mend this module only.
"""

from __future__ import annotations

from typing import Any

from mcp.server import MCPServer
from mcp.server.connection import Connection
from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver.tools.base import Tool
from mcp.server.session import ServerSession


def lowlevel(server: MCPServer[Any]) -> Server[Any]:
    """The low-level server under `server`: to run it on our own stdio streams (mcp_server.stdio_wire) and to
    declare capabilities MCPServer leaves out (no public accessor in mcp 2.x)."""
    return server._lowlevel_server


def register_tool(server: MCPServer[Any], tool: Tool) -> None:
    """Put a tool built by us (mcp_server.tool_surface.CheckedTool: our argument checks, portable schemas) in
    the server's table; `MCPServer.add_tool` builds its own `Tool` from a function and returns nothing."""
    server._tool_manager._tools[tool.name] = tool


def remove_resource(server: MCPServer[Any], uri: str) -> None:
    """Forget a resource (a skill or agent card that is gone); MCPServer has no public remove."""
    server._resource_manager._resources.pop(uri, None)


def connection(session: object) -> Connection | None:
    """The connection behind a request's `ServerSession` (its state, session id and client info for the
    whole connection; the session object is made anew for every request). None for anything else."""
    return session._connection if isinstance(session, ServerSession) else None
