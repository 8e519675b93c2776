"""Delegation tools: delegate_task (an isolated sub-agent), delegate_status and list_agents."""

from __future__ import annotations

import dataclasses
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import anyio
from pydantic import BaseModel, Field

from context.llm import LLMConfig, choose_slot, slot_sees_images
from context.pictures import content_text, picture_message
from context.subagent import StepDelta, Thread, ThreadStore
from foundation.bounding import bound_json, dumps, next_offset
from foundation.calls import CallOrigin, ToolRunner
from foundation.errors import Conflict, GeneralAgentError, InvalidInput, LLMError, NotConfigured, NotFound
from foundation.pictures import Picture
from foundation.settings import Settings
from foundation.toolspec import ToolSpec
from tools.agents import (
    AgentCard,
    agents_file,
    check_handoff,
    check_tool_names,
    enabled_agents,
    get_agent,
    transfer_targets,
)
from tools.mcp_servers import SEPARATOR, load_servers
from tools.runtime import CallContext, Runtime, Service
from tools.subagent_loop import (
    DEFAULT_TOOLS,
    Handoff,
    HandoffFn,
    SubagentLoop,
    close_open_calls,
    system_prompt,
    transfer_schema,
)

GENERAL_AGENT = "subagent"  # the label of a card-less sub-agent on the agent stack
MAX_TASK_PICTURES = 4


class DelegateResult(BaseModel):
    ok: bool = Field(description="True when the sub-agent finished with a final answer.")
    result: str = Field(description="The sub-agent's final answer (or its summary so far when incomplete).")
    context_id: str = Field(description="The thread id: pass it to delegate_status or as continue_id.")
    agent: str | None = Field(description="The agent card that finished (null: the general sub-agent).")
    handoffs: list[str] = Field(default_factory=list, description="Agents the task was handed over to, in order.")
    loops: int = Field(description="Model turns used in this run.")
    tool_calls: int = Field(description="Tool calls made in this run.")
    tokens: int = Field(description="LLM tokens used in this run (as reported by the endpoint).")
    incomplete: bool = Field(description="True when it stopped at max_loops or the time limit.")
    stop_reason: Literal["final", "max_loops", "timeout"] = Field(description="Why the run ended.")
    notes: list[str] = Field(description="Calls that need a human's approval or were denied, and other notices.")


THREAD_STORE: Service[ThreadStore] = Service(lambda rt: ThreadStore(rt.database))
_ACTIVE_THREADS: Service[set[str]] = Service(lambda rt: set())


def thread_store(rt: Runtime) -> ThreadStore:
    return THREAD_STORE.of(rt)


def _dispatcher(rt: Runtime) -> ToolRunner:
    return rt.runner("delegate_task")


def default_tool_names(known: set[str], settings: Settings | None = None) -> list[str]:
    """The read-only tools a sub-agent gets unless told otherwise (those this server has and has turned on)."""
    off = tools_off(settings) if settings is not None else set()
    return [name for name in DEFAULT_TOOLS if name in known and name not in off]


def tools_off(settings: Settings) -> set[str]:
    """Default tools the settings leave off (they would only answer how to turn them on)."""
    off = set() if settings.web_fetch_enabled else {"fetch_url"}
    return off if settings.web_search_url else off | {"web_search"}


def offered_specs(
    dispatcher: ToolRunner, base: list[str] | None, extra: list[str], source: str = "the thread",
    settings: Settings | None = None,
) -> list[ToolSpec]:
    """The tools a sub-agent gets: `base` (default: the read-only set that exists and is on) plus `extra`."""
    known = set(dispatcher.specs)
    names = check_tool_names(base, known, source) if base is not None else default_tool_names(known, settings)
    names = check_tool_names([*names, *extra], known)
    return [dispatcher.specs[name] for name in names]


@dataclass(frozen=True)
class ServerTools:
    """The tools of the other MCP servers a sub-agent was given, and why some of them are missing."""

    specs: list[ToolSpec]
    unavailable: list[str]

    def note(self) -> str:
        return "\n".join(f"Unavailable: {why}" for why in self.unavailable)


