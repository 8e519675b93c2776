"""Names that are not UTF-8 and folders or files the server may not read, with real files on disk,
through the SDK client and the CLI: a clear error or a note that names the fix, never an internal
error or a folder that looks empty.

Permission checks need a user without CAP_DAC_OVERRIDE: as root each such test runs itself again under
`setpriv` without that capability (skipped where setpriv is missing).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import settings as hyp_settings
from hypothesis import strategies as st

from foundation.filewalk import escaped_name, is_decodable, walk_files
from tests.approval_helpers import elicitation_answer
from tests.conftest import connect

REPO = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "mcp_server"]  # this checkout's code (run with cwd=REPO)
_UNPRIVILEGED = "GA_TEST_UNPRIVILEGED"
_DROP = ["--inh-caps=-dac_override,-dac_read_search", "--bounding-set=-dac_override,-dac_read_search"]


def _reads_everything(tmp_path: Path) -> bool:
    probe = tmp_path / "probe"
    probe.write_text("x")
    probe.chmod(0)
    try:
        probe.read_text()
        return True
    except PermissionError:
        return False
    finally:
        probe.unlink()


@pytest.fixture
def unprivileged(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[None]:
    """Run the test as a user that file permissions apply to (re-run under setpriv when root)."""
    if not _reads_everything(tmp_path):
        yield
        return
    setpriv = shutil.which("setpriv")
    if os.environ.get(_UNPRIVILEGED) or setpriv is None or os.geteuid() != 0:
        pytest.skip("root reads everything")
    node = f"{request.node.path}::{request.node.name}"
    done = subprocess.run([setpriv, *_DROP, sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "no:randomly", node], capture_output=True, text=True, timeout=300,
                          env={**os.environ, _UNPRIVILEGED: "1"}, cwd=REPO)
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout[-3000:] + done.stderr[-2000:]
    pytest.skip("ran without CAP_DAC_OVERRIDE in a subprocess (passed)")


def _bad_names(workspace: Path) -> None:
    (workspace / "good.txt").write_text("hello good")
    (workspace / "sub").mkdir()
    (workspace / "sub" / "fine.md").write_text("# fine\n")
    for raw in (b"bad\xff.txt", b"sub/also\xfe.md"):
        with open(os.fsencode(workspace) + b"/" + raw, "wb") as out:
            out.write(b"hidden words")


# -- names that are not UTF-8 ----------------------------------------------------------------------


@hyp_settings(max_examples=300, deadline=None)
@given(st.binary(min_size=1, max_size=40))
def test_decodable_means_utf8_and_the_escape_shows_every_byte(raw: bytes) -> None:
    name = os.fsdecode(raw)
    try:
        raw.decode("utf-8")
        utf8 = True
    except UnicodeDecodeError:
        utf8 = False
    assert is_decodable(name) is utf8
    shown = escaped_name(name)
    assert is_decodable(shown)  # can always go into JSON and the index
    assert shown == name if utf8 else "\\x" in shown


def test_walk_skips_and_reports_undecodable_names(workspace: Path) -> None:
    _bad_names(workspace)
    walk = walk_files(workspace)
    assert [e.rel for e in walk] == ["good.txt", "sub/fine.md"]
    assert walk.undecodable == 2 and walk.undecodable_names == ["bad\\xff.txt", "sub/also\\xfe.md"]
    note = walk.skipped_note()
    assert note is not None and "bad\\xff.txt" in note and "rename them" in note


@pytest.mark.anyio
async def test_tools_list_find_and_index_a_folder_with_undecodable_names(settings: Any, workspace: Path) -> None:
    _bad_names(workspace)
    async with connect(settings) as client:
        listing = await client.call_tool("list_workspace_files", {"directory": "."})
        assert not listing.is_error, listing.content[0].text
        assert [e["name"] for e in listing.structured_content["entries"]] == ["sub", "good.txt"]
        assert "bad\\xff.txt" in listing.structured_content["note"] and "rename" in listing.structured_content["note"]
        found = await client.call_tool("find_files", {"pattern": "*"})
        assert not found.is_error, found.content[0].text
        assert {m["name"] for m in found.structured_content["matches"]} == {"good.txt", "sub/fine.md"}
        assert "2 files or folders with a name that is not valid UTF-8" in found.structured_content["note"]
        indexed = await client.call_tool("index_path", {"path": "."})
        assert not indexed.is_error, indexed.content[0].text
        report = indexed.structured_content
        assert report["state"] == "done" and report["indexed"] == 2 and report["failed"] == []
        assert "sub/also\\xfe.md" in report["note"]
        hits = await client.call_tool("search_documents", {"query": "hello"})
        assert not hits.is_error and "good.txt" in hits.content[0].text
        # the escaped form is never taken for the file: it names no file, and says so
        again = await client.call_tool("read_file", {"path": "bad\\xff.txt"})
        assert again.is_error and "No file" in again.content[0].text


def test_cli_index_of_a_folder_with_undecodable_names(tmp_path: Path, workspace: Path) -> None:
    _bad_names(workspace)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GENERALAGENT_")}
    done = subprocess.run([*CLI, "--data-dir", str(tmp_path / "data"), "index", str(workspace)],
                          capture_output=True, text=True, timeout=120, env=env, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert "2 indexed" in done.stdout and "0 failed" in done.stdout
    assert "not valid UTF-8 skipped (bad\\xff.txt, sub/also\\xfe.md)" in done.stdout
    assert "Traceback" not in done.stderr


# -- permissions -------------------------------------------------------------------------------------


@pytest.fixture
def locked(workspace: Path) -> Iterator[Path]:
    (workspace / "good.txt").write_text("hello good")
    (workspace / "locked").mkdir()
    (workspace / "locked" / "f.txt").write_text("x")
    (workspace / "unread.txt").write_text("secret words")
    (workspace / "unread.txt").chmod(0)
    (workspace / "locked").chmod(0)
    yield workspace
    (workspace / "locked").chmod(0o700)


@pytest.mark.anyio
async def test_tools_say_permission_denied(unprivileged: None, settings: Any, locked: Path) -> None:
    async with connect(settings) as client:
        for tool, args in [("read_file", {"path": "unread.txt"}),
                           ("search_file", {"path": "unread.txt", "query": "secret"})]:
            result = await client.call_tool(tool, args)
            text = result.content[0].text
            assert result.is_error and "'unread.txt' cannot be read: permission denied" in text, text
            assert "Internal error" not in text
        listing = await client.call_tool("list_workspace_files", {"directory": "locked"})
        text = listing.content[0].text
        assert listing.is_error and "'locked' cannot be read: permission denied" in text, text
        indexed = await client.call_tool("index_path", {"path": "locked"})
        text = indexed.content[0].text
        assert indexed.is_error and "'locked' cannot be read: permission denied" in text, text
        whole = await client.call_tool("index_path", {"path": "."})
        report = whole.structured_content
        assert report["indexed"] == 1 and [f["path"] for f in report["failed"]] == ["unread.txt"]
        assert "1 unreadable folder skipped (locked)" in report["note"]
        found = await client.call_tool("find_files", {"pattern": "*"})
        assert "1 unreadable folder skipped (locked)" in found.structured_content["note"]


def test_cli_index_reports_unreadable_folders(unprivileged: None, tmp_path: Path, locked: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GENERALAGENT_")}
    base = [*CLI, "--data-dir", str(tmp_path / "data"), "index"]
    done = subprocess.run([*base, str(locked)], capture_output=True, text=True, timeout=120, env=env, cwd=REPO)
    assert "1 unreadable folder skipped (locked)" in done.stdout, done.stdout + done.stderr
    done = subprocess.run([*base, str(locked / "locked")], capture_output=True, text=True, timeout=120, env=env, cwd=REPO)
    assert done.returncode != 0 and "cannot be read: permission denied" in done.stderr, done.stdout + done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.anyio
async def test_writes_the_server_may_not_make_say_permission_denied(unprivileged: None, settings: Any,
                                                                    workspace: Path) -> None:
    shut = workspace / "shut"
    shut.mkdir()
    (shut / "old.txt").write_text("old words")
    shut.chmod(0o555)  # readable, not writable
    try:
        async with connect(settings, elicitation_callback=elicitation_answer("accept")) as client:
            for tool, args in [("write_file", {"path": "shut/new.txt", "content": "x"}),
                               ("write_file", {"path": "shut/deeper/new.txt", "content": "x"}),
                               ("edit_file", {"path": "shut/old.txt", "old_string": "old", "new_string": "new"})]:
                result = await client.call_tool(tool, args)
                text = result.content[0].text
                assert result.is_error and "cannot be written: permission denied" in text, (tool, text)
                assert "Internal error" not in text and "Errno" not in text
        assert sorted(p.name for p in shut.iterdir()) == ["old.txt"]  # no temp file left behind
        assert (shut / "old.txt").read_text() == "old words"
    finally:
        shut.chmod(0o755)


@pytest.mark.anyio
async def test_a_root_the_server_may_not_read_says_so(unprivileged: None, make_settings: Any,
                                                      workspace: Path) -> None:
    (workspace / "f.txt").write_text("words")
    workspace.chmod(0)
    try:
        async with connect(make_settings(), elicitation_callback=elicitation_answer("accept")) as client:
            for tool, args in [("list_workspace_files", {"directory": "."}), ("read_file", {"path": "f.txt"}),
                               ("write_file", {"path": "g.txt", "content": "x"})]:
                result = await client.call_tool(tool, args)
                text = result.content[0].text
                assert result.is_error and "permission denied" in text, (tool, text)
                assert "Internal error" not in text and "Errno" not in text
            found = await client.call_tool("find_files", {"pattern": "*"})  # a walk notes what it could not read
            assert "1 unreadable folder skipped (workspace)" in found.structured_content["note"]
    finally:
        workspace.chmod(0o755)
