"""The sub-agent loop: an isolated conversation with the user's LLM, whose tool calls go through
the same dispatch point (and approval gate) as a client's calls.

Isolation: a fresh message history per thread; the parent gets only the final answer.
Every step is persisted (ThreadStore) before the next one starts.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

import anyio
import anyio.to_thread

from context.llm import ChatReply, LLMConfig, ToolCall, chat
from context.pictures import NOT_SEEN, carries_pictures, latest_pictures_only, picture_message
from context.subagent import StepDelta, ThreadStore
from foundation.bounding import bound_json
from foundation.calls import CallOrigin, ToolRunner
from foundation.errors import ApprovalRequired, GeneralAgentError, LLMError, PolicyDenied
from foundation.pictures import Picture, pictures_of
from foundation.schemas import portable_schema
from foundation.toolspec import ToolSpec, arguments_schema
from tools.agents import TRANSFER_PREFIX, transfer_target

log = logging.getLogger("generalagent.subagent")

DEFAULT_TOOLS = (
    "search_documents", "search_file", "index_status", "read_file",
    "list_workspace_files", "find_files", "recall", "todo_read", "now", "ask_human", "fetch_url", "web_search",
)
"""A sub-agent's tools unless its card or the call says otherwise: read-only ones, the web ones when the server
turned them on, and ask_human (its question reaches the user through the parent call's client, the same path
as approvals; else it is told to put the question in its final answer)."""
SHORT_ANSWER_CHARS = 200
MAX_CALLS_PER_STEP = 16  # more tool calls in one model turn are answered with an error, not run
SUBAGENT_RESULT_TOKENS = 4000  # per tool result fed to the sub-agent's model: keeps its context bounded
DETAIL_REQUEST = (
    "Your final answer is very short. Write a more detailed, self-contained summary for the parent agent: "
    "what you did, what you found (with file names, figures and short quotes), and anything left undone. "
    "Do not call tools."
)
WRAP_UP_REQUEST = (
    "You have used all {max_loops} steps. Do not call tools. Summarise what you found so far and what is "
    "still left to do, so the parent agent can continue."
)
StopReason = Literal["final", "max_loops", "timeout"]
Reporter = Callable[[str], Awaitable[None]]


def function_schema(spec: ToolSpec) -> dict[str, Any]:
    """The OpenAI function-calling schema of one of our tools, built from its signature: the same
    portable (strict) schema MCP clients list."""
    # (another MCP server's tool keeps its own schema; portable_schema copies: the cached one stays as it is)
    parameters = spec.input_schema if spec.input_schema is not None else portable_schema(arguments_schema(spec))
    return {
        "type": "function",
        "function": {"name": spec.name, "description": spec.description[:1024], "parameters": parameters},
    }


def transfer_schema(agent_id: str, description: str) -> dict[str, Any]:
    """The `transfer_to_<agent>` function a sub-agent calls to hand its thread over to another agent card."""
    note = {"type": "string", "maxLength": 4000, "description": "What the next agent should know or do next."}
    return {"type": "function", "function": {
        "name": TRANSFER_PREFIX + agent_id,
        "description": f"Hand this task over to agent {agent_id!r}: {description[:300]} It continues this "
                       "conversation with its own tools; you stop working on it.",
        "parameters": {"type": "object", "properties": {"note": note}},
    }}


@dataclass(frozen=True)
class Handoff:
    """Who takes a thread over: the new card's id, tools, model config, system prompt and transfers."""

    agent: str
    offered: list[ToolSpec]
    config: LLMConfig
    system: str
    transfers: list[dict[str, Any]]


HandoffFn = Callable[[str, tuple[str, ...], str], Awaitable[Handoff]]
"""(target agent, the current chain, the note) -> Handoff; raises GeneralAgentError when refused."""


def system_prompt(context_id: str, tool_names: list[str], max_loops: int, agent_prompt: str = "",
                  transfers: list[str] | None = None, took_over: str = "") -> str:
    lines = [agent_prompt.strip()] if agent_prompt.strip() else []
    if took_over:
        lines.append(took_over)
    lines += [
        f"You are a sub-agent of generalagent-mcp (thread {context_id}). A parent agent gave you one task. "
        "Work on it alone with the tools listed to you; the parent sees only your final answer, not your tool calls.",
        "Rules:",
        "- You cannot delegate: delegate_task is not available to sub-agents (no nesting). Do the work yourself.",
        "- Tool errors come back as tool results starting with 'Error:'; fix the arguments or try another way.",
        "- Some calls need a human's approval. If a result says approval is required or the call is denied, "
        "do not retry it; mention it in your final answer.",
        f"- You have at most {max_loops} steps. End with a final answer (no tool call) that is detailed and "
        "self-contained: what you found, with file names, figures and short quotes, and what is left undone.",
        f"Your tools: {', '.join(tool_names) if tool_names else 'none'}.",
    ]
    if transfers:
        lines.insert(-1, "- To hand the whole task over to a better-suited agent, call its transfer tool "
                         f"({', '.join(transfers)}); it continues this conversation and you stop.")
    return "\n".join(lines)