async def server_specs(rt: Runtime, servers: list[str], saved: list[str] | None = None) -> ServerTools:
    """The tools of other MCP servers (`server__tool`), each server started if it is not running. A server
    that does not start leaves its tools out (the reason goes to the sub-agent and the result's notes); an
    unknown server name is the caller's mistake (NotFound), but for the `saved` ones (a thread's, from
    before its configuration changed): they are only left out."""
    saved = saved or []
    servers = [*saved, *servers]
    wanted = list(dict.fromkeys(name.strip() for name in servers if name.strip()))
    if not wanted:
        return ServerTools([], [])
    if rt.tool_sources is None:
        raise NotConfigured("Other MCP servers are available only in the running server.")
    sources = rt.tool_sources
    found: dict[str, list[ToolSpec] | GeneralAgentError] = {}

    async def start(server: str) -> None:
        try:
            found[server] = await sources.tools(server)
        except GeneralAgentError as exc:
            found[server] = exc

    async with anyio.create_task_group() as group:  # at the same time: a slow one costs its timeout once
        for server in wanted:
            group.start_soon(start, server)
    specs: list[ToolSpec] = []
    unavailable: list[str] = []
    for server in wanted:
        result = found[server]
        if isinstance(result, NotFound) and server not in saved:
            raise result
        if isinstance(result, GeneralAgentError):
            unavailable.append(str(result))
        else:
            specs += result
    return ServerTools(specs, unavailable)


def thread_servers(tool_names: list[str]) -> list[str]:
    """The other MCP servers a saved thread's tool names come from (`docs__search` -> docs)."""
    return list(dict.fromkeys(name.split(SEPARATOR, 1)[0] for name in tool_names if SEPARATOR in name))


def _with_note(context: str | None, note: str) -> str | None:
    return "\n\n".join(part for part in (context, note) if part and part.strip()) or None


def _task_message(task: str, context: str | None, new_tools: list[str] | None = None,
                  pictures: list[Picture] | None = None) -> dict[str, Any]:
    text = f"Task:\n{task.strip()}"
    if context and context.strip():
        text += f"\n\nContext from the parent agent:\n{context.strip()}"
    if new_tools:
        text += f"\n\n(You now also have these tools: {', '.join(new_tools)}.)"
    return picture_message(text, pictures) if pictures else {"role": "user", "content": text}


