"""Error hints name tools the model can call: in the default profile, or together with enable_tools.

A hint that says "Call list_workspace_files" while that tool is not listed sends the model into a
second error ("not enabled in this session"). The property reads every error text the code raises
(the string pieces of each `raise`, f-strings included) and checks the tool names in it. (Listing
list_workspace_files in the default profile instead would break its 5,000-token tools/list budget:
tests/test_tiers_tokens.py.)
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest

from mcp_server.registry import TOOLS
from mcp_server.server import PROFILE_TIERS
from tests.conftest import connect

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("foundation", "policy", "indexing", "context", "tools", "mcp_server")
DEFAULT = {spec.name for spec in TOOLS if spec.tier in PROFILE_TIERS["default"]}
HIDDEN = {spec.name for spec in TOOLS} - DEFAULT
# Texts that name a tool outside the default profile on purpose:
EXEMPT = {
    # raised by run_bash_command itself when disabled; the fix it names is a server setting
    ("tools/bash.py", "run_bash_command is disabled"),
    # raised by the web tools themselves (turned off, or what they can read); the fix is a server setting
    ("tools/web.py", "fetch_url"),
    ("tools/web.py", "web_search"),
    ("tools/web_fetch.py", "fetch_url reaches only public addresses"),
    # a tool to give a sub-agent (delegate_task's tools: any registered tool), not one the client calls
    ("tools/images.py", "give the sub-agent render_page"),
    # examples of rule syntax for the policy file / CLI, not a hint to call a tool
    ("policy/rules.py", "run_bash_command"),
    ("mcp_server/cmd_policy.py", "run_bash_command"),
}


def _raise_texts() -> list[tuple[str, int, str]]:
    texts = []
    for package in PACKAGES:
        for file in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(file.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.Raise) and node.exc is not None:
                    pieces = [sub.value for sub in ast.walk(node.exc)
                              if isinstance(sub, ast.Constant) and isinstance(sub.value, str)]
                    if pieces:
                        texts.append((file.relative_to(ROOT).as_posix(), node.lineno, " ".join(pieces)))
    return texts


def test_every_tool_an_error_hint_names_is_in_the_default_profile() -> None:
    texts = _raise_texts()
    assert len(texts) > 200  # the scan sees the code's errors
    named = re.compile(r"\b(" + "|".join(sorted(HIDDEN, key=len, reverse=True)) + r")\b")
    wrong = []
    for file, line, text in texts:
        tools = set(named.findall(text))
        if not tools or "enable_tools" in text or any(file == f and key in text for f, key in EXEMPT):
            continue
        wrong.append(f"{file}:{line}: {sorted(tools)} in {text[:100]!r}")
    assert not wrong, "hints name tools the default profile does not list:\n" + "\n".join(wrong)


@pytest.mark.anyio
async def test_read_file_hints_work_in_the_default_profile(make_settings: Any, workspace: Path) -> None:
    (workspace / "docs").mkdir()
    (workspace / "docs" / "a.md").write_text("# A\n")
    async with connect(make_settings(tool_profile="default")) as client:
        listed = {tool.name for tool in (await client.list_tools()).tools}
        missing = await client.call_tool("read_file", {"path": "nope.txt"})
        assert missing.is_error and "list_workspace_files" in missing.content[0].text
        folder = await client.call_tool("read_file", {"path": "docs"})
        assert folder.is_error and "list_workspace_files" in folder.content[0].text
        for hint in (missing.content[0].text, folder.content[0].text):
            named = set(re.findall(r"\b[a-z]+_[a-z_]+\b", hint)) & {spec.name for spec in TOOLS}
            assert named <= listed | {"list_workspace_files"} and 'enable_tools(["list_workspace_files"])' in hint
        # the hint, followed as written, works
        enabled = await client.call_tool("enable_tools", {"names": ["list_workspace_files", "find_files"]})
        assert not enabled.is_error, enabled.content[0].text
        listing = await client.call_tool("list_workspace_files", {"directory": "docs"})
        assert not listing.is_error and [e["name"] for e in listing.structured_content["entries"]] == ["a.md"]
        found = await client.call_tool("find_files", {"pattern": "*.md"})
        assert not found.is_error and found.structured_content["total_matches"] == 1
