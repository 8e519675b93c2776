"""Draw one PDF page as a picture (PyMuPDF), inside the extraction worker like any parse of a document.

The task travels as the kind `render:<page>:<side>:<unit>` (`render_kind`): page is 1-based, side the
longest side in px, unit what a page is called in errors ("page", or "slide" for a deck converted to PDF). The page is drawn at the zoom that makes its longest side `side` px, but never above
MAX_DPI (a small page is not blown up past print resolution). A page past the end is an InvalidInput
naming the page count.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import IO

from foundation.errors import ExtractionError, InvalidInput

RENDER_PREFIX = "render:"
MAX_DPI = 300


@dataclass(frozen=True)
class RenderedPage:
    """A drawn page: PNG bytes, its size in px, and how many pages the document has."""

    png: bytes
    width: int
    height: int
    page_count: int


def render_kind(page: int, side: int, unit: str = "page") -> str:
    return f"{RENDER_PREFIX}{page}:{side}:{unit}"


def render_task(kind: str, path: Path, source: IO[bytes] | None) -> RenderedPage:
    """Run a `render:<page>:<side>:<unit>` task (in the worker)."""
    page_text, side_text, unit = kind[len(RENDER_PREFIX):].split(":")
    return render_pdf_page(path, int(page_text), int(side_text), source, unit)


def render_pdf_page(path: Path, page: int, side: int, source: IO[bytes] | None = None,
                    unit: str = "page") -> RenderedPage:
    import pymupdf

    pymupdf.TOOLS.mupdf_display_errors(False)
    pymupdf.TOOLS.mupdf_display_warnings(False)
    try:
        doc = pymupdf.open(stream=source.read(), filetype="pdf") if source else pymupdf.open(path, filetype="pdf")
    except Exception as exc:
        raise ExtractionError(f"{path.name} is not a readable PDF (corrupt or damaged).") from exc
    with doc:
        if doc.needs_pass:
            raise ExtractionError(f"{path.name} is encrypted (password protected); remove the password first.")
        count = doc.page_count
        if not 1 <= page <= count:
            raise InvalidInput(f"{unit} {page} is out of range: {path.name} has {count} {unit}(s). "
                               f"Ask for a {unit} from 1 to {count}." if count else f"{path.name} has no {unit}s.")
        drawn = doc[page - 1]
        rect = drawn.rect
        longest = max(rect.width, rect.height, 1.0)
        zoom = min(side / longest, MAX_DPI / 72)
        pixmap = drawn.get_pixmap(matrix=pymupdf.Matrix(zoom, zoom), alpha=False)
        return RenderedPage(pixmap.tobytes("png"), pixmap.width, pixmap.height, count)
