"""Tool tiers: profiles, discoverable tools, enable_tools (approval for risky ones), list_changed in both eras."""

from __future__ import annotations

from typing import Annotated, Any

import anyio
import pytest
from pydantic import BaseModel, Field

from foundation.settings import Settings
from foundation.toolspec import ToolSpec
from mcp_server import registry
from tests import approval_helpers as helpers
from tests.conftest import MODES, connect

pytestmark = pytest.mark.anyio


class PeekResult(BaseModel):
    seen: str = Field(description="What was seen.")


def peek(what: Annotated[str, Field(description="What to look at.")]) -> PeekResult:
    """Looks at something (read-only test tool)."""
    return PeekResult(seen=what)


PEEK = ToolSpec(peek, title="Peek", read_only=True, tier="full")


def listed_names(result: Any) -> set[str]:
    return {tool.name for tool in result.tools}


@pytest.mark.parametrize("profile", ["minimal", "default", "full"])
def test_profiles_list_their_tiers(make_settings: Any, profile: str) -> None:
    from mcp_server.server import listed_specs

    settings: Settings = make_settings(tool_profile=profile)
    names = {spec.name for spec in listed_specs(settings, registry.TOOLS)}
    core = {spec.name for spec in registry.TOOLS if spec.tier == "core"}
    assert core <= names and {"enable_tools", "list_available_tools"} <= names
    if profile == "minimal":
        assert names == core
    if profile == "full":
        assert names == {spec.name for spec in registry.TOOLS}


@pytest.mark.parametrize("mode", MODES)
async def test_discover_and_enable_a_read_only_tool(make_settings: Any, monkeypatch: Any, mode: str) -> None:
    helpers.install(monkeypatch, helpers.POKE, PEEK)
    seen: list[str] = []
    settings = make_settings(tool_profile="minimal")
    async with connect(settings, mode, elicitation_callback=helpers.elicitation_answer("accept", seen=seen)) as c:
        before = listed_names(await c.list_tools())
        assert "peek" not in before and "poke" not in before
        available = (await c.call_tool("list_available_tools", {})).structured_content
        by_name = {t["name"]: t for t in available["tools"]}
        assert by_name["peek"]["changes_things"] is False and by_name["poke"]["changes_things"] is True
        result = await c.call_tool("enable_tools", {"names": ["peek"]})
        assert not result.is_error and result.structured_content["enabled"] == ["peek"]
        assert seen == []  # enabling a read-only tool asks nobody
        assert "peek" in listed_names(await c.list_tools(cache_mode="refresh"))
        assert (await c.call_tool("peek", {"what": "x"})).structured_content == {"seen": "x"}
        again = await c.call_tool("enable_tools", {"names": ["peek"]})
        assert again.structured_content["enabled"] == [] and again.structured_content["already_listed"] == ["peek"]
        unknown = await c.call_tool("enable_tools", {"names": ["nope"]})
        assert unknown.is_error and "list_available_tools" in unknown.content[0].text