def describe_call(name: str, args: dict[str, Any]) -> str:
    """`search_documents "quarterly revenue"`: the tool and its first text argument, shortened."""
    first = next((v for v in args.values() if isinstance(v, str) and v.strip()), None)
    if first is None:
        return name
    text = " ".join(first.split())
    return f'{name} "{text[:60]}{"…" if len(text) > 60 else ""}"'


def close_open_calls(messages: list[dict[str, Any]], content: str) -> list[dict[str, Any]]:
    """Tool results for calls that never got one (interrupted run), so the transcript stays valid."""
    answered = {m.get("tool_call_id") for m in messages if m.get("role") == "tool"}
    return [
        {"role": "tool", "tool_call_id": call["id"], "content": content}
        for m in messages if m.get("role") == "assistant"
        for call in m.get("tool_calls") or []
        if call.get("id") not in answered
    ]


@dataclass
class LoopOutcome:
    result: str
    stop_reason: StopReason
    loops: int = 0
    tool_calls: int = 0
    tokens: int = 0
    notes: list[str] = field(default_factory=list)
    handoffs: list[str] = field(default_factory=list)

    @property
    def incomplete(self) -> bool:
        return self.stop_reason != "final"


@dataclass
class SubagentLoop:
    """One run of a thread: `messages` is the full history so far (system prompt first)."""

    context_id: str
    dispatcher: ToolRunner
    store: ThreadStore
    config: LLMConfig
    origin: CallOrigin
    offered: list[ToolSpec]
    messages: list[dict[str, Any]]
    max_loops: int
    report: Reporter
    transfers: list[dict[str, Any]] = field(default_factory=list)
    handoff: HandoffFn | None = None
    eyes: LLMConfig | None = None
    """The model that sees pictures (requests carrying any go to it); None: no slot can see them."""
    outcome: LoopOutcome = field(default_factory=lambda: LoopOutcome("", "final"))
    _next: Handoff | None = None
    _seen: list[dict[str, Any]] = field(default_factory=list)  # pictures from this step's tool results

    async def run(self, timeout: float) -> LoopOutcome:
        """Run to a final answer, max_loops or the timeout; cancellation propagates (status saved)."""
        try:
            with anyio.fail_after(timeout):
                await self._loop()
        except TimeoutError:
            self.outcome.stop_reason = "timeout"
            self.outcome.result = self._last_text() or f"(No answer within the {timeout:g} s time limit.)"
            self.outcome.notes.append(f"Stopped after the {timeout:g} s time limit (delegate_timeout_seconds).")
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                self.store.save_step(self.context_id, StepDelta(), status="cancelled")
            raise
        except BaseException:
            self.store.save_step(self.context_id, StepDelta(), status="failed")
            raise
        status = "done" if not self.outcome.incomplete else "incomplete"
        self.store.save_step(self.context_id, StepDelta(), status=status, result=self.outcome.result)
        return self.outcome

    async def _loop(self) -> None:
        schemas = self._schemas()
        asked_for_detail = False
        budget = self.max_loops
        while True:
            if self.outcome.loops >= budget:
                await self._wrap_up(schemas)
                return
            reply = await self._ask(schemas, f"step {self.outcome.loops + 1}: thinking")
            if reply.tool_calls:
                await self._run_tools(reply)
                if self._take_over():
                    schemas = self._schemas()
                continue
            text = (reply.content or "").strip()
            if len(text) < SHORT_ANSWER_CHARS and not asked_for_detail:
                asked_for_detail = True
                budget += 1  # the one detail request never costs the caller a step
                self._persist([{"role": "user", "content": DETAIL_REQUEST}])
                self.outcome.result = text
                continue
            self.outcome.result = text if len(text) >= len(self.outcome.result) else self.outcome.result
            self.outcome.stop_reason = "final"
            return

    async def _ask(self, schemas: list[dict[str, Any]], progress: str, **kwargs: Any) -> ChatReply:
        await self.report(progress)
        messages = latest_pictures_only(self._request_messages())
        config = self.eyes if self.eyes is not None and carries_pictures(messages) else self.config
        request = partial(chat, config, messages, tools=schemas or None, **kwargs)
        reply: ChatReply = await anyio.to_thread.run_sync(request, abandon_on_cancel=True)
        self.outcome.loops += 1
        self.outcome.tokens += reply.total_tokens
        self._persist([reply.as_message()], loops=1, tokens=reply.total_tokens)
        return reply

    async def _run_tools(self, reply: ChatReply) -> None:
        for index, call in enumerate(reply.tool_calls):
            content = await self._answer(call, over_limit=index >= MAX_CALLS_PER_STEP)
            self.outcome.tool_calls += 1
            self._persist([{"role": "tool", "tool_call_id": call.id, "content": content}], tool_calls=1)
        seen, self._seen = self._seen, []
        self._persist(seen)  # after every tool result of the step: pictures go in a user message

    async def _answer(self, call: ToolCall, over_limit: bool) -> str:
        if over_limit:
            return f"Error: not run; at most {MAX_CALLS_PER_STEP} tool calls per step. Call it again next step."
        if self._next is not None:
            return f"Error: not run; the task was handed over to agent {self._next.agent!r}."
        try:
            args = call.parsed_arguments()
        except LLMError as exc:
            return f"Error: {exc}"
        await self.report(f"step {self.outcome.loops}: {describe_call(call.name, args)}")
        target = transfer_target(call.name)
        if target is not None and call.name in self._transfer_names():
            return await self._transfer(target, args)
        return await self._dispatch(call.name, args)

    async def _transfer(self, target: str, args: dict[str, Any]) -> str:
        """Prepare the handoff (applied after this step's tool results) or say why it is refused."""
        assert self.handoff is not None
        note = str(args.get("note") or "")[:4000]
        try:
            self._next = await self.handoff(target, self.origin.agent_stack, note)
        except GeneralAgentError as exc:
            return f"Error: {exc}"
        return f"Transferred to agent {target!r}; it continues this task."

    def _take_over(self) -> bool:
        """Apply a prepared handoff: the new agent's prompt, tools, model and place on the agent stack."""
        step, self._next = self._next, None
        if step is None:
            return False
        self.offered, self.config, self.transfers = step.offered, step.config, step.transfers
        self.origin = dataclasses.replace(self.origin, agent_stack=(*self.origin.agent_stack, step.agent))
        self.outcome.handoffs.append(step.agent)
        self.store.set_agent(self.context_id, step.agent, [spec.name for spec in step.offered])
        self._persist([{"role": "system", "content": step.system}])
        return True

    def _schemas(self) -> list[dict[str, Any]]:
        return [function_schema(spec) for spec in self.offered] + list(self.transfers)

    def _transfer_names(self) -> set[str]:
        return {t["function"]["name"] for t in self.transfers} if self.handoff is not None else set()

    def _request_messages(self) -> list[dict[str, Any]]:
        """The transcript for the model: after a handoff only the newest system prompt, placed first."""
        systems = [m for m in self.messages if m.get("role") == "system"]
        if len(systems) <= 1:
            return list(self.messages)
        return [systems[-1], *(m for m in self.messages if m.get("role") != "system")]

    async def _dispatch(self, name: str, args: dict[str, Any]) -> str:
        offered = {spec.name: spec for spec in self.offered}
        if name == "delegate_task":
            return "Error: delegate_task is not available to sub-agents (no nesting). Do the work yourself."
        if name not in offered:
            mine = ", ".join(sorted(set(offered) | self._transfer_names()))
            return f"Error: tool {name!r} is not available to you. Your tools: {mine}."
        try:
            result = await self.dispatcher.run(name, args, self.origin, validate=True, spec=offered[name])
        except (ApprovalRequired, PolicyDenied) as exc:
            self.outcome.notes.append(f"{name}: {exc}")
            return f"Error: {exc}"
        except GeneralAgentError as exc:
            return f"Error: {exc}"
        limit = min(SUBAGENT_RESULT_TOKENS, self.dispatcher.max_result_tokens)
        text = bound_json(result.model_dump(mode="json", by_alias=True), limit)[1]
        pictures = pictures_of(result)
        return text + self._shown(name, pictures) if pictures else text

    def _shown(self, name: str, pictures: list[Picture]) -> str:
        """Queue a tool result's pictures for the model when one can see them; the note for its result."""
        if self.eyes is None:
            return "\n" + NOT_SEEN.format(count=len(pictures))
        self._seen.append(picture_message(f"The picture(s) from your {name} call:", pictures))
        return f"\n[{len(pictures)} picture(s) follow in the next message.]"

    async def _wrap_up(self, schemas: list[dict[str, Any]]) -> None:
        self.outcome.stop_reason = "max_loops"
        self._persist([{"role": "user", "content": WRAP_UP_REQUEST.format(max_loops=self.max_loops)}])
        try:
            reply = await self._ask(schemas, "wrapping up (max_loops reached)", tool_choice="none")
            self._persist(close_open_calls(self.messages, "Error: not run; the step limit was reached."))
            self.outcome.result = (reply.content or "").strip() or self._last_text()
        except LLMError as exc:
            self.outcome.result = self._last_text()
            self.outcome.notes.append(f"The wrap-up summary failed: {exc}")
        if not self.outcome.result:
            self.outcome.result = f"(No final answer within max_loops={self.max_loops}.)"

    def _persist(self, messages: list[dict[str, Any]], loops: int = 0, tool_calls: int = 0, tokens: int = 0) -> None:
        if not (messages or loops or tool_calls or tokens):
            return
        self.messages.extend(messages)
        self.store.save_step(self.context_id, StepDelta(messages, loops, tool_calls, tokens))

    def _last_text(self) -> str:
        for message in reversed(self.messages):
            if message.get("role") == "assistant" and (message.get("content") or "").strip():
                return str(message["content"]).strip()
        return ""
