"""OCR of PDF pages that have no text layer (scans), offline, with the Tesseract program.

PyMuPDF draws the page in grey at OCR_DPI; `tesseract` reads it in a child process with a time limit, so
a slow page is killed and counted, not the whole file lost to the worker's timeout. Tesseract and its
language data (eng, chi_sim) are an install extra: scripts/ocr.sh installs the Debian packages. Without them, or with ocr_languages empty, OCR is off: such pages are counted and the PDF's
warning says how many were skipped and why (index_status adds them up). Runs in the extraction worker.

Measured on generated scanned pages (bench/ocr_speed.py): character accuracy 1.0 (English) and 0.99
(Simplified Chinese) at OCR_DPI; 5-24 s a page on a heavily loaded 2-core machine (the bench's notes).
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import signal
import subprocess
import sys
from typing import Any

from foundation.errors import ExtractionError

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
def tesseract_for(languages: str) -> str | None:
    """The `tesseract` program when it is installed with every language of `languages` ('eng+chi_sim')
    (asked of the program itself), else None: OCR is off."""
    program = shutil.which("tesseract")
    if not languages or program is None:
        return None
    try:
        listed = subprocess.run([program, "--list-langs"], capture_output=True, text=True, timeout=60,
                                stdin=subprocess.DEVNULL, check=False).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return None
    return program if set(languages.split("+")) <= set(listed) else None


def ocr_available(languages: str) -> bool:
    return tesseract_for(languages) is not None


def needs_ocr(page: Any, text: str) -> bool:
    """A page with no text but with a picture on it (a scan). A blank page needs nothing."""
    if text.strip():
        return False
    try:
        return bool(page.get_images(full=False))
    except Exception:
        return False


def ocr_page(page: Any, languages: str, seconds: float) -> str | None:
    """The text Tesseract reads on `page` (drawn in grey at `ocr_dpi`), with the spaces and line breaks it puts
    between CJK characters removed; None when it did not finish within `seconds` (it is killed then).
    Raises ExtractionError when Tesseract fails on the page."""
    import pymupdf

    dpi = ocr_dpi(page.rect.width, page.rect.height)
    picture = page.get_pixmap(dpi=dpi, colorspace=pymupdf.csGRAY, alpha=False).tobytes("png")
    return ocr_picture(picture, languages, seconds, dpi)


def ocr_picture(picture: bytes, languages: str, seconds: float, dpi: int | None) -> str | None:
    """The text Tesseract reads in `picture` (PNG bytes, drawn at `dpi`; None: Tesseract estimates it from the
    letters' size), CJK gaps removed; None when it did not finish within `seconds`. Raises ExtractionError when
    Tesseract fails on it."""
    program = tesseract_for(languages)
    assert program is not None  # callers check ocr_available first
    env = {**os.environ, "OMP_THREAD_LIMIT": "1"}  # one thread a page: the extraction workers run in parallel
    resolution = ["--dpi", str(dpi)] if dpi is not None else []
    try:
        done = subprocess.run([program, "stdin", "stdout", "-l", languages, *resolution], input=picture,
                              capture_output=True, timeout=max(seconds, 0.1), env=env, check=False,
                              preexec_fn=_die_with_parent)
    except subprocess.TimeoutExpired:
        return None
    if done.returncode != 0:
        detail = done.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no message"]
        raise ExtractionError(f"Tesseract failed (exit code {done.returncode}): {detail[0][:200]}")
    return join_cjk(done.stdout.decode("utf-8", "replace"))


def _die_with_parent() -> None:
    """In the Tesseract child: on Linux, be killed when the worker is (a cancelled or timed-out read)."""
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(Exception):
            ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def ocr_dpi(width_pt: float, height_pt: float) -> int:
    """OCR_DPI, or less for a page that would be drawn larger than MAX_OCR_PIXELS (at least 1 dpi)."""
    square_inches = max(width_pt, 1.0) * max(height_pt, 1.0) / 72 / 72
    return max(1, min(OCR_DPI, int((MAX_OCR_PIXELS / square_inches) ** 0.5)))


def join_cjk(text: str) -> str:
    """`text` without the whitespace between two CJK characters (OCR splits Chinese words with spaces
    and line breaks; Chinese never has them there)."""
    return _CJK_GAP.sub("", text)