@pytest.mark.parametrize("mode", MODES)
async def test_enabling_a_risky_tool_needs_approval(make_settings: Any, monkeypatch: Any, mode: str) -> None:
    helpers.install(monkeypatch, helpers.POKE, PEEK)
    settings = make_settings(tool_profile="minimal")
    async with connect(settings, mode) as c:  # no elicitation: out of band
        await c.list_tools()
        refused = await c.call_tool("enable_tools", {"names": ["poke"]})
        assert refused.is_error and "Approval required" in refused.content[0].text
        assert "poke" not in listed_names(await c.list_tools(cache_mode="refresh"))
    seen: list[str] = []
    async with connect(settings, mode, elicitation_callback=helpers.elicitation_answer("accept", seen=seen)) as c:
        await c.list_tools()
        ok = await c.call_tool("enable_tools", {"names": ["poke", "peek"]})
        assert not ok.is_error and sorted(ok.structured_content["enabled"]) == ["peek", "poke"]
        assert len(seen) == 1 and "enable_tools" in seen[0] and "poke" in seen[0]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_list_changed_notification_without_listening(make_settings: Any, monkeypatch: Any, mode: str) -> None:
    """2025: a session notification; 2026-07-28 without a listen stream (pydantic-ai, fastmcp): the
    notification in the enable_tools call's own response stream, where the client's handler sees it."""
    helpers.install(monkeypatch, PEEK)
    received: list[str] = []

    async def on_message(message: Any) -> None:
        method = getattr(message, "method", None) or getattr(getattr(message, "root", None), "method", None)
        if method:
            received.append(method)

    async with connect(make_settings(tool_profile="minimal"), mode, message_handler=on_message) as c:
        assert (c.protocol_version == "2026-07-28") is (mode == "auto")
        caps = c.server_capabilities
        assert caps.tools is not None and caps.tools.list_changed is True
        result = await c.call_tool("enable_tools", {"names": ["peek"]})
        assert result.structured_content["notified"] is True
        with anyio.fail_after(30):
            while "notifications/tools/list_changed" not in received:
                await anyio.sleep(0.01)
        assert "peek" in listed_names(await c.list_tools())


async def test_list_changed_event_2026(make_settings: Any, monkeypatch: Any) -> None:
    from mcp.shared.subscriptions import ToolsListChanged

    helpers.install(monkeypatch, PEEK)
    events: list[Any] = []
    async with connect(make_settings(tool_profile="minimal"), "auto") as c:
        assert c.protocol_version == "2026-07-28"
        assert "peek" not in listed_names(await c.list_tools())
        async with c.listen(tools_list_changed=True) as subscription:

            async def collect() -> None:
                async for event in subscription:
                    events.append(event)
                    return

            async with anyio.create_task_group() as tg:
                tg.start_soon(collect)
                result = await c.call_tool("enable_tools", {"names": ["peek"]})
                assert result.structured_content["notified"] is True
                with anyio.fail_after(30):
                    while not events:
                        await anyio.sleep(0.01)
                tg.cancel_scope.cancel()
        assert isinstance(events[0], ToolsListChanged)
        assert "peek" in listed_names(await c.list_tools())


def test_settings_enable_and_disable_tools(make_settings: Any, monkeypatch: Any) -> None:
    from foundation.errors import SettingsError
    from foundation.settings import load_settings
    from mcp_server.server import listed_specs

    helpers.install(monkeypatch, helpers.POKE, PEEK)
    settings = make_settings(tools_enabled=["peek"], tools_disabled=["poke", "now"])
    names = {spec.name for spec in listed_specs(settings, registry.TOOLS)}
    assert "peek" in names and "poke" not in names and "now" in names  # core tools stay
    from_env = load_settings(environ={"GENERALAGENT_TOOLS_ENABLED": "peek,poke"})
    assert from_env.tools_enabled == ("peek", "poke")
    with pytest.raises(SettingsError, match="nope"):
        listed_specs(make_settings(tools_enabled=["nope"]), registry.TOOLS)


def test_turning_the_shell_on_lists_it_in_every_profile(make_settings: Any) -> None:
    """`serve --enable-bash` (GENERALAGENT_BASH_ENABLED=1) is the user's choice: the shell is listed whatever the
    profile (a new user found it enabled but not listed); tools_disabled still wins."""
    from mcp_server.server import listed_specs

    for profile in ("minimal", "default", "full"):
        on = {spec.name for spec in listed_specs(make_settings(tool_profile=profile, bash_enabled=True), registry.TOOLS)}
        off = {spec.name for spec in listed_specs(make_settings(tool_profile=profile), registry.TOOLS)}
        assert "run_bash_command" in on and (profile == "full" or "run_bash_command" not in off)
    hidden = make_settings(tool_profile="full", bash_enabled=True, tools_disabled=["run_bash_command"])
    assert "run_bash_command" not in {spec.name for spec in listed_specs(hidden, registry.TOOLS)}
