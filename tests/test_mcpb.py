"""The MCP Bundle: manifest generated from the registry, validated and packed by the pinned `mcpb`
tool, and its bootstrap starts the server over stdio (with an existing environment: creating
server/venv needs the package index, which tests never use)."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from mcp_server import registry
from mcp_server.mcpb import manifest, stage
from tests.test_conformance import NODE_SH, ensure_node_tools


def mcpb(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(NODE_SH), "mcpb", *args], capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)


def test_manifest_lists_every_tool_and_the_user_config() -> None:
    found = manifest()
    assert [t["name"] for t in found["tools"]] == [spec.name for spec in registry.TOOLS]
    assert all(t["description"] for t in found["tools"])
    config = found["user_config"]
    assert config["roots"]["type"] == "directory" and config["roots"]["multiple"] is True
    assert config["llm_api_key"]["sensitive"] is True and not config["llm_api_key"]["required"]
    env = found["server"]["mcp_config"]["env"]
    assert env["GENERALAGENT_LLM_API_KEY"] == "${user_config.llm_api_key}"
    assert "${user_config.roots}" in found["server"]["mcp_config"]["args"]


def test_mcpb_validates_and_packs_the_bundle(tmp_path: Path) -> None:
    ensure_node_tools()
    folder = stage(tmp_path / "bundle")
    checked = mcpb("validate", str(folder / "manifest.json"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    out = tmp_path / "generalagent-mcp.mcpb"
    packed = mcpb("pack", str(folder), str(out))
    assert packed.returncode == 0, packed.stdout + packed.stderr
    with zipfile.ZipFile(out) as archive:
        names = set(archive.namelist())
        assert json.loads(archive.read("manifest.json"))["tools"] == manifest()["tools"]
    assert {"manifest.json", "server/bootstrap.py", "server/src/mcp_server/server.py",
            "server/src/constraints.txt", "server/src/pyproject.toml"} <= names
    assert not any("__pycache__" in name for name in names)


@pytest.mark.anyio
async def test_bootstrap_starts_the_server_with_the_user_config(tmp_path: Path) -> None:
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    folder = stage(tmp_path / "bundle")
    docs = tmp_path / "My Documents"
    docs.mkdir()
    (docs / "hello.md").write_text("# Hello\n\nbundle works\n", encoding="utf-8")
    env: dict[str, Any] = {
        "GENERALAGENT_BUNDLE_PYTHON": sys.executable,  # instead of creating server/venv (needs the index)
        "GENERALAGENT_DATA_DIR": str(tmp_path / "data"),
        "GENERALAGENT_LLM_BASE_URL": "",  # optional settings the user skipped
        "GENERALAGENT_LLM_API_KEY": "${user_config.llm_api_key}",
        "PYTHONPATH": str(folder / "server" / "src"),  # the staged source runs (deps from this environment)
    }
    params = StdioServerParameters(command=sys.executable, args=[str(folder / "server" / "bootstrap.py"), str(docs)],
                                   env=env, cwd=str(tmp_path))
    with (tmp_path / "stderr.txt").open("w") as err:
        async with Client(stdio_client(params, errlog=err)) as client:
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert {"search_documents", "read_file"} <= names
            read = await client.call_tool("read_file", {"path": "hello.md"})  # relative to the configured root
            assert not read.is_error and "bundle works" in read.content[0].text
