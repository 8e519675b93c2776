"""The MCP Bundle (.mcpb) for one-click install in Claude Desktop: its manifest.json, generated from
the tool registry (so it never drifts), and the staged bundle folder that `mcpb pack` zips.

Layout of the bundle (server.type "python"):

    manifest.json
    server/bootstrap.py     stdlib only: makes server/venv with the user's Python (>= 3.11) on first
                            start (pip install of server/src with its pinned constraints), then runs
                            `python -m mcp_server serve` from it over stdio
    server/src/             this project's source, pyproject.toml and constraints.txt

    python -m mcp_server.mcpb stage DIR     write the bundle folder DIR (then: mcpb pack DIR OUT.mcpb)
    python -m mcp_server.mcpb manifest      print manifest.json

scripts/build_mcpb.sh does both steps with the pinned mcpb tool.
"""

from __future__ import annotations

import json
import shutil
import sys
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SOURCE_PACKAGES = ("foundation", "mcp_server", "tools", "indexing", "context")
SOURCE_FILES = ("pyproject.toml", "constraints.txt", "README.md")
MANIFEST_VERSION = "0.3"
BOOTSTRAP = Path(__file__).with_name("mcpb_bootstrap.py")


def project() -> dict[str, Any]:
    with (ROOT / "pyproject.toml").open("rb") as fh:
        return dict(tomllib.load(fh)["project"])


def manifest_tools() -> list[dict[str, str]]:
    """Every registered tool, with the first sentence of its description."""
    from mcp_server import registry

    return [{"name": spec.name, "description": spec.summary} for spec in registry.TOOLS]


def manifest() -> dict[str, Any]:
    meta = project()
    python = meta.get("requires-python", ">=3.11")
    return {
        "manifest_version": MANIFEST_VERSION,
        "name": "generalagent-mcp",
        "display_name": "generalagent",
        "version": meta["version"],
        "description": "Agent runtime as MCP tools: document search, context tools, memory, todos, approvals.",
        "long_description": meta["description"],
        "author": {"name": "generalagent-mcp contributors"},
        "license": meta.get("license", "MIT"),
        "keywords": ["search", "documents", "pdf", "context", "memory", "agent"],
        "server": {
            "type": "python",
            "entry_point": "server/bootstrap.py",
            "mcp_config": {
                "command": "python3",
                "args": ["${__dirname}/server/bootstrap.py", "${user_config.roots}"],
                "env": {
                    "GENERALAGENT_LLM_BASE_URL": "${user_config.llm_base_url}",
                    "GENERALAGENT_LLM_MODEL": "${user_config.llm_model}",
                    "GENERALAGENT_LLM_API_KEY": "${user_config.llm_api_key}",
                    "PYTHONUNBUFFERED": "1",
                },
                "platform_overrides": {"win32": {"command": "python"}},
            },
        },
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


def stage(out: Path) -> Path:
    """Write the bundle folder `out` (replaced when it exists); returns it."""
    if out.exists():
        shutil.rmtree(out)
    src = out / "server" / "src"
    src.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for package in SOURCE_PACKAGES:
        shutil.copytree(ROOT / package, src / package, ignore=ignore)
    for name in SOURCE_FILES:
        shutil.copy2(ROOT / name, src / name)
    shutil.copy2(BOOTSTRAP, out / "server" / "bootstrap.py")
    (out / "manifest.json").write_text(json.dumps(manifest(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["manifest"]:
        print(json.dumps(manifest(), indent=2, ensure_ascii=False))
        return 0
    if len(args) == 2 and args[0] == "stage":
        print(stage(Path(args[1]).resolve()))
        return 0
    print("usage: python -m mcp_server.mcpb stage DIR | manifest", file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
