"""read_file on real generated PDF/DOCX/XLSX/PPTX files: preview limits and lossless paging."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from foundation.errors import ExtractionError
from tests.docgen import Heading, Slide, make_docx, make_pdf, make_pptx, make_truncated_pdf, make_xlsx
from tools import files
from tools.runtime import CallContext, Runtime


@pytest.fixture
def rt(settings: Any) -> Runtime:
    return Runtime(settings)


@pytest.fixture
def call() -> CallContext:
    return CallContext(tool="read_file")


def read_pages(rt: Runtime, call: CallContext, path: str, **kwargs: Any) -> list[files.ReadFileResult]:
    pages, offset = [], 0
    while True:
        page = files.read_file(path, offset=offset, rt=rt, call=call, **kwargs)
        pages.append(page)
        if page.next_offset is None:
            return pages
        assert page.next_offset > offset
        offset = page.next_offset


def whole_text(pages: list[files.ReadFileResult]) -> str:
    return "".join(p.content for p in pages)


def words(n: int, seed: str) -> str:
    return " ".join(f"{seed}{i}" for i in range(n))


def test_pdf_pages_ten_at_a_time(rt: Runtime, call: CallContext, workspace: Path) -> None:
    make_pdf(workspace / "r.pdf", [[f"Page {n} marker", words(40, f"p{n}w")] for n in range(1, 26)])
    pages = read_pages(rt, call, "r.pdf")
    assert [p.location for p in pages] == ["pages 1-10 of 25", "pages 11-20 of 25", "pages 21-25 of 25"]
    assert pages[0].kind == "pdf" and "Page 1 marker" in pages[0].content
    assert "Page 11 marker" not in pages[0].content and "Page 11 marker" in pages[1].content
    assert whole_text(pages).count("marker") == 25 and len(whole_text(pages)) == pages[0].total_chars


def test_pdf_character_cap_cuts_at_page_boundaries(rt: Runtime, call: CallContext, workspace: Path) -> None:
    make_pdf(workspace / "dense.pdf", [[f"Dense {n}", words(700, f"d{n}x")] for n in range(1, 9)])
    pages = read_pages(rt, call, "dense.pdf")
    assert len(pages) > 1
    for page in pages:
        assert len(page.content) <= 30_000
        assert page.content.lstrip().startswith("Dense")  # every page starts at a PDF page
    assert whole_text(pages).count("Dense") == 8


def test_pdf_repaired_warning_is_reported(rt: Runtime, call: CallContext, workspace: Path) -> None:
    make_truncated_pdf(workspace / "cut.pdf", [[words(50, "t")] for _ in range(5)])
    page = files.read_file("cut.pdf", rt=rt, call=call)
    assert any("repaired" in w for w in page.warnings)


def test_encrypted_pdf_is_a_clear_error(rt: Runtime, call: CallContext, workspace: Path) -> None:
    make_pdf(workspace / "locked.pdf", [["secret"]], password="pw")
    with pytest.raises(ExtractionError, match="password"):
        files.read_file("locked.pdf", rt=rt, call=call)


def test_docx_pages_by_character_budget(rt: Runtime, call: CallContext, workspace: Path) -> None:
    blocks: list[Any] = []
    for n in range(1, 41):
        blocks += [Heading(f"Chapter {n}", 1), words(150, f"c{n}a"), words(150, f"c{n}b")]
    make_docx(workspace / "book.docx", blocks)
    pages = read_pages(rt, call, "book.docx")
    assert len(pages) >= 3 and pages[0].kind == "docx"
    assert all(len(p.content) <= 30_000 for p in pages)
    text = whole_text(pages)
    assert all(f"Chapter {n}\n" in text for n in range(1, 41)) and len(text) == pages[0].total_chars
    assert pages[1].content.lstrip().startswith("Chapter")  # cut between sections
    assert pages[0].location is not None and pages[0].location.startswith("sections 1-")


def test_xlsx_three_sheets_per_page(rt: Runtime, call: CallContext, workspace: Path) -> None:
    sheets = {f"S{n}": [["name", "value"], *[[f"row{n}-{r}", r] for r in range(1, 31)]] for n in range(1, 6)}
    make_xlsx(workspace / "book.xlsx", sheets)
    pages = read_pages(rt, call, "book.xlsx")
    assert [p.location for p in pages] == ["sheets: S1, S2, S3", "sheets: S4, S5"]
    assert "row3-30" in pages[0].content and "row4-1" in pages[1].content


def test_pptx_fifteen_slides_per_page(rt: Runtime, call: CallContext, workspace: Path) -> None:
    make_pptx(workspace / "deck.pptx", [Slide(title=f"Slide title {n}", bullets=[f"point {n}"]) for n in range(1, 21)])
    pages = read_pages(rt, call, "deck.pptx")
    assert [p.location for p in pages] == ["slides 1-15 of 20", "slides 16-20 of 20"]
    assert "Slide title 15" in pages[0].content and "Slide title 16" in pages[1].content


def test_document_limit_makes_smaller_pages(rt: Runtime, call: CallContext, workspace: Path) -> None:
    make_pptx(workspace / "deck.pptx", [Slide(title=f"T{n}", bullets=[words(100, f"s{n}")]) for n in range(1, 11)])
    pages = read_pages(rt, call, "deck.pptx", limit=1000)
    assert len(pages) > 2 and all(len(p.content) <= 1000 for p in pages)
    assert all(f"T{n}\n" in whole_text(pages) for n in range(1, 11))
