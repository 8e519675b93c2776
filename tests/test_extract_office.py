"""PDF / DOCX / XLSX / PPTX extraction from real generated files, English and Chinese."""

from __future__ import annotations

from pathlib import Path

from indexing.chunking import chunk_document
from indexing.extract import extract_file
from indexing.model import ChunkingOptions
from tests.docgen import Heading, Slide, Table, make_docx, make_pdf, make_pptx, make_xlsx

EN = "Quarterly revenue grew by twelve percent while running costs stayed flat."
ZH = "第一季度营收增长率为百分之十二，客户满意度显著提高。"


def check_offsets(result) -> None:  # type: ignore[no-untyped-def]
    previous = -1
    for unit in result.units:
        assert 0 <= unit.start < unit.end <= len(result.text)
        assert unit.start >= previous
        previous = unit.end
        assert result.text[unit.start : unit.end].strip() == result.text[unit.start : unit.end]


def test_pdf_pages_outline_and_chinese(tmp_path: Path) -> None:
    path = make_pdf(
        tmp_path / "report.pdf",
        [[Heading("Overview"), EN], [Heading("营收分析", 2), ZH], [], ["Closing remarks about baselines."]],
    )
    result = extract_file(path)
    assert result.kind == "pdf" and result.warnings == []
    check_offsets(result)
    assert [u.page for u in result.units] == [1, 2, 4]  # the empty page 3 has no unit
    assert [u.kind for u in result.units] == ["page"] * 3
    page = {u.page: result.text[u.start : u.end] for u in result.units}
    assert "Overview" in page[1] and "twelve percent" in page[1]
    assert "营收分析" in page[2] and "客户满意度" in page[2].replace("\n", "")
    assert result.units[0].heading_path == ("Overview",)
    assert result.units[1].heading_path == ("Overview", "营收分析")
    assert result.units[2].heading_path == ("Overview", "营收分析")  # outline entry still in force
    chunks = chunk_document(result)
    assert {c.page for c in chunks} == {1, 2, 4}
    assert all(c.text == result.text[c.start : c.end] for c in chunks)


def test_pdf_text_cap_stops_at_a_page(tmp_path: Path) -> None:
    from indexing.model import ExtractionLimits

    path = make_pdf(tmp_path / "long.pdf", [[f"Page {n} " + EN * 3] for n in range(1, 21)])
    result = extract_file(path, ExtractionLimits(max_extracted_chars=1500))
    assert len(result.text) <= 1500 and 1 < len(result.units) < 20
    assert any("truncated" in w for w in result.warnings)


def test_docx_headings_paragraphs_tables_in_order(tmp_path: Path) -> None:
    path = make_docx(
        tmp_path / "plan.docx",
        [
            Heading("Annual Plan", 0),
            "Opening paragraph.",
            Heading("Revenue"),
            EN,
            Table([["Region", "Q1", "Q2"], ["North", "10", "12"], ["华东", "营收", "客户"]]),
            Heading("营收增长", 2),
            ZH,
            Heading("Costs"),
            "Costs are flat.",
        ],
        title="Plan 2026",
    )
    result = extract_file(path)
    assert result.kind == "docx" and result.title == "Plan 2026"
    check_offsets(result)
    sections = [(u.heading_path, result.text[u.start : u.end]) for u in result.units]
    assert [s[0] for s in sections] == [
        ("Annual Plan",),
        ("Annual Plan", "Revenue"),
        ("Annual Plan", "Revenue", "营收增长"),
        ("Annual Plan", "Costs"),
    ]
    revenue = sections[1][1]
    assert revenue.startswith("Revenue\n\n" + EN)
    assert "Region | Q1 | Q2\nNorth | 10 | 12\n华东 | 营收 | 客户" in revenue
    assert sections[2][1] == "营收增长\n\n" + ZH
    assert result.text.index("Opening paragraph.") < result.text.index("Region | Q1")
    headings = {c.heading for c in chunk_document(result)}
    assert "Annual Plan > Revenue > 营收增长" in headings


