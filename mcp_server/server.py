"""Build the MCPServer: every registered tool becomes an entry that calls the dispatcher."""

from __future__ import annotations

import hashlib
import inspect
import logging
import os
import re
import secrets
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from importlib.metadata import PackageNotFoundError, version
from typing import Annotated, Any

import anyio.to_thread
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.server.mcpserver.resolve import Elicit, ElicitationResult, Resolve
from mcp.server.request_state import RequestStateSecurity
from mcp_types import CallToolResult, ImageContent, TextContent, ToolAnnotations
from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from foundation.calls import CallOrigin
from foundation.errors import GeneralAgentError, SettingsError
from foundation.pictures import pictures_of
from foundation.schemas import portable_schema
from foundation.settings import Settings
from foundation.toolspec import ToolSpec, return_model, tool_parameters
from mcp_server import client_log, registry
from mcp_server.approval.elicit import McpClientChannel, supports_form_elicitation
from mcp_server.approval.gate import ApprovalForm, PolicyGate, answer_from_outcome
from mcp_server.approval.http_page import add_approval_routes
from mcp_server.dispatch import Dispatcher, arguments_fit
from mcp_server.external import ExternalServers
from mcp_server.http_state import SharedKeyCodec, SharedToolLists
from mcp_server.prompts import install_prompts
from mcp_server.sdk_adapter import lowlevel, register_tool
from mcp_server.secret_paths import PolicySecretPaths
from mcp_server.tool_surface import CheckedTool, SessionToolServer, connection_of
from tools.runtime import Runtime

log = logging.getLogger("generalagent.server")

INSTRUCTIONS = (
    "generalagent-mcp: an agent runtime as tools. Search inside documents (index_path, then "
    "search_documents; search_file for one file), remember facts (remember/recall), keep todo lists "
    "(todo_write/todo_read), read and edit workspace files, and delegate sub-tasks (delegate_task). "
    "More tools (context budgeting and compaction, shell, index maintenance, memory admin) are listed by "
    "list_available_tools and turned on with enable_tools. Risky calls may need the user's approval; "
    "follow the instructions in such results."
)


def server_version() -> str:
    try:
        return version("generalagent-mcp")
    except PackageNotFoundError:
        return "0.0.0"


def origin_from_context(ctx: Context) -> CallOrigin:
    """Identify the calling client and session from the SDK context (best effort)."""
    client_id, session_id, grant_key = "default", None, None
    try:
        request_context = ctx.request_context
        session_id = getattr(connection_of(request_context), "session_id", None)  # None on stdio: its own id
        grant_key = sessionless_grant_key(getattr(request_context, "request", None), session_id)
        session_id = session_id or getattr(ctx.mcp_server, "stdio_session", None)
        params = request_context.session.client_params
        if params is not None and params.client_info is not None:
            client_id = params.client_info.name or client_id
    except Exception:  # outside a request or an era without client info
        pass
    return CallOrigin(kind="client", client_id=client_id, session_id=session_id, grant_key=grant_key,
                      channel=McpClientChannel(ctx), mcp_context=ctx)


