"""What each client sees of the tools and how its arguments are checked before anything runs.

- `CheckedTool`: an SDK tool whose arguments pass `prepare_arguments` first (unknown names are
  rejected with the closest valid name; null / "" for an optional argument means its default),
  then validation with one short line per problem instead of pydantic's raw text. This happens
  before the approval resolver and the gate see (and hash) the arguments.
- `SessionToolServer`: an MCPServer whose tools/list is per session (`SessionTools`, an SDK middleware): the profile's tools plus
  the ones this session enabled (`enable_tools`); calling a tool that is not listed says which
  profile has it and how to enable it.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

import anyio.to_thread
from mcp.server import MCPServer
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools.base import Tool
from mcp.server.subscriptions import InMemorySubscriptionBus, SubscriptionBus
from mcp_types import CallToolResult, ListToolsResult, TextContent
from pydantic import PrivateAttr, ValidationError

from foundation.errors import InvalidInput
from foundation.toolspec import ToolSpec, invalid_arguments_message, prepare_arguments
from mcp_server.eras import is_modern
from mcp_server.http_state import ENABLED_KEY, MemoryToolLists
from mcp_server.sdk_adapter import connection

PROFILE_OF_TIER = {"core": "minimal", "default": "default", "full": "full"}


class CheckedTool(Tool):
    """An SDK Tool that checks its raw arguments itself before the SDK validates and runs it."""

    _spec: ToolSpec | None = PrivateAttr(default=None)

    @classmethod
    def of(cls, spec: ToolSpec, entry: Callable[..., Any], **kwargs: Any) -> CheckedTool:
        tool = cls.from_function(entry, name=spec.name, **kwargs)
        assert isinstance(tool, CheckedTool)  # from_function builds `cls`
        tool._spec = spec
        return tool

    async def run(self, arguments: dict[str, Any], context: Any, convert_result: bool = False) -> Any:
        try:
            return await super().run(self.checked(arguments), context, convert_result=convert_result)
        except ToolError as exc:  # the SDK validates once; its raw pydantic text becomes our short message
            if isinstance(exc.__cause__, ValidationError):
                raise ToolError(invalid_arguments_message(self.name, exc.__cause__)) from None
            raise

    def checked(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The arguments to validate (unknown ones refused, null/"" as the default), or ToolError."""
        if self._spec is None:
            return arguments
        try:
            return prepare_arguments(self._spec, arguments)
        except InvalidInput as exc:
            raise ToolError(str(exc)) from None


def connection_of(request_context: Any) -> Any:
    """The SDK's per-client Connection behind a request (None outside a request)."""
    return connection(getattr(request_context, "session", None))


