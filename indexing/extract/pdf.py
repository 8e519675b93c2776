"""PDF extraction with PyMuPDF: one "page" Unit per page (1-based), heading path from the outline.

Encrypted PDFs that need a password and files MuPDF cannot open raise ExtractionError. A file
MuPDF had to repair (truncated, broken xref) is read as far as possible, with a warning; a page
that fails to read is skipped with a warning. Runs inside the extraction worker process.
"""

from __future__ import annotations

from pathlib import Path
from typing import IO

from foundation.errors import ExtractionError
from indexing.extract.builder import TextBuilder
from indexing.model import Extracted, ExtractionLimits


def extract_pdf(path: Path, limits: ExtractionLimits, source: IO[bytes] | None = None) -> Extracted:
    import pymupdf

    pymupdf.TOOLS.mupdf_display_errors(False)
    pymupdf.TOOLS.mupdf_display_warnings(False)
    name = path.name
    try:
        doc = pymupdf.open(stream=source.read(), filetype="pdf") if source else pymupdf.open(path, filetype="pdf")
    except Exception as exc:  # FileDataError, RuntimeError: MuPDF gives several
        raise ExtractionError(f"{name} is not a readable PDF (corrupt or damaged).") from exc
    with doc:
        if doc.needs_pass:
            raise ExtractionError(
                f"{name} is encrypted (password protected); remove the password and index it again."
            )
        builder = TextBuilder(limits.max_extracted_chars)
        if doc.is_repaired:
            builder.warnings.append("the PDF is damaged and was repaired while reading: text may be partial")
        headings = _outline_by_page(doc)
        bad_pages: list[int] = []
        for number in range(1, doc.page_count + 1):
            try:
                text = doc[number - 1].get_text()
            except Exception:
                bad_pages.append(number)
                continue
            if not builder.add(text, "page", page=number, heading_path=headings.get(number, ())):
                break
        if bad_pages:
            shown = ", ".join(map(str, bad_pages[:10])) + (" ..." if len(bad_pages) > 10 else "")
            builder.warnings.append(f"{len(bad_pages)} page(s) could not be read and were skipped: {shown}")
        if doc.page_count and not builder.units:
            builder.warnings.append("the PDF has no text layer (scanned images?); OCR is not supported")
        title = (doc.metadata or {}).get("title") or None
        return builder.build("pdf", title=title)


def _outline_by_page(doc: object) -> dict[int, tuple[str, ...]]:
    """Page number → heading path of the last outline entry that starts on or before it."""
    try:
        toc = doc.get_toc(simple=True)  # type: ignore[attr-defined]
        page_count: int = doc.page_count  # type: ignore[attr-defined]
    except Exception:
        return {}
    starts: dict[int, tuple[str, ...]] = {}
    stack: list[str] = []
    for level, title, page in toc:
        del stack[max(level - 1, 0) :]
        stack.append(str(title).strip())
        if 1 <= page <= page_count:
            starts[page] = tuple(stack)
    result: dict[int, tuple[str, ...]] = {}
    current: tuple[str, ...] = ()
    for page in range(1, page_count + 1):
        current = starts.get(page, current)
        if current:
            result[page] = current
    return result