async def delegate_task(
    task: Annotated[str, Field(min_length=1, max_length=20_000, description="The sub-task, self-contained "
                               "(the sub-agent does not see your conversation). With continue_id: the follow-up.")],
    max_loops: Annotated[int, Field(ge=1, le=50, description="Most model turns before it must stop and summarise.")] = 10,
    agent: Annotated[str | None, Field(description="An agent card id from list_agents; omit for the general sub-agent.")] = None,
    tools: Annotated[list[str] | None, Field(description="Extra tools beyond the read-only defaults.")] = None,
    context: Annotated[str | None, Field(max_length=50_000, description="Background the sub-agent needs.")] = None,
    continue_id: Annotated[str | None, Field(description="Continue this earlier thread (a context_id) with `task`.")] = None,
    mcp_servers: Annotated[list[str] | None, Field(max_length=8, description="Other MCP servers (list_agents) whose "
                                                  "tools it gets as server__tool.")] = None,
    images: Annotated[list[str] | None, Field(max_length=MAX_TASK_PICTURES, description="Workspace pictures for "
                                             "it to see (runs on the vision model).")] = None,
    *,
    rt: Runtime,
    call: CallContext,
) -> DelegateResult:
    """Run an isolated sub-agent (the configured LLM with this server's read-only tools) on a sub-task;
    returns its final answer. delegate_status reads its transcript, continue_id continues it. Sub-agents
    cannot delegate further."""
    if not task.strip():
        raise InvalidInput("task is empty. Describe the sub-task in a few sentences.")
    parent = call.origin
    LLMConfig.from_settings(rt.settings, feature="delegate_task")  # LLMNotConfigured before any work
    store, dispatcher = thread_store(rt), _dispatcher(rt)
    active = _ACTIVE_THREADS.of(rt)
    thread = _load_for_continue(store, active, continue_id, agent) if continue_id else None
    agent_id = thread.agent if thread else agent
    card = get_agent(rt.settings, agent_id) if agent_id else None
    label = card.id if card else GENERAL_AGENT
    _check_caller(parent, label, rt.settings.handoff_max_depth)
    pictures = task_pictures(rt, images or [], parent.session_id)
    config = agent_config(rt, card, carries_images=bool(pictures))
    eyes = eyes_for(rt, card)
    if pictures and eyes is None:
        raise NotConfigured("This task carries pictures, but no model slot can see them: set "
                            "GENERALAGENT_LLM_VISION_MODEL (and _BASE_URL if it is another endpoint), or omit images.")
    if thread is not None:
        external = await server_specs(rt, mcp_servers or [], saved=thread_servers(thread.tools))
        context = _with_note(context, external.note())
        context_id, specs, messages = _resume(store, dispatcher, thread, task, context, tools or [], external.specs,
                                              pictures)
    else:
        external = await server_specs(rt, [*(card.mcp_servers if card else []), *(mcp_servers or [])])
        context = _with_note(context, external.note())
        context_id, specs, messages = _start(rt, card, task, context, tools or [], max_loops, parent, external.specs,
                                             pictures)
    origin = CallOrigin(kind="subagent", client_id=parent.client_id, session_id=parent.session_id,
                        subagent_id=context_id, agent_stack=(*parent.agent_stack, label),
                        channel=parent.channel, mcp_context=parent.mcp_context)
    loop = SubagentLoop(context_id, dispatcher, store, config, origin, specs, messages, max_loops,
                        _reporter(call, context_id), transfers=transfer_tools(rt, card),
                        handoff=_handoff(rt, context_id, max_loops), eyes=eyes)
    loop.outcome.notes.extend(external.unavailable)
    active.add(context_id)
    try:
        outcome = await loop.run(rt.settings.delegate_timeout_seconds)
    except LLMError as exc:
        raise LLMError(f"{exc} Thread {context_id} is saved; retry later with continue_id={context_id!r}.") from exc
    finally:
        active.discard(context_id)
    final = outcome.handoffs[-1] if outcome.handoffs else (card.id if card else None)
    return DelegateResult(
        ok=not outcome.incomplete, result=outcome.result, context_id=context_id, agent=final,
        handoffs=outcome.handoffs, loops=outcome.loops, tool_calls=outcome.tool_calls, tokens=outcome.tokens,
        incomplete=outcome.incomplete, stop_reason=outcome.stop_reason, notes=outcome.notes,
    )


def agent_config(rt: Runtime, card: AgentCard | None, carries_images: bool = False) -> LLMConfig:
    """The model slot chosen by capability (context/llm.py choose_slot: the card's slot, else vision when the
    task carries pictures, else base), with the card's model when it names one."""
    slot = choose_slot(rt.settings, card.slot if card else None, carries_images)
    config = LLMConfig.from_settings(rt.settings, feature="delegate_task", slot=slot)
    return dataclasses.replace(config, model=card.model) if card and card.model else config


def eyes_for(rt: Runtime, card: AgentCard | None) -> LLMConfig | None:
    """The model that sees the pictures of this sub-agent: its own when its slot sees, else (when the card
    prefers no slot) the vision slot's when that one sees; None: pictures are not shown."""
    preferred = card.slot if card else "base"
    if slot_sees_images(rt.settings, preferred):
        return agent_config(rt, card)
    if preferred == "base" and slot_sees_images(rt.settings, "vision"):
        return LLMConfig.from_settings(rt.settings, feature="delegate_task", slot="vision")
    return None


def task_pictures(rt: Runtime, paths: list[str], session: str | None) -> list[Picture]:
    """The task's pictures, read from the workspace like read_file reads them (within the same caps)."""
    from tools.images import read_picture

    return [read_picture(rt, path, session) for path in paths]


def transfer_tools(rt: Runtime, card: AgentCard | None) -> list[dict[str, Any]]:
    """`transfer_to_<agent>` functions for the cards this agent may hand off to."""
    return [transfer_schema(c.id, c.description) for c in transfer_targets(enabled_agents(rt.settings), card)]