def sessionless_grant_key(request: Any, session_id: str | None) -> str | None:
    """On HTTP without a server-issued session (the 2026-07-28 era), a session grant is bound to what the
    client cannot choose: its bearer token (the hash), else to this call alone (no grant carries over). The
    client's self-declared name is not enough: another client may declare the same one. None: stdio, or an
    HTTP session the server issued."""
    headers = getattr(request, "headers", None)
    if session_id is not None or headers is None:
        return None
    auth = headers.get("authorization")
    if auth:
        return "bearer:" + hashlib.sha256(auth.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return "call:" + secrets.token_hex(12)


def make_entry(spec: ToolSpec, dispatcher: Dispatcher,
               sessions: dict[str, dict[str, Any]] | None = None) -> Callable[..., Any]:
    """An async function with the tool's public signature (plus ctx) that calls the dispatcher.

    Two hidden, resolver-filled parameters (never in the input schema) ask the human through the
    SDK's Resolve/Elicit, which works in both protocol eras (a standalone elicitation request on
    2025-11-25, an InputRequiredResult round trip on 2026-07-28): `ga_approval` when the policy
    says ask, and `ga_human` for tools that declare a `human_question` (ask_human).
    """
    params = tool_parameters(spec.fn)
    result_type = return_model(spec.fn)
    names = [p.name for p in params]
    question = getattr(spec.fn, "human_question", None)

    async def entry(
        ctx: Context, ga_approval: Any = None, ga_human: Any = None, **kwargs: Any
    ) -> CallToolResult:
        origin = origin_from_context(ctx)
        answer = answer_from_outcome(ga_approval, spec.name, kwargs) if ga_approval is not None else None
        if answer is not None:
            origin.approval_answer = answer
        if ga_human is not None:
            origin.human_answer = human_answer(ga_human)
        try:
            with client_log.forwarding(ctx, sessions if sessions is not None else {}):
                result = await dispatcher.run(spec.name, kwargs, origin, sink=ctx.report_progress)
        except GeneralAgentError as exc:
            raise ToolError(str(exc)) from exc
        data, text = dispatcher.bounded_payload(result)
        pictures = [ImageContent(type="image", data=p.base64(), mime_type=p.mime_type) for p in pictures_of(result)]
        return CallToolResult(content=[TextContent(type="text", text=text), *pictures], structured_content=data)

    approval_type = Annotated[ElicitationResult[ApprovalForm], Resolve(_approval_resolver(spec, dispatcher, names))]
    hidden = [inspect.Parameter("ga_approval", inspect.Parameter.KEYWORD_ONLY, annotation=approval_type)]
    annotations: dict[str, Any] = {"ga_approval": approval_type}
    if callable(question):
        human_type = Annotated[ElicitationResult[Any], Resolve(_human_resolver(question, names))]
        hidden.append(inspect.Parameter("ga_human", inspect.Parameter.KEYWORD_ONLY, annotation=human_type))
        annotations["ga_human"] = human_type
    ctx_param = inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context)
    entry.__signature__ = inspect.Signature([*params, *hidden, ctx_param], return_annotation=result_type)  # type: ignore[attr-defined]
    entry.__annotations__ = {p.name: p.annotation for p in params} | annotations | {"ctx": Context, "return": result_type}
    entry.__name__ = spec.name
    entry.__doc__ = spec.description
    return entry


def _with_signature(fn: Callable[..., Any], names: list[str]) -> Callable[..., Any]:
    """Give a resolver the signature (ctx, <tool args by name>) the SDK's resolver planner expects."""
    ctx_param = inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context)
    args = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY) for n in names]
    fn.__signature__ = inspect.Signature([ctx_param, *args])  # type: ignore[attr-defined]
    fn.__annotations__ = {"ctx": Context}
    return fn


def _approval_resolver(spec: ToolSpec, dispatcher: Dispatcher, names: list[str]) -> Callable[..., Any]:
    async def approval_question(ctx: Context, **args: Any) -> Elicit[Any] | None:
        gate = dispatcher.gate
        if not isinstance(gate, PolicyGate) or not supports_form_elicitation(ctx):
            return None
        if not arguments_fit(args, spec):
            return None  # refused with a clear error by the dispatcher, before any analysis or question
        origin = origin_from_context(ctx)
        if gate.allows_at_once(spec, args, origin):
            return None  # decided here (pure policy, small input); the call's check uses this verdict
        question = await anyio.to_thread.run_sync(_question_unless_failing, dispatcher, spec, args, origin)
        return Elicit(question[0], question[1]) if question else None

    approval_question.__qualname__ = f"approval_question.{spec.name}"
    return _with_signature(approval_question, names)


def _question_unless_failing(dispatcher: Dispatcher, spec: ToolSpec, args: dict[str, Any],
                             origin: CallOrigin) -> tuple[str, type[BaseModel]] | None:
    """The approval question for this call, or None when its precheck fails (the dispatcher then says why,
    and nobody is asked to approve a call that cannot run)."""
    if spec.precheck is not None:
        try:
            spec.precheck(dispatcher.runtime, origin.session_id, args)
        except GeneralAgentError:
            return None
    assert isinstance(dispatcher.gate, PolicyGate)
    return dispatcher.gate.question(spec, args, origin)


def _human_resolver(question: Callable[..., Any], names: list[str]) -> Callable[..., Any]:
    async def human_question(ctx: Context, **args: Any) -> Elicit[Any] | None:
        if not supports_form_elicitation(ctx):
            return None
        message, form = question(**args)
        return Elicit(message, form)

    return _with_signature(human_question, names)


def human_answer(outcome: Any) -> dict[str, Any] | None:
    """A plain dict for tools: {"action": accept|decline|cancel, "content": {...}}; None if not asked."""
    action = getattr(outcome, "action", None)
    data = getattr(outcome, "data", None)
    if action == "accept" and data is None:
        return None  # the resolver did not ask (no elicitation support)
    content = data.model_dump(mode="json") if isinstance(data, BaseModel) else None
    return {"action": action, "content": content}


