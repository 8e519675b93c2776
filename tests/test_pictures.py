"""Pictures for the model: read_file on PNG/JPEG/GIF/WebP and render_page on PDF pages (slides:
tests/test_slides.py), checked through the SDK client, which gets MCP image content and decodes it (base64 ->
a real image of the stated size)."""

from __future__ import annotations

import base64
import io
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from PIL import Image, ImageDraw

from foundation.errors import ExtractionError, LimitExceeded
from foundation.pictures import MAX_BYTES, MAX_SIDE
from tests.conftest import MODES, connect
from tools.picture_fit import fit_picture

pytestmark = pytest.mark.anyio


def picture_bytes(size: tuple[int, int], fmt: str, mode: str = "RGB", noise: bool = False, **save: Any) -> bytes:
    if noise:
        image = Image.frombytes("RGB", size, os.urandom(size[0] * size[1] * 3)).convert(mode)
    else:
        image = Image.new(mode, size, "white")
        ImageDraw.Draw(image).rectangle((size[0] // 4, size[1] // 4, size[0] // 2, size[1] // 2), fill="black")
    out = io.BytesIO()
    image.save(out, fmt, **save)
    return out.getvalue()


def decoded(result: Any) -> Image.Image:
    """The one image content part of a call result, decoded."""
    images = [part for part in result.content if part.type == "image"]
    assert len(images) == 1 and result.content[0].type == "text"
    image = Image.open(io.BytesIO(base64.b64decode(images[0].data)))
    assert image.get_format_mimetype() == images[0].mime_type
    assert len(base64.b64decode(images[0].data)) <= MAX_BYTES
    image.load()
    return image


@pytest.mark.parametrize("mode", MODES)
async def test_read_file_returns_pictures_the_client_decodes(make_settings: Any, mode: str, workspace: Path) -> None:
    (workspace / "big.png").write_bytes(picture_bytes((4000, 3000), "PNG"))
    (workspace / "photo.jpg").write_bytes(picture_bytes((3000, 1000), "JPEG", noise=True, quality=95))
    (workspace / "small.webp").write_bytes(picture_bytes((320, 200), "WEBP"))
    frames = [Image.new("RGB", (100, 80), color) for color in ("red", "green", "blue")]
    gif = io.BytesIO()
    frames[0].save(gif, "GIF", save_all=True, append_images=frames[1:])
    (workspace / "anim.gif").write_bytes(gif.getvalue())
    expect = {"big.png": ((1568, 1176), "PNG 1568x1176", "4000x3000"), "photo.jpg": ((1568, 523), "1568x523", "3000x1000"),
              "small.webp": ((320, 200), "JPEG 320x200", "320x200"), "anim.gif": ((100, 80), "PNG 100x80", "100x80")}
    async with connect(make_settings(), mode) as client:
        for name, (size, sent, original) in expect.items():
            result = await client.call_tool("read_file", {"path": name})
            assert not result.is_error, result.content[0].text
            assert decoded(result).size == size
            data = result.structured_content
            assert data["kind"] == "image" and sent in data["content"] and original in data["content"]
            assert "data" not in data and "_pictures" not in str(data)  # the picture is not in the JSON
        anim = await client.call_tool("read_file", {"path": "anim.gif"})
        assert "3 frames" in anim.structured_content["warnings"][0]


@pytest.mark.parametrize("mode", MODES)
async def test_bad_pictures_are_clear_errors(make_settings: Any, mode: str, workspace: Path) -> None:
    (workspace / "fake.png").write_bytes(picture_bytes((50, 50), "JPEG"))
    (workspace / "junk.webp").write_bytes(b"RIFF\x00\x00\x00\x00WEBPjunk" * 10)
    (workspace / "cut.png").write_bytes(picture_bytes((400, 400), "PNG", noise=True)[:3000])
    async with connect(make_settings(), mode) as client:
        fake = await client.call_tool("read_file", {"path": "fake.png"})
        assert fake.is_error and "JPEG image, not PNG" in fake.content[0].text
        junk = await client.call_tool("read_file", {"path": "junk.webp"})
        assert junk.is_error and "not a PNG, JPEG, GIF or WebP image" in junk.content[0].text
        cut = await client.call_tool("read_file", {"path": "cut.png"})
        assert cut.is_error and "damaged PNG image" in cut.content[0].text
        assert all(part.type == "text" for r in (fake, junk, cut) for part in r.content)


def test_a_huge_source_is_refused_before_decoding() -> None:
    data = picture_bytes((9000, 8000), "PNG", mode="1")  # 72 MP, a few KB on disk
    with pytest.raises(LimitExceeded, match="9000x8000 px, over the 64 MP limit"):
        fit_picture(data, "huge.png", "PNG")
    with pytest.raises(ExtractionError):
        fit_picture(b"\x89PNG\r\n\x1a\nnot really", "x.png", "PNG")


@hsettings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(width=st.integers(1, 2000), height=st.integers(1, 2000), mode=st.sampled_from(["RGB", "RGBA", "L", "P", "1", "LA"]),
       fmt=st.sampled_from(["PNG", "JPEG", "GIF", "WEBP"]), noise=st.booleans())
def test_fit_picture_keeps_caps_and_shape(width: int, height: int, mode: str, fmt: str, noise: bool) -> None:
    if fmt == "JPEG" and mode not in ("RGB", "L"):
        mode = "RGB"
    fitted = fit_picture(picture_bytes((width, height), fmt, mode=mode, noise=noise), "p", fmt)
    sent = fitted.picture
    assert (fitted.source_width, fitted.source_height) == (width, height)
    assert max(sent.width, sent.height) <= MAX_SIDE and len(sent.data) <= MAX_BYTES
    if max(width, height) <= MAX_SIDE and sent.mime_type == "image/png":
        assert (sent.width, sent.height) == (width, height)
    ratio = max(sent.width, sent.height) / max(width, height)  # the shape is kept (to rounding)
    assert abs(sent.width - width * ratio) <= 1.5 and abs(sent.height - height * ratio) <= 1.5
    with Image.open(io.BytesIO(sent.data)) as image:
        assert image.size == (sent.width, sent.height)


def write_pdf(path: Path, pages: int, size: tuple[float, float] = (595, 842)) -> None:
    import pymupdf

    doc = pymupdf.open()
    for number in range(1, pages + 1):
        page = doc.new_page(width=size[0], height=size[1])
        page.insert_text((72, 100), f"Page {number}: quarterly chart", fontsize=24)
        page.draw_rect(pymupdf.Rect(72, 150, 72 + 40 * number, 300), color=(0, 0, 1), fill=(0, 0, 1))
    doc.save(path)


@pytest.mark.parametrize("mode", MODES)
async def test_render_page_draws_a_pdf_page(make_settings: Any, mode: str, workspace: Path) -> None:
    write_pdf(workspace / "report.pdf", 3)
    write_pdf(workspace / "card.pdf", 1, size=(200, 100))
    (workspace / "deck.key").write_bytes(b"PK\x03\x04")
    async with connect(make_settings(tool_profile="full"), mode) as client:
        result = await client.call_tool("render_page", {"path": "report.pdf", "page": 2})
        assert not result.is_error, result.content[0].text
        image = decoded(result)
        assert image.size == (1109, 1568)  # A4 portrait: the longest side is the cap
        data = result.structured_content
        assert (data["page"], data["page_count"], data["width"], data["height"]) == (2, 3, 1109, 1568)
        assert image.getpixel((int(80 * 1568 / 842), int(200 * 1568 / 842)))[2] > 200  # the blue bar is drawn
        small = await client.call_tool("render_page", {"path": "report.pdf", "max_side": 400})
        assert decoded(small).size == (283, 400)
        card = await client.call_tool("render_page", {"path": "card.pdf"})
        assert decoded(card).size == (834, 417)  # a small page stops at 300 dpi
        past = await client.call_tool("render_page", {"path": "report.pdf", "page": 7})
        assert past.is_error and "page 7 is out of range: report.pdf has 3 page(s)" in past.content[0].text
        deck = await client.call_tool("render_page", {"path": "deck.key"})
        assert deck.is_error and "save the deck as .pptx or export it to PDF" in deck.content[0].text
        shown = await client.call_tool("render_page", {"path": "../outside.pdf"})
        assert shown.is_error and "not allowed" in shown.content[0].text
