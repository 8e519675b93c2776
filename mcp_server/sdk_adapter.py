"""The SDK's private names this product relies on, each in one place, for what its public API lacks.

Every line here names a private attribute of the SDK (checked by tests/test_sdk_adapter.py, which fails
when the SDK renames or removes one, and fails when a private name appears anywhere else or on more than 3
lines): upgrade the SDK, run that test, and mend this module only. Why each has no public way in mcp 2.x:

- `lowlevel`: MCPServer runs stdio only on the process's own stdin/stdout (`run_stdio_async` takes no
  streams), offers no `logging/setLevel` handler and no NotificationOptions for listChanged; the low-level
  `Server` has all three (`run(read, write, options)`, `add_request_handler`, `create_initialization_options`).
- `register_tool`: `MCPServer.add_tool` builds its own `Tool` from a function and returns nothing, so our
  `CheckedTool` (argument checks before the SDK's, portable schemas, no second validation of results we
  already dumped from their model) cannot go in, and the SDK's tool cannot be adjusted after.
- `connection`: a request's `ServerSession` is made anew per request; what lives as long as the client
  (the scratch `state`, `session_id`) is only on the `Connection`, which `ServerRequestContext` does not
  carry (`mcp.server.context.Context.connection` would, but the runner does not build that context yet).

Resources of skills and cards need no removal (mcp_server.prompts lists them from the current state and
reads them through templates); the subscription bus is ours, handed to `MCPServer(subscriptions=...)`.
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


def connection(session: object) -> Connection | None:
    """The connection behind a request's `ServerSession` (its state, session id and client info for the
    whole connection; the session object is made anew for every request). None for anything else."""
    return session._connection if isinstance(session, ServerSession) else None
