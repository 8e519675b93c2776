"""PPTX extraction: one "slide" Unit per slide (1-based), read from the slide XML with lxml.

python-pptx opens the package (slides, notes); the text is then read straight from each slide's
shape tree, which is faster than building python-pptx shape objects and sees every shape: a
slide's text is its title (also its heading_path), then every other shape's text in document
order (group shapes included, a blank line between shapes), tables as "cell | cell" rows
(merged cells once), and finally the speaker notes prefixed with "Notes: ".
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from indexing.extract.builder import TextBuilder
from indexing.model import Extracted, ExtractionLimits

_A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
_P = "{http://schemas.openxmlformats.org/presentationml/2006/main}"
_TITLE_TYPES = ("title", "ctrTitle")


def extract_pptx(path: Path, limits: ExtractionLimits, source: IO[bytes] | None = None) -> Extracted:
    import pptx

    deck = pptx.Presentation(source or str(path))
    builder = TextBuilder(limits.max_extracted_chars)
    for number, slide in enumerate(deck.slides, start=1):
        title, blocks = _slide_texts(slide.shapes._spTree)
        notes = _notes(slide)
        if notes:
            blocks.append("Notes: " + notes)
        text = "\n\n".join(b for b in [title, *blocks] if b.strip())
        if not builder.add(text, "slide", slide=number, heading_path=(title,) if title else ()):
            break
    deck_title = (deck.core_properties.title or "").strip() or None
    return builder.build("pptx", title=deck_title)


def _slide_texts(tree: Any) -> tuple[str, list[str]]:
    """(title, other shapes' texts) of one shape tree."""
    title = ""
    blocks: list[str] = []
    for kind, text in _shapes(tree):
        if kind == "title" and not title:
            title = " ".join(text.split())
        elif text:
            blocks.append(text)
    return title, blocks


def _shapes(tree: Any) -> Iterator[tuple[str, str]]:
    """("title" | "body" | "table", text) for each shape, in document order."""
    for child in tree.iterchildren():
        tag = child.tag
        if tag == f"{_P}sp":
            ph = child.find(f"{_P}nvSpPr/{_P}nvPr/{_P}ph")
            kind = "title" if ph is not None and ph.get("type") in _TITLE_TYPES else "body"
            yield kind, _text_body(child.find(f"{_P}txBody"))
        elif tag == f"{_P}grpSp":
            yield from _shapes(child)
        elif tag == f"{_P}graphicFrame":
            table = child.find(f".//{_A}tbl")
            if table is not None:
                yield "table", "\n".join(_table_rows(table))


def _text_body(body: Any) -> str:
    if body is None:
        return ""
    lines = []
    for paragraph in body.iter(f"{_A}p"):
        parts = [(el.text or "") if el.tag == f"{_A}t" else "\n" for el in paragraph.iter(f"{_A}t", f"{_A}br")]
        lines.append("".join(parts))
    return "\n".join(lines).strip()


def _table_rows(table: Any) -> Iterator[str]:
    for row in table.iter(f"{_A}tr"):
        cells = [
            " ".join(_text_body(cell.find(f"{_A}txBody")).split())
            for cell in row.iter(f"{_A}tc")
            if cell.get("hMerge") not in ("1", "true") and cell.get("vMerge") not in ("1", "true")
        ]
        while cells and not cells[-1]:
            cells.pop()
        if cells:
            yield " | ".join(cells)


def _notes(slide: Any) -> str:
    if not slide.has_notes_slide:
        return ""
    tree = slide.notes_slide.shapes._spTree
    for child in tree.iter(f"{_P}sp"):
        ph = child.find(f"{_P}nvSpPr/{_P}nvPr/{_P}ph")
        if ph is not None and ph.get("type") == "body":
            return _text_body(child.find(f"{_P}txBody"))
    return ""
