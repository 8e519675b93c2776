"""PPTX extraction with python-pptx: one "slide" Unit per slide (1-based).

A slide's text is its title (also its heading_path), then every shape's text in document order
(group shapes included, blank line between shapes), tables as "cell | cell" rows, and finally
the speaker notes prefixed with "Notes: ". Runs inside the extraction worker.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from indexing.extract.builder import TextBuilder
from indexing.model import Extracted, ExtractionLimits


def extract_pptx(path: Path, limits: ExtractionLimits) -> Extracted:
    import pptx

    deck = pptx.Presentation(str(path))
    builder = TextBuilder(limits.max_extracted_chars)
    for number, slide in enumerate(deck.slides, start=1):
        title_shape = slide.shapes.title
        title = " ".join(title_shape.text_frame.text.split()) if title_shape is not None else ""
        blocks = [title] if title else []
        skip = title_shape.shape_id if title_shape is not None else None
        blocks.extend(_shape_texts(slide.shapes, skip))
        notes = _notes(slide)
        if notes:
            blocks.append("Notes: " + notes)
        text = "\n\n".join(b for b in blocks if b.strip())
        if not builder.add(text, "slide", slide=number, heading_path=(title,) if title else ()):
            break
    deck_title = (deck.core_properties.title or "").strip() or None
    return builder.build("pptx", title=deck_title)


def _shape_texts(shapes: Any, skip: int | None) -> Iterator[str]:
    for shape in shapes:
        if skip is not None and shape.shape_id == skip:
            continue
        if getattr(shape, "shape_type", None) is not None and hasattr(shape, "shapes"):  # group shape
            yield from _shape_texts(shape.shapes, skip)
        elif getattr(shape, "has_table", False):
            yield "\n".join(_table_rows(shape.table))
        elif getattr(shape, "has_text_frame", False):
            yield shape.text_frame.text.strip()


def _table_rows(table: Any) -> Iterator[str]:
    for row in table.rows:
        cells = [" ".join(cell.text.split()) for cell in row.cells if not cell.is_spanned]
        while cells and not cells[-1]:
            cells.pop()
        if cells:
            yield " | ".join(cells)


def _notes(slide: Any) -> str:
    if not slide.has_notes_slide:
        return ""
    frame = slide.notes_slide.notes_text_frame
    return frame.text.strip() if frame is not None else ""
