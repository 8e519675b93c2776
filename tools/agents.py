"""Agent cards: specialised sub-agents configured in a TOML file, and the handoff protection.

The file (`GENERALAGENT_AGENTS_FILE`, default `<data dir>/agents.toml`) holds one table per agent:

    [agents.researcher]
    description = "Finds and quotes sources in the indexed documents."
    system_prompt = "You are a meticulous researcher. Quote exact passages."
    tools = ["search_documents", "search_file", "read_file"]   # optional: replaces the defaults
    model = "gpt-4o-mini"                                      # optional: overrides the slot's model
    slot = "reasoning"            # optional model slot: base, reasoning, vision, code or chat
    handoffs = ["planner"]        # optional: the cards it may transfer to (default: every other one)
    mcp_servers = ["docs"]        # optional: other MCP servers whose tools it gets (mcp_servers.toml)
    enabled = true                # optional: false hides the card everywhere

It is read on every use, so edits apply without a restart. Inside delegated work a sub-agent may hand
the thread over to another card with a `transfer_to_<id>` tool; the chain is capped at
`handoff_max_depth` cards and never visits a card twice (A > B > A is refused).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from foundation.errors import Conflict, InvalidInput, LimitExceeded, NotFound, SettingsError
from foundation.settings import Settings

MAX_DEPTH = 5  # the default of the handoff_max_depth setting
AGENT_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
TRANSFER_PREFIX = "transfer_to_"
MAX_TRANSFER_TOOLS = 20


class AgentCard(BaseModel):
    id: str = Field(description="The id to pass as delegate_task(agent=...).")
    description: str = Field(description="What this agent is for.")
    system_prompt: str = Field(default="", description="Extra instructions for this agent.", exclude=True)
    tools: list[str] | None = Field(default=None, description="Its tools (null: the read-only defaults).")
    model: str | None = Field(default=None, description="Its model (null: the configured default model).")
    slot: Literal["base", "reasoning", "vision", "code", "chat"] = Field(
        default="base", description="Its model slot (endpoint + model; unset slots use the base one).")
    handoffs: list[str] | None = Field(default=None, description="Cards it may transfer to (null: all others).")
    mcp_servers: list[str] = Field(default_factory=list, description="Other MCP servers whose tools it gets.")
    enabled: bool = Field(default=True, description="False: not offered anywhere.")


def agents_file(settings: Settings) -> Path:
    return settings.agents_file or settings.data_dir / "agents.toml"


BUILTIN_AGENTS = Path(__file__).parent / "builtin" / "agents.toml"


def load_agents(settings: Settings) -> dict[str, AgentCard]:
    """The built-in cards (unless turned off), then all cards in the file (a card of the same id replaces a
    built-in one); SettingsError names the problem."""
    builtin = _cards_in(BUILTIN_AGENTS) if settings.builtins_enabled else {}
    path = agents_file(settings)
    return builtin | (_cards_in(path) if path.is_file() else {})


def _cards_in(path: Path) -> dict[str, AgentCard]:
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


def enabled_agents(settings: Settings) -> dict[str, AgentCard]:
    return {agent_id: card for agent_id, card in load_agents(settings).items() if card.enabled}


def get_agent(settings: Settings, agent_id: str) -> AgentCard:
    cards = load_agents(settings)
    if agent_id in cards and not cards[agent_id].enabled:
        raise NotFound(f"Agent card {agent_id!r} is disabled (enabled = false in {agents_file(settings)}).")
    if agent_id not in cards:
        known = ", ".join(sorted(enabled_agents(settings))) or f"none (define them in {agents_file(settings)})"
        raise NotFound(f"No agent card {agent_id!r}. Known agents: {known}.")
    return cards[agent_id]


def check_handoff(stack: tuple[str, ...], agent_id: str, max_depth: int = MAX_DEPTH) -> None:
    """Refuse a handoff that would loop (agent already on the stack) or make the chain longer than max_depth."""
    if agent_id in stack:
        chain = " > ".join(stack)
        raise Conflict(
            f"Agent {agent_id!r} is already on the call stack ({chain}); handing off to it again would loop. "
            "Finish the task yourself or pick another agent."
        )
    if len(stack) >= max_depth:
        raise LimitExceeded(
            f"Delegation depth limit reached ({max_depth}: {' > '.join(stack)}). Finish the task yourself "
            "(the limit is the handoff_max_depth setting)."
        )


def transfer_targets(cards: dict[str, AgentCard], current: AgentCard | None) -> list[AgentCard]:
    """The enabled cards the current agent may hand off to (its `handoffs`, else every other card)."""
    allowed = current.handoffs if current is not None and current.handoffs is not None else list(cards)
    own = current.id if current is not None else None
    targets = [cards[a] for a in allowed if a in cards and a != own and cards[a].enabled]
    return [c for c in targets if len(TRANSFER_PREFIX + c.id) <= 64][:MAX_TRANSFER_TOOLS]


def transfer_target(tool_name: str) -> str | None:
    """The agent id a `transfer_to_<id>` tool name asks for (None for other tools)."""
    return tool_name[len(TRANSFER_PREFIX):] if tool_name.startswith(TRANSFER_PREFIX) else None


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


def agent_document(card: AgentCard) -> dict[str, Any]:
    """The full card (system prompt included) for the `agent://{id}` resource."""
    return card.model_dump(mode="json") | {"system_prompt": card.system_prompt}


def agent_prompt(card: AgentCard, task: str | None = None) -> str:
    """The text of the card's MCP prompt: start a conversation as that agent."""
    parts = [f"For this conversation, act as the agent {card.id!r}: {card.description}"]
    if card.system_prompt.strip():
        parts.append(f"Its instructions:\n{card.system_prompt.strip()}")
    if card.tools:
        parts.append(f"Work with these tools: {', '.join(card.tools)}.")
    if task and task.strip():
        parts.append(f"Task:\n{task.strip()}")
    return "\n\n".join(parts)
