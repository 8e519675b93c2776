"""The workspace tools through the real SDK client (in memory), in both protocol eras.

Calls that change things go through the approval policy at the dispatch point; the client
here answers the elicitation with "approve once", as a user would.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.approval_helpers import elicitation_answer
from tests.conftest import MODES, connect

pytestmark = pytest.mark.anyio

FILE_TOOLS = {"read_file", "write_file", "edit_file", "list_workspace_files", "find_files"}


@pytest.mark.parametrize("mode", MODES)
async def test_tools_listed_with_honest_annotations(make_settings: Any, mode: str) -> None:
    async with connect(make_settings(tool_profile="default"), mode) as client:
        default = {tool.name for tool in (await client.list_tools()).tools}
    assert {"read_file", "write_file", "edit_file"} <= default and "run_bash_command" not in default
    async with connect(make_settings(tool_profile="full"), mode) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) >= FILE_TOOLS | {"run_bash_command"}
    for name in ("read_file", "list_workspace_files", "find_files"):
        assert tools[name].annotations.read_only_hint is True, name
    for name in ("write_file", "edit_file"):
        assert tools[name].annotations.read_only_hint is False
        assert tools[name].annotations.destructive_hint is True
    assert tools["edit_file"].annotations.idempotent_hint is False


@pytest.mark.parametrize("mode", MODES)
async def test_read_list_find_and_escape(settings: Any, mode: str, workspace: Path, tmp_path: Path) -> None:
    (workspace / "docs").mkdir()
    (workspace / "docs" / "a.md").write_text("# Title\nbody\n")
    (tmp_path / "secret.txt").write_text("top secret")
    (workspace / "leak.txt").symlink_to(tmp_path / "secret.txt")
    async with connect(settings, mode) as client:
        read = await client.call_tool("read_file", {"path": "docs/a.md"})
        assert not read.is_error and read.structured_content["content"] == "# Title\nbody\n"
        listing = await client.call_tool("list_workspace_files", {"directory": "docs"})
        assert [e["name"] for e in listing.structured_content["entries"]] == ["a.md"]
        found = await client.call_tool("find_files", {"pattern": "**/*.{md,txt}"})
        assert [m["name"] for m in found.structured_content["matches"]] == ["docs/a.md"]
        for bad in ["../secret.txt", "leak.txt", str(tmp_path / "secret.txt")]:
            result = await client.call_tool("read_file", {"path": bad})
            assert result.is_error and "not allowed" in result.content[0].text
            assert "top secret" not in result.content[0].text


@pytest.mark.parametrize("mode", MODES)
async def test_write_then_edit_with_approval(settings: Any, mode: str, workspace: Path) -> None:
    async with connect(settings, mode, elicitation_callback=elicitation_answer("accept")) as client:
        wrote = await client.call_tool("write_file", {"path": "out/n.txt", "content": "a = 1\na = 1\n"})
        assert not wrote.is_error, wrote.content[0].text
        assert (workspace / "out" / "n.txt").read_text() == "a = 1\na = 1\n"
        ambiguous = await client.call_tool("edit_file", {"path": "out/n.txt", "old_string": "a = 1",
                                                         "new_string": "a = 2"})
        assert ambiguous.is_error and "occurs 2 times" in ambiguous.content[0].text
        edited = await client.call_tool("edit_file", {"path": "out/n.txt", "old_string": "a = 1\na",
                                                      "new_string": "a = 1\nb"})
        assert not edited.is_error and "+b = 1" in edited.structured_content["diff"]


@pytest.mark.parametrize("mode", MODES)
async def test_bash_disabled_then_enabled_with_scrubbed_env(settings: Any, mode: str, monkeypatch: Any) -> None:
    monkeypatch.setenv("FAKE_API_KEY", "sk-should-not-leak")
    full = settings.model_copy(update={"tool_profile": "full"})
    async with connect(full, mode, elicitation_callback=elicitation_answer("accept")) as client:
        result = await client.call_tool("run_bash_command", {"command": "echo hi"})
        assert result.is_error and "GENERALAGENT_BASH_ENABLED=1" in result.content[0].text
    enabled = full.model_copy(update={"bash_enabled": True})
    async with connect(enabled, mode, elicitation_callback=elicitation_answer("accept")) as client:
        result = await client.call_tool("run_bash_command", {"command": "printenv"})
        assert not result.is_error, result.content[0].text
        assert result.structured_content["exit_code"] == 0
        assert "FAKE_API_KEY" not in result.structured_content["stdout"]
        assert "sk-should-not-leak" not in result.content[0].text


@pytest.mark.parametrize("mode", MODES)
async def test_read_pdf_pages_through_the_client(settings: Any, mode: str, workspace: Path) -> None:
    from tests.docgen import make_pdf

    make_pdf(workspace / "r.pdf", [[f"Page {n} text"] for n in range(1, 13)])
    async with connect(settings, mode) as client:
        first = await client.call_tool("read_file", {"path": "r.pdf"})
        assert not first.is_error and first.structured_content["location"] == "pages 1-10 of 12"
        rest = await client.call_tool("read_file", {"path": "r.pdf", "offset": first.structured_content["next_offset"]})
        assert "Page 12 text" in rest.structured_content["content"]
        assert rest.structured_content["next_offset"] is None


async def test_edit_file_on_a_document_never_suggests_replacing_it(settings: Any, workspace: Path) -> None:
    """edit_file on a PDF is refused before its bytes are read as text (an uncompressed PDF decodes as UTF-8,
    and its raw bytes were edited), and the error does not point at write_file, which would replace the
    document by plain text; a text file in another encoding is still pointed there, with the cost."""
    from tests.docgen import make_pdf

    make_pdf(workspace / "r.pdf", [["Quarterly figures"]])
    (workspace / "latin.txt").write_bytes("caf\xe9 \xff\n".encode("latin-1"))
    async with connect(settings, elicitation_callback=elicitation_answer("accept")) as client:
        pdf = await client.call_tool("edit_file", {"path": "r.pdf", "old_string": "%PDF-", "new_string": "%TXT-"})
        assert pdf.is_error and "PDF document" in pdf.content[0].text and "new file" in pdf.content[0].text
        assert "replace it with write_file" not in pdf.content[0].text
        # what it says of write_file is true: write_file does replace a document by plain text
        assert "write_file would replace the whole document by plain text" in pdf.content[0].text
        make_pdf(workspace / "copy.pdf", [["Quarterly figures"]])
        wrote = await client.call_tool("write_file", {"path": "copy.pdf", "content": "plain"})
        assert not wrote.is_error and (workspace / "copy.pdf").read_bytes() == b"plain"
        text = await client.call_tool("edit_file", {"path": "latin.txt", "old_string": "caf", "new_string": "x"})
        assert text.is_error and "write_file" in text.content[0].text and "U+FFFD" in text.content[0].text
    assert (workspace / "r.pdf").read_bytes().startswith(b"%PDF-")


@pytest.mark.parametrize(
    ("name", "data", "what"),
    [
        ("logo.dat", b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4, "a PNG image"),  # .png: a picture (test_pictures)
        ("blob.bin", bytes(range(256)) * 10, "NUL bytes"),
        ("report.dat", b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj", "rename it to .pdf"),
        ("old.doc", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(512), "save it as DOCX, XLSX or PPTX"),
    ],
)
async def test_read_file_on_a_binary_file_says_what_it_is(
    settings: Any, workspace: Path, name: str, data: bytes, what: str
) -> None:
    """A read says the file is binary, what it is, and where text comes from; not that it was not indexed."""
    (workspace / name).write_bytes(data)
    async with connect(settings) as client:
        result = await client.call_tool("read_file", {"path": name})
    text = result.content[0].text
    assert result.is_error and f"{name} is binary, not text" in text and what in text, text
    assert "PDF, DOCX, XLSX and PPTX" in text and "index" not in text, text


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("ask", ["form", "approval id"])
async def test_edit_file_that_cannot_run_never_asks_for_approval(settings: Any, mode: str, ask: str,
                                                                 workspace: Path) -> None:
    """A missing file, an old_string that does not occur or occurs twice: the error comes first, nobody is asked
    (neither by a form nor by a pending approval id), and the repeated call is not an approval wasted."""
    (workspace / "n.txt").write_text("a = 1\na = 1\n")
    seen: list[str] = []
    callback = elicitation_answer("accept", seen=seen) if ask == "form" else None
    async with connect(settings, mode, elicitation_callback=callback) as client:
        for args, says in [({"path": "gone.txt", "old_string": "a", "new_string": "b"}, "does not exist"),
                           ({"path": "n.txt", "old_string": "zzz", "new_string": "b"}, "not found"),
                           ({"path": "n.txt", "old_string": "a = 1", "new_string": "b"}, "occurs 2 times")]:
            result = await client.call_tool("edit_file", args)
            text = result.content[0].text
            assert result.is_error and says in text.lower() and "approv" not in text.lower(), text
        assert seen == []
        good = await client.call_tool("edit_file", {"path": "n.txt", "old_string": "a = 1\na", "new_string": "b"})
        if ask == "form":
            assert not good.is_error and len(seen) == 1
        else:
            assert good.is_error and "approv" in good.content[0].text.lower()