def session_state(request_context: Any, fallback: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Scratch state for the calling session: the connection's own state on session-based eras
    (stdio, 2025 HTTP sessions); per client name on the sessionless 2026-07-28 era."""
    connection = connection_of(request_context)
    if connection is None:
        return fallback.setdefault("default", {})
    if connection.session_id is None and is_modern(connection):
        return fallback.setdefault(_client_key(connection), {})
    state: dict[str, Any] = connection.state
    return state


def sessionless_client(request_context: Any, stateless_http: bool = False) -> str | None:
    """The client key (`client:<name>`) whose tool list a request without a session uses: the 2026-07-28
    era, and any request on stateless HTTP (`stateless_http`: 2025-era requests carry no client name
    there, so they share `client:default`); None for a request inside a session, which keeps its own."""
    connection = connection_of(request_context)
    if connection is None:
        return "default"
    if connection.session_id is None and (stateless_http or is_modern(connection)):
        return _client_key(connection)
    return None


def _client_key(connection: Any) -> str:
    params = connection.client_params
    name = params.client_info.name if params is not None and params.client_info is not None else "default"
    return f"client:{name}"


class ToolLists(Protocol):
    """Where clients without a session keep the tools they enabled (mcp_server/http_state.py)."""

    def names(self, client: str) -> set[str]: ...

    def add(self, client: str, names: Iterable[str]) -> None: ...


class SessionToolServer(MCPServer[Any]):
    """tools/list and tools/call scoped to the session's tool list (see module doc)."""

    listed_by_profile: set[str]
    all_specs: dict[str, ToolSpec]

    def __init__(self, *args: Any, subscriptions: SubscriptionBus | None = None, **kwargs: Any) -> None:
        self.subscriptions: SubscriptionBus = subscriptions or InMemorySubscriptionBus()
        """The `subscriptions/listen` bus (2026-07-28 list_changed events): ours, handed to MCPServer."""
        super().__init__(*args, subscriptions=self.subscriptions, **kwargs)
        self.listed_by_profile = set()
        self.all_specs = {}
        self.sessionless_state: dict[str, dict[str, Any]] = {}
        self.tool_lists: ToolLists = MemoryToolLists(self.sessionless_state)
        self.stateless_http = False  # set when served by stateless HTTP workers (transports.http_app)
        self.register: Callable[[str], None] = lambda name: None  # registers a tool enabled in another process
        self.prompt_sync: Any = None  # mcp_server.prompts.PromptSync, set by build_server
        self.stdio_session: str | None = None
        """Served over stdio (one connection per process): this connection's id, its session id for
        the workspace (without roots), approvals for the session and the audit (set by run_stdio)."""
        self.registered: set[str] = set()  # the names in the SDK's tool table (mcp_server.server.ToolTable.add)
        self.middleware.append(SessionTools(self))  # the SDK's public hook around every request

    def setup_tools(self, listed: set[str], specs: dict[str, ToolSpec]) -> None:
        self.listed_by_profile = set(listed)
        self.all_specs = specs

    def enabled_for(self, request_context: Any) -> set[str]:
        """The names this session (or session-less client) enabled on demand (a copy)."""
        client = sessionless_client(request_context, self.stateless_http)
        if client is not None:
            return self.tool_lists.names(client)
        return set(self._session_set(request_context))

    def enable_for(self, request_context: Any, names: Iterable[str]) -> None:
        """List `names` for this session (or session-less client) from now on."""
        client = sessionless_client(request_context, self.stateless_http)
        if client is not None:
            self.tool_lists.add(client, names)
        else:
            self._session_set(request_context).update(names)

    def _session_set(self, request_context: Any) -> set[str]:
        enabled: set[str] = session_state(request_context, self.sessionless_state).setdefault(ENABLED_KEY, set())
        return enabled

    def visible(self, request_context: Any) -> set[str]:
        return self.listed_by_profile | self.enabled_for(request_context)

    async def visible_registered(self, ctx: Any) -> set[str]:
        """`visible(ctx)` (read in a worker thread when it may ask the database, else here), every one of
        them registered here (on the event loop, like every change of the tool table): a tool enabled
        through another server process on the same database was never registered in this one."""
        if self._lists_in_memory(ctx):
            names = self.visible(ctx)
        else:
            names = await anyio.to_thread.run_sync(self.visible, ctx)
        for name in names:
            if name not in self.registered and name in self.all_specs:
                self.register(name)
        return names

    def _lists_in_memory(self, ctx: Any) -> bool:
        """True when this request's tool list is held in this process (a session's own set, or the
        in-memory lists of session-less clients): reading it does no IO."""
        return isinstance(self.tool_lists, MemoryToolLists) or sessionless_client(ctx, self.stateless_http) is None

    def hidden_tool_problem(self, name: str, visible: set[str]) -> str | None:
        """Why `name` cannot be called in this session (None when it can)."""
        if name in visible:
            return None
        spec = self.all_specs.get(name)
        if spec is None:
            close = difflib.get_close_matches(name, sorted(visible), n=1, cutoff=0.6)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            return f"Unknown tool {name!r}.{hint} Call list_available_tools to see every tool."
        profile = PROFILE_OF_TIER[spec.tier]
        return (f"Tool {name!r} is not enabled in this session (it is listed in the {profile!r} profile). "
                f'Call enable_tools(["{name}"]) first, or start the server with '
                f"GENERALAGENT_TOOL_PROFILE={profile} (or GENERALAGENT_TOOLS_ENABLED={name}).")


class SessionTools(ServerMiddleware[Any]):
    """tools/list filtered to the session's tools; tools/call of a tool the session does not list answered
    with how to enable it (before the SDK looks the tool up)."""

    def __init__(self, server: SessionToolServer) -> None:
        self.server = server

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        if ctx.method == "tools/list":
            visible = await self.server.visible_registered(ctx)
            return _only(await call_next(ctx), visible)
        params = ctx.params
        if ctx.method == "tools/call" and isinstance(params, Mapping) and isinstance(params.get("name"), str):
            problem = self.server.hidden_tool_problem(params["name"], await self.server.visible_registered(ctx))
            if problem is not None:
                return CallToolResult(content=[TextContent(type="text", text=problem)], is_error=True)
        return await call_next(ctx)


def _only(listed: HandlerResult, visible: set[str]) -> HandlerResult:
    """A tools/list result (a model or its dump) with only the `visible` tools."""
    if isinstance(listed, ListToolsResult):
        return listed.model_copy(update={"tools": [tool for tool in listed.tools if tool.name in visible]})
    if isinstance(listed, dict) and isinstance(listed.get("tools"), list):
        return {**listed, "tools": [tool for tool in listed["tools"] if tool.get("name") in visible]}
    return listed
