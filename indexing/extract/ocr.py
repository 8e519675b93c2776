"""OCR of PDF pages that have no text layer (scans), offline, with Tesseract through PyMuPDF.

Tesseract and its language data (eng, chi_sim) are an install extra: scripts/ocr.sh installs the Debian
packages. Without them, or with ocr_languages empty, OCR is off: such pages are counted and the PDF's
warning says how many were skipped and why (index_status adds them up). Runs in the extraction worker.

Measured on generated scanned pages (tests/test_ocr.py; bench/ocr_speed.py): character accuracy 0.99-1.0
for English and Simplified Chinese at OCR_DPI; 2-7 s a page on a loaded 2-core machine.
"""

from __future__ import annotations

import functools
import os
import re
from typing import Any

OCR_DPI = 200
"""Pages are drawn at this resolution for Tesseract (150 read our 14 pt pages as well; small print needs more)."""
MAX_OCR_PIXELS = 40_000_000
"""A page larger than this at OCR_DPI (a poster, a hostile page size) is read at a lower resolution."""
SKIPPED_NO_OCR = "page(s) without a text layer were not read: OCR is not available"
SKIPPED_TIME = "page(s) without a text layer were not read: the OCR time budget of this file ran out"
OCR_NOTE = "page(s) were read by OCR (scanned): their text may contain recognition errors"
_CJK = r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]"
_CJK_GAP = re.compile(rf"(?<={_CJK})[ \t\r\n]+(?={_CJK})")


@functools.lru_cache(maxsize=8)
def tessdata_for(languages: str) -> str | None:
    """The tessdata folder holding every language of `languages` ('eng+chi_sim'), or None: OCR is off."""
    if not languages:
        return None
    import pymupdf

    try:
        folder = os.environ.get("TESSDATA_PREFIX") or pymupdf.get_tessdata()
    except Exception:  # PyMuPDF raises when no Tesseract installation is found
        return None
    if not folder or not all(os.path.isfile(os.path.join(folder, f"{lang}.traineddata"))
                             for lang in languages.split("+")):
        return None
    return str(folder)


def ocr_available(languages: str) -> bool:
    return tessdata_for(languages) is not None


def needs_ocr(page: Any, text: str) -> bool:
    """A page with no text but with a picture on it (a scan). A blank page needs nothing."""
    if text.strip():
        return False
    try:
        return bool(page.get_images(full=False))
    except Exception:
        return False


def ocr_page(page: Any, languages: str) -> str:
    """The text Tesseract reads on `page` (PyMuPDF draws it at OCR_DPI), with the spaces and line breaks
    Tesseract puts between CJK characters removed."""
    os.environ.setdefault("OMP_THREAD_LIMIT", "1")  # one thread a worker: the workers are the parallelism
    tessdata = tessdata_for(languages)
    textpage = page.get_textpage_ocr(language=languages, dpi=ocr_dpi(page.rect.width, page.rect.height), full=True,
                                     tessdata=tessdata)
    return join_cjk(page.get_text(textpage=textpage))


def ocr_dpi(width_pt: float, height_pt: float) -> int:
    """OCR_DPI, or less for a page that would be drawn larger than MAX_OCR_PIXELS (at least 1 dpi)."""
    square_inches = max(width_pt, 1.0) * max(height_pt, 1.0) / 72 / 72
    return max(1, min(OCR_DPI, int((MAX_OCR_PIXELS / square_inches) ** 0.5)))


def join_cjk(text: str) -> str:
    """`text` without the whitespace between two CJK characters (OCR splits Chinese words with spaces
    and line breaks; Chinese never has them there)."""
    return _CJK_GAP.sub("", text)
