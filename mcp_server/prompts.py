"""Skills and agent cards as MCP prompts and resources, kept in step with their folders and files.

- prompts: one per enabled skill (named by its front-matter name; the SKILL.md body and its file list
  as a user message) and one per enabled agent card (`agent-<id>`: start a conversation as that agent);
- resources: `skill://{name}` (SKILL.md), `skill://{name}/{path}` (its files, confined to the skill
  folder) and `agent://{id}` (the card as JSON), listed and readable.

A middleware re-checks the skill folders' fingerprint (cheap mtime checks) before prompts/* and
resources/* requests and the registry's version after tools/call (list_skills(refresh=true));
when something changed it re-registers and sends prompts and resources list_changed.
"""

from __future__ import annotations

import json
import logging
import mimetypes
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any
from urllib.parse import quote

import anyio.to_thread
from mcp.server import MCPServer
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context, UserMessage
from mcp.server.mcpserver.exceptions import ResourceError
from mcp.server.mcpserver.prompts import Prompt
from mcp.server.mcpserver.prompts.base import Message, PromptArgument
from mcp.server.mcpserver.resources import FunctionResource

from context.skills import SKILL_FILE, Skill, SkillCatalog, read_skill_file, skill_files
from foundation.errors import GeneralAgentError
from mcp_server.eras import is_modern
from mcp_server.sdk_adapter import remove_resource
from tools.agents import AgentCard, agent_document, agent_prompt, agents_file, enabled_agents
from tools.runtime import Runtime
from tools.skills import PROMPT_FILES, SKILLS, skill_catalog, skill_prompt

log = logging.getLogger("generalagent.server")

WATCHED = frozenset({"prompts/list", "prompts/get", "resources/list", "resources/read", "resources/templates/list"})
AGENT_PROMPT_PREFIX = "agent-"
MAX_LISTED_RESOURCES = 1000


def _read(fn: Callable[[], str | bytes]) -> str | bytes:
    try:
        return fn()
    except GeneralAgentError as exc:
        raise ResourceError(str(exc)) from exc


# -- the texts behind each prompt and resource ------------------------------------------------------


def skill_md(rt: Runtime, name: str) -> str:
    skill = SKILLS.of(rt).get(name)
    return (skill.folder / SKILL_FILE).read_text(encoding="utf-8")


def skill_file(rt: Runtime, name: str, path: str) -> str | bytes:
    return read_skill_file(SKILLS.of(rt).get(name), path)


def agent_json(rt: Runtime, agent_id: str) -> str:
    cards = enabled_agents(rt.settings)
    card = cards.get(agent_id)
    if card is None:
        known = ", ".join(sorted(cards)) or "none"
        raise ResourceError(f"No enabled agent card {agent_id!r}. Known agents: {known}.")
    return json.dumps(agent_document(card), ensure_ascii=False, indent=2)


def _skill_prompt(rt: Runtime, skill: Skill) -> Prompt:
    def render(request: str | None = None) -> list[Message]:
        return [UserMessage(skill_prompt(SKILLS.of(rt).get(skill.name), request))]

    argument = PromptArgument(name="request", description="What to do with this skill (optional).")
    return Prompt(name=skill.name, title=f"Skill: {skill.name}", description=skill.description,
                  arguments=[argument], fn=render, context_kwarg=None)


def _agent_prompt(rt: Runtime, card: AgentCard) -> Prompt:
    def render(task: str | None = None) -> list[Message]:
        current = enabled_agents(rt.settings).get(card.id, card)
        return [UserMessage(agent_prompt(current, task))]

    argument = PromptArgument(name="task", description="The first task for the agent (optional).")
    return Prompt(name=AGENT_PROMPT_PREFIX + card.id, title=f"Agent: {card.id}", description=card.description,
                  arguments=[argument], fn=render, context_kwarg=None)


# -- keeping the server's prompts and resources in step ------------------------------------------------


def _agents_key(rt: Runtime) -> tuple[int, int]:
    try:
        info = os.stat(agents_file(rt.settings))
    except OSError:
        return (-1, -1)
    return (info.st_mtime_ns, info.st_size)


def _cards(rt: Runtime) -> dict[str, AgentCard]:
    try:
        return enabled_agents(rt.settings)
    except GeneralAgentError as exc:
        log.error("agent cards are not offered as prompts: %s", exc)
        return {}


