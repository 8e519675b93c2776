"""Test-only tools that need approval (registered by monkeypatching registry.TOOLS)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, Field

from foundation.toolspec import ToolSpec
from mcp_server import registry

CALLS: list[str] = []


class PokeResult(BaseModel):
    text: str = Field(description="What was poked.")


def poke(
    text: Annotated[str, Field(description="Text to poke with.")],
    path: Annotated[str | None, Field(description="A file to poke.")] = None,
) -> PokeResult:
    """Changes state (test tool): the default policy asks before it runs."""
    CALLS.append(text)
    return PokeResult(text=text)


POKE = ToolSpec(poke, title="Poke", read_only=False, tier="default")
ZAP = ToolSpec(poke, title="Zap", read_only=False, destructive=True, tier="full", name_override="zap")


def install(monkeypatch: Any, *specs: ToolSpec) -> None:
    CALLS.clear()
    monkeypatch.setattr(registry, "TOOLS", [*registry.TOOLS, *(specs or (POKE,))])


def elicitation_answer(action: str, decision: str | None = None, seen: list[str] | None = None) -> Any:
    from mcp_types import ElicitResult

    async def callback(context: Any, params: Any) -> Any:
        if seen is not None:
            seen.append(params.message)
        if action == "accept":
            return ElicitResult(action="accept", content={"decision": decision or "approve_once"})
        return ElicitResult(action=action)

    return callback
