"""Issue 14, reproducers 6 and 8: oversized arguments are refused at the edge before any analysis,
the policy analysis runs off the event loop (a slow verdict does not hold other calls), a full disk
is reported plainly, and errors never show the data folder's path or where a symlink points."""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import subprocess
import threading
from pathlib import Path
from typing import Annotated, Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field

from foundation.bounding import MAX_COMMAND_CHARS
from foundation.calls import CallOrigin
from foundation.errors import NotFound
from foundation.toolspec import ToolSpec
from mcp_server import registry
from mcp_server.approval.gate import PolicyGate
from mcp_server.dispatch import Dispatcher, lone_surrogate_in, redact_data_dir
from tests.approval_helpers import elicitation_answer
from tests.conftest import connect
from tests.json_strategies import json_values
from tools.runtime import Runtime

pytestmark = pytest.mark.anyio
HUGE_PATH = "a/" * 1_950_000  # 3.9 MB, as in the red team's reproducer


async def test_huge_path_is_refused_at_the_edge(settings: Any) -> None:
    async with connect(settings) as client:
        result = await client.call_tool("read_file", {"path": HUGE_PATH})
        assert result.is_error and "4,096 bytes" in result.content[0].text
        assert len(result.content[0].text) < 400
        now = await client.call_tool("now", {})
        assert not now.is_error


async def test_huge_command_is_refused_at_the_edge(make_settings: Any) -> None:
    async with connect(make_settings(bash_enabled=True)) as client:
        result = await client.call_tool("run_bash_command", {"command": "echo " + "x" * 300_000})
    assert result.is_error and f"longer than {MAX_COMMAND_CHARS:,} characters" in result.content[0].text


async def test_a_slow_verdict_does_not_hold_other_calls(settings: Any, workspace: Path) -> None:
    """The verdict for read_file blocks until released; `now` must finish meanwhile. If the policy
    ran on the event loop, `now` could not run until the release (which comes only at the deadline)."""
    import policy

    release = threading.Event()

    def decide(tool: str, args: dict[str, Any], context: Any) -> Any:
        if tool == "read_file":
            release.wait(60)
        return policy.decide(tool, args, context)

    (workspace / "a.txt").write_text("hello")
    dispatcher = Dispatcher(Runtime(settings), registry.TOOLS, gate=PolicyGate(settings, decide=decide))
    origin = CallOrigin(kind="client", client_id="t")
    done: dict[str, Any] = {}

    async def slow() -> None:
        done["read"] = await dispatcher.run("read_file", {"path": "a.txt"}, origin)

    async with anyio.create_task_group() as group:
        group.start_soon(slow)
        with anyio.fail_after(30):  # generous: a blocked loop would never get here before the release
            done["now"] = await dispatcher.run("now", {}, origin)
        assert "read" not in done and not release.is_set()
        release.set()
    assert done["read"].content == "hello"


# -- plain errors --------------------------------------------------------------------------------


class Done(BaseModel):
    ok: bool = Field(description="Always true.")


def fill_device(what: Annotated[str, Field(description="disk or sqlite")] = "disk") -> Done:
    """Writes where there is no space (test tool)."""
    if what == "disk":
        with open("/dev/full", "wb") as handle:  # every write fails with ENOSPC
            handle.write(b"x")
            handle.flush()
    else:
        con = sqlite3.connect(":memory:")
        con.execute("PRAGMA max_page_count=2")
        con.execute("CREATE TABLE t(x)")
        con.executemany("INSERT INTO t VALUES (?)", [("x" * 1000,)] * 100)
    return Done(ok=True)


def data_dir_error(path: Annotated[str, Field(description="A path in the data dir.")]) -> Done:
    """Fails naming a file in the server's data folder (test tool)."""
    if path.startswith("internal:"):
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", path.removeprefix("internal:"))
    raise NotFound(f"No list in {path}. Workspace stays visible: {Path(path).parent / 'workspaces' / 's1'}.")


@pytest.fixture
def failing_tools(monkeypatch: Any) -> None:
    extra = [ToolSpec(fill_device, title="Fill", read_only=True, tier="full"),
             ToolSpec(data_dir_error, title="Fail", read_only=True, tier="full")]
    monkeypatch.setattr(registry, "TOOLS", [*registry.TOOLS, *extra])


@pytest.mark.parametrize("what", ["disk", "sqlite"])
async def test_disk_full_is_reported_plainly(settings: Any, failing_tools: None, what: str) -> None:
    if what == "disk" and not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this platform")
    async with connect(settings) as client:
        result = await client.call_tool("fill_device", {"what": what})
    assert result.is_error
    assert result.content[0].text.endswith(": The disk is full: free space and retry."), result


