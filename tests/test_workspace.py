"""The path resolver and the iterative walker, on real files, symlinks and hard links."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import settings as hyp_settings
from hypothesis import strategies as st

from foundation.errors import NotConfigured, NotFound, PathNotAllowed
from foundation.filewalk import remove_tree, walk_files
from foundation.globs import GlobPattern, expand_braces
from foundation.paths import default_workspace, display_path, resolve_path, roots_for, session_dir_name
from tools.runtime import Runtime


@pytest.fixture
def rt(settings: Any) -> Runtime:
    return Runtime(settings)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    path = tmp_path / "outside.txt"
    path.write_text("secret")
    return path


def make_deep(root: Path, depth: int) -> Path:
    """A `depth`-deep chain of folders, built without recursion (os.makedirs recurses)."""
    folder = root
    for _ in range(depth):
        folder = folder / "d"
        os.mkdir(folder)
    return folder


@pytest.fixture
def deep_workspace(workspace: Path) -> Iterator[Path]:
    """The workspace, emptied without recursion afterwards: pytest's own tmp cleanup uses
    shutil.rmtree, which dies with RecursionError on a 1,500-deep tree (and breaks later runs)."""
    yield workspace
    remove_tree(workspace)  # this also tests remove_tree on the deep tree
    assert not workspace.exists()


# -- resolve_path -----------------------------------------------------------------------------


def test_relative_path_resolves_against_first_root(rt: Runtime, workspace: Path) -> None:
    assert resolve_path(rt.settings, "a/b.txt") == workspace.resolve() / "a" / "b.txt"
    assert resolve_path(rt.settings, ".") == workspace.resolve()
    assert resolve_path(rt.settings, "sub/../x.txt") == workspace.resolve() / "x.txt"


def test_absolute_path_inside_root_is_allowed(rt: Runtime, workspace: Path) -> None:
    (workspace / "f.txt").write_text("x")
    assert resolve_path(rt.settings, str(workspace / "f.txt"), must_exist=True) == workspace.resolve() / "f.txt"


@pytest.mark.parametrize(
    "bad",
    ["../outside.txt", "a/../../outside.txt", "../../../../../../etc/passwd", "/etc/passwd", "/", ".."],
)
def test_escapes_are_refused(rt: Runtime, bad: str, outside: Path) -> None:
    with pytest.raises(PathNotAllowed, match="outside the workspace"):
        resolve_path(rt.settings, bad)


def test_prefix_sibling_is_refused(rt: Runtime, workspace: Path) -> None:
    sibling = workspace.parent / (workspace.name + "_evil")
    sibling.mkdir()
    (sibling / "x.txt").write_text("x")
    with pytest.raises(PathNotAllowed, match="outside"):
        resolve_path(rt.settings, str(sibling / "x.txt"))
    with pytest.raises(PathNotAllowed):
        resolve_path(rt.settings, f"../{workspace.name}_evil/x.txt")


def test_symlink_to_outside_file_is_refused(rt: Runtime, workspace: Path, outside: Path) -> None:
    (workspace / "link").symlink_to(outside)
    for_write_too = [False, True]
    for for_write in for_write_too:
        with pytest.raises(PathNotAllowed, match="outside the workspace") as caught:
            resolve_path(rt.settings, "link", for_write=for_write)
        assert str(outside) not in str(caught.value)  # where a symlink points is not shown to the model


def test_symlinked_folder_out_is_refused(rt: Runtime, workspace: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (workspace / "dirlink").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(PathNotAllowed):
        resolve_path(rt.settings, "dirlink/new.txt", for_write=True)


def test_dangling_symlink_out_is_refused_for_write(rt: Runtime, workspace: Path, tmp_path: Path) -> None:
    (workspace / "dangling").symlink_to(tmp_path / "not-yet-there.txt")
    with pytest.raises(PathNotAllowed, match="outside"):
        resolve_path(rt.settings, "dangling", for_write=True)


def test_symlink_inside_root_resolves_to_target(rt: Runtime, workspace: Path) -> None:
    (workspace / "real.txt").write_text("x")
    (workspace / "alias").symlink_to(workspace / "real.txt")
    assert resolve_path(rt.settings, "alias", must_exist=True) == workspace.resolve() / "real.txt"


def test_symlink_loop_is_refused(rt: Runtime, workspace: Path) -> None:
    (workspace / "a").symlink_to(workspace / "b")
    (workspace / "b").symlink_to(workspace / "a")
    with pytest.raises(PathNotAllowed, match="resolved|loop"):
        resolve_path(rt.settings, "a")


def test_hard_link_refused_for_write_allowed_for_read(rt: Runtime, workspace: Path, outside: Path) -> None:
    os.link(outside, workspace / "hard")
    assert resolve_path(rt.settings, "hard", must_exist=True) == workspace.resolve() / "hard"
    with pytest.raises(PathNotAllowed, match="2 hard links"):
        resolve_path(rt.settings, "hard", for_write=True)


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        ("a\x00b", "NUL"),
        ("-rf", "option"),
        ("--help", "option"),
        ("~/.ssh/id_rsa", "not expanded"),
        ("~", "not expanded"),
        ("", "empty"),
        ("x" * 5000, "4096"),
        ("y" * 300 + "/f", "255 bytes"),
    ],
)
def test_malformed_paths_are_refused(rt: Runtime, bad: str, why: str) -> None:
    with pytest.raises(PathNotAllowed, match=why):
        resolve_path(rt.settings, bad)


def test_error_names_roots_and_fix(rt: Runtime, workspace: Path) -> None:
    with pytest.raises(PathNotAllowed) as err:
        resolve_path(rt.settings, "/etc/passwd")
    assert str(workspace.resolve()) in str(err.value)
    assert "Use a path inside" in str(err.value)


def test_must_exist_raises_not_found(rt: Runtime) -> None:
    with pytest.raises(NotFound, match="list_workspace_files"):
        resolve_path(rt.settings, "missing.txt", must_exist=True)


def test_tilde_inside_a_name_is_fine(rt: Runtime, workspace: Path) -> None:
    assert resolve_path(rt.settings, "a~b/~c") == workspace.resolve() / "a~b" / "~c"


def test_several_roots(make_settings: Any, tmp_path: Path, workspace: Path) -> None:
    second = tmp_path / "second"
    second.mkdir()
    (second / "s.txt").write_text("s")
    rt = Runtime(make_settings(roots=[workspace, second]))
    assert resolve_path(rt.settings, str(second / "s.txt"), must_exist=True) == second.resolve() / "s.txt"
    assert resolve_path(rt.settings, "s.txt") == workspace.resolve() / "s.txt"


def test_root_given_through_symlink(make_settings: Any, tmp_path: Path, workspace: Path) -> None:
    alias = tmp_path / "alias-root"
    alias.symlink_to(workspace, target_is_directory=True)
    rt = Runtime(make_settings(roots=[alias]))
    assert roots_for(rt.settings) == (workspace.resolve(),)
    assert resolve_path(rt.settings, str(alias / "f.txt")) == workspace.resolve() / "f.txt"


def test_missing_roots_are_skipped_and_none_left_is_an_error(make_settings: Any, tmp_path: Path,
                                                              workspace: Path) -> None:
    rt = Runtime(make_settings(roots=[tmp_path / "gone", workspace]))
    assert roots_for(rt.settings) == (workspace.resolve(),)
    rt = Runtime(make_settings(roots=[tmp_path / "gone"]))
    with pytest.raises(NotConfigured, match="GENERALAGENT_ROOTS"):
        roots_for(rt.settings)


def test_default_workspace_per_session(make_settings: Any, data_dir: Path) -> None:
    rt = Runtime(make_settings(roots=[]))
    (root,) = roots_for(rt.settings)
    assert root == data_dir.resolve() / "workspaces" / "default"
    assert sorted(p.name for p in root.iterdir()) == ["outputs", "temp", "uploads"]
    (other,) = roots_for(rt.settings, session_id="abc-123")
    assert other.name == "abc-123"
    assert resolve_path(rt.settings, "x.txt", session_id="abc-123") == other / "x.txt"
    with pytest.raises(PathNotAllowed):
        resolve_path(rt.settings, str(root / "x.txt"), session_id="abc-123")


def test_session_dir_name_is_safe() -> None:
    assert session_dir_name(None) == "default"
    assert session_dir_name("ok_1") == "ok_1"
    for hostile in ["../x", "..", "a/b", ".hidden", "x" * 200]:
        name = session_dir_name(hostile)
        assert name.startswith("s-") and "/" not in name


def test_default_workspace_creates_subdirs(tmp_path: Path) -> None:
    base = default_workspace(tmp_path / "data", "s1")
    assert all((base / sub).is_dir() for sub in ("uploads", "outputs", "temp"))


def test_display_path(workspace: Path, tmp_path: Path) -> None:
    root, second = workspace.resolve(), tmp_path.resolve() / "second"
    assert display_path(root, [root]) == "."
    assert display_path(root / "a" / "b", [root, second]) == "a/b"
    assert display_path(second / "s.txt", [root, second]) == str(second / "s.txt")  # passes back as is


# -- walk_files -------------------------------------------------------------------------------


def test_walk_lists_files_sorted_and_skips_hidden_and_index(workspace: Path) -> None:
    (workspace / "b.txt").write_text("bb")
    (workspace / "a").mkdir()
    (workspace / "a" / "x.md").write_text("x")
    (workspace / ".git").mkdir()
    (workspace / ".git" / "config").write_text("x")
    (workspace / ".hidden.txt").write_text("x")
    (workspace / "__generalagent__").mkdir()
    (workspace / "__generalagent__" / "index.db").write_text("x")
    entries = list(walk_files(workspace))
    assert [e.rel for e in entries] == ["b.txt", "a/x.md"]  # a folder's files, then its subfolders
    assert entries[0].size == 2 and entries[1].depth == 1


def test_walk_1500_deep_tree_without_recursion_error(deep_workspace: Path) -> None:
    workspace = deep_workspace
    deepest = make_deep(workspace, 1500)
    (deepest / "bottom.txt").write_text("x")
    walk = walk_files(workspace, max_depth=2000)
    entries = list(walk)
    assert len(entries) == 1 and entries[0].depth == 1500
    capped = walk_files(workspace, max_depth=10)
    assert list(capped) == [] and capped.depth_capped == 1


def test_walk_does_not_follow_dir_symlinks_or_loops(workspace: Path, tmp_path: Path, outside: Path) -> None:
    (workspace / "sub").mkdir()
    (workspace / "sub" / "f.txt").write_text("x")
    (workspace / "sub" / "loop").symlink_to(workspace, target_is_directory=True)
    (workspace / "self").symlink_to(workspace / "self")
    (workspace / "out-link").symlink_to(outside)
    (workspace / "in-link").symlink_to(workspace / "sub" / "f.txt")
    rels = [e.rel for e in walk_files(workspace)]
    assert rels == ["in-link", "sub/f.txt"]


def test_walk_max_entries_truncates(workspace: Path) -> None:
    for i in range(50):
        (workspace / f"f{i:02}.txt").write_text("x")
    walk = walk_files(workspace, max_entries=10)
    assert len(list(walk)) == 10 and walk.truncated


def test_walk_skip_paths(workspace: Path) -> None:
    (workspace / "data").mkdir()
    (workspace / "data" / "db").write_text("x")
    (workspace / "keep.txt").write_text("x")
    assert [e.rel for e in walk_files(workspace, skip_paths=[workspace / "data"])] == ["keep.txt"]


def test_walk_counts_unreadable_folders(workspace: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads everything")
    locked = workspace / "locked"
    locked.mkdir()
    (locked / "f").write_text("x")
    locked.chmod(0)
    try:
        walk = walk_files(workspace)
        assert list(walk) == [] and walk.errors == 1
    finally:
        locked.chmod(0o700)


def test_remove_tree_never_follows_symlinks(tmp_path: Path) -> None:
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "k.txt").write_text("k")
    doomed = tmp_path / "doomed"
    doomed.mkdir()
    make_deep(doomed, 5)
    (doomed / "link").symlink_to(keep, target_is_directory=True)
    (doomed / "f.txt").write_text("x")
    remove_tree(doomed)
    assert not doomed.exists() and (keep / "k.txt").exists()
    remove_tree(doomed)  # missing: no error


# -- glob patterns ----------------------------------------------------------------------------


@hyp_settings(max_examples=400, deadline=None)
@given(st.text(alphabet="ab*?[]!", max_size=8), st.text(alphabet="ab]", max_size=8))
def test_segment_matching_agrees_with_fnmatch(pattern: str, name: str) -> None:
    import fnmatch

    if not pattern or not name or "**" in pattern:
        return
    assert GlobPattern(pattern).matches(name) == fnmatch.fnmatchcase(name, pattern)


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("*.pdf", "a/b/c.PDF", True),
        ("docs/*.md", "docs/x/a.md", False),
        ("docs/**/*.md", "docs/a.md", True),
        ("docs/**/*.md", "docs/x/y/a.md", True),
        ("**/x/**", "a/x/b/c", True),
        ("./src/*.py", "src/a.py", True),
        ("report.{pdf,docx}", "x/report.docx", True),
        ("{a,b{c,d}}.txt", "bd.txt", True),
        ("[a-c]?.txt", "bz.txt", True),
        ("[a-c]?.txt", "dz.txt", False),
        ("[.txt", "[.txt", True),  # an unclosed bracket is a literal
    ],
)
def test_glob_patterns(pattern: str, path: str, expected: bool) -> None:
    assert GlobPattern(pattern).matches(path) is expected


def test_brace_expansion() -> None:
    assert expand_braces("a.{pdf,docx}") == ["a.pdf", "a.docx"]
    assert expand_braces("{x}") == ["{x}"]
    assert expand_braces("{a,{b,c}}") == ["a", "b", "c"]
    with pytest.raises(ValueError, match="alternatives"):
        expand_braces("{a,b}" * 7)
