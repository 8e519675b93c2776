"""The walk that finds the secret stores (to hide) and the repositories (to guard) inside the workspace roots
for the shell sandbox: it finds what a full walk finds (random trees, symlinks, nested roots), lists again only the folders whose
ctime moved (a restored mtime does not hide a change), and stops at its entry limit saying so."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foundation.paths import is_within
from tools.workspace_scan import WorkspaceScan

SECRET_NAMES = {".env", "id_rsa", ".ssh"}
NAMES = st.sampled_from([".env", "id_rsa", ".ssh", "a", "b", ".hidden", "notes.txt", "env", "x.env", ".git"])


def is_secret(path: str) -> bool:
    return os.path.basename(path) in SECRET_NAMES


def full_walk(roots: list[Path]) -> tuple[set[Path], set[Path]]:
    """What the scan must find, restated recursively: every secret entry (a symlink's target when it or its
    target is one) and every folder holding a `.git` that is not a symlink, in the folders reached from the
    roots through sub-folders and linked folders inside the roots (each once), not through secret ones nor
    `.git` folders, nor through links out of the roots (the sandbox shows nothing of the user's there)."""
    real_roots = [os.path.realpath(root) for root in roots]

    def walked(target: str) -> bool:
        return any(target == r or target.startswith(r + "/") for r in real_roots)

    found: set[Path] = set()
    repos: set[Path] = set()
    seen: set[str] = set()

    def visit(folder: str) -> None:
        if folder in seen:
            return
        seen.add(folder)
        names = os.listdir(folder)
        if ".git" in names and not os.path.islink(os.path.join(folder, ".git")):
            repos.add(Path(folder))
        for name in names:
            path = os.path.join(folder, name)
            if os.path.islink(path):
                target = os.path.realpath(path)
                if is_secret(path) or is_secret(target):
                    found.add(Path(target))
                elif os.path.isdir(target) and walked(target):
                    visit(target)
            elif is_secret(path):
                found.add(Path(path))
            elif os.path.isdir(path) and name != ".git":
                visit(path)

    for root in roots:
        visit(os.path.realpath(root))
    return found, repos


TREES = st.lists(st.tuples(st.lists(NAMES, min_size=1, max_size=4),
                           st.sampled_from(["file", "dir", "link", "outlink"])), max_size=25)


def build(root: Path, tree: list[tuple[list[str], str]], outside: Path) -> None:
    """Files, folders, links to an entry of the root and links to a folder outside it (with a `.env`; under
    /tmp it is not walked, under /var/tmp it is)."""
    (outside / "deeper").mkdir(parents=True, exist_ok=True)
    (outside / "deeper" / ".env").write_text("x")
    for parts, kind in tree:
        path = root.joinpath(*parts)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if kind == "dir":
                path.mkdir(exist_ok=True)
            elif kind == "link":
                path.symlink_to(root / parts[0])
            elif kind == "outlink":
                path.symlink_to(outside)
            else:
                path.write_text("x")
        except OSError:  # a name taken by another kind of entry
            continue


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tree=TREES, nested=st.booleans(), shared_outside=st.booleans())
def test_finds_what_a_full_walk_finds(tmp_path_factory: object, tree: list[tuple[list[str], str]],
                                      nested: bool, shared_outside: bool) -> None:
    root = Path(os.path.realpath(tmp_path_factory.mktemp("scan")))  # type: ignore[attr-defined]
    outside = Path(tempfile.mkdtemp(prefix="ga-scan-", dir="/var/tmp")) if shared_outside else \
        Path(os.path.realpath(tmp_path_factory.mktemp("outside")))  # type: ignore[attr-defined]
    try:
        build(root, tree, outside)
        roots = [root, root / "a"] if nested and (root / "a").is_dir() else [root]
        scanned = WorkspaceScan(is_secret).scan(roots)
        assert (set(scanned.secrets), set(scanned.repos)) == full_walk(roots)
    finally:
        if shared_outside:
            shutil.rmtree(outside, ignore_errors=True)


