"""Skills and agent cards through the real MCP client: prompts, resources, tools, hints, list_changed."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.exceptions import MCPError

from tests.approval_helpers import elicitation_answer
from tests.conftest import connect
from tests.docgen import make_pdf

pytestmark = pytest.mark.anyio

PDF_SKILL = """---
name: pdf-tools
description: Extract text and tables from PDF files, fill in PDF forms, and merge or split PDF documents.
license: MIT
allowed-tools: read_file index_path
metadata:
  author: tests
---
# PDF tools

Use scripts/fill_form.py to fill forms. Read reference.md first.
"""
ZH_SKILL = """---
name: spreadsheet-zh
description: 分析电子表格中的销售数据，生成月度汇总报表和图表。
---
# 表格分析

先读取工作表，再按月份汇总销售额。
"""
OLD_SKILL = "---\nname: old-notes\ndescription: Old note taking instructions.\n---\nOld.\n"
BROKEN_SKILL = "---\nname: broken-skill\nlicense: MIT\n---\nNo description above.\n"
CONFIG = """
[skills.pdf-tools]
auto_load_on_file_types = [".pdf"]

[skills.old-notes]
enabled = false
"""
CARDS = """
[agents.researcher]
description = "Finds and quotes sources."
system_prompt = "You are a meticulous researcher."
tools = ["now"]
slot = "reasoning"
"""


def write_skill(root: Path, folder: str, text: str) -> Path:
    path = root / folder
    path.mkdir(parents=True)
    (path / "SKILL.md").write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def skills_root(tmp_path: Path) -> Path:
    root = tmp_path / "skills"
    pdf = write_skill(root, "pdf-tools", PDF_SKILL)
    (pdf / "scripts").mkdir()
    (pdf / "scripts" / "fill_form.py").write_text("print('fill')\n")
    (pdf / "reference.md").write_text("# Reference\nForm fields are named.\n")
    (tmp_path / "secret.txt").write_text("top secret")
    os.symlink(tmp_path / "secret.txt", pdf / "leak.txt")
    write_skill(root, "spreadsheet-zh", ZH_SKILL)
    write_skill(root, "old-notes", OLD_SKILL)
    write_skill(root, "broken-skill", BROKEN_SKILL)
    return root


@pytest.fixture
def skill_settings(make_settings: Any, skills_root: Path, data_dir: Path) -> Any:
    (data_dir / "skills.toml").write_text(CONFIG)
    (data_dir / "agents.toml").write_text(CARDS)
    return make_settings(skills_dirs=[skills_root])


def text_of(result: Any) -> str:
    return "\n".join(getattr(c, "text", "") for c in result.content)


async def test_prompts_list_and_get_for_english_and_chinese_skills(skill_settings: Any) -> None:
    async with connect(skill_settings) as c:
        assert c.server_capabilities.prompts.list_changed is True
        prompts = {p.name: p for p in (await c.list_prompts()).prompts}
        assert {"pdf-tools", "spreadsheet-zh", "agent-researcher"} <= set(prompts)
        assert "old-notes" not in prompts and "broken-skill" not in prompts  # disabled / broken
        assert prompts["spreadsheet-zh"].description == "分析电子表格中的销售数据，生成月度汇总报表和图表。"
        got = await c.get_prompt("pdf-tools", {"request": "fill form.pdf"})
        message = got.messages[0]
        assert message.role == "user"
        assert "Use scripts/fill_form.py to fill forms." in message.content.text
        assert "- reference.md" in message.content.text and "- scripts/fill_form.py" in message.content.text
        assert "leak.txt" not in message.content.text  # a symlink out of the folder is not listed
        assert message.content.text.endswith("Request:\nfill form.pdf")
        zh = await c.get_prompt("spreadsheet-zh")
        assert "先读取工作表，再按月份汇总销售额。" in zh.messages[0].content.text
        agent = await c.get_prompt("agent-researcher", {"task": "find the 2024 revenue"})
        assert "act as the agent 'researcher'" in agent.messages[0].content.text
        assert "You are a meticulous researcher." in agent.messages[0].content.text


async def test_skill_resources_are_listed_readable_and_confined(skill_settings: Any) -> None:
    async with connect(skill_settings) as c:
        uris = {str(r.uri) for r in (await c.list_resources()).resources}
        assert {"skill://pdf-tools", "skill://pdf-tools/reference.md", "skill://pdf-tools/scripts/fill_form.py",
                "skill://spreadsheet-zh", "agent://researcher"} <= uris
        assert not any("old-notes" in u or "broken" in u or "leak" in u for u in uris)
        ref = await c.read_resource("skill://pdf-tools/reference.md")
        assert ref.contents[0].text == "# Reference\nForm fields are named.\n"
        md = await c.read_resource("skill://pdf-tools")
        assert md.contents[0].text == PDF_SKILL
        card = json.loads((await c.read_resource("agent://researcher")).contents[0].text)
        assert card["system_prompt"] == "You are a meticulous researcher." and card["slot"] == "reasoning"
        for uri in ("skill://x/../../secret", "skill://pdf-tools/../../secret.txt", "skill://pdf-tools/%2E%2E/x",
                    "skill://pdf-tools/leak.txt", "skill://old-notes", "skill://pdf-tools//etc/passwd"):
            with pytest.raises(MCPError) as refused:
                await c.read_resource(uri)
            assert "top secret" not in str(refused.value)


async def test_skill_resources_follow_the_folders_and_say_each_file_s_type(skill_settings: Any, skills_root: Path) -> None:
    """Skill resources are listed from the skills there are now and read through the templates: a file
    named with a space or Chinese reads under its listed (quoted) URI with its own MIME type; a skill that
    is gone is neither listed nor readable."""
    (skills_root / "pdf-tools" / "my notes 笔记.md").write_text("# 笔记\n", encoding="utf-8")
    async with connect(skill_settings) as c:
        listed = {str(r.uri): r for r in (await c.list_resources()).resources}
        quoted = "skill://pdf-tools/my%20notes%20%E7%AC%94%E8%AE%B0.md"
        assert listed[quoted].mime_type == "text/markdown"
        assert listed["skill://pdf-tools/scripts/fill_form.py"].mime_type == "text/x-python"
        assert listed["skill://pdf-tools"].description.startswith("Extract text and tables")
        note = (await c.read_resource(quoted)).contents[0]
        assert note.text == "# 笔记\n" and note.mime_type == "text/markdown"
        script = (await c.read_resource("skill://pdf-tools/scripts/fill_form.py")).contents[0]
        assert script.text == "print('fill')\n" and script.mime_type == "text/x-python"
        (skills_root / "spreadsheet-zh" / "SKILL.md").unlink()
        assert not any("spreadsheet-zh" in uri for uri in {str(r.uri) for r in (await c.list_resources()).resources})
        with pytest.raises(MCPError):
            await c.read_resource("skill://spreadsheet-zh")


async def test_list_skills_searches_descriptions_in_both_languages(skill_settings: Any) -> None:
    async with connect(skill_settings) as c:
        everything = (await c.call_tool("list_skills", {})).structured_content
        assert [s["name"] for s in everything["skills"]] == ["pdf-tools", "spreadsheet-zh"]
        assert everything["problems"] == 1  # broken-skill
        found = (await c.call_tool("list_skills", {"query": "pull the tables out of a pdf document"})).structured_content
        assert found["skills"][0]["name"] == "pdf-tools"
        zh = (await c.call_tool("list_skills", {"query": "汇总每月销售报表"})).structured_content
        assert [s["name"] for s in zh["skills"]] == ["spreadsheet-zh"]
        none = (await c.call_tool("list_skills", {"query": "weather forecast"})).structured_content
        assert none["skills"] == [] and "try other words" in none["hint"]


async def test_load_skill_pages_and_reads_files(skill_settings: Any) -> None:
    async with connect(skill_settings) as c:
        body = (await c.call_tool("load_skill", {"name": "pdf-tools"})).structured_content
        assert body["content"].startswith("# PDF tools") and body["next_offset"] is None
        assert body["files"] == ["reference.md", "scripts/fill_form.py"]
        assert body["allowed_tools"] == ["read_file", "index_path"]
        ref = (await c.call_tool("load_skill", {"name": "pdf-tools", "path": "reference.md"})).structured_content
        assert ref["content"].startswith("# Reference")
        for args, message in [({"name": "old-notes"}, "disabled"), ({"name": "nope"}, "No skill 'nope'"),
                              ({"name": "pdf-tools", "path": "../secret.txt"}, "no '..'"),
                              ({"name": "pdf-tools", "path": "leak.txt"}, "outside skill")]:
            refused = await c.call_tool("load_skill", args)
            assert refused.is_error and message in text_of(refused), text_of(refused)


async def test_file_type_hint_when_a_mapped_file_is_indexed_or_read(skill_settings: Any, workspace: Path) -> None:
    """The first mapped file of a session brings the skill's instructions with it (auto-loaded where the model
    sees them); later ones point at load_skill."""
    make_pdf(workspace / "form.pdf", [["Name: ____ Date: ____"]])
    (workspace / "notes.txt").write_text("plain notes")
    async with connect(skill_settings) as c:
        indexed = (await c.call_tool("index_path", {"path": "form.pdf"})).structured_content
        assert indexed["skill_hint"].startswith("The pdf-tools skill has instructions for this file type; follow them")
        assert "Use scripts/fill_form.py to fill forms." in indexed["skill_hint"]
        read = (await c.call_tool("read_file", {"path": "form.pdf"})).structured_content
        assert read["skill_hint"].startswith("The pdf-tools skill has instructions for this file type: load_skill('pdf-tools')")
        assert "fill_form" not in read["skill_hint"]
        plain = (await c.call_tool("read_file", {"path": "notes.txt"})).structured_content
        assert plain.get("skill_hint") is None


async def test_skill_folders_are_read_only_to_file_tools(make_settings: Any, tmp_path: Path, skills_root: Path) -> None:
    settings = make_settings(roots=[tmp_path], skills_dirs=[skills_root])
    async with connect(settings, elicitation_callback=elicitation_answer("accept")) as c:  # the user approves
        readable = await c.call_tool("read_file", {"path": "skills/pdf-tools/reference.md"})
        assert not readable.is_error
        for tool, args in [("write_file", {"path": "skills/pdf-tools/SKILL.md", "content": "x"}),
                           ("write_file", {"path": "skills/new/SKILL.md", "content": "x"}),
                           ("edit_file", {"path": "skills/pdf-tools/reference.md", "old_string": "Form",
                                          "new_string": "Evil"})]:
            refused = await c.call_tool(tool, args)
            assert refused.is_error and "inside a skill folder" in text_of(refused), text_of(refused)
    assert (skills_root / "pdf-tools" / "SKILL.md").read_text() == PDF_SKILL


async def test_list_changed_when_skill_folders_change(skill_settings: Any, skills_root: Path) -> None:
    received: list[str] = []

    async def on_message(message: Any) -> None:
        method = getattr(message, "method", None)
        if method:
            received.append(method)

    async with connect(skill_settings, "legacy", message_handler=on_message) as c:
        assert "csv-tools" not in {p.name for p in (await c.list_prompts()).prompts}
        write_skill(skills_root, "csv-tools", "---\nname: csv-tools\ndescription: Clean CSV files.\n---\nSteps.\n")
        found = (await c.call_tool("list_skills", {"refresh": True})).structured_content
        assert "csv-tools" in [s["name"] for s in found["skills"]]
        with anyio.fail_after(30):
            while not {"notifications/prompts/list_changed", "notifications/resources/list_changed"} <= set(received):
                await anyio.sleep(0.01)
        assert "csv-tools" in {p.name for p in (await c.list_prompts()).prompts}
        (skills_root / "csv-tools" / "SKILL.md").unlink()
        assert "csv-tools" not in {p.name for p in (await c.list_prompts()).prompts}  # re-scan on list


async def test_prompts_in_the_2026_era(skill_settings: Any) -> None:
    async with connect(skill_settings, "auto") as c:
        assert c.protocol_version == "2026-07-28"
        names = {p.name for p in (await c.list_prompts()).prompts}
        assert {"pdf-tools", "spreadsheet-zh"} <= names
        got = await c.get_prompt("spreadsheet-zh")
        assert "按月份汇总销售额" in got.messages[0].content.text
        assert "skill://pdf-tools/reference.md" in {str(r.uri) for r in (await c.list_resources()).resources}
        assert (await c.read_resource("skill://pdf-tools/reference.md")).contents[0].mime_type == "text/markdown"


def test_doctor_names_each_broken_skill_and_the_model_slots(skill_settings: Any, skills_root: Path) -> None:
    from mcp_server.cmd_doctor import check_model_slots, check_skills

    check = check_skills(skill_settings)
    assert not check.ok and not check.required
    assert check.detail.startswith("2 loaded (pdf-tools, spreadsheet-zh)") and "disabled: old-notes" in check.detail
    broken = skills_root / "broken-skill" / "SKILL.md"
    assert f"BROKEN {broken}: 'description' is missing from its front matter; the skill is skipped" in check.detail
    slots = check_model_slots(skill_settings.model_copy(update={"llm_base_url": "http://x/v1", "llm_model": "m",
                                                                "llm_code_model": "coder"}))
    assert slots.ok and "code: http://x/v1 model coder (from base: base_url)" in slots.detail
    assert "chat: http://x/v1 model m (from base: base_url, model)" in slots.detail