def _handoff(rt: Runtime, context_id: str, max_loops: int) -> HandoffFn:
    """What the loop calls on transfer_to_<agent>: check the chain, then build the new agent's setup."""

    async def handoff(target: str, stack: tuple[str, ...], note: str) -> Handoff:
        check_handoff(stack, target, rt.settings.handoff_max_depth)
        card = get_agent(rt.settings, target)
        specs = offered_specs(_dispatcher(rt), card.tools, [], f"agent card {card.id!r}", rt.settings)
        external = await server_specs(rt, card.mcp_servers)
        specs += external.specs
        transfers = transfer_tools(rt, card)
        took_over = f"You took this task over from agent {stack[-1]!r} (chain: {' > '.join((*stack, target))})."
        if note.strip():
            took_over += f" Its note: {note.strip()}"
        if external.unavailable:
            took_over += "\n" + external.note()
        prompt = system_prompt(context_id, [s.name for s in specs], max_loops, card.system_prompt,
                               [t["function"]["name"] for t in transfers], took_over)
        return Handoff(card.id, specs, agent_config(rt, card), prompt, transfers)

    return handoff


def _check_caller(parent: CallOrigin, label: str, max_depth: int) -> None:
    """Handoff protection (no agent twice on the stack, depth <= max_depth), then the no-nesting rule."""
    check_handoff(parent.agent_stack, label, max_depth)
    if parent.kind == "subagent":
        raise InvalidInput("Sub-agents cannot call delegate_task (no nesting). Do the work yourself.")


def _reporter(call: CallContext, context_id: str) -> Callable[[str], Awaitable[None]]:
    """Progress notifications `[subagent-xxxx] step 3: ...` with a strictly increasing counter."""
    events = 0

    async def report(message: str) -> None:
        nonlocal events
        events += 1
        await call.areport(events, None, f"[{context_id}] {message}")

    return report


def _start(
    rt: Runtime, card: AgentCard | None, task: str, context: str | None, extra: list[str], max_loops: int,
    parent: CallOrigin, external: list[ToolSpec], pictures: list[Picture],
) -> tuple[str, list[ToolSpec], list[dict[str, Any]]]:
    store, dispatcher = thread_store(rt), _dispatcher(rt)
    specs = offered_specs(dispatcher, card.tools if card else None, extra, f"agent card {card.id!r}" if card else "",
                          rt.settings)
    specs += external
    names = [spec.name for spec in specs]
    context_id = f"subagent-{secrets.token_hex(4)}"
    transfers = [t["function"]["name"] for t in transfer_tools(rt, card)]
    prompt = system_prompt(context_id, names, max_loops, card.system_prompt if card else "", transfers)
    messages = [{"role": "system", "content": prompt}, _task_message(task, context, pictures=pictures)]
    store.create(context_id, card.id if card else None, names, parent.client_id)
    store.save_step(context_id, StepDelta(list(messages)))
    return context_id, specs, messages


def _load_for_continue(store: ThreadStore, active: set[str], continue_id: str, agent: str | None) -> Thread:
    thread = store.load(continue_id)
    if continue_id in active or thread.status == "running":  # here or in another live server process
        raise Conflict(f"Thread {continue_id} is still running. Wait for its result, then continue it.")
    if agent and agent != thread.agent:
        raise InvalidInput(f"Thread {continue_id} belongs to agent {thread.agent or 'none'}; omit agent to continue it.")
    return thread


def _resume(
    store: ThreadStore, dispatcher: ToolRunner, thread: Thread, task: str, context: str | None, extra: list[str],
    external: list[ToolSpec], pictures: list[Picture],
) -> tuple[str, list[ToolSpec], list[dict[str, Any]]]:
    own = [name for name in thread.tools if SEPARATOR not in name]
    specs = offered_specs(dispatcher, own, extra) + external
    names = [spec.name for spec in specs]
    added = [name for name in names if name not in thread.tools]
    if added:
        store.set_tools(thread.context_id, names)
    messages = thread.messages
    new = close_open_calls(messages, "Error: interrupted before it ran.") + [_task_message(task, context, added, pictures)]
    messages.extend(new)
    store.save_step(thread.context_id, StepDelta(new))
    return thread.context_id, specs, messages


class TranscriptEntry(BaseModel):
    seq: int = Field(description="Position in the transcript.")
    role: str = Field(description="system, user, assistant or tool.")
    content: str | None = Field(description="The text (long texts are shortened).")
    tool_calls: list[str] = Field(default_factory=list, description="Tool calls the assistant made.")


