"""Generators of REAL office files for tests and benchmarks (no pytest needed to import this).

Documents are described with plain values:
- `make_pdf(path, pages)`: each page a list of blocks; a block is a paragraph `str` or a
  `Heading(text, level)` (headings also go into the PDF outline). Chinese text uses MuPDF's
  built-in CJK font. `password=` saves it encrypted (AES-256, a user password is then needed);
  `overflow=True` continues text that does not fit onto extra pages instead of dropping it.
- `make_docx(path, blocks)`: blocks are `str` paragraphs, `Heading(text, level)` (Word's
  "Heading N" styles; level 0 = "Title") and `Table(rows)`.
- `make_xlsx(path, sheets)`: `{sheet name: [row, ...]}`, a row is a list of cell values.
- `make_pptx(path, slides)`: `Slide(title, bullets, notes, table)`.
Hostile files for the safety tests: `make_zip_bomb_docx`, `make_entity_bomb_docx`,
`make_entity_bomb_xlsx`, `make_huge_dimension_xlsx`, `make_lying_zip_docx`, `make_corrupt_pdf`,
`make_truncated_pdf`. All heavy imports happen inside the functions.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Heading:
    text: str
    level: int = 1


@dataclass(frozen=True)
class Table:
    rows: Sequence[Sequence[str]]


@dataclass(frozen=True)
class Slide:
    title: str = ""
    bullets: Sequence[str] = ()
    notes: str = ""
    table: Sequence[Sequence[str]] = field(default_factory=tuple)


Block = str | Heading | Table


def _has_cjk(text: str) -> bool:
    return any("\u3000" <= ch <= "\u9fff" or "\uff00" <= ch <= "\uffef" for ch in text)


# ---------------------------------------------------------------- PDF


def make_pdf(
    path: Path, pages: Sequence[Sequence[str | Heading]], password: str | None = None, overflow: bool = False
) -> Path:
    """A text PDF, one page per entry. Text that does not fit on its page is dropped, unless
    `overflow=True`: then it continues on extra pages (use that to keep long texts whole)."""
    import pymupdf

    doc = pymupdf.open()
    toc: list[list[object]] = []
    for blocks in pages:
        page = doc.new_page(width=595, height=842)
        y = 60.0
        for block in blocks:
            text, size = (block.text, 16 - 2 * min(block.level, 3)) if isinstance(block, Heading) else (block, 10)
            if isinstance(block, Heading):
                toc.append([max(block.level, 1), block.text, doc.page_count])
            for line in _wrap(text, 95 if not _has_cjk(text) else 48):
                if y > 800:
                    if not overflow:
                        break
                    page, y = doc.new_page(width=595, height=842), 60.0
                page.insert_text((50, y), line, fontsize=size, fontname="china-s" if _has_cjk(line) else "helv")
                y += size * 1.4
            y += 6
    if toc:
        doc.set_toc(toc)
    options: dict[str, object] = {}
    if password:
        options = {
            "encryption": pymupdf.PDF_ENCRYPT_AES_256,  # type: ignore[attr-defined]
            "user_pw": password,
            "owner_pw": password + "-owner",
        }
    doc.save(path, **options)
    doc.close()
    return path


def _wrap(text: str, width: int) -> list[str]:
    lines: list[str] = []
    for raw in text.splitlines() or [""]:
        while len(raw) > width:
            cut = raw.rfind(" ", 0, width)
            cut = cut if cut > width // 2 else width
            lines.append(raw[:cut])
            raw = raw[cut:].lstrip(" ")
        lines.append(raw)
    return lines


def make_corrupt_pdf(path: Path) -> Path:
    """Starts like a PDF, then garbage: MuPDF cannot open it."""
    path.write_bytes(b"%PDF-1.7\n" + bytes(range(256)) * 8 + b"\n%%EOF\n")
    return path


def make_truncated_pdf(path: Path, pages: Sequence[Sequence[str | Heading]], keep: float | None = None) -> Path:
    """A valid PDF cut short: by default inside its xref table (trailer lost, MuPDF repairs it);
    with `keep` (a fraction), cut anywhere (deep cuts are usually beyond repair)."""
    data = make_pdf(path, pages).read_bytes()
    cut = int(len(data) * keep) if keep is not None else data.rfind(b"\nxref") + 60
    path.write_bytes(data[:cut])
    return path


# ---------------------------------------------------------------- DOCX


def make_docx(path: Path, blocks: Sequence[Block], title: str | None = None) -> Path:
    import docx

    document = docx.Document()
    if title:
        document.core_properties.title = title
    for block in blocks:
        if isinstance(block, Heading):
            document.add_heading(block.text, level=block.level)
        elif isinstance(block, Table):
            _docx_table(document, block)
        else:
            document.add_paragraph(block)
    document.save(str(path))
    return path


def _docx_table(document: object, table: Table) -> None:
    columns = max((len(r) for r in table.rows), default=1)
    grid = document.add_table(rows=len(table.rows), cols=columns)  # type: ignore[attr-defined]
    for r, row in enumerate(table.rows):
        for c, value in enumerate(row):
            grid.cell(r, c).text = str(value)


# ---------------------------------------------------------------- XLSX


def make_xlsx(path: Path, sheets: Mapping[str, Sequence[Sequence[object]]]) -> Path:
    import openpyxl

    workbook = openpyxl.Workbook(write_only=True)
    for name, rows in sheets.items():
        sheet = workbook.create_sheet(title=name)
        for row in rows:
            sheet.append(list(row))
    workbook.save(str(path))
    return path


# ---------------------------------------------------------------- PPTX


def make_pptx(path: Path, slides: Sequence[Slide]) -> Path:
    import pptx
    from pptx.util import Inches

    deck = pptx.Presentation()
    for spec in slides:
        slide = deck.slides.add_slide(deck.slide_layouts[1 if spec.bullets else 5])
        if spec.title and slide.shapes.title is not None:
            slide.shapes.title.text = spec.title
        if spec.bullets:
            body = slide.placeholders[1].text_frame
            body.text = spec.bullets[0]
            for bullet in spec.bullets[1:]:
                body.add_paragraph().text = bullet
        if spec.table:
            cols = max(len(r) for r in spec.table)
            shape = slide.shapes.add_table(len(spec.table), cols, Inches(0.5), Inches(4), Inches(9), Inches(2))
            for r, row in enumerate(spec.table):
                for c, value in enumerate(row):
                    shape.table.cell(r, c).text = str(value)
        if spec.notes:
            slide.notes_slide.notes_text_frame.text = spec.notes
    deck.save(str(path))
    return path


# ---------------------------------------------------------------- hostile Office files


def _rewrite_zip(source: Path, target: Path, replace: Mapping[str, bytes], extra: Mapping[str, bytes] = {}) -> Path:  # noqa: B006
    buffer = io.BytesIO()
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as new:
        for info in old.infolist():
            new.writestr(info.filename, replace.get(info.filename, old.read(info.filename)))
        for name, data in extra.items():
            new.writestr(name, data)
    target.write_bytes(buffer.getvalue())
    return target


def make_zip_bomb_docx(path: Path, inflated_mib: int = 64) -> Path:
    """A real DOCX plus a part of zeros compressing ~1000x (64 MiB → ~64 KiB on disk)."""
    base = make_docx(path.with_suffix(".base.docx"), ["bomb"])
    zeros = b"\0" * (inflated_mib * 2**20)
    _rewrite_zip(base, path, {}, {"word/media/zeros.bin": zeros})
    base.unlink()
    return path


_LAUGHS = (
    b'<?xml version="1.0"?>\n<!DOCTYPE lolz [\n<!ENTITY lol "lol">\n'
    + b"".join(
        b'<!ENTITY lol%d "%s">\n' % (i, (b"&lol%d;" % (i - 1) if i > 1 else b"&lol;") * 10) for i in range(1, 10)
    )
    + b"]>\n"
)


def make_entity_bomb_docx(path: Path) -> Path:
    """A DOCX whose document.xml is a "billion laughs" entity bomb."""
    base = make_docx(path.with_suffix(".base.docx"), ["laughs"])
    body = (
        _LAUGHS
        + b'<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
        + b"<w:body><w:p><w:r><w:t>&lol9;</w:t></w:r></w:p></w:body></w:document>"
    )
    _rewrite_zip(base, path, {"word/document.xml": body})
    base.unlink()
    return path


def make_entity_bomb_xlsx(path: Path) -> Path:
    """An XLSX whose sharedStrings/sheet XML is a "billion laughs" entity bomb."""
    base = make_xlsx(path.with_suffix(".base.xlsx"), {"S": [["a", "b"]]})
    with zipfile.ZipFile(base) as archive:
        sheet = next(n for n in archive.namelist() if n.startswith("xl/worksheets/sheet"))
        xml = archive.read(sheet)
    start = xml.find(b"<worksheet")
    bomb = _LAUGHS + xml[start:].replace(b"<v>", b"<v>&lol9;", 1)
    _rewrite_zip(base, path, {sheet: bomb})
    base.unlink()
    return path


def make_huge_dimension_xlsx(path: Path, rows: Sequence[Sequence[object]]) -> Path:
    """A small XLSX whose sheet claims the dimension A1:XFD1048576 (17 billion cells)."""
    base = make_xlsx(path.with_suffix(".base.xlsx"), {"Data": rows})
    with zipfile.ZipFile(base) as archive:
        sheet = next(n for n in archive.namelist() if n.startswith("xl/worksheets/sheet"))
        xml = archive.read(sheet)
    import re

    if b"<dimension" in xml:
        xml = re.sub(rb'<dimension ref="[^"]*"', b'<dimension ref="A1:XFD1048576"', xml)
    else:
        xml = xml.replace(b"<sheetData", b'<dimension ref="A1:XFD1048576"/><sheetData', 1)
    _rewrite_zip(base, path, {sheet: xml})
    base.unlink()
    return path


def make_lying_zip_docx(path: Path, real_mib: int = 8) -> Path:
    """A DOCX whose document.xml inflates to `real_mib` MiB while its zip headers claim 1 KiB."""
    base = make_docx(path.with_suffix(".base.docx"), ["liar"])
    with zipfile.ZipFile(base) as archive:
        xml = archive.read("word/document.xml")
    padded = xml.replace(b"<w:body>", b"<w:body>" + b" " * (real_mib * 2**20), 1)
    _rewrite_zip(base, path, {"word/document.xml": padded})
    base.unlink()
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo("word/document.xml")
    claimed = (1024).to_bytes(4, "little")
    local = info.header_offset
    data[local + 22 : local + 26] = claimed  # local header: uncompressed size
    central = _central_entry(bytes(data), b"word/document.xml")
    data[central + 24 : central + 28] = claimed  # central directory: uncompressed size
    path.write_bytes(bytes(data))
    return path


def _central_entry(data: bytes, name: bytes) -> int:
    pos = data.find(b"PK\x01\x02")
    while pos >= 0:
        name_len = int.from_bytes(data[pos + 28 : pos + 30], "little")
        if data[pos + 46 : pos + 46 + name_len] == name:
            return pos
        pos = data.find(b"PK\x01\x02", pos + 4)
    raise ValueError(f"{name!r} not in the central directory")


# ---------------------------------------------------------------- EPUB, ODF, e-mail


def make_epub(
    path: Path, chapters: Sequence[tuple[str, str]], title: str = "A Book", spine_reversed: bool = False,
    toc: Sequence[str] = (), toc_kind: str = "nav",
) -> Path:
    """An EPUB 3 whose chapters are (file title, XHTML body markup); the spine lists them in the given
    order (reversed file names when `spine_reversed`, to tell spine order from name order). `toc`: a
    table-of-contents label per chapter, as an EPUB 3 nav document (`toc_kind="nav"`) or an EPUB 2 NCX."""
    names = [f"text/ch{i:02d}.xhtml" for i in range(len(chapters))]
    if spine_reversed:
        names = names[::-1]
    manifest = "".join(
        f'<item id="c{i}" href="{name}" media-type="application/xhtml+xml"/>' for i, name in enumerate(names)
    )
    toc_part = _epub_toc(names, toc, toc_kind) if toc else None
    if toc_part is not None:
        manifest += (f'<item id="toc" href="{toc_part[0]}" properties="nav" media-type="application/xhtml+xml"/>'
                     if toc_kind == "nav" else
                     f'<item id="toc" href="{toc_part[0]}" media-type="application/x-dtbncx+xml"/>')
    spine = "".join(f'<itemref idref="c{i}"/>' for i in range(len(names)))
    if toc and toc_kind == "nav":
        spine = '<itemref idref="toc"/>' + spine  # as many tools write it: the nav document read first
    opf = (
        '<?xml version="1.0" encoding="utf-8"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0" '
        f'unique-identifier="id"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>{title}</dc:title>'
        f'<dc:identifier id="id">x</dc:identifier></metadata><manifest>{manifest}</manifest><spine>{spine}</spine></package>'
    )
    container = (
        '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
        '<rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
        "</rootfiles></container>"
    )
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")
        archive.writestr("META-INF/container.xml", container)
        archive.writestr("OEBPS/content.opf", opf)
        if toc_part is not None:
            archive.writestr(f"OEBPS/{toc_part[0]}", toc_part[1])
        for name, (chapter_title, body) in zip(names, chapters, strict=True):
            xhtml = (
                '<?xml version="1.0" encoding="utf-8"?><!DOCTYPE html><html xmlns="http://www.w3.org/1999/xhtml">'
                f"<head><title>{chapter_title}</title></head><body>{body}</body></html>"
            )
            archive.writestr(f"OEBPS/{name}", xhtml)
    return path


def _epub_toc(names: Sequence[str], labels: Sequence[str], kind: str) -> tuple[str, str]:
    """(file name, markup) of a table of contents: label i points at chapter i (names in the OPF folder)."""
    if kind == "nav":
        links = "".join(f'<li><a href="{name}#start">{_esc(label)}</a></li>' for name, label in zip(names, labels, strict=True))
        return "nav.xhtml", ('<?xml version="1.0" encoding="utf-8"?><!DOCTYPE html><html xmlns="http://www.w3.org/1999/xhtml" '
                             'xmlns:epub="http://www.idpf.org/2007/ops"><body><nav epub:type="toc"><ol>'
                             f"{links}</ol></nav></body></html>")
    points = "".join(
        f'<navPoint id="p{i}"><navLabel><text>{_esc(label)}</text></navLabel><content src="{name}"/></navPoint>'
        for i, (name, label) in enumerate(zip(names, labels, strict=True))
    )
    return "toc.ncx", ('<?xml version="1.0" encoding="utf-8"?><ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" '
                       f'version="2005-1"><navMap>{points}</navMap></ncx>')


_ODF_NS = (
    'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
    'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
    'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
    'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
    'xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0" '
    'xmlns:dc="http://purl.org/dc/elements/1.1/"'
)
_ODF_TYPES = {
    "text": "application/vnd.oasis.opendocument.text",
    "spreadsheet": "application/vnd.oasis.opendocument.spreadsheet",
    "presentation": "application/vnd.oasis.opendocument.presentation",
}


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def make_odf(path: Path, body_kind: str, body: str, title: str = "", encrypted: bool = False) -> Path:
    """An OpenDocument file (the zip layout LibreOffice writes) whose office:body holds
    `<office:{body_kind}>{body}</office:{body_kind}>` (body is ODF XML markup)."""
    content = (
        f'<?xml version="1.0" encoding="UTF-8"?><office:document-content {_ODF_NS} office:version="1.3">'
        f"<office:body><office:{body_kind}>{body}</office:{body_kind}></office:body></office:document-content>"
    )
    meta = (
        f'<?xml version="1.0" encoding="UTF-8"?><office:document-meta {_ODF_NS}><office:meta>'
        f"<dc:title>{_esc(title)}</dc:title></office:meta></office:document-meta>"
    )
    encryption = '<manifest:encryption-data manifest:checksum-type="SHA1"/>' if encrypted else ""
    manifest = (
        '<?xml version="1.0" encoding="UTF-8"?><manifest:manifest '
        'xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0">'
        f'<manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml">{encryption}'
        "</manifest:file-entry></manifest:manifest>"
    )
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(zipfile.ZipInfo("mimetype"), _ODF_TYPES[body_kind])
        archive.writestr("content.xml", content)
        archive.writestr("meta.xml", meta)
        archive.writestr("META-INF/manifest.xml", manifest)
    return path


def odt_body(blocks: Sequence[Block]) -> str:
    """ODF text markup for `make_odf(path, "text", ...)`: paragraphs, Heading(text, level), Table(rows)."""
    out = []
    for block in blocks:
        if isinstance(block, Heading):
            out.append(f'<text:h text:outline-level="{max(block.level, 1)}">{_esc(block.text)}</text:h>')
        elif isinstance(block, Table):
            out.append("<table:table>" + "".join(_odf_row(row) for row in block.rows) + "</table:table>")
        else:
            out.append(f"<text:p>{_esc(block)}</text:p>")
    return "".join(out)


def _odf_row(row: Sequence[object], repeat: int = 1) -> str:
    cells = "".join(f"<table:table-cell><text:p>{_esc(str(value))}</text:p></table:table-cell>" for value in row)
    extra = f' table:number-rows-repeated="{repeat}"' if repeat > 1 else ""
    return f"<table:table-row{extra}>{cells}</table:table-row>"


def ods_body(sheets: Mapping[str, Sequence[Sequence[object]]]) -> str:
    """ODF spreadsheet markup: {sheet name: rows}; an empty row list entry is a blank row."""
    out = []
    for name, rows in sheets.items():
        body = "".join(_odf_row(row) if row else "<table:table-row><table:table-cell/></table:table-row>" for row in rows)
        out.append(f'<table:table table:name="{_esc(name)}">{body}</table:table>')
    return "".join(out)


def odp_body(slides: Sequence[Slide]) -> str:
    """ODF presentation markup: one draw:page per Slide (title frame, bullets frame, notes)."""
    out = []
    for number, slide in enumerate(slides, start=1):
        title = (f'<draw:frame presentation:class="title"><draw:text-box><text:p>{_esc(slide.title)}</text:p>'
                 "</draw:text-box></draw:frame>") if slide.title else ""
        items = "".join(f"<text:p>{_esc(b)}</text:p>" for b in slide.bullets)
        bullets = f'<draw:frame presentation:class="outline"><draw:text-box>{items}</draw:text-box></draw:frame>'
        notes = (f"<presentation:notes><draw:frame><draw:text-box><text:p>{_esc(slide.notes)}</text:p>"
                 "</draw:text-box></draw:frame></presentation:notes>") if slide.notes else ""
        out.append(f'<draw:page draw:name="page{number}">{title}{bullets}{notes}</draw:page>')
    return "".join(out)


def make_eml(
    path: Path, subject: str, body: str, html: str | None = None,
    attachments: Sequence[tuple[str, bytes]] = (), sender: str = "Alice <alice@example.com>",
) -> Path:
    """An RFC 5322 e-mail: a text/plain body (plus an HTML alternative when `html`), and attachments
    (file name, bytes), built with the standard library's email package."""
    import mimetypes
    from email.message import EmailMessage

    message = EmailMessage()
    message["Subject"] = subject
    message["From"] = sender
    message["To"] = "Bob <bob@example.com>"
    message["Date"] = "Tue, 03 Mar 2026 10:00:00 +0800"
    message.set_content(body)
    if html is not None:
        message.add_alternative(html, subtype="html")
    for name, data in attachments:
        if name.endswith(".eml"):  # a forwarded e-mail: attached as message/rfc822
            from email import message_from_bytes, policy

            message.add_attachment(message_from_bytes(data, policy=policy.default), filename=name)
            continue
        kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
        maintype, subtype = kind.split("/", 1)
        message.add_attachment(data, maintype=maintype, subtype=subtype, filename=name)
    path.write_bytes(bytes(message))
    return path