def describe(spec: ToolSpec, settings: Settings) -> str:
    """The tool's description; says so first when it needs the LLM endpoint and none is configured."""
    if spec.without_llm and not settings.llm_configured:
        return f"{spec.without_llm}\n{spec.description}"
    return spec.description


def annotations_for(spec: ToolSpec) -> ToolAnnotations:
    """The tool's hints; destructiveHint only where it means something (a tool that is not read-only)."""
    read_only = spec.read_only and not spec.changes_session
    return ToolAnnotations(  # the title is on the tool itself; not repeated here
        read_only_hint=read_only,
        destructive_hint=None if read_only else spec.destructive,
        idempotent_hint=spec.idempotent,
        open_world_hint=spec.open_world,
    )


PROFILE_TIERS = {"minimal": {"core"}, "default": {"core", "default"}, "full": {"core", "default", "full"}}


def listed_specs(settings: Settings, specs: list[ToolSpec]) -> list[ToolSpec]:
    """The tools listed from start-up: core always; the rest by profile, plus tools_enabled, minus tools_disabled.

    Raises SettingsError for an unknown name in tools_enabled/tools_disabled.
    """
    known = {spec.name for spec in specs}
    unknown = sorted((set(settings.tools_enabled) | set(settings.tools_disabled)) - known)
    if unknown:
        raise SettingsError(f"Unknown tool name(s) in GENERALAGENT_TOOLS_ENABLED/_DISABLED: {', '.join(unknown)}. "
                            f"Known tools: {', '.join(sorted(known))}.")
    tiers = PROFILE_TIERS[settings.tool_profile]
    enabled, disabled = set(settings.tools_enabled), set(settings.tools_disabled)
    if settings.bash_enabled:  # the user turned the shell on: it is listed in every profile
        enabled.add("run_bash_command")
    return [spec for spec in specs
            if spec.tier == "core" or (spec.name not in disabled and (spec.tier in tiers or spec.name in enabled))]


class ToolCatalog:
    """Tool tiers at run time (`rt.catalog`): every tool is registered once; what a client sees is
    its session's list (the profile's tools plus the ones it enabled), kept by SessionToolServer."""

    def __init__(self, server: SessionToolServer, dispatcher: Dispatcher, listed: list[ToolSpec]) -> None:
        self.server = server
        self.dispatcher = dispatcher
        server.setup_tools({spec.name for spec in listed}, dispatcher.specs)
        server.register = lambda name: self.add(dispatcher.spec(name))
        self._lock = threading.Lock()

    def all_specs(self) -> list[ToolSpec]:
        return list(self.dispatcher.specs.values())

    def is_listed(self, name: str, origin: CallOrigin | None = None) -> bool:
        return name in self.server.listed_by_profile or name in self._enabled(origin)

    def _enabled(self, origin: CallOrigin | None) -> set[str]:
        return self.server.enabled_for(_request_context(origin))

    def add(self, spec: ToolSpec) -> None:
        """Register the tool with portable schemas (foundation.schemas) and checked arguments."""
        tool = CheckedTool.of(spec, make_entry(spec, self.dispatcher, self.server.sessionless_state),
                              title=spec.title,
                              description=describe(spec, self.dispatcher.runtime.settings),
                              annotations=annotations_for(spec))
        tool.parameters = portable_schema(tool.parameters)
        if tool.fn_metadata.output_schema is not None:
            tool.fn_metadata.output_schema = portable_schema(tool.fn_metadata.output_schema, output=True)
            tool.fn_metadata.output_model = None  # results are dumps of that model: the SDK need not re-validate
        register_tool(self.server, tool)
        self.server.registered.add(spec.name)

    def enable(self, names: list[str], origin: CallOrigin | None = None) -> list[str]:
        """List the named tools in the caller's session from now on; returns the newly enabled names."""
        added: list[str] = []
        with self._lock:
            enabled = self._enabled(origin)
            for name in names:
                self.dispatcher.spec(name)  # NotFound names the available tools
                if name not in self.server.listed_by_profile and name not in enabled and name not in added:
                    if name not in self.server.registered:
                        self.add(self.dispatcher.spec(name))
                    added.append(name)
            if added:
                self.server.enable_for(_request_context(origin), added)
        return added

    async def notify_changed(self, origin: CallOrigin | None) -> bool:
        """Send tools/list_changed to the calling client (False when it cannot be told)."""
        channel = origin.channel if origin is not None else None
        return await channel.notify_tools_changed() if channel is not None else False