def test_lists_again_only_the_folders_that_changed(tmp_path: Path) -> None:
    for name in ("a/b/c.txt", "a/b/.env", "d/e.txt", "f.txt"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x")
    checked: list[str] = []
    scan = WorkspaceScan(lambda path: checked.append(path) or is_secret(path), settled_ns=0)
    assert scan.scan([tmp_path]).secrets == (tmp_path / "a/b/.env",)
    first = len(checked)
    assert first == 7  # every entry once
    assert scan.scan([tmp_path]).secrets == (tmp_path / "a/b/.env",) and len(checked) == first  # nothing listed

    time.sleep(0.05)  # past the file system's timestamp tick
    stamp = (tmp_path / "d").stat()
    (tmp_path / "d" / "id_rsa").write_text("key")  # d's ctime moves: d alone is listed again
    os.utime(tmp_path / "d", ns=(stamp.st_atime_ns, stamp.st_mtime_ns))  # as `tar x` or `cp -p` would
    result = scan.scan([tmp_path])
    assert set(result.secrets) == {tmp_path / "a/b/.env", tmp_path / "d/id_rsa"} and result.unchecked is None
    assert sorted(checked[first:]) == [str(tmp_path / "d/e.txt"), str(tmp_path / "d/id_rsa")]
    (tmp_path / "a/b/.env").unlink()
    assert scan.scan([tmp_path]).secrets == (tmp_path / "d/id_rsa",)


def test_says_when_it_cannot_cover_the_workspace(tmp_path: Path) -> None:
    """Over its entry limit, or a folder it cannot list (too deep a path): the result says why (the shell tool
    then refuses to run); a folder nobody may read is skipped (a command cannot read it either)."""
    for i in range(30):
        (tmp_path / f"f{i}").write_text("x")
    (tmp_path / ".env").write_text("x")
    assert WorkspaceScan(is_secret, max_entries=100).scan([tmp_path]).unchecked is None
    assert "over 10 files" in str(WorkspaceScan(is_secret, max_entries=10).scan([tmp_path]).unchecked)
    deep = tmp_path
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        for _ in range(45):  # past PATH_MAX (4096) through relative paths, as a command could make it
            os.mkdir("d" * 100, dir_fd=fd)
            inner = os.open("d" * 100, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = inner
        with open(os.open(".env", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd), "w") as handle:
            handle.write("x")
    finally:
        os.close(fd)
    assert "cannot be listed" in str(WorkspaceScan(is_secret).scan([deep]).unchecked)


def test_a_listing_taken_right_after_a_change_is_not_kept(tmp_path: Path) -> None:
    """With coarse timestamps, a change in the same tick as a listing leaves the folder's ctime as it was: a
    listing is kept only when it was taken `settled_ns` after the folder's last change, however old that is."""
    (tmp_path / "a.txt").write_text("x")
    checked: list[str] = []
    settled = 400_000_000
    scan = WorkspaceScan(lambda path: checked.append(path) or is_secret(path), settled_ns=settled)
    scan.scan([tmp_path])
    changed = tmp_path.stat().st_ctime_ns
    soon = scan._listings[str(tmp_path)].listed_ns - changed <= settled  # as good as always (a stalled machine: no)
    assert len(checked) == 1
    time.sleep(0.5)  # the change is old now; a listing taken right after it is listed again all the same
    scan.scan([tmp_path])
    assert len(checked) == (2 if soon else 1)
    scan.scan([tmp_path])  # the last listing was taken 0.5 s after the change: kept
    assert len(checked) == (2 if soon else 1)


def test_links_out_of_the_workspace_are_not_walked(tmp_path: Path) -> None:
    """A link to a big folder outside, to `/` or to /proc costs no walk: shell commands still run (a link to `/`
    made every command refuse: over the entry limit). The sandbox shows nothing of the user's there."""
    outside = Path(tempfile.mkdtemp(prefix="ga-scan-", dir="/var/tmp"))
    try:
        for i in range(30):
            (outside / f"f{i}").write_text("x")
        (outside / ".env").write_text("KEY=1")
        (tmp_path / "ext").symlink_to(outside)
        (tmp_path / "everything").symlink_to("/")
        (tmp_path / "proc").symlink_to("/proc")
        found = WorkspaceScan(is_secret, max_entries=20).scan([tmp_path])
        assert found.unchecked is None
        assert all(not is_within(Path(p), [outside]) for p in found.secrets)
    finally:
        shutil.rmtree(outside, ignore_errors=True)


def limited_walk(home: Path) -> set[Path]:
    """What the home walk must find, restated: the secret entries of every folder reached from the home through
    folders it may walk into (tools.workspace_scan.home_scan: dot-folders at the top, any folder below them,
    nothing deeper), each at the least depth it can be reached at (through links too; a `.git` that is a link
    is a linked folder a command can read through, not a repository's internals)."""
    from tools.workspace_scan import _home_folder

    found: set[Path] = set()
    depth = {os.path.realpath(home): 0}
    queue = [os.path.realpath(home)]
    while queue:
        folder = queue.pop(0)
        for name in os.listdir(folder):
            path = os.path.join(folder, name)
            target = os.path.realpath(path)
            if is_secret(path) or (os.path.islink(path) and is_secret(target)):
                found.add(Path(target))
            elif os.path.isdir(target) and (name != ".git" or os.path.islink(path)) and _home_folder(name, depth[folder] + 1) \
                    and target not in depth and (not os.path.islink(path) or not target.startswith("/tmp/")):
                depth[target] = depth[folder] + 1
                queue.append(target)
    return found


HOME_NAMES = st.sampled_from([".env", "id_rsa", ".ssh", ".a", ".b", "c", "notes.txt", ".git"])
HOME_TREES = st.lists(st.tuples(st.lists(HOME_NAMES, min_size=1, max_size=4), st.sampled_from(["file", "dir", "link"]),
                                st.lists(HOME_NAMES, min_size=1, max_size=2)), max_size=25)


@settings(max_examples=80, deadline=None)
@given(tree=HOME_TREES)
def test_the_home_walk_finds_what_it_promises(tree: list[tuple[list[str], str, list[str]]]) -> None:
    """The depth-limited walk of the home (its top, dot-folders, their sub-folders) finds every secret store a
    breadth-first restatement finds, also when a link reaches a folder deeper first (it is walked again from
    where it lies shallower)."""
    from tools.workspace_scan import home_scan

    home = Path(tempfile.mkdtemp(prefix="ga-home-", dir="/var/tmp"))
    try:
        for parts, kind, target in [([".a", "link"], "link", [".b"]), ([".b", "c", ".env"], "file", []), *tree]:
            path = home.joinpath(*parts)  # first: .a/link reaches .b deeper (walked first) than .b itself
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                if kind == "dir":
                    path.mkdir(exist_ok=True)
                elif kind == "link":
                    path.symlink_to(home.joinpath(*target))
                else:
                    path.write_text("x")
            except OSError:
                continue
        assert set(home_scan(is_secret).scan([home]).secrets) == limited_walk(home)
    finally:
        shutil.rmtree(home, ignore_errors=True)
