"""OpenDocument (ODT/ODS/ODP) extraction from the zip's content.xml with the standard library
(through defusedxml): ODF is zipped XML, so no third-party reader is needed (odfpy would add a
dependency to build a DOM of the same XML).

ODT: paragraphs, lists and tables in document order; every `text:h` starts a "section" Unit whose
heading path is the stack of enclosing headings (by `text:outline-level`). Tables are "cell | cell"
rows. ODS: one "row" Unit per non-empty row of each `table:table` (as XLSX: the sheet's first
row in the heading of the others), repeated rows/cells expanded up to a bound, cell text as
displayed; streamed (a row is dropped once read), as openpyxl streams XLSX. ODP: one "slide" Unit per `draw:page`, its title frame as heading, then the other
frames' text, then the speaker notes as "Notes: ...". The document title comes from meta.xml.
Not read: embedded objects and images, comments (office:annotation), tracked deletions, styles,
formulas (their displayed values are), flat XML files (.fodt ...).
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO
from xml.etree.ElementTree import Element

from foundation.errors import ExtractionError
from indexing.extract.builder import TextBuilder
from indexing.extract.safety import safe_xml
from indexing.extract.xlsx_file import add_rows
from indexing.model import Extracted, ExtractionLimits

_URI = {
    "office": "urn:oasis:names:tc:opendocument:xmlns:office:1.0",
    "text": "urn:oasis:names:tc:opendocument:xmlns:text:1.0",
    "table": "urn:oasis:names:tc:opendocument:xmlns:table:1.0",
    "draw": "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0",
    "presentation": "urn:oasis:names:tc:opendocument:xmlns:presentation:1.0",
    "dc": "http://purl.org/dc/elements/1.1/",
}
MAX_REPEAT = 1000  # a repeated row or cell with text is read at most this many times


def _q(name: str) -> str:
    prefix, local = name.split(":")
    return f"{{{_URI[prefix]}}}{local}"


_P, _H, _SPACE, _TAB, _BREAK = _q("text:p"), _q("text:h"), _q("text:s"), _q("text:tab"), _q("text:line-break")
_LIST, _TABLE, _ROW, _CELL = _q("text:list"), _q("table:table"), _q("table:table-row"), _q("table:table-cell")
_COVERED = _q("table:covered-table-cell")
_SKIPPED = frozenset({_q("office:annotation"), _q("text:tracked-changes"), _q("text:note-citation")})
_NOTES, _PAGE, _SHEETS = _q("presentation:notes"), _q("draw:page"), _q("office:spreadsheet")


def extract_odf(path: Path, kind: str, limits: ExtractionLimits, source: IO[bytes] | None = None) -> Extracted:
    builder = TextBuilder(limits.max_extracted_chars)
    with zipfile.ZipFile(source or path) as archive:
        if _encrypted(archive):
            raise ExtractionError(f"{path.name} is password-protected; remove the password and index it again.")
        title = _meta_title(archive)
        with archive.open("content.xml") as content:
            if not _read_body(builder, content):
                raise ExtractionError(f"{path.name} has no document body (office:body); check the file.")
    return builder.build(kind, title=title)


def _read_body(builder: TextBuilder, content: IO[bytes]) -> bool:
    """Stream content.xml: a spreadsheet row by row (each row dropped once read, so a large sheet never
    becomes one tree); a text document or a presentation as one tree. False when there is no body."""
    import defusedxml.ElementTree

    events = iter(defusedxml.ElementTree.iterparse(content, events=("start", "end")))
    readers = {_q("office:text"): _text_document, _q("office:presentation"): _presentation}
    for event, element in events:
        if event == "start" and element.tag == _SHEETS:
            _stream_sheets(builder, events)
            return True
        if event == "end" and element.tag in readers:
            readers[element.tag](builder, element)
            return True
    return False


def _encrypted(archive: zipfile.ZipFile) -> bool:
    try:
        with archive.open("META-INF/manifest.xml") as manifest:
            return b"encryption-data" in manifest.read(1 << 20)
    except KeyError:
        return False


def _meta_title(archive: zipfile.ZipFile) -> str | None:
    try:
        meta = safe_xml(archive.read("meta.xml"))
    except (KeyError, ValueError, SyntaxError):
        return None
    element = meta.find(f".//{_q('dc:title')}")
    if element is None:
        return None
    return " ".join((element.text or "").split()) or None


def inline_text(element: Element) -> str:
    """A paragraph's text: spans and links read through, text:s/tab/line-break as whitespace."""
    parts: list[str] = []
    _walk(element, parts)
    return "".join(parts)


def _walk(element: Element, parts: list[str]) -> None:
    parts.append(element.text or "")
    for child in element:
        if child.tag == _SPACE:
            count = child.get(_q("text:c"), "1")
            parts.append(" " * min(int(count) if count.isdigit() else 1, 100))
        elif child.tag == _TAB:
            parts.append("\t")
        elif child.tag == _BREAK:
            parts.append("\n")
        elif child.tag not in _SKIPPED:
            _walk(child, parts)
        parts.append(child.tail or "")


# ---------------------------------------------------------------- ODT


