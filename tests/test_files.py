"""File tools on real files: read (text paging), write, edit, list and find; path escapes."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from foundation.bounding import estimate_tokens
from foundation.errors import Conflict, ExtractionError, InvalidInput, LimitExceeded, NotFound, PathNotAllowed
from foundation.filewalk import remove_tree
from tools import files
from tools.runtime import CallContext, Runtime


@pytest.fixture
def rt(settings: Any) -> Runtime:
    return Runtime(settings)


@pytest.fixture
def call() -> CallContext:
    return CallContext(tool="test")


@pytest.fixture
def deep_workspace(workspace: Path) -> Iterator[Path]:
    """Emptied without recursion afterwards (pytest's shutil.rmtree dies on 1,500-deep trees)."""
    yield workspace
    remove_tree(workspace)


def read_all(rt: Runtime, call: CallContext, path: str, **kwargs: Any) -> tuple[str, list[Any]]:
    pages, offset = [], 0
    while True:
        page = files.read_file(path, offset=offset, rt=rt, call=call, **kwargs)
        pages.append(page)
        if page.next_offset is None:
            return "".join(p.content for p in pages), pages
        assert page.next_offset > offset
        offset = page.next_offset


# -- read_file: text ----------------------------------------------------------------------------


def test_small_text_file_comes_whole(rt: Runtime, call: CallContext, workspace: Path) -> None:
    (workspace / "notes.txt").write_text("line one\nline two\n")
    page = files.read_file("notes.txt", rt=rt, call=call)
    assert page.content == "line one\nline two\n" and page.next_offset is None
    assert page.kind == "text" and page.path == "notes.txt" and page.total_chars == 18
    assert page.location == "lines 1-2"


def test_large_text_file_pages_losslessly(rt: Runtime, call: CallContext, workspace: Path) -> None:
    text = "".join(f"line {i:06d} " + "x" * 60 + "\n" for i in range(4000))  # ~290 KB
    (workspace / "big.log").write_text(text)
    whole, pages = read_all(rt, call, "big.log")
    assert whole == text and len(pages) > 5
    budget = rt.settings.max_result_tokens
    for page in pages:
        assert len(page.content) <= files.TEXT_PAGE_CHARS
        assert estimate_tokens(page.content) <= budget
        assert page.content.endswith("\n")  # cut at line ends
    assert pages[1].location is not None and pages[1].location.startswith("lines ")


def test_text_limit_and_offset(rt: Runtime, call: CallContext, workspace: Path) -> None:
    (workspace / "a.txt").write_text("abcdefghij" * 100)
    page = files.read_file("a.txt", offset=10, limit=200, rt=rt, call=call)
    assert page.content == ("abcdefghij" * 100)[10:210] and page.next_offset == 210


def test_cjk_pages_fit_the_result_budget(rt: Runtime, call: CallContext, workspace: Path) -> None:
    text = "这是一个用于测试分页的中文句子。\n" * 8000
    (workspace / "zh.md").write_text(text, encoding="utf-8")
    whole, pages = read_all(rt, call, "zh.md")
    assert whole == text
    assert all(estimate_tokens(p.content) <= rt.settings.max_result_tokens for p in pages)


def test_text_file_at_100kb_whole_boundary(rt: Runtime, call: CallContext, make_settings: Any,
                                           workspace: Path) -> None:
    rt = Runtime(make_settings(max_result_tokens=24_000))
    text = "word " * 19_000 + "\n"  # 95 KB, ~27K estimated tokens: still paged to fit the budget
    (workspace / "w.txt").write_text(text)
    first = files.read_file("w.txt", rt=rt, call=call)
    assert first.next_offset is not None and estimate_tokens(first.content) <= 24_000
    (workspace / "s.txt").write_text("word " * 12_000)  # 60 KB fits: whole
    assert files.read_file("s.txt", rt=rt, call=call).next_offset is None


def test_unknown_extension_read_as_text_and_binary_refused(rt: Runtime, call: CallContext,
                                                           workspace: Path) -> None:
    (workspace / "unit.service").write_text("[Unit]\nDescription=x\n")
    assert files.read_file("unit.service", rt=rt, call=call).content.startswith("[Unit]")
    (workspace / "blob.bin").write_bytes(bytes(range(256)) * 10)
    with pytest.raises(ExtractionError):
        files.read_file("blob.bin", rt=rt, call=call)


def test_read_errors(rt: Runtime, call: CallContext, workspace: Path, tmp_path: Path) -> None:
    (workspace / "sub").mkdir()
    (workspace / "t.txt").write_text("abc")
    with pytest.raises(InvalidInput, match="list_workspace_files"):
        files.read_file("sub", rt=rt, call=call)
    with pytest.raises(NotFound):
        files.read_file("nope.txt", rt=rt, call=call)
    with pytest.raises(InvalidInput, match="past the end"):
        files.read_file("t.txt", offset=99, rt=rt, call=call)
    (tmp_path / "secret.txt").write_text("s")
    (workspace / "ln.txt").symlink_to(tmp_path / "secret.txt")
    for bad in ["../secret.txt", str(tmp_path / "secret.txt"), "ln.txt", "-n"]:
        with pytest.raises(PathNotAllowed):
            files.read_file(bad, rt=rt, call=call)


def test_empty_file(rt: Runtime, call: CallContext, workspace: Path) -> None:
    (workspace / "empty.txt").write_text("")
    page = files.read_file("empty.txt", rt=rt, call=call)
    assert page.content == "" and page.next_offset is None


def test_read_reflects_changes(rt: Runtime, call: CallContext, workspace: Path) -> None:
    target = workspace / "c.txt"
    target.write_text("one")
    assert files.read_file("c.txt", rt=rt, call=call).content == "one"
    target.write_text("two!")
    assert files.read_file("c.txt", rt=rt, call=call).content == "two!"


# -- write_file -------------------------------------------------------------------------------


def test_write_creates_parents_and_overwrites(rt: Runtime, call: CallContext, workspace: Path) -> None:
    result = files.write_file("out/deep/new.txt", "héllo\n", rt=rt, call=call)
    assert result.created and result.bytes_written == 7 and result.path == "out/deep/new.txt"
    assert (workspace / "out" / "deep" / "new.txt").read_text() == "héllo\n"
    os.chmod(workspace / "out/deep/new.txt", 0o640)
    again = files.write_file("out/deep/new.txt", "bye", rt=rt, call=call)
    assert not again.created and (workspace / "out/deep/new.txt").read_text() == "bye"
    assert stat.S_IMODE((workspace / "out/deep/new.txt").stat().st_mode) == 0o640
    assert sorted(p.name for p in (workspace / "out/deep").iterdir()) == ["new.txt"]  # no temp files left


def test_write_very_deep_parents_without_recursion(rt: Runtime, call: CallContext, deep_workspace: Path) -> None:
    workspace = deep_workspace
    rel = "d/" * 1200 + "f.txt"
    files.write_file(rel, "deep", rt=rt, call=call)
    assert (workspace / rel).read_text() == "deep"


def test_write_refuses_escapes(rt: Runtime, call: CallContext, workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    (workspace / "link.txt").symlink_to(outside)
    (workspace / "dirlink").symlink_to(tmp_path, target_is_directory=True)
    os.link(outside, workspace / "hard.txt")
    for bad in ["link.txt", "dirlink/x.txt", "../x.txt", str(tmp_path / "x.txt"), "hard.txt", "a\x00b"]:
        with pytest.raises(PathNotAllowed):
            files.write_file(bad, "pwned", rt=rt, call=call)
    assert outside.read_text() == "keep"
    assert not (tmp_path / "x.txt").exists()


def test_write_through_inside_symlink_replaces_the_target(rt: Runtime, call: CallContext,
                                                          workspace: Path) -> None:
    (workspace / "real.txt").write_text("old")
    (workspace / "alias.txt").symlink_to(workspace / "real.txt")
    files.write_file("alias.txt", "new", rt=rt, call=call)
    assert (workspace / "real.txt").read_text() == "new" and (workspace / "alias.txt").is_symlink()


def test_write_refuses_folders_and_server_data(make_settings: Any, call: CallContext, tmp_path: Path,
                                               data_dir: Path) -> None:
    rt = Runtime(make_settings(roots=[tmp_path]))  # the data dir is inside this root
    (tmp_path / "folder").mkdir()
    with pytest.raises(InvalidInput, match="folder"):
        files.write_file("folder", "x", rt=rt, call=call)
    with pytest.raises(PathNotAllowed, match="server's own data"):
        files.write_file(str(data_dir / "policy.toml"), "x", rt=rt, call=call)
    with pytest.raises(PathNotAllowed, match="server's own data"):
        files.read_file(str(data_dir / "x.db"), rt=rt, call=call)
    policy = tmp_path / "rules.toml"
    policy.write_text("# rules")
    rt = Runtime(make_settings(roots=[tmp_path], policy_file=policy))
    with pytest.raises(PathNotAllowed, match="rules"):
        files.write_file("rules.toml", "x", rt=rt, call=call)
    with pytest.raises(PathNotAllowed, match="rules"):
        files.edit_file("rules.toml", "rules", "none", rt=rt, call=call)


def test_write_in_default_session_workspace(make_settings: Any, data_dir: Path) -> None:
    rt = Runtime(make_settings(roots=[]))
    call = CallContext(tool="write_file", session_id="sess1")
    files.write_file("outputs/r.md", "# r", rt=rt, call=call)
    assert (data_dir / "workspaces" / "sess1" / "outputs" / "r.md").read_text() == "# r"


# -- edit_file --------------------------------------------------------------------------------


def test_edit_unique_replacement_returns_diff(rt: Runtime, call: CallContext, workspace: Path) -> None:
    lines = [f"line {i}\n" for i in range(1, 201)]
    (workspace / "e.py").write_text("".join(lines))
    result = files.edit_file("e.py", "line 150\n", "LINE 150\nadded\n", rt=rt, call=call)
    assert result.replacements == 1
    assert "-line 150" in result.diff and "+LINE 150" in result.diff and "+added" in result.diff
    assert "@@ -148,5 +148,6 @@" in result.diff  # real line numbers despite the trimmed window
    assert result.diff.count("\n") < 20
    assert (workspace / "e.py").read_text().count("LINE 150\nadded\n") == 1


def test_edit_ambiguous_names_the_count(rt: Runtime, call: CallContext, workspace: Path) -> None:
    (workspace / "m.txt").write_text("x = 1\nx = 1\nx = 1\n")
    with pytest.raises(InvalidInput, match="occurs 3 times.*replace_all"):
        files.edit_file("m.txt", "x = 1", "x = 2", rt=rt, call=call)
    assert (workspace / "m.txt").read_text() == "x = 1\nx = 1\nx = 1\n"
    result = files.edit_file("m.txt", "x = 1", "x = 2", replace_all=True, rt=rt, call=call)
    assert result.replacements == 3 and (workspace / "m.txt").read_text() == "x = 2\n" * 3


def test_edit_errors(rt: Runtime, call: CallContext, workspace: Path) -> None:
    (workspace / "a.txt").write_text("alpha")
    with pytest.raises(NotFound, match="not found.*read_file"):
        files.edit_file("a.txt", "beta", "gamma", rt=rt, call=call)
    with pytest.raises(InvalidInput, match="same"):
        files.edit_file("a.txt", "alpha", "alpha", rt=rt, call=call)
    with pytest.raises(NotFound, match="write_file"):
        files.edit_file("missing.txt", "a", "b", rt=rt, call=call)
    (workspace / "latin.txt").write_bytes("caf\xe9".encode("latin-1"))
    with pytest.raises(InvalidInput, match="UTF-8"):
        files.edit_file("latin.txt", "caf", "bar", rt=rt, call=call)


def test_edit_whitespace_hint(rt: Runtime, call: CallContext, workspace: Path) -> None:
    (workspace / "i.py").write_text("def f():\n    return 1\n")
    with pytest.raises(NotFound, match="different leading/trailing whitespace"):
        files.edit_file("i.py", "  return 1  ", "return 2", rt=rt, call=call)


def test_atomic_write_refuses_when_the_file_changed(workspace: Path) -> None:
    target = workspace / "c.txt"
    target.write_text("v1")
    from tools.atomic_files import atomic_write

    seen = (target.stat().st_mtime_ns, target.stat().st_size)
    target.write_text("v2 by someone else")
    with pytest.raises(Conflict, match="changed while"):
        atomic_write(target, b"mine", expect=seen)
    assert target.read_text() == "v2 by someone else"
    assert [p.name for p in workspace.iterdir()] == ["c.txt"]  # temp file removed


def test_edit_keeps_crlf_and_bom(rt: Runtime, call: CallContext, workspace: Path) -> None:
    (workspace / "w.txt").write_bytes(b"\xef\xbb\xbfone\r\ntwo\r\nthree\r\n")
    files.edit_file("w.txt", "one\ntwo", "uno\ndos", rt=rt, call=call)
    assert (workspace / "w.txt").read_bytes() == b"\xef\xbb\xbfuno\r\ndos\r\nthree\r\n"


def test_edit_size_limit(rt: Runtime, call: CallContext, workspace: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(files, "MAX_EDIT_BYTES", 100)
    (workspace / "big.txt").write_text("y" * 200)
    with pytest.raises(LimitExceeded, match="write_file"):
        files.edit_file("big.txt", "y", "z", replace_all=True, rt=rt, call=call)


def test_small_diff_of_a_large_change_is_bounded() -> None:
    before = "".join(f"{i}\n" for i in range(1000))
    after = "".join(f"{i}!\n" for i in range(1000))
    diff = files.small_diff(before, after, "x")
    assert diff.count("\n") <= files.MAX_DIFF_LINES + 2 and "more diff lines" in diff


# -- list_workspace_files ---------------------------------------------------------------------


def test_list_folder(rt: Runtime, call: CallContext, workspace: Path) -> None:
    (workspace / "b.txt").write_text("12345")
    (workspace / "A.md").write_text("x")
    (workspace / "zdir").mkdir()
    (workspace / ".env").write_text("SECRET=1")
    (workspace / ".git").mkdir()
    (workspace / "__generalagent__").mkdir()
    (workspace / "ln").symlink_to(workspace / "b.txt")
    result = files.list_workspace_files(rt=rt, call=call)
    assert [(e.name, e.type) for e in result.entries] == [
        ("zdir", "dir"), ("A.md", "file"), ("b.txt", "file"), ("ln", "symlink"),
    ]
    assert result.entries[2].size == 5 and result.directory == "." and result.total == 4
    assert result.roots == [str(workspace.resolve())]


def test_list_paging_and_errors(rt: Runtime, call: CallContext, workspace: Path) -> None:
    for i in range(25):
        (workspace / f"f{i:02}.txt").write_text("x")
    first = files.list_workspace_files(".", limit=10, rt=rt, call=call)
    assert len(first.entries) == 10 and first.next_offset == 10 and first.total == 25
    last = files.list_workspace_files(".", offset=20, limit=10, rt=rt, call=call)
    assert [e.name for e in last.entries][-1] == "f24.txt" and last.next_offset is None
    with pytest.raises(InvalidInput, match="read_file"):
        files.list_workspace_files("f00.txt", rt=rt, call=call)
    with pytest.raises(PathNotAllowed):
        files.list_workspace_files("..", rt=rt, call=call)


@pytest.mark.anyio
async def test_a_page_past_the_end_says_so(settings: Any, workspace: Path) -> None:
    """A listing paged past its end says where the end is (it was an empty page, total aside, no word)."""
    from tests.conftest import connect

    for i in range(37):
        (workspace / f"f{i:02}.txt").write_text("x")
    async with connect(settings) as client:
        listed = (await client.call_tool("list_workspace_files", {"offset": 500})).structured_content
        found = (await client.call_tool("find_files", {"pattern": "f0*.txt", "offset": 10})).structured_content
        inside = (await client.call_tool("list_workspace_files", {"offset": 30})).structured_content
    assert listed["entries"] == [] and listed["next_offset"] is None
    assert listed["note"] == "Offset 500 is past the end: 37 entries. Start again from offset 0."
    assert found["matches"] == [] and found["note"] == "Offset 10 is past the end: 10 matches. Start again from offset 0."
    assert len(inside["entries"]) == 7 and inside["note"] is None


# -- find_files -------------------------------------------------------------------------------


@pytest.fixture
def tree(workspace: Path) -> Path:
    names = ["report.pdf", "docs/a.md", "docs/b.MD", "docs/deep/c.md", "docs/deep/d.docx",
             "src/x1.py", "src/x2.py", "src/y1.py", ".hidden/h.md", "notes.txt"]
    for i, name in enumerate(names):
        path = workspace / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(name)
        os.utime(path, (1_700_000_000 + i * 60, 1_700_000_000 + i * 60))
    return workspace


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("*.md", ".", ["docs/deep/c.md", "docs/b.MD", "docs/a.md"]),
        ("docs/*.md", ".", ["docs/b.MD", "docs/a.md"]),
        ("docs/**/*.md", ".", ["docs/deep/c.md", "docs/b.MD", "docs/a.md"]),
        ("**/deep/*", ".", ["docs/deep/d.docx", "docs/deep/c.md"]),
        ("x?.py", ".", ["src/x2.py", "src/x1.py"]),
        ("[xy]1.py", ".", ["src/y1.py", "src/x1.py"]),
        ("[!x]*.py", ".", ["src/y1.py"]),
        ("*.{pdf,docx}", ".", ["docs/deep/d.docx", "report.pdf"]),
        ("*.md", "docs/deep", ["docs/deep/c.md"]),
        ("*", "src", ["src/y1.py", "src/x2.py", "src/x1.py"]),
        ("nothing*", ".", []),
    ],
)
def test_find_patterns_newest_first(rt: Runtime, call: CallContext, tree: Path, pattern: str, path: str,
                                    expected: list[str]) -> None:
    result = files.find_files(pattern, path, rt=rt, call=call)
    assert [m.name for m in result.matches] == expected
    assert result.total_matches == len(expected)


def test_find_paging_and_errors(rt: Runtime, call: CallContext, tree: Path) -> None:
    first = files.find_files("*", max_results=3, rt=rt, call=call)
    assert len(first.matches) == 3 and first.total_matches == 9 and first.next_offset == 3
    assert first.matches[0].name == "notes.txt" and first.matches[0].size == len("notes.txt")
    rest = files.find_files("*", offset=3, max_results=100, rt=rt, call=call)
    assert len(rest.matches) == 6 and rest.next_offset is None
    with pytest.raises(InvalidInput, match="pattern"):
        files.find_files("x" * 600, rt=rt, call=call)
    with pytest.raises(InvalidInput, match="alternatives"):
        files.find_files("{a,b}{c,d}{e,f}{g,h}{i,j}{k,l}{m,n}", rt=rt, call=call)
    with pytest.raises(PathNotAllowed):
        files.find_files("*", "../", rt=rt, call=call)


def test_find_survives_deep_trees_and_symlink_loops(rt: Runtime, call: CallContext, deep_workspace: Path) -> None:
    workspace = deep_workspace
    folder = workspace
    for _ in range(1200):
        folder = folder / "d"
        os.mkdir(folder)
    (folder / "bottom.txt").write_text("x")
    (workspace / "d" / "loop").symlink_to(workspace, target_is_directory=True)
    (workspace / "top.txt").write_text("x")
    result = files.find_files("*.txt", rt=rt, call=call)
    assert [m.name for m in result.matches] == ["top.txt"]
    assert result.note is not None and "deeper than" in result.note


def test_find_is_fast_on_catastrophic_pattern(rt: Runtime, call: CallContext, workspace: Path) -> None:
    (workspace / ("a" * 200)).write_text("x")
    result = files.find_files("*a*a*a*a*a*a*a*a*a*a*a*a*b", rt=rt, call=call)  # regex would hang
    assert result.matches == []


def test_second_root_paths_come_back_absolute_and_readable(make_settings: Any, call: CallContext,
                                                           workspace: Path, tmp_path: Path) -> None:
    second = tmp_path / "second"
    (second / "sub").mkdir(parents=True)
    (second / "sub" / "only.txt").write_text("in second")
    (workspace / "only.txt").write_text("in first")
    rt = Runtime(make_settings(roots=[workspace, second]))
    found = files.find_files("only.txt", str(second), rt=rt, call=call)
    assert [m.name for m in found.matches] == [str(second.resolve() / "sub" / "only.txt")]
    assert files.read_file(found.matches[0].name, rt=rt, call=call).content == "in second"
    assert files.read_file("only.txt", rt=rt, call=call).content == "in first"
    listing = files.list_workspace_files(str(second / "sub"), rt=rt, call=call)
    assert listing.directory == str(second.resolve() / "sub")


def test_pages_of_escape_heavy_text_survive_json_bounding(rt: Runtime, call: CallContext, workspace: Path) -> None:
    import json

    text = ('"\\' * 30 + "\n") * 3000  # every character doubles once JSON-escaped
    (workspace / "q.txt").write_text(text)
    whole, pages = read_all(rt, call, "q.txt")
    assert whole == text and len(pages) > 1
    for page in pages:
        assert estimate_tokens(json.dumps(page.model_dump(mode="json"), ensure_ascii=False)) <= (
            rt.settings.max_result_tokens)


def test_diff_of_a_huge_single_line_is_bounded(rt: Runtime, call: CallContext, workspace: Path) -> None:
    (workspace / "min.js").write_text("var a=1;" + "x" * 200_000 + ";var b=2;\n")
    result = files.edit_file("min.js", "var b=2", "var b=3", rt=rt, call=call)
    assert len(result.diff) < files.MAX_DIFF_CHARS + 100 and "more characters" in result.diff


def test_write_refuses_lone_surrogates(rt: Runtime, call: CallContext, workspace: Path) -> None:
    with pytest.raises(InvalidInput, match="surrogate"):
        files.write_file("new/s.txt", "bad \ud800 text", rt=rt, call=call)
    assert not (workspace / "new").exists()