class ThreadStatus(BaseModel):
    context_id: str = Field(description="The thread id.")
    agent: str | None = Field(description="The agent card (null: the general sub-agent).")
    status: str = Field(description="running, done, incomplete, failed, cancelled or interrupted (server ended mid-run).")
    tools: list[str] = Field(description="The tools the sub-agent has.")
    loops: int = Field(description="Model turns over all runs.")
    tool_calls: int = Field(description="Tool calls over all runs.")
    tokens: int = Field(description="LLM tokens over all runs.")
    result: str | None = Field(description="The latest final answer.")
    total_messages: int = Field(description="Messages in the transcript.")
    messages: list[TranscriptEntry] = Field(description="One page of the transcript.")
    next_offset: int | None = Field(description="Pass as offset for the next page (null: no more).")


def _entry(seq: int, message: dict[str, Any], limit: int = 1500) -> TranscriptEntry:
    content = content_text(message.get("content"))  # a picture shows as [picture]
    if isinstance(content, str) and len(content) > limit:
        content = content[:limit] + f"…[{len(content) - limit} more chars]"
    calls = [f"{c['function']['name']}({c['function'].get('arguments', '')[:200]})" for c in message.get("tool_calls") or []]
    return TranscriptEntry(seq=seq, role=str(message.get("role")), content=content, tool_calls=calls)


def delegate_status(
    context_id: Annotated[str, Field(description="The context_id from a delegate_task result.")],
    offset: Annotated[int, Field(ge=0, description="First transcript message to return.")] = 0,
    limit: Annotated[int, Field(ge=1, le=50, description="Most transcript messages to return.")] = 20,
    *,
    rt: Runtime,
) -> ThreadStatus:
    """Status, counters, latest result and a page of the saved transcript of a sub-agent thread."""
    thread = thread_store(rt).load(context_id.strip())
    page = thread.messages[offset: offset + limit]
    end = offset + len(page)
    return ThreadStatus(
        context_id=thread.context_id, agent=thread.agent, status=thread.status, tools=thread.tools,
        loops=thread.loops, tool_calls=thread.tool_calls, tokens=thread.tokens, result=thread.result,
        total_messages=len(thread.messages), messages=[_entry(offset + i, m) for i, m in enumerate(page)],
        next_offset=next_offset(end, len(thread.messages)),
    )


class AgentInfo(BaseModel):
    id: str = Field(description="Pass as delegate_task(agent=...).")
    description: str = Field(description="What the agent is for.")
    tools: list[str] | None = Field(description="Its tools (null: the read-only defaults).")
    model: str | None = Field(description="Its model (null: the configured default).")
    slot: str = Field(description="Its model slot (base, reasoning, vision, code, chat).")
    mcp_servers: list[str] = Field(default_factory=list, description="Other MCP servers whose tools it gets.")


class AgentsResult(BaseModel):
    agents: list[AgentInfo] = Field(description="The configured agent cards.")
    agents_file: str = Field(description="Where agent cards are configured (TOML).")
    default_tools: list[str] = Field(description="Tools a sub-agent gets when neither the card nor tools= says.")
    mcp_servers: list[str] = Field(default_factory=list, description="Other MCP servers a sub-agent can be given "
                                   "(delegate_task mcp_servers=...).")


def list_agents(*, rt: Runtime) -> AgentsResult:
    """The specialised sub-agents (agent cards) available to delegate_task(agent=...)."""
    cards = enabled_agents(rt.settings)
    return AgentsResult(
        agents=[AgentInfo(id=c.id, description=c.description, tools=c.tools, model=c.model, slot=c.slot,
                          mcp_servers=c.mcp_servers) for c in cards.values()],
        agents_file=str(agents_file(rt.settings)),
        default_tools=default_tool_names(set(_dispatcher(rt).specs), rt.settings),
        mcp_servers=sorted(name for name, server in load_servers(rt.settings).items() if server.enabled),
    )


def thread_resource(rt: Runtime, context_id: str) -> str:
    """The thread as JSON for the `subagent://{context_id}` resource (first 50 messages; bounded)."""
    status = delegate_status(context_id, offset=0, limit=50, rt=rt)
    data, _ = bound_json(status.model_dump(mode="json"), rt.settings.max_result_tokens)
    return dumps(data)
