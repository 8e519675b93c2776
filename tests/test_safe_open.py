"""Race-free file access (issue 14, reproducer 5): a thread swaps a workspace file (or folder) for
a symlink to an outside one while the tools run; not one call may read or write outside.
Before the fd-based opening, read_file and search_file leaked the outside file in ~3.5% of calls.
The same for a link inside the roots swapped between a secret store (`.env`) and an ordinary file: the
gate decides the link as it leads at check time, so the opened descriptor itself must not be a store."""

from __future__ import annotations

import contextlib
import os
import random
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from foundation.errors import GeneralAgentError, InvalidInput, NotFound, PathNotAllowed
from foundation.paths import fd_allowed, open_folder, open_for_read, roots_for
from foundation.safe_open import fd_real_path, open_inside, read_fd
from mcp_server.secret_paths import loaded_on_first_use
from tests.conftest import connect
from tools.documents import search_documents, search_file
from tools.files import edit_file, list_workspace_files, read_file, write_file
from tools.index_tools import index_path
from tools.runtime import CallContext, Runtime

SECRET = "OUTSIDE-SECRET-c0ffee"
ITERATIONS = 1000
MIN_OK = 20  # calls that must succeed, so the race was exercised
DEADLINE_S = 60.0
HOLD_S = 0.0005


@pytest.fixture
def rt(settings: Any) -> Runtime:
    return Runtime(settings)


def call() -> CallContext:
    return CallContext(tool="t")


@contextlib.contextmanager
def swapping(name: Path, real: Callable[[Path], None], fake_target: Path) -> Iterator[None]:
    """Keep replacing `name` by a real entry (made by `real`) and by a symlink to `fake_target`.
    Each state lasts a random 0-0.5 ms (about one call), with the GIL released: swaps land inside
    calls, and every call has a fair chance to run against the real entry on any scheduler."""
    stop = threading.Event()
    staged_real, staged_link = name.with_name(".real-" + name.name), name.with_name(".link-" + name.name)
    chance = random.Random(0)

    def swap() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                if not os.path.lexists(staged_real):
                    real(staged_real)
                os.replace(staged_real, name)
            _hold(chance)
            with contextlib.suppress(OSError):
                if not os.path.lexists(staged_link):
                    staged_link.symlink_to(fake_target)
                os.replace(staged_link, name)
            _hold(chance)

    thread = threading.Thread(target=swap, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(10)


def _hold(chance: random.Random) -> None:
    """Half the swaps follow at once (the tightest race), half after a pause of up to HOLD_S."""
    time.sleep(chance.choice((0.0, chance.uniform(0, HOLD_S))))


def _attempts(fn: Callable[[], str]) -> tuple[int, int]:
    """Run `fn` at least ITERATIONS times, and on until MIN_OK calls returned text (or DEADLINE_S
    passed): (calls that returned text, calls that leaked the secret)."""
    ok = leaked = tries = 0
    deadline = time.monotonic() + DEADLINE_S
    while tries < ITERATIONS or (ok < MIN_OK and time.monotonic() < deadline):
        tries += 1
        try:
            text = fn()
        except (PathNotAllowed, NotFound, InvalidInput):
            continue
        ok += 1
        leaked += SECRET in text
    return ok, leaked


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "notes.txt").write_text(f"{SECRET}\n")
    return folder


def _write_inside(path: Path) -> None:
    path.write_text("inside words only\n")


def test_file_swapped_for_symlink_never_leaks(rt: Runtime, workspace: Path, outside: Path) -> None:
    target = workspace / "notes.txt"
    _write_inside(target)
    with swapping(target, _write_inside, outside / "notes.txt"):
        read = _attempts(lambda: read_file("notes.txt", rt=rt, call=call()).content)
        found = _attempts(lambda: str(search_file("notes.txt", "SECRET inside", rt=rt, call=call()).hits))
    assert read[1] == 0 and found[1] == 0, (read, found)
    assert read[0] > 0 and found[0] > 0, "no call succeeded: the race was not exercised"


def _make_folder(path: Path) -> None:
    path.mkdir()
    _write_inside(path / "notes.txt")


def test_folder_swapped_for_symlink_never_leaks(rt: Runtime, workspace: Path, outside: Path) -> None:
    folder = workspace / "sub"
    _make_folder(folder)
    with swapping(folder, _make_folder, outside):
        read = _attempts(lambda: read_file("sub/notes.txt", rt=rt, call=call()).content)
    assert read[1] == 0 and read[0] > 0, read


