"""Claude-Desktop-like: the real console script over stdio, no elicitation, the real write_file,
approval with `generalagent-mcp approve` in another process, then the identical call writes once."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.conftest import MODES
from tests.test_approval_oob import approve

pytestmark = pytest.mark.anyio
CONSOLE_SCRIPT = Path(__import__("sys").executable).with_name("generalagent-mcp")


@pytest.mark.parametrize("mode", MODES)
async def test_write_file_over_stdio_needs_out_of_band_approval(tmp_path: Path, mode: str) -> None:
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    data_dir, root = tmp_path / "data", tmp_path / "root"
    root.mkdir()
    params = StdioServerParameters(command=str(CONSOLE_SCRIPT), args=["serve"], cwd=str(tmp_path),
                                   env={"GENERALAGENT_DATA_DIR": str(data_dir), "GENERALAGENT_ROOTS": str(root)})
    target = root / "notes" / "plan.md"
    args: dict[str, Any] = {"path": "notes/plan.md", "content": "step 1\n"}
    with (tmp_path / "stderr.txt").open("w") as err:
        async with Client(stdio_client(params, errlog=err), mode=mode) as client:
            await client.list_tools()
            first = await client.call_tool("write_file", args)
            assert first.is_error and "Approval required" in first.content[0].text
            approval_id = re.search(r"Approval id: (ap-[a-z2-9]{6})", first.content[0].text).group(1)  # type: ignore[union-attr]
            assert not target.exists()
            done = approve(SimpleNamespace(data_dir=data_dir, database_url=None), approval_id)
            assert done.returncode == 0 and "write_file" in done.stdout and "notes/plan.md" in done.stdout
            changed = await client.call_tool("write_file", {**args, "content": "rm -rf everything\n"})
            assert changed.is_error and "Approval required" in changed.content[0].text and not target.exists()
            written = await client.call_tool("write_file", args)
            assert not written.is_error, written.content
            assert target.read_text() == "step 1\n"
            target.unlink()
            again = await client.call_tool("write_file", args)
            assert again.is_error and "Approval required" in again.content[0].text and not target.exists()
