"""HTML, CSV/TSV, EPUB, ODT/ODS/ODP and e-mail extraction on real generated files (through extract_file
and its worker), plus hypothesis properties of the HTML and CSV parsers."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from indexing.extract import detect_kind, extract_file, reads_as_source
from indexing.extract.csv_file import csv_lines, sniff_dialect
from indexing.extract.html_file import parse_html
from indexing.model import Extracted, ExtractionLimits
from tests.docgen import (
    Heading,
    Slide,
    Table,
    make_docx,
    make_eml,
    make_epub,
    make_odf,
    make_pdf,
    make_xlsx,
    odp_body,
    ods_body,
    odt_body,
)

PAGE = """<!DOCTYPE html><html><head><title>Guide &amp; Notes</title>
<style>.secret-style { color: red }</style><script>var secretScript = "<h1>not a heading</h1>";</script></head>
<body><p>Before any heading &lt;intro&gt; &#20013;&#25991;&nbsp;text.</p><!-- secret comment -->
<h1>Install</h1><p>Run the <a href="setup.html">setup wizard</a> first.</p>
<h2>Linux</h2><p>Use the package.</p><h3>Debian</h3><p>apt install it</p>
<h2>Windows</h2><table><tr><th>Step</th><th>Action</th></tr><tr><td>1</td><td>Download</td></tr></table>
<h1>Usage</h1><div hidden>hidden secret</div><p>Open it <b>now <i>please</p><img alt="a diagram of flows">
"""


def units_by_heading(result: Extracted) -> dict[tuple[str, ...], str]:
    return {u.heading_path: result.text[u.start : u.end] for u in result.units}


def check_offsets(result: Extracted) -> None:
    for unit in result.units:
        assert 0 <= unit.start < unit.end <= len(result.text)
        assert result.text[unit.start : unit.end].strip()


# ---------------------------------------------------------------- HTML


@pytest.mark.parametrize("suffix", [".html", ".htm", ".xhtml"])
def test_html_headings_nest_and_tags_scripts_styles_comments_are_gone(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"guide{suffix}"
    path.write_text(PAGE, encoding="utf-8")
    result = extract_file(path)
    assert result.kind == "html" and result.title == "Guide & Notes"
    sections = units_by_heading(result)
    assert list(sections) == [
        ("Guide & Notes",), ("Install",), ("Install", "Linux"), ("Install", "Linux", "Debian"),
        ("Install", "Windows"), ("Usage",),
    ]
    assert sections[("Guide & Notes",)] == "Before any heading <intro> 中文 text."
    assert "setup wizard first" in sections[("Install",)]
    assert sections[("Install", "Windows")] == "Windows\n\nStep | Action\n1 | Download"
    assert "Open it now please" in sections[("Usage",)] and "a diagram of flows" in sections[("Usage",)]
    for gone in ("secret", "<", "color", "not a heading", "href"):
        assert gone not in result.text.replace("<intro>", "")
    check_offsets(result)


def test_html_declared_charset_and_chinese_fallback(tmp_path: Path) -> None:
    latin = tmp_path / "latin.html"
    latin.write_bytes('<meta charset="windows-1252"><p>café – naïve</p>'.encode("cp1252"))
    assert extract_file(latin).text == "café – naïve"
    labelled = tmp_path / "labelled.html"  # labelled GB2312 but written as GBK, as browsers read such pages
    labelled.write_bytes('<meta http-equiv="Content-Type" content="text/html; charset=gb2312"><p>朱镕基</p>'.encode("gbk"))
    assert extract_file(labelled).text == "朱镕基"
    gbk = tmp_path / "gbk.htm"
    gbk.write_bytes("<h1>标题</h1><p>中文内容</p>".encode("gbk"))
    result = extract_file(gbk)
    assert result.units[0].heading_path == ("标题",) and "中文内容" in result.text


def test_html_is_read_as_source_by_read_file_but_indexed_as_text() -> None:
    assert detect_kind(Path("a.html")) == "html" and reads_as_source("a.html") and reads_as_source("a.csv")
    assert not reads_as_source("a.eml") and not reads_as_source("a.epub")


# Whole constructs, however badly nested: whatever they make, a <script> after them is still a script.
_WHOLE = ["<p>", "</p>", "<div>", "</div>", "<h1>", "</h1>", "<h3>", "</h2>", "<b>", "<a href='x'>", "</a>", ">",
          "&amp;", "&#", "&#x4e2d;", "&bogus;", "<!-- c -->", "-->", "<br/>", "<table><tr><td>", "</td>", "text",
          "中文", "]]>", "<?pi?>", "<!DOCTYPE html>", "\n", " ", "<td>", "</tr>", "<pre>", "</pre>", "<li>", "</body>",
          "</html>", "<html>", "<head>", "<body>", "<h6>"]
# Broken ones that swallow what follows (an unclosed comment, attribute, CDATA): only after the script.
_BROKEN = ["<a href='", "<", "<!--", "<![CDATA[", "</h2", "<p class=\"", "&"]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(_WHOLE), max_size=40), st.lists(st.sampled_from(_WHOLE + _BROKEN), max_size=40),
       st.sampled_from(["script", "style"]))
def test_html_property_never_crashes_never_emits_script_or_style(before: list[str], after: list[str], tag: str) -> None:
    markup = "".join(before) + f"<{tag}>MARKER{tag} <p>inner</p></{tag}>" + "".join(after)
    doc = parse_html(markup)
    text = "\n".join(s.text() for s in doc.sections)
    assert "MARKER" not in text and "MARKER" not in doc.title
    for section in doc.sections:
        assert all(h and "MARKER" not in h for h in section.heading_path)


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=300))
def test_html_property_arbitrary_text_never_crashes(markup: str) -> None:
    doc = parse_html(markup)
    assert all(s.text() == s.text().strip() for s in doc.sections)


# ---------------------------------------------------------------- CSV / TSV


def test_csv_rows_are_units_with_the_header_in_their_heading(tmp_path: Path) -> None:
    path = tmp_path / "people.csv"
    path.write_text('name,city,note\nAlice,Paris,"likes\nbread"\n\nBob,"Rome, IT",\n', encoding="utf-8-sig")
    result = extract_file(path)
    assert result.kind == "csv" and result.encoding == "utf-8-sig"
    rows = [(u.rows, u.heading_path, result.text[u.start : u.end]) for u in result.units]
    assert rows == [
        ((1, 1), (), "name | city | note"),
        ((2, 2), ("name | city | note",), "Alice | Paris | likes bread"),
        ((4, 4), ("name | city | note",), "Bob | Rome, IT"),  # the blank line is row 3, as a spreadsheet shows it
    ]


def test_csv_gbk_semicolons_and_tsv(tmp_path: Path) -> None:
    gbk = tmp_path / "城市.csv"
    gbk.write_bytes("城市;人口\n北京;2100\n上海;2400\n".encode("gbk"))
    result = extract_file(gbk)
    assert result.text == "城市 | 人口\n北京 | 2100\n上海 | 2400" and result.units[2].heading_path == ("城市 | 人口",)
    excel = tmp_path / "unicode.txt.csv"  # Excel's "Unicode text": UTF-16 with a BOM, tab-separated
    excel.write_bytes("名称\t数量\r\n苹果\t3\r\n".encode("utf-16"))
    assert extract_file(excel).text == "名称 | 数量\n苹果 | 3"
    tsv = tmp_path / "t.tsv"
    tsv.write_text("a,b\tc\n1,2\t3\n", encoding="utf-8")
    assert extract_file(tsv).text == "a,b | c\n1,2 | 3"


def test_huge_csv_is_bounded_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "big.csv"
    path.write_text("id,value\n" + "".join(f"{i},value number {i}\n" for i in range(200_000)), encoding="utf-8")
    result = extract_file(path, ExtractionLimits(max_extracted_chars=50_000))
    assert len(result.text) <= 50_000 and result.warnings
    assert 1000 < len(result.units) < 5000 and result.units[-1].heading_path == ("id | value",)


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.sampled_from('ab,;\t|"\n\r 中'), max_size=200), st.booleans())
def test_csv_property_never_crashes_and_keeps_every_cell(text: str, tab: bool) -> None:
    dialect = sniff_dialect(text, tab)
    try:
        lines = list(csv_lines(text, dialect))
    except Exception as exc:  # only the csv module's own error, which extract_csv handles
        assert type(exc).__name__ == "Error"
        return
    numbers = [n for n, _ in lines]
    assert numbers == sorted(set(numbers)) and all(line.strip() for _, line in lines)


# ---------------------------------------------------------------- EPUB


def test_epub_chapters_in_spine_order_with_headings(tmp_path: Path) -> None:
    chapters = [
        ("Opening", "<h1>Chapter One</h1><p>The voyage begins.</p><h2>At sea</h2><p>Waves &amp; wind.</p>"),
        ("Interlude", "<p>A chapter without headings.</p>"),
        ("Closing", "<h1>第二章</h1><p>回到港口。</p><script>hidden()</script>"),
    ]
    result = extract_file(make_epub(tmp_path / "book.epub", chapters, title="Sea Book", spine_reversed=True))
    assert result.kind == "epub" and result.title == "Sea Book"
    assert [u.heading_path for u in result.units] == [
        ("Chapter One",), ("Chapter One", "At sea"), ("Interlude",), ("第二章",),
    ]
    assert "Waves & wind." in result.text and "hidden" not in result.text
    assert result.text.index("voyage") < result.text.index("without") < result.text.index("回到港口")
    check_offsets(result)


@pytest.mark.parametrize("toc_kind", ["nav", "ncx"])
def test_epub_table_of_contents_heads_chapters_without_headings(tmp_path: Path, toc_kind: str) -> None:
    chapters = [("Book", '<p class="chapter-title">I. Departure</p><p>We left at dawn.</p>'),
                ("Book", "<h1>II. Storm</h1><p>Thunder.</p>")]
    path = make_epub(tmp_path / "toc.epub", chapters, toc=["I. Departure", "II. The Storm"], toc_kind=toc_kind)
    result = extract_file(path)
    assert [u.heading_path for u in result.units] == [("I. Departure",), ("II. Storm",)]
    assert "The Storm" not in result.text  # the table of contents is not read as a chapter


# ---------------------------------------------------------------- OpenDocument


def test_odt_headings_paragraphs_tables(tmp_path: Path) -> None:
    blocks: list[str | Heading | Table] = [Heading("Plan", 1), "Intro paragraph.", Heading("Budget", 2), Table([["Item", "Cost"], ["Boat", "500"]]),
              Heading("Crew", 2), "五名船员。", Heading("Later", 1), "The end."]
    result = extract_file(make_odf(tmp_path / "plan.odt", "text", odt_body(blocks), title="Trip plan"))
    assert result.kind == "odt" and result.title == "Trip plan"
    sections = units_by_heading(result)
    assert list(sections) == [("Plan",), ("Plan", "Budget"), ("Plan", "Crew"), ("Later",)]
    assert sections[("Plan", "Budget")] == "Budget\n\nItem | Cost\nBoat | 500"
    assert "五名船员。" in sections[("Plan", "Crew")]


def test_odt_spaces_tabs_breaks_and_no_comments(tmp_path: Path) -> None:
    body = ('<text:p>a<text:s text:c="3"/>b<text:tab/>c<text:line-break/>d <text:span>span</text:span>'
            '<office:annotation><text:p>a comment</text:p></office:annotation></text:p>')
    result = extract_file(make_odf(tmp_path / "s.odt", "text", body))
    assert result.text == "a   b\tc\nd span"


def test_ods_sheets_rows_header_and_repeats(tmp_path: Path) -> None:
    sheets: dict[str, list[list[object]]] = {
        "Sales": [["Name", "Amount"], ["客户甲", 10], [], ["Bravo", 20]], "Other": [["k"], ["v"]],
    }
    result = extract_file(make_odf(tmp_path / "book.ods", "spreadsheet", ods_body(sheets)))
    assert result.kind == "ods"
    rows = [(u.sheet, u.rows, u.heading_path, result.text[u.start : u.end]) for u in result.units]
    assert rows == [
        ("Sales", (1, 1), ("Sales",), "Name | Amount"),
        ("Sales", (2, 2), ("Sales", "Name | Amount"), "客户甲 | 10"),
        ("Sales", (4, 4), ("Sales", "Name | Amount"), "Bravo | 20"),
        ("Other", (1, 1), ("Other",), "k"),
        ("Other", (2, 2), ("Other", "k"), "v"),
    ]


def test_odp_slides_titles_and_notes(tmp_path: Path) -> None:
    slides = [Slide("Roadmap", ["Launch", "Grow"], notes="say hello"), Slide("", ["untitled body"])]
    result = extract_file(make_odf(tmp_path / "deck.odp", "presentation", odp_body(slides)))
    assert result.kind == "odp"
    assert [(u.slide, u.heading_path) for u in result.units] == [(1, ("Roadmap",)), (2, ())]
    assert result.text == "Roadmap\n\nLaunch\nGrow\n\nNotes: say hello\n\nuntitled body"


# ---------------------------------------------------------------- e-mail


def test_eml_headers_body_and_attachments_as_their_own_documents(tmp_path: Path) -> None:
    docx = make_docx(tmp_path / "r.docx", [Heading("Findings"), "The hull is sound."])
    pdf = make_pdf(tmp_path / "r.pdf", [["first page"], ["second page 营收"]])
    xlsx = make_xlsx(tmp_path / "r.xlsx", {"Costs": [["Item", "Cost"], ["Sail", 90]]})
    inner = make_eml(tmp_path / "inner.eml", "Earlier note", "The original message.")
    attachments = [("report.docx", docx.read_bytes()), ("scan.pdf", pdf.read_bytes()), ("costs.xlsx", xlsx.read_bytes()),
                   ("notes.md", b"# Todo\n\nbuy rope"), ("fwd.eml", inner.read_bytes()),
                   ("tool.exe", b"MZ\x00\x00"), ("broken.docx", b"PK\x03\x04 not really")]
    path = make_eml(tmp_path / "mail.eml", "Survey 结果", "Hello Bob,\nsee the attachments.", html="<p>HTML copy</p>",
                    attachments=attachments)
    result = extract_file(path)
    assert result.kind == "eml" and result.title == "Survey 结果"
    head = result.text[result.units[0].start : result.units[0].end]
    assert head.startswith("Subject: Survey 结果\nFrom: Alice <alice@example.com>\nTo: Bob <bob@example.com>\nDate: ")
    assert "\nAttachments: report.docx, scan.pdf, costs.xlsx, notes.md, fwd.eml, tool.exe, broken.docx\n" in head
    assert "see the attachments." in head and "HTML copy" not in result.text  # text/plain preferred
    located = [(u.heading_path, u.page, u.sheet) for u in result.units[1:]]
    assert located == [
        (("mail.eml/report.docx", "Findings"), None, None),
        (("mail.eml/scan.pdf",), 1, None), (("mail.eml/scan.pdf",), 2, None),
        (("mail.eml/costs.xlsx", "Costs"), None, "Costs"), (("mail.eml/costs.xlsx", "Costs", "Item | Cost"), None, "Costs"),
        (("mail.eml/notes.md", "Todo"), None, None), (("mail.eml/fwd.eml", "Earlier note"), None, None),
    ]
    assert "The original message." in result.text and "second page 营收" in result.text
    assert any("tool.exe" in w and "unsupported" in w for w in result.warnings)
    assert any("broken.docx" in w for w in result.warnings)
    check_offsets(result)


def test_eml_html_only_body_goes_through_the_html_extractor(tmp_path: Path) -> None:
    raw = (b"Subject: =?utf-8?b?5pyI5oql?=\r\nFrom: a@example.com\r\nContent-Type: text/html; charset=utf-8\r\n\r\n"
           b"<html><style>x{}</style><h1>Summary</h1><p>Numbers &amp; more</p></html>\r\n")
    path = tmp_path / "report.eml"
    path.write_bytes(raw)
    result = extract_file(path)
    assert result.title == "月报"
    assert [u.heading_path for u in result.units] == [("月报",), ("月报", "Summary")]
    assert "Numbers & more" in result.text and "x{}" not in result.text


# ---------------------------------------------------------------- properties of the ODF and e-mail readers

_WORDS = st.text(alphabet=st.sampled_from("abcxyz 中文&<>'\"é"), min_size=1, max_size=12).filter(lambda t: t.strip())
_BLOCKS = st.lists(st.one_of(_WORDS, st.builds(Heading, _WORDS, st.integers(1, 4))), max_size=12)


def expected_paths(blocks: list[str | Heading]) -> list[tuple[str, ...]]:
    """The heading path of each heading's section: the nearest earlier heading of a lower level, then itself."""
    paths: list[tuple[str, ...]] = []
    open_headings: list[Heading] = []
    for block in blocks:
        if isinstance(block, Heading):
            while open_headings and open_headings[-1].level >= block.level:
                open_headings.pop()
            open_headings.append(block)
            paths.append(tuple(" ".join(h.text.split()) for h in open_headings))
    return paths