@dataclass
class PromptSync:
    """Registers the current skills and agent cards on the server; `middleware` keeps them current."""

    server: MCPServer[Any]
    runtime: Runtime
    prompts: set[str] = field(default_factory=set)
    resources: set[str] = field(default_factory=set)
    state: tuple[Any, ...] | None = None

    def unchanged(self) -> bool:
        """True when neither the skills' version nor the agents file changed since the last sync (one stat:
        cheap enough for the event loop)."""
        return self.state is not None and (SKILLS.of(self.runtime).version, _agents_key(self.runtime)) == self.state

    def pending(self, rescan: bool) -> tuple[tuple[Any, ...], SkillCatalog, dict[str, AgentCard]] | None:
        """What to register when it differs from what is registered (None: nothing changed). Does IO."""
        rt = self.runtime
        if not rescan and self.unchanged():
            return None
        catalog = skill_catalog(rt)
        state = (catalog.version, _agents_key(rt))
        return None if state == self.state else (state, catalog, _cards(rt))

    def apply(self, state: tuple[Any, ...], catalog: SkillCatalog, cards: dict[str, AgentCard]) -> None:
        """Replace the registered skill and agent prompts and resources (runs on the event loop)."""
        for name in self.prompts:
            self.server.remove_prompt(name)
        for uri in self.resources:
            remove_resource(self.server, uri)
        self.prompts, self.resources, self.state = set(), set(), state
        for skill in catalog.skills.values():
            self._add_prompt(_skill_prompt(self.runtime, skill))
            self._add_skill_resources(skill)
        for card in cards.values():
            self._add_prompt(_agent_prompt(self.runtime, card))
            self._add_resource(f"agent://{card.id}", f"agent-{card.id}", card.description, "application/json",
                               partial(agent_json, self.runtime, card.id))

    def sync_now(self) -> bool:
        found = self.pending(rescan=True)
        if found is not None:
            self.apply(*found)
        return found is not None

    def _add_prompt(self, prompt: Prompt) -> None:
        if prompt.name in self.prompts:
            log.warning("prompt %r exists already (a skill and an agent card share the name); skipped", prompt.name)
            return
        self.server.add_prompt(prompt)
        self.prompts.add(prompt.name)

    def _add_skill_resources(self, skill: Skill) -> None:
        rt, name = self.runtime, skill.name
        self._add_resource(f"skill://{name}", f"skill-{name}", skill.description, "text/markdown",
                           lambda: skill_md(rt, name))
        files, _ = skill_files(skill, PROMPT_FILES)
        for rel in files:
            mime = mimetypes.guess_type(rel)[0] or "text/plain"
            self._add_resource(f"skill://{name}/{quote(rel, safe='/')}", f"{name}/{rel}", f"A file of the {name} skill.",
                               mime, partial(skill_file, rt, name, rel))

    def _add_resource(self, uri: str, name: str, description: str, mime: str, fn: Callable[[], str | bytes]) -> None:
        if len(self.resources) >= MAX_LISTED_RESOURCES:
            return
        resource = FunctionResource.from_function(lambda: _read(fn), uri=uri, name=name, description=description,
                                                  mime_type=mime)
        self.server.add_resource(resource)
        self.resources.add(uri)

    async def middleware(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        changed = False
        if ctx.method in WATCHED:
            changed = await self._sync(rescan=True)
        result = await call_next(ctx)
        if ctx.method == "tools/call":
            changed = await self._sync(rescan=False)
        if changed:
            await _notify(self.server, ctx)
        return result

    async def _sync(self, rescan: bool) -> bool:
        if not rescan and self.unchanged():  # after most tool calls: no worker thread needed
            return False
        try:
            found = await anyio.to_thread.run_sync(self.pending, rescan)
        except Exception:
            log.exception("re-scanning skills failed")
            return False
        if found is not None:
            self.apply(*found)
        return found is not None


async def _notify(server: MCPServer[Any], ctx: ServerRequestContext[Any, Any]) -> None:
    """prompts and resources list_changed: listen events on 2026-07-28, notifications on 2025-era sessions."""
    try:
        bus = Context(request_context=ctx, mcp_server=server, subscriptions=server._subscriptions)
        await bus.notify_prompts_changed()
        await bus.notify_resources_changed()
    except Exception:
        log.debug("no subscription bus for list_changed", exc_info=True)
    if not is_modern(ctx):
        try:
            await ctx.session.send_prompt_list_changed()
            await ctx.session.send_resource_list_changed()
        except Exception:
            log.warning("could not send prompts/resources list_changed", exc_info=True)


def install_prompts(server: MCPServer[Any], runtime: Runtime) -> PromptSync:
    """Register skills and agent cards as prompts and resources, the templates that read any skill file
    or card, the re-sync middleware, and advertise listChanged for prompts and resources."""
    rt = runtime

    @server.resource("skill://{name}", name="skill", description="A skill's SKILL.md.", mime_type="text/markdown")
    def read_skill_md(name: str) -> str:
        return str(_read(lambda: skill_md(rt, name)))

    @server.resource("skill://{name}/{+path}", name="skill-file", description="A file of a skill (path inside it).")
    def read_skill_file_(name: str, path: str) -> str | bytes:
        return _read(lambda: skill_file(rt, name, path))

    @server.resource("agent://{agent_id}", name="agent-card", description="An agent card as JSON.",
                     mime_type="application/json")
    def read_agent(agent_id: str) -> str:
        return agent_json(rt, agent_id)

    sync = PromptSync(server, runtime)
    sync.sync_now()
    server.middleware.append(sync.middleware)  # type: ignore[arg-type]
    return sync