def test_docx_localised_heading_style_ids(tmp_path: Path) -> None:
    """Chinese Word names heading styles with ids like "1"; levels come from the style name."""
    import zipfile

    source = make_docx(tmp_path / "src.docx", [Heading("概述"), "正文内容。", Heading("细节", 2), "更多内容。"])
    target = tmp_path / "zh.docx"
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as new:
        for info in old.infolist():
            data = old.read(info.filename)
            if info.filename in ("word/document.xml", "word/styles.xml"):
                data = data.replace(b'w:val="Heading1"', b'w:val="1"').replace(b'w:val="Heading2"', b'w:val="2"')
                data = data.replace(b'w:styleId="Heading1"', b'w:styleId="1"')
                data = data.replace(b'w:styleId="Heading2"', b'w:styleId="2"')
            new.writestr(info.filename, data)
    result = extract_file(target)
    assert [u.heading_path for u in result.units] == [("概述",), ("概述", "细节")]


def test_xlsx_rows_are_units_with_the_header_in_their_heading(tmp_path: Path) -> None:
    rows: list[list[object]] = [["Region", "Revenue", "Growth"]]
    rows += [[f"R{n}", n * 1000, n / 100] for n in range(1, 46)]  # sheet rows 2..46
    path = make_xlsx(tmp_path / "sales.xlsx", {"Sales": rows, "空表": [], "客户": [["客户", "营收"], ["华为", 12.5]]})
    result = extract_file(path)
    assert result.kind == "xlsx"
    check_offsets(result)
    sales = [u for u in result.units if u.sheet == "Sales"]
    assert [u.rows for u in sales] == [(n, n) for n in range(1, 47)]
    assert result.text[sales[0].start : sales[0].end] == "Region | Revenue | Growth"
    assert result.text[sales[1].start : sales[1].end] == "R1 | 1000 | 0.01"
    assert sales[0].heading_path == ("Sales",)
    assert all(u.kind == "row" and u.heading_path == ("Sales", "Region | Revenue | Growth") for u in sales[1:])
    assert result.text.count("Region | Revenue") == 1  # each row's text once
    assert [u.sheet for u in result.units if u.sheet != "Sales"] == ["客户", "客户"]  # the empty sheet has none
    chunks = chunk_document(result)
    sales_chunks = [c for c in chunks if c.sheet == "Sales"]
    assert sales_chunks[0].rows is not None and sales_chunks[0].rows[0] == 1
    assert sales_chunks[-1].rows is not None and sales_chunks[-1].rows[1] == 46
    assert all(len(c.text) <= ChunkingOptions().max_chars and c.heading.startswith("Sales") for c in sales_chunks)
    assert all("Region | Revenue" in c.heading for c in sales_chunks[1:])  # the header goes with every window
    zh = [c for c in chunks if c.sheet == "客户"]
    assert len(zh) == 1 and zh[0].text == "客户 | 营收\n华为 | 12.5" and zh[0].rows == (1, 2)


def test_xlsx_dates_bools_and_blank_rows(tmp_path: Path) -> None:
    import datetime as dt

    path = make_xlsx(
        tmp_path / "types.xlsx",
        {"T": [["when", "ok", "note"], [dt.datetime(2026, 3, 1), True, None], [], [None, None, None], ["x", False, "多行\n文本"]]},
    )
    result = extract_file(path)
    text = result.text
    assert text == "when | ok | note\n2026-03-01 | TRUE\nx | FALSE | 多行 文本"
    assert [u.rows for u in result.units] == [(1, 1), (2, 2), (5, 5)]  # blank rows skipped, numbers kept


