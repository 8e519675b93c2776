"""Build the MCPServer: every registered tool becomes an entry that calls the dispatcher."""

from __future__ import annotations

import inspect
import logging
import re
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from mcp_server import registry
from mcp_server.dispatch import CallOrigin, Dispatcher, return_model, tool_parameters
from mcp_server.errors import GeneralAgentError
from mcp_server.settings import Settings
from mcp_server.toolspec import ToolSpec
from tools.runtime import Runtime

log = logging.getLogger("generalagent.server")

INSTRUCTIONS = (
    "generalagent-mcp: an agent runtime as tools. Search inside documents (index_path, then "
    "search_documents; search_file for one file), manage context (count_tokens, context_status, "
    "optimize_context, compact_context), remember facts (remember/recall), keep todo lists "
    "(todo_write/todo_read) and delegate sub-tasks (delegate_task). Risky calls may need the "
    "user's approval; follow the instructions in such results."
)


def server_version() -> str:
    try:
        return version("generalagent-mcp")
    except PackageNotFoundError:
        return "0.0.0"


def origin_from_context(ctx: Context) -> CallOrigin:
    """Identify the calling client and session from the SDK context (best effort)."""
    client_id, session_id = "default", None
    try:
        request_context = ctx.request_context
        session_id = getattr(request_context, "session_id", None)
        params = request_context.session.client_params
        if params is not None and params.client_info is not None:
            client_id = params.client_info.name or client_id
    except Exception:  # outside a request or an era without client info
        pass
    return CallOrigin(kind="client", client_id=client_id, session_id=session_id, mcp_context=ctx)


def make_entry(spec: ToolSpec, dispatcher: Dispatcher) -> Callable[..., Any]:
    """An async function with the tool's public signature (plus ctx) that calls the dispatcher."""
    params = tool_parameters(spec.fn)
    result_type = return_model(spec.fn)

    async def entry(ctx: Context, **kwargs: Any) -> CallToolResult:
        try:
            result = await dispatcher.run(spec.name, kwargs, origin_from_context(ctx), sink=ctx.report_progress)
        except GeneralAgentError as exc:
            raise ToolError(str(exc)) from exc
        data, text = dispatcher.bounded_payload(result)
        return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=data)

    ctx_param = inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context)
    entry.__signature__ = inspect.Signature([*params, ctx_param], return_annotation=result_type)  # type: ignore[attr-defined]
    entry.__annotations__ = {p.name: p.annotation for p in params} | {"ctx": Context, "return": result_type}
    entry.__name__ = spec.name
    entry.__doc__ = spec.description
    return entry


def annotations_for(spec: ToolSpec) -> ToolAnnotations:
    return ToolAnnotations(
        title=spec.title,
        read_only_hint=spec.read_only,
        destructive_hint=spec.destructive,
        idempotent_hint=spec.idempotent,
        open_world_hint=spec.open_world,
    )


def listed_specs(settings: Settings, specs: list[ToolSpec]) -> list[ToolSpec]:
    allowed = {"minimal": {"core"}, "default": {"core", "default"}, "full": {"core", "default", "full"}}
    tiers = allowed[settings.tool_profile]
    return [spec for spec in specs if spec.tier in tiers]


def _warm_up(runtime: Runtime) -> None:
    for warm in registry.WARMUPS:
        try:
            warm(runtime)
        except Exception:
            log.exception("warm-up %s failed", getattr(warm, "__name__", warm))


def build_server(settings: Settings) -> tuple[MCPServer[Any], Dispatcher]:
    runtime = Runtime(settings)
    dispatcher = Dispatcher(runtime, registry.TOOLS)
    runtime.service("dispatcher", lambda: dispatcher)  # sub-agents dispatch their tool calls through it

    @asynccontextmanager
    async def lifespan(_: MCPServer[Any]) -> AsyncIterator[None]:
        threading.Thread(target=_warm_up, args=(runtime,), name="warm-up", daemon=True).start()
        yield None

    server: MCPServer[Any] = MCPServer(
        "generalagent-mcp",
        title="generalagent-mcp",
        version=server_version(),
        instructions=INSTRUCTIONS,
        log_level=settings.log_level,
        lifespan=lifespan,
    )
    for spec in listed_specs(settings, registry.TOOLS):
        server.add_tool(
            make_entry(spec, dispatcher),
            name=spec.name,
            title=spec.title,
            description=spec.description,
            annotations=annotations_for(spec),
        )
    _add_resources(server, runtime)

    @server.custom_route("/health", methods=["GET"])
    async def health(_: Request) -> Response:
        return JSONResponse({"status": "ok", "name": "generalagent-mcp", "version": server_version()})

    server.dispatcher = dispatcher  # type: ignore[attr-defined]
    server.runtime = runtime  # type: ignore[attr-defined]
    return server, dispatcher


def _add_resources(server: MCPServer[Any], runtime: Runtime) -> None:
    for res in registry.RESOURCES:
        handler = _template_reader(res, runtime) if "{" in res.uri else _static_reader(res, runtime)
        server.resource(res.uri, name=res.name, description=res.description, mime_type=res.mime_type)(handler)


def _static_reader(res: registry.ResourceSpec, runtime: Runtime) -> Callable[[], str]:
    def read() -> str:  # static resources must declare no parameters
        return res.fn(runtime)

    return read


def _template_reader(res: registry.ResourceSpec, runtime: Runtime) -> Callable[..., str]:
    """A handler for a URI template: `fn(rt, **uri_params)`, plus `origin=` when fn accepts it."""
    names = re.findall(r"{([A-Za-z_][A-Za-z0-9_]*)}", res.uri)
    wants_origin = "origin" in inspect.signature(res.fn).parameters

    def read(ctx: Context, **params: str) -> str:
        try:
            if wants_origin:
                return res.fn(runtime, **params, origin=origin_from_context(ctx))
            return res.fn(runtime, **params)
        except GeneralAgentError as exc:
            raise ResourceError(str(exc)) from exc

    kw = inspect.Parameter.KEYWORD_ONLY
    read.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(n, kw, annotation=str) for n in names] + [inspect.Parameter("ctx", kw, annotation=Context)],
        return_annotation=str,
    )
    read.__annotations__ = {n: str for n in names} | {"ctx": Context, "return": str}
    return read
