"""README's tools and settings tables, generated from the registry and the Settings model.

`python -m mcp_server.readme_tables` rewrites both tables in README.md in place (run it after
adding a tool or a setting); tests/test_readme.py fails while README.md differs from them.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from foundation.settings import Settings, env_name
from foundation.toolspec import ToolSpec
from mcp_server import registry

README = Path(__file__).resolve().parents[1] / "README.md"
DEST_ALIASES = {"root": "roots"}  # flags whose dest is not the settings field's name
DATA_DIR_DEFAULT = "platform user data dir (e.g. `~/.local/share/generalagent-mcp`)"


def tool_kind(spec: ToolSpec) -> str:
    kind = "read-only" if spec.read_only else "writes (destructive)" if spec.destructive else "writes"
    return kind + (", open world" if spec.open_world else "")


def summary(spec: ToolSpec) -> str:
    """The tool's one-line summary, escaped for a Markdown table cell."""
    return spec.summary.replace("|", "\\|")


def tools_table() -> str:
    rows = [f"| `{s.name}` | {summary(s)} | {tool_kind(s)} | {s.tier} |" for s in registry.TOOLS]
    return "\n".join(["| Tool | What it does | Kind | Tier |", "|---|---|---|---|", *rows]) + "\n"


def cli_flags() -> dict[str, str]:
    """Settings field -> the command-line flag that sets it (`--root`, `serve --enable-bash`)."""
    from mcp_server.cli import build_parser

    flags: dict[str, str] = {}

    def visit(parser: argparse.ArgumentParser, prefix: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    visit(sub, f"{prefix}{name} ")
            elif action.option_strings:
                field = DEST_ALIASES.get(action.dest, action.dest.removeprefix("set_"))
                if field in Settings.model_fields and field not in flags:
                    flags[field] = prefix + action.option_strings[-1]

    visit(build_parser(), "")
    return flags


def default_text(field: str) -> str:
    info = Settings.model_fields[field]
    if field == "data_dir":
        return DATA_DIR_DEFAULT
    value: Any = info.get_default(call_default_factory=True)
    if value is None or value == ():
        return "—"
    if isinstance(value, bool):
        value = str(value).lower()
    return f"`{value}`"


def settings_table() -> str:
    flags = cli_flags()
    rows = []
    for field, info in Settings.model_fields.items():
        name = f"`{field}`" + (f" (`{flags[field]}`)" if field in flags else "")
        rows.append(f"| {name} | `{env_name(field)}` | {default_text(field)} | {info.description or ''} |")
    return "\n".join(["| Setting | Environment variable | Default | Meaning |", "|---|---|---|---|", *rows]) + "\n"


def replace_block(text: str, marker: str, body: str) -> str:
    pattern = re.compile(rf"(<!-- {marker}:start.*?-->\n)(.*?)(<!-- {marker}:end -->)", re.S)
    if not pattern.search(text):
        raise SystemExit(f"README.md has no <!-- {marker}:start --> ... <!-- {marker}:end --> block")
    return pattern.sub(lambda m: m.group(1) + body + m.group(3), text, count=1)


def render(text: str) -> str:
    return replace_block(replace_block(text, "tools", tools_table()), "settings", settings_table())


def main() -> int:
    text = README.read_text(encoding="utf-8")
    new = render(text)
    if new != text:
        README.write_text(new, encoding="utf-8")
        print("README.md: tools and settings tables updated", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