def test_writes_never_land_outside(rt: Runtime, workspace: Path, outside: Path) -> None:
    folder = workspace / "sub"
    _make_folder(folder)
    with swapping(folder, _make_folder, outside):
        for i in range(ITERATIONS // 2):
            with contextlib.suppress(GeneralAgentError):
                write_file(f"sub/new{i}.txt", "x", rt=rt, call=call())
            with contextlib.suppress(GeneralAgentError):
                edit_file("sub/notes.txt", "inside", "changed", rt=rt, call=call())
    assert sorted(p.name for p in outside.iterdir()) == ["notes.txt"]
    assert (outside / "notes.txt").read_text() == f"{SECRET}\n"


def test_indexer_never_indexes_outside_content(rt: Runtime, workspace: Path, outside: Path) -> None:
    target = workspace / "notes.md"
    _write_inside(target)
    # The race may end with notes.md a symlink (never indexed): keep one file so the index is never empty.
    _write_inside(workspace / "steady.md")
    with swapping(target, _write_inside, outside / "notes.txt"):
        for _ in range(60):
            with contextlib.suppress(GeneralAgentError):
                index_path("notes.md", rt=rt, call=call())
    index_path(".", rt=rt, call=call())
    hits = search_documents("OUTSIDE SECRET c0ffee", rt=rt, call=call()).hits
    assert not any(SECRET in (hit.text or "") for hit in hits), hits


def test_open_helpers_refuse_symlinks_and_report_the_real_place(settings: Any, workspace: Path, outside: Path) -> None:
    roots = roots_for(settings)
    (workspace / "a").mkdir()
    (workspace / "a" / "f.txt").write_text("inside")
    (workspace / "link.txt").symlink_to(outside / "notes.txt")
    (workspace / "inner-link.txt").symlink_to(workspace / "a" / "f.txt")
    fd = open_for_read(settings, workspace / "a" / "f.txt", secrets=None)
    try:
        assert read_fd(fd, 100) == b"inside" and fd_real_path(fd) == workspace / "a" / "f.txt"
    finally:
        os.close(fd)
    with pytest.raises(PathNotAllowed) as caught:
        open_for_read(settings, workspace / "link.txt", shown="link.txt", secrets=None)
    assert str(outside) not in str(caught.value)
    with pytest.raises(PathNotAllowed):
        open_inside(workspace / "link.txt", roots, fd_allowed(settings, roots, None))
    inner = open_inside(workspace / "inner-link.txt", roots, fd_allowed(settings, roots, None))  # inside: fine
    os.close(inner)
    with pytest.raises(InvalidInput, match="folder"):
        open_for_read(settings, workspace / "a", secrets=None)
    os.mkfifo(workspace / "pipe")
    with pytest.raises(InvalidInput, match="not a regular file"):
        open_for_read(settings, workspace / "pipe", secrets=None)  # and it does not hang
    with socket.socket(socket.AF_UNIX) as listening:  # open() of a socket fails with ENXIO: same answer
        listening.bind(str(workspace / "sock"))
        with pytest.raises(InvalidInput, match="not a regular file"):
            open_for_read(settings, workspace / "sock", secrets=None)
    os.close(open_folder(settings, workspace / "x" / "y", create=True, secrets=None))
    assert (workspace / "x" / "y").is_dir()


# -- a link inside the roots swapped between a secret store and an ordinary file ---------------------


def _secret_workspace(workspace: Path) -> None:
    (workspace / ".env").write_text(f"API_KEY={SECRET}\n")
    (workspace / ".ssh").mkdir()
    (workspace / ".ssh" / "config").write_text(f"{SECRET}\n")
    (workspace / ".ssh" / "notes.txt").write_text(f"{SECRET}\n")
    (workspace / ".ssh" / SECRET).write_text("a key's name is listed by list_workspace_files\n")
    (workspace / ".env.txt").write_text(f"API_KEY={SECRET}\n")  # a store search_file can read (text)
    _write_inside(workspace / "real.txt")
    _make_folder(workspace / "docs")


def _link_to(target: str) -> Callable[[Path], None]:
    return lambda path: path.symlink_to(target)


def test_a_link_swapped_to_a_secret_store_is_never_opened(rt: Runtime, workspace: Path) -> None:
    rt.secret_paths = loaded_on_first_use(rt.settings)
    _secret_workspace(workspace)
    _link_to("real.txt")(workspace / "x")
    with swapping(workspace / "x", _link_to("real.txt"), workspace / ".env"):
        read = _attempts(lambda: read_file("x", rt=rt, call=call()).content)
    _link_to("real.txt")(workspace / "x.txt")
    with swapping(workspace / "x.txt", _link_to("real.txt"), workspace / ".env.txt"):
        found = _attempts(lambda: str(search_file("x.txt", "SECRET inside API_KEY", rt=rt, call=call()).hits))
    _link_to("docs")(workspace / "d")
    with swapping(workspace / "d", _link_to("docs"), workspace / ".ssh"):
        folder = _attempts(lambda: read_file("d/notes.txt", rt=rt, call=call()).content)
        listed = _attempts(lambda: " ".join(e.name for e in list_workspace_files("d", rt=rt, call=call()).entries))
        for i in range(ITERATIONS // 4):
            with contextlib.suppress(GeneralAgentError):
                write_file(f"d/new{i}.txt", "x", rt=rt, call=call())
    assert [r[1] for r in (read, found, folder, listed)] == [0, 0, 0, 0], (read, found, folder, listed)
    assert all(r[0] > 0 for r in (read, found, folder, listed)), "no call succeeded: the race was not exercised"
    assert sorted(p.name for p in (workspace / ".ssh").iterdir()) == sorted(["config", "notes.txt", SECRET])
    assert (workspace / ".env").read_text() == f"API_KEY={SECRET}\n"


def test_edit_file_never_shows_a_secret_store_swapped_in(rt: Runtime, workspace: Path) -> None:
    rt.secret_paths = loaded_on_first_use(rt.settings)
    _secret_workspace(workspace)
    (workspace / ".env").write_text(f"inside {SECRET}\n")
    _link_to("real.txt")(workspace / "x")
    with swapping(workspace / "x", _link_to("real.txt"), workspace / ".env"):
        edited = _attempts(lambda: edit_file("x", "inside", "inside!", rt=rt, call=call()).diff)
    assert edited[1] == 0 and edited[0] > 0, edited
    assert (workspace / ".env").read_text() == f"inside {SECRET}\n"


def test_the_indexer_never_opens_a_secret_store_swapped_in(rt: Runtime, workspace: Path) -> None:
    rt.secret_paths = loaded_on_first_use(rt.settings)
    _secret_workspace(workspace)
    _write_inside(workspace / "steady.md")
    _link_to("real.txt")(workspace / "x.md")
    with swapping(workspace / "x.md", _link_to("real.txt"), workspace / ".env.txt"):
        for _ in range(60):
            with contextlib.suppress(GeneralAgentError):
                index_path("x.md", rt=rt, call=call())
    hits = search_documents("OUTSIDE SECRET c0ffee API_KEY", rt=rt, call=call()).hits
    assert not any(SECRET in (hit.text or "") for hit in hits), hits


def test_open_helpers_refuse_a_secret_store_by_what_was_opened(settings: Any, workspace: Path) -> None:
    secrets = loaded_on_first_use(settings)
    _secret_workspace(workspace)
    (workspace / "plain-name").symlink_to(".env")
    for path in (workspace / ".env", workspace / ".ssh" / "config"):
        with pytest.raises(PathNotAllowed, match="secret store"):
            open_for_read(settings, path, secrets=secrets)
        os.close(open_for_read(settings, path, secrets=None))  # without a policy: no secret stores
    with pytest.raises(PathNotAllowed, match="secret store"):
        open_folder(settings, workspace / ".ssh", secrets=secrets)
    roots = roots_for(settings)
    with pytest.raises(PathNotAllowed, match="secret store"):
        open_inside(workspace / "plain-name", roots, fd_allowed(settings, roots, secrets))
    os.close(open_for_read(settings, workspace / "real.txt", secrets=secrets))


@pytest.mark.anyio
async def test_the_red_team_race_through_the_client_never_leaks(make_settings: Any, workspace: Path) -> None:
    """The reproducer: the gate allows `x` while it leads to real.txt; the tool then opened `.env`."""
    _secret_workspace(workspace)
    _link_to("real.txt")(workspace / "x")
    ok = leaked = 0
    async with connect(make_settings()) as client:
        with swapping(workspace / "x", _link_to("real.txt"), workspace / ".env"):
            deadline = time.monotonic() + DEADLINE_S
            tries = 0
            while tries < 400 or (ok < MIN_OK and time.monotonic() < deadline):
                tries += 1
                result = await client.call_tool("read_file", {"path": "x"})
                text = " ".join(getattr(part, "text", "") for part in result.content)
                leaked += SECRET in text
                ok += not result.is_error
    assert leaked == 0 and ok > 0, (ok, leaked)