def _request_context(origin: CallOrigin | None) -> Any:
    context = getattr(origin, "mcp_context", None) if origin is not None else None
    return getattr(context, "request_context", None) if context is not None else None


def _warm_up(runtime: Runtime, gate: PolicyGate) -> None:
    def approval_rules(_: Runtime) -> None:
        gate.warm_up()

    for warm in [approval_rules, *registry.WARMUPS]:  # the rules first: every call needs them
        try:
            warm(runtime)
        except Exception:
            if not threading.main_thread().is_alive():  # the server stopped meanwhile: its exit broke the warm-up
                return  # (an import then cannot register its atexit hook): nothing to report
            log.exception("warm-up %s failed", getattr(warm, "__name__", warm))


def shell_sandboxed(settings: Settings) -> bool:
    """True when shell commands run in an OS sandbox here; without one every shell command asks.
    Probed only when the shell tool is enabled (otherwise it never runs)."""
    if not settings.bash_enabled:
        return True
    from tools.sandbox import sandbox_status

    return sandbox_status().available


def build_server(settings: Settings) -> tuple[MCPServer[Any], Dispatcher]:
    runtime = Runtime(settings)
    gate = PolicyGate(settings, specs={spec.name: spec for spec in registry.TOOLS},  # rules loaded once here
                      sandboxed=shell_sandboxed(settings), database=lambda: runtime.database)
    dispatcher = Dispatcher(runtime, registry.TOOLS, gate=gate)
    runtime.tool_runner = dispatcher  # sub-agents dispatch their tool calls through it
    runtime.secret_paths = PolicySecretPaths(lambda: gate.rules)  # what read_file asks for is never indexed
    sources = runtime.tool_sources = ExternalServers(settings)  # other MCP servers, started when a sub-agent needs one

    @asynccontextmanager
    async def lifespan(_: MCPServer[Any]) -> AsyncIterator[None]:
        threading.Thread(target=_warm_up, args=(runtime, gate), name="warm-up", daemon=True).start()
        try:
            yield None
        finally:
            await anyio.to_thread.run_sync(sources.close)

    shared = settings.database_url is not None  # other server processes may answer this client's next request
    server = SessionToolServer(
        "generalagent-mcp",
        title="generalagent-mcp",
        version=server_version(),
        instructions=INSTRUCTIONS,
        log_level=settings.log_level,
        lifespan=lifespan,
        # a form's answer (2026-07-28 requestState) is unsealed by whichever process gets it
        request_state_security=RequestStateSecurity(codec=SharedKeyCodec(lambda: runtime.database)) if shared else None,
    )
    _advertise_list_changed(server)
    if shared:  # every process on the database lists the same tools for a session-less client
        server.tool_lists = SharedToolLists(lambda: runtime.database)
    client_log.install(server, server.sessionless_state)
    listed = listed_specs(settings, registry.TOOLS)
    catalog = ToolCatalog(server, dispatcher, listed)
    runtime.catalog = catalog
    for spec in listed:  # the rest is registered when a session first enables it
        catalog.add(spec)
    _add_resources(server, runtime)
    server.prompt_sync = install_prompts(server, runtime, server.subscriptions)  # skills and agent cards: prompts, resources, list_changed
    add_approval_routes(server, gate)

    @server.custom_route("/health", methods=["GET"])
    async def health(_: Request) -> Response:
        return JSONResponse({"status": "ok", "name": "generalagent-mcp", "version": server_version(),
                             "pid": os.getpid()})  # which process answered (one of several workers)

    server.dispatcher = dispatcher  # type: ignore[attr-defined]
    server.runtime = runtime  # type: ignore[attr-defined]
    return server, dispatcher


def _advertise_list_changed(server: MCPServer[Any]) -> None:
    """Declare listChanged for tools, prompts and resources on 2025-era sessions (MCPServer leaves them
    false; enable_tools sends the tools one, skill and agent-card changes the other two)."""
    from mcp.server import NotificationOptions

    low = lowlevel(server)
    original = low.create_initialization_options

    def create_initialization_options(notification_options: Any = None, *args: Any, **kwargs: Any) -> Any:
        options = notification_options or NotificationOptions(tools_changed=True, prompts_changed=True,
                                                              resources_changed=True)
        return original(options, *args, **kwargs)

    low.create_initialization_options = create_initialization_options  # type: ignore[method-assign]


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
