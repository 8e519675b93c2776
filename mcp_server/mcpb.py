"""The MCP Bundles (.mcpb) for one-click install in Claude Desktop: their manifest.json, generated from
the tool registry (its tool list is what the bundle's server lists), and the staged bundle folders that
`mcpb pack` zips. Two kinds:

`uv` (manifest 0.4, the default): the app provides Python and the dependencies itself (with uv, from
the pinned pyproject.toml at the bundle's root); no Python needed on the computer.

    manifest.json
    pyproject.toml          dependencies pinned exactly, constraints.txt as [tool.uv] constraint-dependencies
    foundation/ ... context/, constraints.txt, README.md      this project's source
    server/bootstrap.py     runs `python -m mcp_server serve` with the Python it was started by

`python` (manifest 0.3, the fallback for apps without the uv type): needs Python >= 3.11 on the computer.

    manifest.json
    server/bootstrap.py     stdlib only: makes server/venv with the user's Python on first start (pip install
                            of server/src with its pinned constraints), then runs the server from it
    server/src/             this project's source, pyproject.toml and constraints.txt

    python -m mcp_server.mcpb stage DIR [uv|python]     write a bundle folder (then: mcpb pack DIR OUT.mcpb)
    python -m mcp_server.mcpb manifest [uv|python]      print its manifest.json

scripts/build_mcpb.sh builds both with the pinned mcpb tool.
"""

from __future__ import annotations

import json
import shutil
import sys
import tomllib
from pathlib import Path
from typing import Any, Literal

Kind = Literal["uv", "python"]
ROOT = Path(__file__).resolve().parents[1]
SOURCE_PACKAGES = ("foundation", "policy", "mcp_server", "tools", "indexing", "context")
SOURCE_FILES = ("pyproject.toml", "constraints.txt", "README.md")
MANIFEST_VERSION = {"uv": "0.4", "python": "0.3"}
BUNDLE_PROFILE = "default"  # the bundle's server runs with the default tool profile
BOOTSTRAP = Path(__file__).with_name("mcpb_bootstrap.py")


def project() -> dict[str, Any]:
    with (ROOT / "pyproject.toml").open("rb") as fh:
        return dict(tomllib.load(fh)["project"])


def manifest_tools() -> list[dict[str, str]]:
    """The tools the bundle's server lists (its profile's tiers), with the first sentence of each description;
    the others stay reachable through enable_tools."""
    from mcp_server import registry
    from mcp_server.server import PROFILE_TIERS

    tiers = PROFILE_TIERS[BUNDLE_PROFILE]
    return [{"name": spec.name, "description": spec.summary} for spec in registry.TOOLS if spec.tier in tiers]


def _server(kind: Kind) -> dict[str, Any]:
    env = {
        "GENERALAGENT_LLM_BASE_URL": "${user_config.llm_base_url}",
        "GENERALAGENT_LLM_MODEL": "${user_config.llm_model}",
        "GENERALAGENT_LLM_API_KEY": "${user_config.llm_api_key}",
        "PYTHONUNBUFFERED": "1",
    }
    if kind == "uv":
        return {"type": "uv", "entry_point": "server/bootstrap.py", "mcp_config": {
            "command": "uv", "args": ["run", "--directory", "${__dirname}", "server/bootstrap.py", "${user_config.roots}"],
            "env": env}}
    return {"type": "python", "entry_point": "server/bootstrap.py", "mcp_config": {
        "command": "python3", "args": ["${__dirname}/server/bootstrap.py", "${user_config.roots}"], "env": env,
        "platform_overrides": {"win32": {"command": "python"}}}}


def manifest(kind: Kind = "uv") -> dict[str, Any]:
    meta = project()
    python = meta.get("requires-python", ">=3.11")
    return {
        "manifest_version": MANIFEST_VERSION[kind],
        "name": "generalagent-mcp",
        "display_name": "generalagent",
        "version": meta["version"],
        "description": "Agent runtime as MCP tools: document search, context tools, memory, todos, approvals.",
        "long_description": meta["description"],
        "author": {"name": "generalagent-mcp contributors"},
        "license": meta.get("license", "MIT"),
        "keywords": ["search", "documents", "pdf", "context", "memory", "agent"],
        "server": _server(kind),
        "tools": manifest_tools(),
        "compatibility": {"platforms": ["darwin", "linux", "win32"], "runtimes": {"python": python}},
        "user_config": _user_config(),
    }


