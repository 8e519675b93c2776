"""Agent cards: specialised sub-agents configured in a TOML file, and the handoff protection.

The file (`GENERALAGENT_AGENTS_FILE`, default `<data dir>/agents.toml`) holds one table per agent:

    [agents.researcher]
    description = "Finds and quotes sources in the indexed documents."
    system_prompt = "You are a meticulous researcher. Quote exact passages."
    tools = ["search_documents", "search_file", "read_file"]   # optional: replaces the defaults
    model = "gpt-4o-mini"                                      # optional: overrides GENERALAGENT_LLM_MODEL

It is read on every use, so edits apply without a restart.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from foundation.errors import Conflict, InvalidInput, LimitExceeded, NotFound, SettingsError
from foundation.settings import Settings

MAX_DEPTH = 5
AGENT_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")


class AgentCard(BaseModel):
    id: str = Field(description="The id to pass as delegate_task(agent=...).")
    description: str = Field(description="What this agent is for.")
    system_prompt: str = Field(default="", description="Extra instructions for this agent.", exclude=True)
    tools: list[str] | None = Field(default=None, description="Its tools (null: the read-only defaults).")
    model: str | None = Field(default=None, description="Its model (null: the configured default model).")


def agents_file(settings: Settings) -> Path:
    return settings.agents_file or settings.data_dir / "agents.toml"


def load_agents(settings: Settings) -> dict[str, AgentCard]:
    """All cards in the file ({} when the file does not exist); SettingsError names the problem."""
    path = agents_file(settings)
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise SettingsError(f"Cannot read the agents file {path}: {exc}. Fix or remove it.") from None
    tables = data.get("agents", {})
    if not isinstance(tables, dict):
        raise SettingsError(f"{path}: 'agents' must be tables like [agents.researcher].")
    return {agent_id: _card(path, agent_id, body) for agent_id, body in tables.items()}


def _card(path: Path, agent_id: str, body: Any) -> AgentCard:
    if not AGENT_ID_RE.match(agent_id):
        raise SettingsError(f"{path}: agent id {agent_id!r} must be letters, digits, _ or - (max 64).")
    if not isinstance(body, dict):
        raise SettingsError(f"{path}: [agents.{agent_id}] must be a table.")
    try:
        card = AgentCard(id=agent_id, **body)
    except (ValidationError, TypeError) as exc:
        raise SettingsError(f"{path}: [agents.{agent_id}] is invalid: {exc}".splitlines()[0]) from None
    if card.tools and "delegate_task" in card.tools:
        raise SettingsError(f"{path}: [agents.{agent_id}] lists delegate_task; sub-agents cannot delegate.")
    return card


def get_agent(settings: Settings, agent_id: str) -> AgentCard:
    cards = load_agents(settings)
    if agent_id not in cards:
        known = ", ".join(sorted(cards)) or f"none (define them in {agents_file(settings)})"
        raise NotFound(f"No agent card {agent_id!r}. Known agents: {known}. Call list_agents to see them.")
    return cards[agent_id]


def check_handoff(stack: tuple[str, ...], agent_id: str) -> None:
    """Refuse a handoff that would loop (agent already on the stack) or go deeper than MAX_DEPTH."""
    if agent_id in stack:
        chain = " > ".join(stack)
        raise Conflict(
            f"Agent {agent_id!r} is already on the call stack ({chain}); handing off to it again would loop. "
            "Finish the task yourself or pick another agent."
        )
    if len(stack) >= MAX_DEPTH:
        raise LimitExceeded(
            f"Delegation depth limit reached ({MAX_DEPTH}: {' > '.join(stack)}). Finish the task without delegating."
        )


def check_tool_names(requested: list[str], known: set[str], source: str = "tools") -> list[str]:
    """Validate tool names a caller (or an agent card: `source`) asks for; delegate_task is refused."""
    cleaned = [name.strip() for name in requested if name.strip()]
    if "delegate_task" in cleaned:
        raise InvalidInput("delegate_task cannot be given to a sub-agent: sub-agents cannot delegate (no nesting).")
    unknown = sorted(set(cleaned) - known)
    if unknown:
        available = ", ".join(sorted(known - {"delegate_task"}))
        raise InvalidInput(f"Unknown tool(s) {unknown} in {source}. Available: {available}.")
    return list(dict.fromkeys(cleaned))