def test_pptx_slides_titles_tables_notes(tmp_path: Path) -> None:
    path = make_pptx(
        tmp_path / "deck.pptx",
        [
            Slide("Revenue Review", ["Revenue grew 12%", "Costs flat"], notes="Mention the baseline.", table=[["Q", "Rev"], ["Q3", "5"]]),
            Slide("营收增长", ["Q3营收增长率", "客户数量"], notes="强调客户。"),
            Slide("", ["untitled bullet"]),
        ],
    )
    result = extract_file(path)
    assert result.kind == "pptx"
    check_offsets(result)
    assert [u.slide for u in result.units] == [1, 2, 3]
    assert [u.heading_path for u in result.units] == [("Revenue Review",), ("营收增长",), ()]
    first = result.text[result.units[0].start : result.units[0].end]
    assert first.startswith("Revenue Review\n\nRevenue grew 12%\nCosts flat")
    assert "Q | Rev\nQ3 | 5" in first and first.endswith("Notes: Mention the baseline.")
    second = result.text[result.units[1].start : result.units[1].end]
    assert "Q3营收增长率" in second and second.endswith("Notes: 强调客户。")
    chunks = chunk_document(result)
    assert [c.slide for c in chunks] == [1, 2, 3]
    assert chunks[1].heading == "营收增长"


def test_worker_is_reused_across_files(tmp_path: Path) -> None:
    from indexing.extract.worker import POOL

    paths = [make_pdf(tmp_path / f"p{n}.pdf", [[f"doc {n}"]]) for n in range(3)]
    extract_file(paths[0])
    pids = {w.process.pid for w in POOL._idle}
    for path in paths[1:]:
        assert "doc" in extract_file(path).text
    assert {w.process.pid for w in POOL._idle} == pids  # no new interpreter per file


def test_docx_runs_tabs_breaks_content_controls_text_boxes(tmp_path: Path) -> None:
    import zipfile

    w = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
    mc = 'xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006"'
    body = (
        f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document {w} {mc}><w:body>'
        '<w:p><w:pPr><w:tabs><w:tab w:val="left" w:pos="720"/></w:tabs></w:pPr>'
        "<w:r><w:t>Name</w:t><w:tab/><w:t>Value</w:t><w:br/><w:t>next line</w:t></w:r>"
        '<w:hyperlink><w:r><w:t xml:space="preserve"> link text</w:t></w:r></w:hyperlink>'
        "<w:del><w:r><w:delText>deleted</w:delText></w:r></w:del></w:p>"
        "<w:sdt><w:sdtContent><w:p><w:r><w:t>inside a content control</w:t></w:r></w:p></w:sdtContent></w:sdt>"
        "<w:p><w:r><mc:AlternateContent><mc:Choice><w:txbxContent><w:p><w:r><w:t>box text</w:t></w:r></w:p>"
        "</w:txbxContent></mc:Choice><mc:Fallback><w:txbxContent><w:p><w:r><w:t>box text</w:t></w:r></w:p>"
        "</w:txbxContent></mc:Fallback></mc:AlternateContent></w:r></w:p>"
        "<w:tbl><w:tr><w:tc><w:p><w:r><w:t>merged</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>b</w:t></w:r></w:p></w:tc></w:tr>"
        "<w:tr><w:tc><w:tcPr><w:vMerge/></w:tcPr><w:p/></w:tc><w:tc><w:p><w:r><w:t>d</w:t></w:r></w:p></w:tc></w:tr></w:tbl>"
        "</w:body></w:document>"
    )
    source = make_docx(tmp_path / "src.docx", ["placeholder"])
    target = tmp_path / "rich.docx"
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as new:
        for info in old.infolist():
            data = body.encode() if info.filename == "word/document.xml" else old.read(info.filename)
            new.writestr(info.filename, data)
    text = extract_file(target).text
    assert text == "Name\tValue\nnext line link text\n\ninside a content control\n\nbox text\n\nmerged | b\n | d"


def test_docgen_pdf_overflow_keeps_long_text(tmp_path: Path) -> None:
    long = " ".join(f"w{n}" for n in range(3000))
    clipped = extract_file(make_pdf(tmp_path / "clip.pdf", [[long]]))
    whole = extract_file(make_pdf(tmp_path / "whole.pdf", [[Heading("Long"), long], ["next"]], overflow=True))
    assert "w2999" not in clipped.text and len(clipped.units) == 1
    assert "w2999" in whole.text and len(whole.units) > 2 and whole.text.endswith("next")
    assert all(u.heading_path == ("Long",) for u in whole.units)
