"""Skills and agent cards as MCP prompts and resources, kept in step with their folders and files.

- prompts: one per enabled skill (named by its front-matter name; the SKILL.md body and its file list
  as a user message) and one per enabled agent card (`agent-<id>`: start a conversation as that agent);
- resources: `skill://{name}` (SKILL.md), `skill://{name}/{path}` (its files, confined to the skill
  folder) and `agent://{id}` (the card as JSON): read through the three templates, which read whatever
  exists now; listed by the middleware from the current skills and cards (resources/list gets them
  added to the SDK's own list), so nothing is ever registered per skill or removed again.

A middleware re-checks the skill folders' fingerprint (cheap mtime checks) before prompts/* and
resources/* requests and the registry's version after tools/call (list_skills(refresh=true));
when something changed it re-registers the prompts and sends prompts and resources list_changed.
"""

from __future__ import annotations

import json
import logging
import mimetypes
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import anyio.to_thread
from mcp.server import MCPServer
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import UserMessage
from mcp.server.mcpserver.exceptions import ResourceError
from mcp.server.mcpserver.prompts import Prompt
from mcp.server.mcpserver.prompts.base import Message, PromptArgument
from mcp.server.subscriptions import SubscriptionBus
from mcp.shared.subscriptions import PromptsListChanged, ResourcesListChanged
from mcp_types import ListResourcesResult, Resource

from context.skills import SKILL_FILE, Skill, SkillCatalog, read_skill_file, skill_files
from foundation.errors import GeneralAgentError
from mcp_server.eras import is_modern
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
    bus: SubscriptionBus
    """The server's subscription bus (handed to MCPServer(subscriptions=...)): prompts and resources
    list_changed for 2026-07-28 `subscriptions/listen` streams."""
    prompts: set[str] = field(default_factory=set)
    resources: list[Resource] = field(default_factory=list)
    """What resources/list adds to the SDK's own list: the current skills' and cards' resources."""
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
        """Replace the registered skill and agent prompts and the listed resources (runs on the event loop)."""
        for name in self.prompts:
            self.server.remove_prompt(name)
        self.prompts, self.resources, self.state = set(), [], state
        for skill in catalog.skills.values():
            self._add_prompt(_skill_prompt(self.runtime, skill))
            self._list_skill_resources(skill)
        for card in cards.values():
            self._add_prompt(_agent_prompt(self.runtime, card))
            self._list_resource(f"agent://{card.id}", f"agent-{card.id}", card.description, "application/json")

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

    def _list_skill_resources(self, skill: Skill) -> None:
        name = skill.name
        self._list_resource(f"skill://{name}", f"skill-{name}", skill.description, "text/markdown")
        files, _ = skill_files(skill, PROMPT_FILES)
        for rel in files:
            self._list_resource(f"skill://{name}/{quote(rel, safe='/')}", f"{name}/{rel}",
                                f"A file of the {name} skill.", file_mime(rel))

    def _list_resource(self, uri: str, name: str, description: str, mime: str) -> None:
        if len(self.resources) < MAX_LISTED_RESOURCES:
            self.resources.append(Resource(uri=uri, name=name, description=description, mime_type=mime))

    async def middleware(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        changed = False
        if ctx.method in WATCHED:
            changed = await self._sync(rescan=True)
        result = await call_next(ctx)
        if ctx.method == "resources/list":
            result = _with_resources(result, self.resources)
        elif ctx.method == "resources/read":
            result = _with_file_mime(result)
        elif ctx.method == "tools/call":
            changed = await self._sync(rescan=False)
        if changed:
            await _notify(self.bus, ctx)
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


def file_mime(path: str) -> str:
    """A skill file's MIME type, by its name."""
    return mimetypes.guess_type(path)[0] or "text/plain"


def _with_resources(listed: HandlerResult, extra: list[Resource]) -> HandlerResult:
    """A resources/list result (its wire dict, or the model) with the skills' and cards' resources added."""
    if isinstance(listed, ListResourcesResult):
        return listed.model_copy(update={"resources": [*listed.resources, *extra]})
    if isinstance(listed, dict) and isinstance(listed.get("resources"), list):
        wire = [r.model_dump(by_alias=True, mode="json", exclude_none=True) for r in extra]
        return {**listed, "resources": [*listed["resources"], *wire]}
    return listed


def _with_file_mime(read: HandlerResult) -> HandlerResult:
    """A resources/read result whose skill files say their own MIME type (the skill-file template is for
    every file, so it declares none)."""
    if not isinstance(read, dict) or not isinstance(read.get("contents"), list):
        return read
    contents = [{**c, "mimeType": file_mime(c["uri"])} if _is_skill_file(c) else c for c in read["contents"]]
    return {**read, "contents": contents}


def _is_skill_file(content: Any) -> bool:
    uri = content.get("uri") if isinstance(content, dict) else None
    return isinstance(uri, str) and uri.startswith("skill://") and "/" in uri[len("skill://"):]


async def _notify(bus: SubscriptionBus, ctx: ServerRequestContext[Any, Any]) -> None:
    """prompts and resources list_changed: listen events on 2026-07-28, notifications on 2025-era sessions."""
    try:
        await bus.publish(PromptsListChanged())
        await bus.publish(ResourcesListChanged())
    except Exception:
        log.warning("could not publish prompts/resources list_changed", exc_info=True)
    if not is_modern(ctx):
        try:
            await ctx.session.send_prompt_list_changed()
            await ctx.session.send_resource_list_changed()
        except Exception:
            log.warning("could not send prompts/resources list_changed", exc_info=True)


def install_prompts(server: MCPServer[Any], runtime: Runtime, bus: SubscriptionBus) -> PromptSync:
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

    sync = PromptSync(server, runtime, bus)
    sync.sync_now()
    server.middleware.append(sync.middleware)  # type: ignore[arg-type]
    return sync
