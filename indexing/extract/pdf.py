"""PDF extraction with PyMuPDF: one "page" Unit per page (1-based), heading path from the outline.

A page with no text layer but a picture on it (a scan) is read by OCR when it is available
(indexing/extract/ocr.py), within 3/4 of the file's time budget; its text is that page's Unit like any
other. Pages left unread (no OCR, or out of time) are counted in a warning that index_status adds up.

Encrypted PDFs that need a password and files MuPDF cannot open raise ExtractionError. A file
MuPDF had to repair (truncated, broken xref) is read as far as possible, with a warning; a page
that fails to read is skipped with a warning. Runs inside the extraction worker process.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from foundation.errors import ExtractionError
from indexing.extract.builder import TextBuilder
from indexing.extract.ocr import OCR_NOTE, SKIPPED_NO_OCR, SKIPPED_TIME, needs_ocr, ocr_available, ocr_page
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
        ocr = _Ocr(limits.ocr_languages, time.monotonic() + limits.timeout_seconds * 0.75)
        for number in range(1, doc.page_count + 1):
            try:
                page = doc[number - 1]
                text = ocr.text_of(page, page.get_text())
            except Exception:
                bad_pages.append(number)
                continue
            if not builder.add(text, "page", page=number, heading_path=headings.get(number, ())):
                break
        if bad_pages:
            shown = ", ".join(map(str, bad_pages[:10])) + (" ..." if len(bad_pages) > 10 else "")
            builder.warnings.append(f"{len(bad_pages)} page(s) could not be read and were skipped: {shown}")
        builder.warnings.extend(ocr.warnings())
        title = (doc.metadata or {}).get("title") or None
        return builder.build("pdf", title=title)


@dataclass
class _Ocr:
    """OCR of the file's scanned pages while the time budget lasts; counts what it read and skipped."""

    languages: str
    deadline: float
    read: int = 0
    no_ocr: int = 0
    out_of_time: int = 0

    def text_of(self, page: Any, text: str) -> str:
        if not needs_ocr(page, text):
            return text
        if not ocr_available(self.languages):
            self.no_ocr += 1
            return text
        left = self.deadline - time.monotonic()
        found = ocr_page(page, self.languages, left) if left > 0 else None
        if found is None:
            self.out_of_time += 1
            return text
        self.read += 1
        return found

    def warnings(self) -> list[str]:
        found = [f"{self.read} {OCR_NOTE}"] if self.read else []
        if self.no_ocr:
            found.append(f"{self.no_ocr} {SKIPPED_NO_OCR} (install it with scripts/ocr.sh, or set "
                         "GENERALAGENT_OCR_LANGUAGES, then index the file again)")
        if self.out_of_time:
            found.append(f"{self.out_of_time} {SKIPPED_TIME} (raise GENERALAGENT_FILE_TIMEOUT_SECONDS)")
        return found


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
