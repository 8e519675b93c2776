"""DOCX extraction: python-docx opens the package; body paragraphs and tables are read with lxml.

Blocks are read in document order, descending into content controls (w:sdt). Paragraph text is
every w:t of the paragraph (runs, hyperlinks, fields' results, text boxes; not deleted text),
w:tab → tab, w:br/w:cr → newline; the Fallback copy of mc:AlternateContent is skipped so text
boxes are not read twice. Paragraphs whose style is a heading ("Heading N", "Title", or a style
with an outline level, including styles based on one, so localised Word files work) start a
new "section" Unit whose heading_path is the stack of enclosing headings. Paragraphs are
separated by a blank line; a table becomes one line per row, cells joined with " | ".
Runs inside the extraction worker, after the zip checks.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from indexing.extract.builder import TextBuilder
from indexing.model import Extracted, ExtractionLimits

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_FALLBACK = "{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback"
_P, _TBL, _SDT, _SDT_CONTENT, _TR, _TC = (_W + t for t in ("p", "tbl", "sdt", "sdtContent", "tr", "tc"))
_T, _TAB, _BR, _CR, _R = (_W + t for t in ("t", "tab", "br", "cr", "r"))
_STYLE_PATH = f"{_W}pPr/{_W}pStyle"
_HEADING_NAME = re.compile(r"heading\s*([1-9])")


def extract_docx(path: Path, limits: ExtractionLimits, source: IO[bytes] | None = None) -> Extracted:
    import docx

    document = docx.Document(source or str(path))
    levels = _HeadingLevels(document.styles.element)
    builder = TextBuilder(limits.max_extracted_chars)
    stack: list[tuple[int, str]] = []
    parts: list[str] = []
    for element in _blocks(document.element.body):
        if element.tag == _TBL:
            parts.append("\n".join(_table_rows(element)))
            continue
        text = paragraph_text(element)
        style = element.find(_STYLE_PATH)
        level = levels.get(style.get(_W + "val") if style is not None else None)
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


def _children(element: Any, *tags: str) -> Iterator[Any]:
    """Direct children with one of `tags`, looking through content controls (w:sdt)."""
    for child in element.iterchildren():
        if child.tag in tags:
            yield child
        elif child.tag == _SDT:
            content = child.find(_SDT_CONTENT)
            if content is not None:
                yield from _children(content, *tags)


def _blocks(body: Any) -> Iterator[Any]:
    return _children(body, _P, _TBL)


def paragraph_text(paragraph: Any) -> str:
    parts: list[str] = []
    skip: set[Any] = set()
    for element in paragraph.iter(_T, _TAB, _BR, _CR, _P, _FALLBACK):
        tag = element.tag
        if tag == _FALLBACK:
            skip.update(element.iter(_T, _TAB, _BR, _CR, _P))
        elif skip and element in skip:
            continue
        elif tag == _T:
            parts.append(element.text or "")
        elif tag == _TAB:
            if element.getparent().tag == _R:  # not a tab-stop definition in w:pPr
                parts.append("\t")
        elif tag != _P or (element is not paragraph and parts and parts[-1] != "\n"):
            parts.append("\n")  # w:br, w:cr, or between paragraphs nested in a text box
    return "".join(parts)


def _table_rows(table: Any) -> Iterator[str]:
    for row in _children(table, _TR):
        cells = [" ".join(" ".join(paragraph_text(p) for p in cell.iter(_P)).split()) for cell in _children(row, _TC)]
        while cells and not cells[-1]:
            cells.pop()
        if cells:
            yield " | ".join(cells)


class _HeadingLevels:
    """Paragraph style id → heading level (Title 0, "Heading N" → N, outline level L → L + 1).

    Computed lazily for the style ids a document uses, following basedOn chains.
    """

    def __init__(self, styles: Any) -> None:
        self._styles = styles
        self._cache: dict[str, int | None] = {}

    def get(self, style_id: str | None) -> int | None:
        if not style_id:
            return None
        if style_id not in self._cache:
            self._cache[style_id] = self._level(style_id, depth=0)
        return self._cache[style_id]

    def _level(self, style_id: str, depth: int) -> int | None:
        style = self._styles.get_by_id(style_id)
        if style is None or depth > 8:
            return None
        name = (style.name_val or "").strip().lower()
        if name == "title":
            return 0
        match = _HEADING_NAME.fullmatch(name)
        if match:
            return int(match.group(1))
        outline = style.find(f"{_W}pPr/{_W}outlineLvl")
        value = outline.get(_W + "val") if outline is not None else None
        if value is not None and value.isdigit() and int(value) < 9:
            return int(value) + 1
        base = style.basedOn_val
        return self._level(base, depth + 1) if base else None