@settings(max_examples=60, deadline=None)
@given(_BLOCKS)
def test_odt_property_headings_nest_and_text_is_kept_in_order(blocks: list[str | Heading]) -> None:
    import tempfile

    from indexing.extract.odf_file import extract_odf

    with tempfile.TemporaryDirectory() as folder:
        path = make_odf(Path(folder) / "p.odt", "text", odt_body(list(blocks)))
        result = extract_odf(path, "odt", ExtractionLimits())
    flat = " ".join(result.text.split())
    texts = [" ".join((b.text if isinstance(b, Heading) else b).split()) for b in blocks]
    position = 0
    for text in texts:  # each in order, after the one before
        position = flat.find(text, position)
        assert position >= 0, text
        position += len(text)
    paths = [u.heading_path for u in result.units if u.heading_path]
    assert paths == expected_paths(list(blocks))


@settings(max_examples=40, deadline=None)
@given(_WORDS, st.text(alphabet=st.sampled_from("ab中 \n.,<&"), max_size=80))
def test_eml_property_subject_and_body_survive(subject: str, body: str) -> None:
    import email
    import email.policy
    import tempfile

    from indexing.extract.builder import TextBuilder
    from indexing.extract.eml_file import _Context, add_message
    from tests.docgen import make_eml

    with tempfile.TemporaryDirectory() as folder:
        data = make_eml(Path(folder) / "m.eml", subject, body).read_bytes()
    message = email.message_from_bytes(data, policy=email.policy.default)
    builder = TextBuilder(10_000)
    add_message(builder, message, _Context("m.eml", ExtractionLimits(), lambda *a: Extracted("", [], "x"), 0))
    result = builder.build("eml")
    flat = " ".join(result.text.split())
    assert f"Subject: {' '.join(subject.split())}" in flat and " ".join(body.split()) in flat
