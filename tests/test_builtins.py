"""Out of the box: built-in skills and agent cards, on unless turned off, offered as prompts; and what
assemble_context puts where the model sees it: the skill catalog in the (conversation-stable) system message,
a skill's instructions when a file of its type arrives, recalled facts (issue 35)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from context.skills import scan
from mcp_server import registry
from tests.conftest import connect
from tools.agents import check_tool_names, load_agents
from tools.context_assemble import assemble
from tools.runtime import CallContext, Runtime
from tools.skills import BUILTIN_SKILLS

SKILLS = {"research-folder", "summarize-pdf", "compare-spreadsheets", "bilingual-brief"}
CARDS = {"researcher", "writer", "reviewer"}
T0 = datetime(2026, 11, 22, 3, 17, 5, tzinfo=UTC)


def test_builtin_skills_and_cards_are_valid(make_settings: Any) -> None:
    catalog = scan([], None, [BUILTIN_SKILLS])
    assert set(catalog.skills) == SKILLS and catalog.problems == []
    assert catalog.for_file_type("report.PDF").name == "summarize-pdf"  # type: ignore[union-attr]
    cards = load_agents(make_settings(builtins_enabled=True))
    assert set(cards) == CARDS
    known = {spec.name for spec in registry.TOOLS}
    for card in cards.values():
        assert check_tool_names(card.tools or [], known, card.id) == card.tools
        assert set(card.handoffs or []) <= CARDS


@pytest.mark.anyio
async def test_on_by_default_shown_as_prompts_and_off_by_the_setting(make_settings: Any) -> None:
    from foundation.settings import load_settings

    default = load_settings({"data_dir": make_settings().data_dir, "tool_profile": "full"}, environ={})
    assert default.builtins_enabled is True
    async with connect(make_settings(builtins_enabled=True)) as client:
        names = {p.name for p in (await client.list_prompts()).prompts}
        agents = await client.call_tool("list_agents", {})
    assert SKILLS | {f"agent-{c}" for c in CARDS} <= names
    assert {a["id"] for a in agents.structured_content["agents"]} == CARDS
    off = load_settings({"data_dir": make_settings().data_dir, "tool_profile": "full"},
                        environ={"GENERALAGENT_BUILTINS_ENABLED": "0"})
    async with connect(off) as client:
        assert not {p.name for p in (await client.list_prompts()).prompts} & (SKILLS | {"agent-researcher"})


def test_a_users_skill_of_the_same_name_wins_quietly(tmp_path: Path) -> None:
    mine = tmp_path / "skills" / "summarize-pdf"
    mine.mkdir(parents=True)
    (mine / "SKILL.md").write_text("---\nname: summarize-pdf\ndescription: My own way.\n---\nMine.\n")
    catalog = scan([tmp_path / "skills"], None, [BUILTIN_SKILLS])
    assert catalog.skills["summarize-pdf"].description == "My own way." and catalog.problems == []
    assert set(catalog.skills) == SKILLS


def _turn(rt: Runtime, messages: list[dict[str, Any]], now: datetime, **kw: Any) -> Any:
    return assemble(rt, CallContext(tool="assemble_context"), "You help with documents.", messages, "c1",
                    None, None, kw.get("files"), None, None, None, "openai", 0, now)


@pytest.mark.storage
def test_assemble_context_shows_catalog_instructions_and_memory(make_settings: Any, tmp_path: Path) -> None:
    from tools.memory import remember

    user_skills = tmp_path / "more-skills"
    rt = Runtime(make_settings(builtins_enabled=True, skills_dirs=[user_skills]))
    try:
        remember("The quarterly report is due on the 5th of each month.", rt=rt, call=CallContext(tool="remember"))
        messages: list[dict[str, Any]] = [{"role": "user", "content": "When is the quarterly report due?"}]
        first = _turn(rt, messages, T0)
        system = first.messages[0]["content"]
        for name in SKILLS:
            line = next(x for x in system.splitlines() if x.startswith(f"- {name}: "))
            assert len(line) < 200
        memory = [r.text for r in first.reminders if r.kind == "memory"]
        assert len(memory) == 1 and "due on the 5th" in memory[0]
        assert "due on the 5th" in first.messages[-1]["content"]  # where the model sees it
        (user_skills / "minutes").mkdir(parents=True)
        (user_skills / "minutes" / "SKILL.md").write_text("---\nname: minutes\ndescription: Meeting minutes.\n---\nx\n")
        messages += [{"role": "assistant", "content": "On the 5th."}, {"role": "user", "content": "Summarise it."}]
        second = _turn(rt, messages, T0 + timedelta(seconds=20), files=["q3/report.pdf"])
        assert second.messages[0]["content"] == system  # byte-identical: a new skill is a reminder instead
        kinds = {r.kind: r.text for r in second.reminders}
        assert "minutes" in kinds["skills"] and "memory" not in kinds  # each fact told once
        assert "Use the summarize-pdf skill" in kinds["skill"] and "read_file" in kinds["skill"]
        assert "Use the summarize-pdf skill" in second.messages[-1]["content"]
        messages += [{"role": "assistant", "content": "Done."}, {"role": "user", "content": "And the other?"}]
        third = _turn(rt, messages, T0 + timedelta(seconds=40), files=["q3/report.pdf", "q4/report.pdf"])
        assert [r.kind for r in third.reminders] == ["files"]  # the pdf skill is not loaded twice
    finally:
        rt.close()
