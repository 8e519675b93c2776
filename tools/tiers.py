"""Tool tiers: see which tools can be enabled on demand, and enable them.

Core tools are always listed, optional ones by the settings profile (minimal/default/full);
the rest are discoverable here and enabled for the calling session with `enable_tools` (other
clients of the same server keep their own lists). Enabling a tool that can change things goes
through the approval policy like any risky call.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from foundation.calls import ToolCatalogView
from foundation.errors import InvalidInput, NotConfigured
from tools.runtime import CallContext, Runtime


class AvailableTool(BaseModel):
    name: str
    title: str
    summary: str = Field(description="First line of its description.")
    tier: str = Field(description="core, default or full.")
    listed: bool = Field(description="Already in tools/list.")
    changes_things: bool = Field(description="Can modify files, state or the outside world (enabling needs approval).")


class AvailableTools(BaseModel):
    tools: list[AvailableTool]
    hint: str = Field(description="What to do next.")


class EnableToolsResult(BaseModel):
    enabled: list[str] = Field(description="Newly added to tools/list.")
    already_listed: list[str]
    notified: bool = Field(description="tools/list_changed was sent.")
    hint: str


def _catalog(rt: Runtime) -> ToolCatalogView:
    catalog = rt.catalog
    if catalog is None:
        raise NotConfigured("Tool tiers are only available when the MCP server is running.")
    return catalog


def list_available_tools(
    rt: Runtime,
    call: CallContext,
    include_listed: Annotated[bool, Field(description="Also show tools that are already listed.")] = False,
) -> AvailableTools:
    """Tools this server has beyond the current tools/list; enable them with enable_tools."""
    catalog = _catalog(rt)
    items = [
        AvailableTool(name=spec.name, title=spec.title, summary=spec.description.splitlines()[0][:160],
                      tier=spec.tier, listed=catalog.is_listed(spec.name, call.origin),
                      changes_things=not spec.read_only)
        for spec in sorted(catalog.all_specs(), key=lambda s: s.name)
        if include_listed or not catalog.is_listed(spec.name, call.origin)
    ]
    hint = ("Call enable_tools with the names you need; tools that change things need the user's approval."
            if any(not t.listed for t in items) else "Every tool is already listed.")
    return AvailableTools(tools=items, hint=hint)


async def enable_tools(
    names: Annotated[list[str], Field(min_length=1, max_length=20,
                                      description="Tool names from list_available_tools.")],
    rt: Runtime,
    call: CallContext,
) -> EnableToolsResult:
    """Add tools from list_available_tools to your tools/list (this session; approval needed for risky ones)."""
    catalog = _catalog(rt)
    known = {spec.name for spec in catalog.all_specs()}
    unknown = sorted(set(names) - known)
    if unknown:
        raise InvalidInput(f"Unknown tool(s) {unknown}. Call list_available_tools to see the names.")
    wanted = list(dict.fromkeys(names))
    before = [n for n in wanted if catalog.is_listed(n, call.origin)]
    added = catalog.enable(wanted, call.origin)
    notified = await catalog.notify_changed(call.origin) if added else False
    told = "Your client was told; refresh" if notified else "Your client could not be told the list changed; list"
    hint = (f"Enabled: {', '.join(added)}. {told} your tools, then call them."
            if added else "Nothing to enable; those tools are already listed.")
    return EnableToolsResult(enabled=added, already_listed=before, notified=notified, hint=hint)
