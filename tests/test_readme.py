"""README.md stays true: the two fresh-clone commands, the tool list, the settings table, configs."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from foundation.settings import Settings, env_name
from mcp_server import readme_tables, registry

ROOT = Path(__file__).resolve().parents[1]
FIX = "README.md is out of date: run .venv/bin/python -m mcp_server.readme_tables"


@pytest.fixture(scope="module")
def readme() -> str:
    return (ROOT / "README.md").read_text()


def section(readme: str, heading: str) -> str:
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", readme, re.S | re.M)
    assert match, f"README has no '## {heading}' section"
    return match.group(1)


def between(readme: str, marker: str) -> str:
    match = re.search(rf"<!-- {marker}:start.*?-->\n(.*?)<!-- {marker}:end -->", readme, re.S)
    assert match, f"README has no <!-- {marker}:start --> ... <!-- {marker}:end --> block"
    return match.group(1)


def test_exactly_two_fresh_clone_commands(readme: str) -> None:
    blocks = re.findall(r"```sh\n(.*?)```", section(readme, "Quick start"), re.S)
    assert len(blocks) == 1
    commands = [line.split("#")[0].strip() for line in blocks[0].splitlines() if line.strip()]
    assert commands == ["./scripts/serve.sh", "./scripts/test.sh"]
    for command in commands:
        script = ROOT / command
        assert script.is_file() and os.access(script, os.X_OK), command


def test_tool_and_settings_tables_are_generated(readme: str) -> None:
    """Both tables are exactly what the registry and Settings say (one row per tool and per setting)."""
    assert between(readme, "tools") == readme_tables.tools_table(), FIX
    assert between(readme, "settings") == readme_tables.settings_table(), FIX


def test_every_registered_tool_is_listed(readme: str) -> None:
    listed = re.findall(r"^\| `([a-z_][a-z0-9_]*)` \|", between(readme, "tools"), re.M)
    assert sorted(listed) == sorted(spec.name for spec in registry.TOOLS)


def test_every_setting_is_in_the_table(readme: str) -> None:
    table = between(readme, "settings")
    rows = re.findall(r"^\| `([a-z_]+)`.*?\| `(GENERALAGENT_[A-Z_]+)` \|", table, re.M)
    assert {field: env for field, env in rows} == {field: env_name(field) for field in Settings.model_fields}


def test_only_real_settings_are_mentioned(readme: str) -> None:
    known = {env_name(field) for field in Settings.model_fields}
    mentioned = set(re.findall(r"GENERALAGENT_[A-Z_]*[A-Z](?!_\*)\b", readme))  # GENERALAGENT_LLM_* is a family
    assert mentioned <= known, f"README names unknown settings: {sorted(mentioned - known)}"


def test_client_configurations(readme: str) -> None:
    clients = section(readme, "Connect a client")
    for needle in ("claude_desktop_config.json", ".vscode/mcp.json", ".cursor/mcp.json", "claude mcp add",
                   ".gemini/settings.json", ".venv/bin/generalagent-mcp"):
        assert needle in clients, needle
    configs = [json.loads(block) for block in re.findall(r"```json\n(.*?)```", clients, re.S)]
    vscode = [c for c in configs if "servers" in c]
    assert vscode and all(server["type"] in ("stdio", "http") for server in vscode[0]["servers"].values())
    desktop = [c for c in configs if "mcpServers" in c]
    assert desktop
    for config in desktop:
        for server in config["mcpServers"].values():
            assert server["command"].startswith("/"), "use absolute paths"
            assert server["args"] == ["serve"]


def test_benchmark_command(readme: str) -> None:
    assert "./scripts/bench.sh" in section(readme, "Benchmarks")
    assert os.access(ROOT / "scripts" / "bench.sh", os.X_OK)