@contextlib.contextmanager
def tiny_disk(path: Path) -> Any:
    path.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(path)],
                                           capture_output=True, check=False).returncode != 0:
        pytest.skip("cannot mount a small tmpfs here (needs root)")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


async def test_write_file_on_a_full_disk_says_so(make_settings: Any, tmp_path: Path) -> None:
    with tiny_disk(tmp_path / "small") as root:
        async with connect(make_settings(roots=[root]), elicitation_callback=elicitation_answer("accept")) as client:
            result = await client.call_tool("write_file", {"path": "big.txt", "content": "x" * 200_000})
        assert result.is_error and result.content[0].text.endswith(": The disk is full: free space and retry.")
        assert [p.name for p in root.iterdir()] == []  # no temp file left behind


async def test_errors_never_show_the_data_dir(settings: Any, failing_tools: None, data_dir: Path) -> None:
    real = os.path.realpath(data_dir)
    async with connect(settings) as client:
        named = await client.call_tool("data_dir_error", {"path": f"{real}/todos.sqlite3"})
        internal = await client.call_tool("data_dir_error", {"path": f"internal:{data_dir}/index/x.db"})
    assert named.is_error and internal.is_error
    assert real not in named.content[0].text.replace(f"{real}/workspaces/s1", "")
    assert "<data dir>/todos.sqlite3" in named.content[0].text and f"{real}/workspaces/s1" in named.content[0].text
    assert str(data_dir) not in internal.content[0].text and "<data dir>/index/x.db" in internal.content[0].text


async def test_symlink_targets_outside_are_not_shown(settings: Any, workspace: Path, tmp_path: Path) -> None:
    secret_place = tmp_path / "elsewhere-secret-name"
    secret_place.mkdir()
    (secret_place / "f.txt").write_text("x")
    (workspace / "link").symlink_to(secret_place / "f.txt")
    (workspace / "dirlink").symlink_to(secret_place)
    async with connect(settings, elicitation_callback=elicitation_answer("accept")) as client:
        for tool, args in [("read_file", {"path": "link"}), ("read_file", {"path": "dirlink/f.txt"}),
                           ("write_file", {"path": "link", "content": "y"}), ("search_file", {"path": "link", "query": "x"}),
                           ("list_workspace_files", {"directory": "dirlink"})]:
            result = await client.call_tool(tool, args)
            assert result.is_error, (tool, result)
            assert "elsewhere-secret-name" not in result.content[0].text, (tool, result.content[0].text)


def test_redact_data_dir_keeps_workspaces_and_siblings() -> None:
    data = Path("/srv/data")
    assert redact_data_dir("at /srv/data/approvals.sqlite3.", data) == "at <data dir>/approvals.sqlite3."
    assert redact_data_dir("root /srv/data/workspaces/s1", data) == "root /srv/data/workspaces/s1"
    assert redact_data_dir("/srv/data2/x and '/srv/data'", data) == "/srv/data2/x and '<data dir>'"


# -- lone surrogates: not text; refused with invalid params, never an internal error ----------------------


@pytest.mark.anyio
async def test_a_lone_surrogate_in_any_argument_is_refused_clearly(make_settings: Any) -> None:
    """Red team: a nested `\\ud800` (todo_write's items) made the approval store's hash raise
    UnicodeEncodeError, reported as an internal error."""
    calls = [("todo_write", {"todos": [{"content": "a\ud800", "status": "pending"}]}),
             ("count_tokens", {"text": "\udfff"}), ("read_file", {"path": "a\ud800"}),
             ("write_file", {"path": "s\ud800.txt", "content": "x"})]
    async with connect(make_settings(tool_profile="full")) as client:
        for tool, args in calls:
            result = await client.call_tool(tool, args)
            text = result.content[0].text
            assert result.is_error and "text must be valid Unicode" in text and "Internal error" not in text, text
        assert not (await client.call_tool("todo_read", {})).is_error


@settings(max_examples=300, deadline=None)
@given(value=json_values(), where=st.integers(0, 50), char=st.integers(0xD800, 0xDFFF))
def test_a_lone_surrogate_is_found_wherever_it_is(value: Any, where: int, char: int) -> None:
    def plant(v: Any, n: list[int]) -> Any:
        if isinstance(v, str):
            n[0] -= 1
            return v + chr(char) if n[0] == 0 else v
        if isinstance(v, dict):
            return {k: plant(x, n) for k, x in v.items()}
        if isinstance(v, list):
            return [plant(x, n) for x in v]
        return v

    counter = [where + 1]
    planted = {"arg": plant(value, counter)}
    if counter[0] > 0:  # fewer strings than `where`: put it in a key
        planted[chr(char)] = 1
    assert lone_surrogate_in(planted) is not None
    assert lone_surrogate_in({"arg": value}) is None  # UTF-8 text only: nothing found
