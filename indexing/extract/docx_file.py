"""DOCX extraction with python-docx: body paragraphs and tables in document order.

Paragraphs whose style is a heading ("Heading N", "Title", or a style with an outline level,
including styles based on one, so localised Word files work) start a new "section" Unit whose
heading_path is the stack of enclosing headings. Paragraphs are separated by a blank line; a
table becomes one line per row, cells joined with " | " (merged cells once). Content controls
(w:sdt) are read through. Runs inside the extraction worker, after the zip checks.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from indexing.extract.builder import TextBuilder
from indexing.model import Extracted, ExtractionLimits

_HEADING_NAME = re.compile(r"heading\s*([1-9])")


def extract_docx(path: Path, limits: ExtractionLimits) -> Extracted:
    import docx

    document = docx.Document(str(path))
    levels = _heading_levels(document)
    builder = TextBuilder(limits.max_extracted_chars)
    stack: list[tuple[int, str]] = []
    parts: list[str] = []
    for kind, block in _blocks(document.element.body, document):
        if kind == "table":
            parts.append("\n".join(_table_rows(block)))
            continue
        text = block.text
        level = levels.get(block._p.style or "")
        if level is not None and text.strip():
            if not _flush(builder, parts, stack):
                break
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, " ".join(text.split())))
        parts.append(text)
    _flush(builder, parts, stack)
    title = (document.core_properties.title or "").strip() or None
    return builder.build("docx", title=title)


def _flush(builder: TextBuilder, parts: list[str], stack: list[tuple[int, str]]) -> bool:
    text = "\n\n".join(p for p in parts if p.strip())
    parts.clear()
    return builder.add(text, "section", heading_path=tuple(title for _, title in stack))


def _blocks(container: Any, parent: Any) -> Iterator[tuple[str, Any]]:
    """("paragraph", Paragraph) / ("table", Table) in order, descending into content controls."""
    from docx.oxml.ns import qn
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    p_tag, tbl_tag, sdt_tag, content_tag = qn("w:p"), qn("w:tbl"), qn("w:sdt"), qn("w:sdtContent")
    for child in container.iterchildren():
        if child.tag == p_tag:
            yield "paragraph", Paragraph(child, parent)
        elif child.tag == tbl_tag:
            yield "table", Table(child, parent)
        elif child.tag == sdt_tag:
            content = child.find(content_tag)
            if content is not None:
                yield from _blocks(content, parent)


def _table_rows(table: Any) -> Iterator[str]:
    for row in table.rows:
        seen: set[int] = set()
        cells: list[str] = []
        for cell in row.cells:
            if id(cell._tc) in seen:
                continue
            seen.add(id(cell._tc))
            cells.append(" ".join(cell.text.split()))
        while cells and not cells[-1]:
            cells.pop()
        if any(cells):
            yield " | ".join(cells)


def _heading_levels(document: Any) -> dict[str, int]:
    """Paragraph style id → heading level (Title 0, Heading N → N, outline level L → L + 1)."""
    from docx.enum.style import WD_STYLE_TYPE

    levels: dict[str, int] = {}
    for style in document.styles:
        if style.type != WD_STYLE_TYPE.PARAGRAPH:
            continue
        level = _style_level(style, depth=0)
        if level is not None and style.style_id:
            levels[style.style_id] = level
    return levels


def _style_level(style: Any, depth: int) -> int | None:
    if style is None or depth > 8:
        return None
    name = (style.name or "").strip().lower()
    if name == "title":
        return 0
    match = _HEADING_NAME.fullmatch(name)
    if match:
        return int(match.group(1))
    outline = style.element.xpath("./w:pPr/w:outlineLvl/@w:val")
    if outline and str(outline[0]).isdigit() and int(outline[0]) < 9:
        return int(outline[0]) + 1
    return _style_level(style.base_style, depth + 1)
