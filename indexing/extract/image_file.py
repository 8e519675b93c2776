"""Pictures in the index (PNG, JPEG, GIF, WebP: screenshots, photographed or scanned pages): their words, read
by OCR like a scanned PDF page (indexing/extract/ocr.py), so search_documents finds them.

The picture is decoded with Pillow in the extraction worker (refused over MAX_SOURCE_PIXELS before decoding,
a GIF's first frame), turned grey and doubled for Tesseract (shrunk to OCR_PIXELS when that is too large), which
estimates the resolution from the letters: on generated screenshots (11 pt text at 72-400 dpi, letters ~11-61
px), 0.93-1.00 of the Chinese characters and 1.00 of the English are read so (0.6-3 s a picture on 2 loaded
cores), where undoubled pictures with small letters read nothing and a fixed resolution hint fails on large
letters (0.24-0.73). One "text" unit holds what OCR read. A picture whose longest side is under MIN_TEXT_SIDE (icons) is not read.
Without OCR (or out of time) the picture is counted like an unread scanned page, in the same warning that
index_status adds up and that makes the index read it again once OCR is installed.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import IO, TYPE_CHECKING

from foundation.errors import ExtractionError, LimitExceeded
from indexing.extract.builder import TextBuilder
from indexing.extract.ocr import SKIPPED_NO_OCR, SKIPPED_TIME, ocr_available, ocr_picture
from indexing.model import Extracted, ExtractionLimits

if TYPE_CHECKING:
    from PIL.Image import Image

IMAGE_EXTENSIONS = {".png": "image", ".jpg": "image", ".jpeg": "image", ".gif": "image", ".webp": "image"}
MIN_TEXT_SIDE = 300
"""Pictures smaller than this (px, longest side) are icons and the like: not read."""
MAX_SOURCE_PIXELS = 64_000_000
"""Larger pictures are refused before decoding (as read_file refuses them)."""
OCR_PIXELS = 12_000_000
"""The picture Tesseract reads is at most this large (pictures are doubled, or less to stay within it)."""
PICTURE_OCR_NOTE = "the picture's text was read by OCR: it may contain recognition errors"


def extract_image(path: Path, limits: ExtractionLimits, source: IO[bytes] | None = None) -> Extracted:
    """The words OCR reads in the picture at `path` (or `source`)."""
    builder = TextBuilder(limits.max_extracted_chars)
    grey = _decoded(path, source)
    if grey is None:
        return builder.build("image")
    if not ocr_available(limits.ocr_languages):
        builder.warnings.append(f"1 {SKIPPED_NO_OCR} (a picture; install it with scripts/ocr.sh, or set "
                                "GENERALAGENT_OCR_LANGUAGES, then index the file again)")
        return builder.build("image")
    text = ocr_picture(_for_ocr(grey), limits.ocr_languages, limits.timeout_seconds * 0.75, None)
    if text is None:
        builder.warnings.append(f"1 {SKIPPED_TIME} (a picture; raise GENERALAGENT_FILE_TIMEOUT_SECONDS)")
        return builder.build("image")
    if builder.add(text, "text") and text.strip():
        builder.warnings.append(PICTURE_OCR_NOTE)
    return builder.build("image")


def _decoded(path: Path, source: IO[bytes] | None) -> Image | None:
    """The picture in grey, or None when it is too small to hold text worth reading."""
    from PIL import Image

    data = source.read() if source is not None else path.read_bytes()
    try:
        with Image.open(io.BytesIO(data)) as image:
            width, height = image.size
            if width * height > MAX_SOURCE_PIXELS:
                raise LimitExceeded(f"{path.name} is {width}x{height} px, over the {MAX_SOURCE_PIXELS // 1_000_000} "
                                    "MP limit for pictures; not read.")
            if max(width, height) < MIN_TEXT_SIDE:
                return None
            image.seek(0)
            return image.convert("L")
    except (OSError, SyntaxError, ValueError, EOFError, Image.DecompressionBombError) as exc:
        raise ExtractionError(f"{path.name} is not a readable picture (damaged, or not a PNG, JPEG, GIF or WebP "
                              f"image: {type(exc).__name__}).") from exc


def _for_ocr(grey: Image) -> bytes:
    """PNG bytes of the grey picture scaled for Tesseract (doubled, at most OCR_PIXELS; no resolution in it)."""
    from PIL import Image

    scale = min(2.0, (OCR_PIXELS / (grey.width * grey.height)) ** 0.5)
    if abs(scale - 1.0) > 0.01:
        size = (max(1, round(grey.width * scale)), max(1, round(grey.height * scale)))
        grey = grey.resize(size, Image.Resampling.LANCZOS)
    out = io.BytesIO()
    grey.save(out, "PNG")
    return out.getvalue()