def _user_config() -> dict[str, Any]:
    return {
        "roots": {
            "type": "directory", "title": "Workspace folders", "multiple": True, "required": True,
            "description": "Folders the tools may read, index and (with your approval) write.",
            "default": ["${DOCUMENTS}"],
        },
        "llm_base_url": {
            "type": "string", "title": "LLM endpoint (optional)", "required": False,
            "description": "OpenAI-compatible base URL for compact_context and delegate_task, "
            "e.g. https://api.openai.com/v1 or http://127.0.0.1:11434/v1.",
        },
        "llm_model": {
            "type": "string", "title": "LLM model (optional)", "required": False,
            "description": "Model name at that endpoint, e.g. gpt-4o-mini.",
        },
        "llm_api_key": {
            "type": "string", "title": "LLM API key (optional)", "required": False, "sensitive": True,
            "description": "API key for the LLM endpoint (stored securely by the app).",
        },
    }


def stage(out: Path, kind: Kind = "uv") -> Path:
    """Write the bundle folder `out` (replaced when it exists); returns it."""
    if out.exists():
        shutil.rmtree(out)
    src = out if kind == "uv" else out / "server" / "src"
    (out / "server").mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for package in SOURCE_PACKAGES:
        shutil.copytree(ROOT / package, src / package, ignore=ignore)
    for name in SOURCE_FILES:
        shutil.copy2(ROOT / name, src / name)
    if kind == "uv":
        (out / "pyproject.toml").write_text(pinned_pyproject(), encoding="utf-8")
    shutil.copy2(BOOTSTRAP, out / "server" / "bootstrap.py")
    (out / "manifest.json").write_text(json.dumps(manifest(kind), indent=2, ensure_ascii=False) + "\n",
                                       encoding="utf-8")
    return out


def constraints() -> dict[str, str]:
    """constraints.txt as {normalised name: its line}."""
    lines = [line.split("#")[0].strip() for line in (ROOT / "constraints.txt").read_text().splitlines()]
    return {_name(line): line for line in lines if line}


def _name(requirement: str) -> str:
    import re

    return re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0].lower().replace("_", "-").replace(".", "-")


BUNDLED_EXTRAS = ("semantic", "onnx")  # installed by the bundles too: meaning-aware search where the model has wheels


def pinned_pyproject() -> str:
    """pyproject.toml whose dependencies are the project's and those of BUNDLED_EXTRAS, each pinned to its
    constraints.txt version (extras and environment markers kept), and every constraint as uv's
    constraint-dependencies: the app's uv installs exactly what the tests ran with."""
    import re
    import tomllib

    pins = constraints()
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    extras = tomllib.loads(text)["project"]["optional-dependencies"]

    def pinned(match: re.Match[str]) -> str:
        requirement, _, marker = match.group(1).partition(";")
        name = _name(requirement)
        named = re.match(r"[A-Za-z0-9_.-]+(\[[^\]]*\])?", requirement)
        version = pins[name].split("==", 1)[1] if "==" in pins.get(name, "") else None
        if version is None:
            return match.group(0)
        when = f"; {marker.strip()}" if marker else ""
        return f'    "{requirement[: named.end() if named else len(name)]}=={version}{when}",'

    head, rest = text.split("dependencies = [", 1)
    body, tail = rest.split("\n]", 1)
    body += "".join(f'\n    "{r}",' for extra in BUNDLED_EXTRAS for r in extras[extra])
    body = re.sub(r'^\s*"([^"]+)",', pinned, body, flags=re.M)
    uv = "\n[tool.uv]\nconstraint-dependencies = [\n" + "".join(f'    "{line}",\n' for line in pins.values()) + "]\n"
    return head + "dependencies = [" + body + "\n]" + tail + uv


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    kinds = ("uv", "python")
    if args[:1] == ["manifest"] and len(args) <= 2 and (args[1:] or ["uv"])[0] in kinds:
        print(json.dumps(manifest((args[1:] or ["uv"])[0]), indent=2, ensure_ascii=False))  # type: ignore[arg-type]
        return 0
    if len(args) in (2, 3) and args[0] == "stage" and (args[2:] or ["uv"])[0] in kinds:
        print(stage(Path(args[1]).resolve(), (args[2:] or ["uv"])[0]))  # type: ignore[arg-type]
        return 0
    print("usage: python -m mcp_server.mcpb stage DIR [uv|python] | manifest [uv|python]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