def _text_document(builder: TextBuilder, part: Element) -> None:
    stack: list[tuple[int, str]] = []
    parts: list[str] = []
    for kind, level, text in _blocks(part):
        if kind == "h" and text.strip():
            if not _flush(builder, parts, stack):
                return
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, " ".join(text.split())))
        parts.append(text)
    _flush(builder, parts, stack)


def _flush(builder: TextBuilder, parts: list[str], stack: list[tuple[int, str]]) -> bool:
    text = "\n\n".join(p.strip() for p in parts if p.strip())
    parts.clear()
    return builder.add(text, "section", heading_path=tuple(title for _, title in stack))


def _blocks(element: Element) -> Iterator[tuple[str, int, str]]:
    """("h", level, text) | ("p", 0, text) | ("table", 0, rows) in document order."""
    for child in element:
        if child.tag == _H:
            level = child.get(_q("text:outline-level"), "1")
            yield "h", int(level) if level.isdigit() else 1, inline_text(child)
        elif child.tag == _P:
            yield "p", 0, inline_text(child)
        elif child.tag == _TABLE:
            yield "table", 0, "\n".join(line for _, line in _table_lines(child))
        elif child.tag not in _SKIPPED:
            yield from _blocks(child)  # lists, list items, sections, indexes ...


# ---------------------------------------------------------------- ODS


def _stream_sheets(builder: TextBuilder, events: Iterator[tuple[str, Element]]) -> None:
    for event, element in events:
        if event == "start" and element.tag == _TABLE:
            if not add_rows(builder, element.get(_q("table:name")) or "Sheet", _streamed_lines(events)):
                return
        elif event == "end" and element.tag == _SHEETS:
            return


def _streamed_lines(events: Iterator[tuple[str, Element]]) -> Iterator[tuple[int, str]]:
    """Rows of the sheet whose start was just read, to its end; each row is cleared once read."""
    number, nested = 0, 0
    for event, element in events:
        if element.tag == _TABLE:
            if event == "start":
                nested += 1
            elif nested:
                nested -= 1
            else:
                element.clear()
                return
        elif event == "end" and element.tag == _ROW and not nested:
            lines, number = _row_lines(element, number)
            yield from lines
            element.clear()


def _table_lines(table: Element) -> Iterator[tuple[int, str]]:
    """(1-based row number, "cell | cell") for each non-empty row of a table held as a tree."""
    number = 0
    for row in _rows(table):
        lines, number = _row_lines(row, number)
        yield from lines


def _row_lines(row: Element, number: int) -> tuple[list[tuple[int, str]], int]:
    """The numbered lines of one row (after row `number`; repeats expanded up to MAX_REPEAT), and the
    number of its last row."""
    repeat = _repeat(row, "table:number-rows-repeated")
    cells = _cells(row)
    if not cells:
        return [], number + repeat
    line = " | ".join(cells)
    return [(number + i, line) for i in range(1, min(repeat, MAX_REPEAT) + 1)], number + repeat


def _rows(element: Element) -> Iterator[Element]:
    """The table's own rows (through row groups and header rows, not into nested tables)."""
    for child in element:
        if child.tag == _ROW:
            yield child
        elif child.tag != _TABLE:
            yield from _rows(child)


def _cells(row: Element) -> list[str]:
    cells: list[str] = []
    pending = 0  # empty cells not yet added: only added when a later cell has text
    for cell in row:
        if cell.tag not in (_CELL, _COVERED):
            continue
        repeat = _repeat(cell, "table:number-columns-repeated")
        text = " ".join(" ".join(inline_text(p) for p in cell.iter(_P)).split())
        if not text:
            pending += repeat
            continue
        cells.extend([""] * min(pending, MAX_REPEAT))
        cells.extend([text] * min(repeat, MAX_REPEAT))
        pending = 0
    return cells


def _repeat(element: Element, attribute: str) -> int:
    value = element.get(_q(attribute), "1")
    return max(1, int(value)) if value.isdigit() else 1


# ---------------------------------------------------------------- ODP


def _presentation(builder: TextBuilder, part: Element) -> None:
    for number, page in enumerate(part.iter(_PAGE), start=1):
        title, blocks, notes = "", [], ""
        for child in page:
            if child.tag == _NOTES:
                notes = "\n".join(_paragraphs(child))
                continue
            text = "\n".join(_paragraphs(child))
            if not title and child.get(_q("presentation:class")) == "title":
                title = " ".join(text.split())
            elif text.strip():
                blocks.append(text)
        if notes.strip():
            blocks.append("Notes: " + notes.strip())
        text = "\n\n".join(b for b in [title, *blocks] if b.strip())
        if not builder.add(text, "slide", slide=number, heading_path=(title,) if title else ()):
            return


def _paragraphs(element: Element) -> list[str]:
    """Texts of the paragraphs, headings and table rows inside a frame or shape."""
    out: list[str] = []
    for child in element:
        if child.tag in (_P, _H):
            out.append(inline_text(child))
        elif child.tag == _TABLE:
            out.extend(line for _, line in _table_lines(child))
        elif child.tag not in _SKIPPED:
            out.extend(_paragraphs(child))
    return out
