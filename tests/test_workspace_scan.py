"""The walk that finds the secret stores (to hide) and the repositories (to guard) inside the workspace roots
for the shell sandbox: it finds what a full walk finds (random trees, symlinks, nested roots), lists again only the folders whose
ctime moved (a restored mtime does not hide a change), and stops at its entry limit saying so."""

from __future__ import annotations

import os
import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tools.workspace_scan import WorkspaceScan

SECRET_NAMES = {".env", "id_rsa", ".ssh"}
NAMES = st.sampled_from([".env", "id_rsa", ".ssh", "a", "b", ".hidden", "notes.txt", "env", "x.env", ".git"])


def is_secret(path: str) -> bool:
    return os.path.basename(path) in SECRET_NAMES


def full_walk(roots: list[Path]) -> tuple[set[Path], set[Path]]:
    """What the scan must find: every secret entry (a symlink's target when it or its target is one), and
    every folder holding a `.git` that is not a symlink, under folders that are not secrets themselves."""
    found: set[Path] = set()
    repos: set[Path] = set()
    for root in roots:
        for folder, dirs, files in os.walk(os.path.realpath(root)):
            if ".git" in dirs + files and not os.path.islink(os.path.join(folder, ".git")):
                repos.add(Path(folder))
            for name in [*dirs, *files]:
                path = os.path.join(folder, name)
                if os.path.islink(path):
                    target = os.path.realpath(path)
                    if is_secret(path) or is_secret(target):
                        found.add(Path(target))
                elif is_secret(path):
                    found.add(Path(path))
            dirs[:] = [d for d in dirs if not is_secret(d) and not os.path.islink(os.path.join(folder, d))]
    return found, repos


TREES = st.lists(st.tuples(st.lists(NAMES, min_size=1, max_size=4), st.sampled_from(["file", "dir", "link"])),
                 max_size=25)


def build(root: Path, tree: list[tuple[list[str], str]]) -> None:
    for parts, kind in tree:
        path = root.joinpath(*parts)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            if kind == "dir":
                path.mkdir(exist_ok=True)
            elif kind == "link":
                path.symlink_to(root / parts[0])
            else:
                path.write_text("x")
        except OSError:  # a name taken by another kind of entry
            continue


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tree=TREES, nested=st.booleans())
def test_finds_what_a_full_walk_finds(tmp_path_factory: object, tree: list[tuple[list[str], str]],
                                      nested: bool) -> None:
    root = Path(os.path.realpath(tmp_path_factory.mktemp("scan")))  # type: ignore[attr-defined]
    build(root, tree)
    roots = [root, root / "a"] if nested and (root / "a").is_dir() else [root]
    scanned = WorkspaceScan(is_secret).scan(roots)
    assert (set(scanned.secrets), set(scanned.repos)) == full_walk(roots)


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
    assert set(result.secrets) == {tmp_path / "a/b/.env", tmp_path / "d/id_rsa"} and result.complete
    assert sorted(checked[first:]) == [str(tmp_path / "d/e.txt"), str(tmp_path / "d/id_rsa")]
    (tmp_path / "a/b/.env").unlink()
    assert scan.scan([tmp_path]).secrets == (tmp_path / "d/id_rsa",)


def test_stops_at_its_entry_limit_and_says_so(tmp_path: Path) -> None:
    for i in range(30):
        (tmp_path / f"f{i}").write_text("x")
    (tmp_path / ".env").write_text("x")
    assert WorkspaceScan(is_secret, max_entries=100).scan([tmp_path]).complete
    assert not WorkspaceScan(is_secret, max_entries=10).scan([tmp_path]).complete
