"""Plain-text extraction: encodings, binary detection, empty files, Markdown sections, limits."""

from __future__ import annotations

import codecs
from pathlib import Path

import pytest

from foundation.errors import ExtractionError, LimitExceeded, NotFound
from indexing.chunking import chunk_document
from indexing.extract import SUPPORTED_EXTENSIONS, detect_kind, extract_file, is_supported
from indexing.model import ChunkingOptions, ExtractionLimits

ZH = "第一季度营收增长率为百分之十二。客户满意度显著提高！\n第二段：Q3营收增长率继续上升。"


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_utf8_text_is_exactly_the_file_content(tmp_path: Path) -> None:
    content = "line one\r\nline two\n\n  indented\tcafé 营收\n"
    result = extract_file(write(tmp_path / "a.txt", content.encode()))
    assert result.text == content
    assert result.kind == "text" and result.encoding == "utf-8" and result.warnings == []
    assert [(u.start, u.end) for u in result.units] == [(0, len(content))]


def test_utf8_bom_is_not_content(tmp_path: Path) -> None:
    result = extract_file(write(tmp_path / "bom.md", codecs.BOM_UTF8 + b"# Title\nbody\n"))
    assert result.text == "# Title\nbody\n"
    assert result.encoding == "utf-8-sig"


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be"])
def test_utf16_with_bom(tmp_path: Path, encoding: str) -> None:
    bom = codecs.BOM_UTF16_LE if encoding.endswith("le") else codecs.BOM_UTF16_BE
    result = extract_file(write(tmp_path / "u16.txt", bom + ZH.encode(encoding)))
    assert result.text == ZH
    assert result.encoding == "utf-16"


def test_utf16_without_bom_is_recognised(tmp_path: Path) -> None:
    content = "plain ASCII log line\nanother line with words\n" * 20
    result = extract_file(write(tmp_path / "u16.log", content.encode("utf-16-le")))
    assert result.text == content and result.encoding == "utf-16-le"


def test_gb18030_fallback(tmp_path: Path) -> None:
    result = extract_file(write(tmp_path / "gbk.txt", ZH.encode("gb18030")))
    assert result.text == ZH
    assert result.encoding == "gb18030" and result.warnings == []


def test_undecodable_bytes_are_replaced_with_a_warning(tmp_path: Path) -> None:
    result = extract_file(write(tmp_path / "bad.txt", b"good start \x80\xff end"))
    assert result.text.startswith("good start ") and result.text.endswith(" end")
    assert "\ufffd" in result.text
    assert any("replaced" in w for w in result.warnings)


@pytest.mark.parametrize(
    "data",
    [b"ELF\x00\x00\x01\x02binary\x00" * 50, bytes(range(1, 32)) * 100, b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj"],
)
def test_binary_data_with_a_text_extension_is_refused(tmp_path: Path, data: bytes) -> None:
    with pytest.raises(ExtractionError, match="is binary, not text"):
        extract_file(write(tmp_path / "data.txt", data))


def test_ansi_colour_codes_in_logs_are_text(tmp_path: Path) -> None:
    content = "\x1b[32mOK\x1b[0m test passed\n" * 50
    assert extract_file(write(tmp_path / "build.log", content.encode())).text == content


@pytest.mark.parametrize("name", ["empty.txt", "empty.pdf", "empty.docx", "empty.xlsx"])
def test_zero_byte_files_give_an_empty_result_with_a_warning(tmp_path: Path, name: str) -> None:
    result = extract_file(write(tmp_path / name, b""))
    assert result.text == "" and result.units == [] and result.warnings == ["file is empty"]
    assert chunk_document(result) == []


def test_whitespace_only_file_has_no_chunks(tmp_path: Path) -> None:
    result = extract_file(write(tmp_path / "blank.txt", b"  \n\n\t\n"))
    assert result.text == "  \n\n\t\n"
    assert chunk_document(result) == []


def test_markdown_headings_become_sections(tmp_path: Path) -> None:
    content = (
        "Preamble text.\n\n"
        "# Guide\n\nIntro.\n\n"
        "## Install\n\nRun it.\n\n"
        "```sh\n# not a heading\n```\n\n"
        "### Linux 安装\n\nApt.\n\n"
        "Setext Title\n============\n\nBody.\n\n"
        "Second\n------\n\nMore.\n"
    )
    result = extract_file(write(tmp_path / "guide.md", content.encode()))
    paths = [(u.heading_path, result.text[u.start : u.end].split("\n")[0]) for u in result.units]
    assert paths == [
        ((), "Preamble text."),
        (("Guide",), "# Guide"),
        (("Guide", "Install"), "## Install"),
        (("Guide", "Install", "Linux 安装"), "### Linux 安装"),
        (("Setext Title",), "Setext Title"),
        (("Setext Title", "Second"), "Second"),
    ]
    assert all(u.kind == "section" for u in result.units)
    assert result.units[-1].end == len(content)


def test_ten_megabyte_single_line(tmp_path: Path) -> None:
    line = ("x" * 97 + " ab") * (10 * 1024 * 1024 // 100)
    result = extract_file(write(tmp_path / "one-line.json", line.encode()))
    assert result.text == line
    chunks = chunk_document(result)
    assert chunks[0].start == 0 and chunks[-1].end == len(line)
    assert max(len(c.text) for c in chunks) <= ChunkingOptions().max_chars
    assert all(line[c.start : c.end] == c.text for c in chunks[:: len(chunks) // 50])


def test_extracted_text_is_cut_at_the_character_cap(tmp_path: Path) -> None:
    content = "营收增长 " * 5000
    result = extract_file(write(tmp_path / "long.txt", content.encode()), ExtractionLimits(max_extracted_chars=1000))
    assert result.text == content[:1000]
    assert any("truncated" in w for w in result.warnings)


def test_file_over_the_size_limit_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "big.txt", b"a" * 5000)
    with pytest.raises(LimitExceeded, match="max_file_bytes"):
        extract_file(path, ExtractionLimits(max_file_bytes=4096))


def test_unsupported_missing_and_supported(tmp_path: Path) -> None:
    with pytest.raises(ExtractionError, match="unsupported file type"):
        extract_file(write(tmp_path / "song.mp3", b"ID3"))
    with pytest.raises(NotFound):
        extract_file(tmp_path / "missing.txt")
    folder = tmp_path / "notes.txt"
    folder.mkdir()
    with pytest.raises(ExtractionError, match="not a regular file"):
        extract_file(folder)
    assert is_supported("a/b/Report.PDF") and is_supported("x.py") and is_supported("Makefile")
    assert is_supported("photo.jpg") and not is_supported("archive.zip") and not is_supported("song.mp3")
    assert {".txt", ".md", ".csv", ".json", ".py", ".pdf", ".docx", ".xlsx", ".pptx"} <= SUPPORTED_EXTENSIONS
    assert detect_kind(Path("deck.PPTX")) == "pptx" and detect_kind(Path("README")) == "text"
