"""Pictures for the model: read_file on an image, and render_page (a PDF page or a slide drawn as a picture).

Both send MCP image content (foundation/pictures.py: longest side <= 1568 px, <= 1 MB encoded) after a
JSON text part that says the picture's original and sent sizes. Files are opened race-free like every
read; a PDF page is drawn in an extraction worker (memory and time limits), never in the server process. A
.pptx/.odp slide is first converted to PDF by LibreOffice (tools/slides.py: sandboxed, same limits, cached).
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from pydantic import Field

from foundation.errors import InvalidInput, LimitExceeded
from foundation.paths import display_path, open_for_read, resolve_path, roots_for
from foundation.pictures import IMAGE_FORMATS, MAX_BYTES, MAX_SIDE, Picture, WithPictures
from foundation.safe_open import opened, read_fd
from indexing.extract.render import RenderedPage
from tools.picture_fit import Fitted, encode_within_caps, fit_picture
from tools.runtime import CallContext, Runtime
from tools.slides import DECK_KINDS, deck_pdf

MAX_IMAGE_FILE_BYTES = 50 * 1024 * 1024
PathArg = Annotated[str, Field(description="File path (relative to the workspace root).")]
CAPS = f"longest side <= {MAX_SIDE} px, <= {MAX_BYTES // 1000} KB"


def _fitted(rt: Runtime, real: Path, fd: int) -> Fitted:
    size = os.fstat(fd).st_size
    limit = min(MAX_IMAGE_FILE_BYTES, rt.settings.max_file_bytes)
    if size > limit:
        raise LimitExceeded(f"{real.name} is {size / 2**20:,.1f} MiB, over the {limit / 2**20:,.0f} MiB limit for "
                            "pictures; scale it down first.")
    return fit_picture(read_fd(fd, limit), real.name, IMAGE_FORMATS[real.suffix.lower()])


def read_picture(rt: Runtime, path: str, session: str | None) -> Picture:
    """A workspace picture (PNG/JPEG/GIF/WebP) within the caps, read as read_file reads it."""
    real = resolve_path(rt.settings, path, must_exist=True, session_id=session)
    if real.suffix.lower() not in IMAGE_FORMATS:
        raise InvalidInput(f"{path!r} is not a PNG, JPEG, GIF or WebP picture. For a PDF page or a slide, give the "
                           "sub-agent render_page (tools=[\"render_page\"]) and name the page in the task.")
    with opened(open_for_read(rt.settings, real, session, shown=path, secrets=rt.secret_paths)) as fd:
        return _fitted(rt, real, fd).picture


@dataclass(frozen=True)
class ImageRead:
    """What read_file says of a picture file (tools/files.py shapes it): a text line and the picture."""

    text: str
    location: str
    warnings: list[str]
    picture: Picture


def read_image(rt: Runtime, real: Path, fd: int) -> ImageRead:
    """read_file's answer for a PNG/JPEG/GIF/WebP file: the picture (within the caps) plus a text line."""
    fitted = _fitted(rt, real, fd)
    sent = fitted.picture
    text = (f"{fitted.source_format} image, {fitted.source_width}x{fitted.source_height} px; sent as "
            f"{sent.mime_type.split('/')[1].upper()} {sent.width}x{sent.height} px ({len(sent.data) // 1000} KB; caps: "
            f"{CAPS}).")
    warnings = [f"animated ({fitted.frames} frames): only the first frame is shown"] if fitted.frames > 1 else []
    return ImageRead(text, f"{sent.width}x{sent.height} px", warnings, sent)


class RenderPageResult(WithPictures):
    path: str
    page: int = Field(description="The page drawn (1-based).")
    page_count: int = Field(description="Pages in the document.")
    width: int = Field(description="Width of the picture sent, px.")
    height: int = Field(description="Height of the picture sent, px.")
    mime_type: str
    note: str


def render_page(
    path: PathArg,
    page: Annotated[int, Field(ge=1, description="Page (or slide) number, 1-based.")] = 1,
    max_side: Annotated[int, Field(ge=256, le=MAX_SIDE, description="Longest side of the picture, px.")] = MAX_SIDE,
    *,
    rt: Runtime,
    call: CallContext,
) -> RenderPageResult:
    """See one PDF page or PPTX/ODP slide as a picture (charts, scans, layout), returned as image content.
    For the text use read_file or search_file."""
    session = call.session_id
    real = resolve_path(rt.settings, path, must_exist=True, session_id=session)
    suffix = real.suffix.lower()
    if suffix != ".pdf" and suffix not in DECK_KINDS:
        raise InvalidInput(_not_pdf(path, suffix))
    with opened(open_for_read(rt.settings, real, session, shown=path, secrets=rt.secret_paths)) as fd:
        drawn = _drawn(rt, real, fd, page, max_side, call)
    from PIL import Image

    with Image.open(io.BytesIO(drawn.png), formats=["PNG"]) as image:
        image.load()
        sent = encode_within_caps(image, lossless=True)
    unit = "Slide" if suffix in DECK_KINDS else "Page"
    note = (f"{unit} {page} of {drawn.page_count} drawn at {sent.width}x{sent.height} px "
            f"({len(sent.data) // 1000} KB {sent.mime_type.split('/')[1].upper()}; caps: {CAPS}).")
    result = RenderPageResult(path=display_path(real, roots_for(rt.settings, session)), page=page,
                              page_count=drawn.page_count, width=sent.width, height=sent.height,
                              mime_type=sent.mime_type, note=note)
    return result.with_pictures([sent])


def _drawn(rt: Runtime, real: Path, fd: int, page: int, side: int, call: CallContext) -> RenderedPage:
    """A PDF page drawn by an extraction worker; a deck's slide from its PDF (converted once, cached)."""
    from indexing.extract import check_container, render_pdf_page

    limits = rt.extraction_limits()
    kind = DECK_KINDS.get(real.suffix.lower())
    if kind is None:
        return render_pdf_page(real, page, side, limits, fd=fd, should_cancel=lambda: call.cancelled)
    check_container(real, kind, limits, fd=fd)
    pdf = deck_pdf(real.name, fd, rt.settings.data_dir / "slides", limits, should_cancel=lambda: call.cancelled)
    with opened(os.open(pdf, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))) as pdf_fd:
        return render_pdf_page(real, page, side, limits, fd=pdf_fd, should_cancel=lambda: call.cancelled,
                               unit="slide")


def _not_pdf(path: str, suffix: str) -> str:
    if suffix in IMAGE_FORMATS:
        return f"{path!r} is a picture already: read it with read_file, which returns it as an image."
    if suffix in (".ppt", ".key"):
        return (f"render_page draws .pdf pages and .pptx/.odp slides, not {suffix}: save the deck as .pptx or "
                "export it to PDF, or read its text with read_file.")
    return f"render_page draws PDF pages and PPTX/ODP slides only; {path!r} is neither."

