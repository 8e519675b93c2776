"""Make a picture fit the caps of foundation/pictures.py, with Pillow (decode, turn upright, scale, re-encode).

A source over MAX_SOURCE_PIXELS is refused before it is decoded (decompression bombs). Pictures are
re-encoded (metadata dropped): PNG when the source is lossless (PNG, GIF: screenshots, charts, scans)
and the PNG fits, else JPEG, at falling quality and then smaller sizes until it fits.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

from foundation.errors import ExtractionError, LimitExceeded
from foundation.pictures import MAX_BYTES, MAX_SIDE, Picture

MAX_SOURCE_PIXELS = 64_000_000
"""Larger sources are refused before decoding: a 64 MP RGBA image already takes ~256 MB to decode."""
JPEG_QUALITIES = (85, 70, 55)


@dataclass(frozen=True)
class Fitted:
    """A picture made to fit the caps, with what the source was."""

    picture: Picture
    source_format: str
    source_width: int
    source_height: int
    frames: int = 1


def fit_picture(data: bytes, name: str, expected: str | None = None) -> Fitted:
    """Decode `data` (PNG, JPEG, GIF, WebP; a GIF's first frame), turn it upright (EXIF) and re-encode it
    within MAX_SIDE and MAX_BYTES. `expected`: the format the file's name promises (a mismatch is an error).
    Raises ExtractionError for data that is not such a picture, LimitExceeded for a source too large."""
    from PIL import ImageOps

    image = _opened(data, name, expected)
    width, height = image.size
    if width * height > MAX_SOURCE_PIXELS:
        raise LimitExceeded(f"{name} is {width}x{height} px, over the {MAX_SOURCE_PIXELS // 1_000_000} MP limit for "
                            "pictures; scale it down first (e.g. to 4000 px on its longest side).")
    frames = int(getattr(image, "n_frames", 1) or 1)
    source_format = str(image.format)
    image.draft("RGB", (MAX_SIDE, MAX_SIDE))  # JPEG: decode at a reduced scale already
    try:
        image.load()
        image = ImageOps.exif_transpose(image) or image
    except Exception as exc:  # truncated or corrupt data: Pillow raises OSError, ValueError, SyntaxError, ...
        raise ExtractionError(f"{name} is a damaged {source_format} image ({exc}).") from exc
    lossless = source_format in ("PNG", "GIF")
    picture = encode_within_caps(image, lossless)
    return Fitted(picture, source_format, width, height, frames)


def _opened(data: bytes, name: str, expected: str | None) -> Any:
    from PIL import Image

    try:
        image = Image.open(io.BytesIO(data), formats=["PNG", "JPEG", "GIF", "WEBP"])
    except Image.DecompressionBombError as exc:
        raise LimitExceeded(f"{name} declares an enormous size ({exc}); it is not read.") from exc
    except Exception as exc:
        raise ExtractionError(f"{name} is not a PNG, JPEG, GIF or WebP image (or it is damaged).") from exc
    if expected is not None and image.format != expected:
        raise ExtractionError(f"{name} is a {image.format} image, not {expected} as its name says; "
                              "rename it to match its content.")
    return image


def encode_within_caps(image: Any, lossless: bool) -> Picture:
    """`image` (a loaded PIL image) scaled to MAX_SIDE and encoded within MAX_BYTES: PNG when `lossless`
    and it fits, else JPEG at falling quality, then at 3/4 of the size, until it fits."""
    image = _scaled(image, MAX_SIDE)
    while True:
        if lossless:
            data = _encoded(image if image.mode in ("RGB", "RGBA", "L", "LA") else image.convert("RGBA"), "PNG")
            if len(data) <= MAX_BYTES:
                return Picture(data, "image/png", *image.size)
        flat = _flattened(image)
        for quality in JPEG_QUALITIES:
            data = _encoded(flat, "JPEG", quality=quality)
            if len(data) <= MAX_BYTES:
                return Picture(data, "image/jpeg", *image.size)
        image = _scaled(image, max(1, max(image.size) * 3 // 4))


def _scaled(image: Any, side: int) -> Any:
    from PIL import Image

    width, height = image.size
    if max(width, height) <= side:
        return image
    ratio = side / max(width, height)
    size = (max(1, round(width * ratio)), max(1, round(height * ratio)))
    if image.mode not in ("RGB", "RGBA", "L", "LA"):
        image = image.convert("RGBA")
    return image.resize(size, Image.Resampling.LANCZOS)


def _flattened(image: Any) -> Any:
    """RGB (or L) with any transparency laid on white: JPEG has no alpha."""
    from PIL import Image

    if image.mode in ("RGB", "L"):
        return image
    rgba = image.convert("RGBA")
    background = Image.new("RGB", rgba.size, (255, 255, 255))
    background.paste(rgba, mask=rgba.getchannel("A"))
    return background


def _encoded(image: Any, fmt: str, **options: Any) -> bytes:
    out = io.BytesIO()
    image.save(out, fmt, optimize=True, **options)
    return out.getvalue()
