"""render_page on .pptx slides: LibreOffice converts the deck (sandboxed, under the extraction limits, cached
by content in the data dir), the slide is drawn like a PDF page, and the SDK client decodes the picture.

The decks are made with python-pptx: coloured rectangles and a picture at known places, so a slide that is
not really drawn (or drawn from the wrong slide) fails on the pixels."""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from foundation.errors import LimitExceeded
from indexing.model import ExtractionLimits
from tests.conftest import connect, require_office
from tests.test_pictures import decoded

pytestmark = pytest.mark.anyio
RED, BLUE, GREEN = (230, 20, 20), (20, 40, 230), (20, 180, 40)


def write_deck(path: Path) -> None:
    """Three 10x7.5 in slides: 1 a red box left, 2 (hidden) a blue picture right, 3 a green box bottom."""
    from pptx import Presentation
    from pptx.dml.color import RGBColor
    from pptx.enum.shapes import MSO_SHAPE
    from pptx.util import Inches

    deck = Presentation()
    blank = deck.slide_layouts[6]
    first = deck.slides.add_slide(blank)
    box = first.shapes.add_shape(MSO_SHAPE.RECTANGLE, Inches(0.5), Inches(2), Inches(3), Inches(3))
    box.fill.solid()
    box.fill.fore_color.rgb = RGBColor(*RED)
    first.shapes.add_textbox(Inches(4.5), Inches(0.5), Inches(5), Inches(1)).text_frame.text = "Quarterly revenue"
    second = deck.slides.add_slide(blank)
    picture = io.BytesIO()
    Image.new("RGB", (300, 300), BLUE).save(picture, "PNG")
    picture.seek(0)
    second.shapes.add_picture(picture, Inches(6), Inches(2), Inches(3), Inches(3))
    second._element.set("show", "0")  # hidden: still slide 2, as read_file and search number it
    third = deck.slides.add_slide(blank)
    bar = third.shapes.add_shape(MSO_SHAPE.RECTANGLE, Inches(0), Inches(5.5), Inches(10), Inches(2))
    bar.fill.solid()
    bar.fill.fore_color.rgb = RGBColor(*GREEN)
    deck.save(str(path))


def near(pixel: tuple[int, ...], colour: tuple[int, int, int]) -> bool:
    return all(abs(a - b) < 40 for a, b in zip(pixel[:3], colour, strict=True))


def at(image: Image.Image, x_inch: float, y_inch: float) -> tuple[int, ...]:
    scale = image.width / 10  # a 10 in wide slide
    pixel = image.convert("RGB").getpixel((int(x_inch * scale), int(y_inch * scale)))
    assert isinstance(pixel, tuple)
    return pixel


async def test_render_page_draws_pptx_slides(make_settings: Any, workspace: Path, data_dir: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    require_office()
    write_deck(workspace / "deck.pptx")
    async with connect(make_settings(), "auto") as client:
        first = await client.call_tool("render_page", {"path": "deck.pptx"})
        assert not first.is_error, first.content[0].text
        image = decoded(first)
        assert image.size == (1568, 1176)  # 4:3, the longest side is the cap
        assert near(at(image, 2, 3.5), RED) and near(at(image, 7.5, 3.5), (255, 255, 255))
        data = first.structured_content
        assert (data["page"], data["page_count"]) == (1, 3) and data["note"].startswith("Slide 1 of 3")
        assert len(list((data_dir / "slides").glob("*.pdf"))) == 1  # cached in the data dir
        assert not list(workspace.glob("*.pdf"))
        monkeypatch.setenv("PATH", "/nonexistent")  # another conversion would now fail: the cache is used
        hidden = decoded(await client.call_tool("render_page", {"path": "deck.pptx", "page": 2, "max_side": 800}))
        assert hidden.size == (800, 600)
        assert near(at(hidden, 7.5, 3.5), BLUE) and not near(at(hidden, 2, 3.5), RED)
        third = decoded(await client.call_tool("render_page", {"path": "deck.pptx", "page": 3}))
        assert near(at(third, 5, 6.5), GREEN) and near(at(third, 5, 3), (255, 255, 255))
        past = await client.call_tool("render_page", {"path": "deck.pptx", "page": 9})
        assert past.is_error and "slide 9 is out of range: deck.pptx has 3 slide(s)" in past.content[0].text


async def test_bad_decks_are_clear_errors(make_settings: Any, workspace: Path) -> None:
    require_office()
    (workspace / "locked.pptx").write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 2000)  # an encrypted deck
    (workspace / "cut.pptx").write_bytes(b"PK\x03\x04" + b"\0" * 100)
    with zipfile.ZipFile(workspace / "junk.pptx", "w") as junk:
        junk.writestr("[Content_Types].xml", "<Types/>")
        junk.writestr("ppt/presentation.xml", "not xml at all")
    async with connect(make_settings(), "auto") as client:
        locked = await client.call_tool("render_page", {"path": "locked.pptx"})
        assert locked.is_error and "password-protected" in locked.content[0].text
        cut = await client.call_tool("render_page", {"path": "cut.pptx"})
        assert cut.is_error and "cut.pptx" in cut.content[0].text
        junk = await client.call_tool("render_page", {"path": "junk.pptx"})
        assert junk.is_error and "junk.pptx" in junk.content[0].text, junk.content[0].text
        assert all(part.type == "text" for r in (locked, cut, junk) for part in r.content)


def test_a_slow_conversion_is_stopped(tmp_path: Path) -> None:
    require_office()
    from tools.slides import deck_pdf

    write_deck(tmp_path / "deck.pptx")
    fd = os.open(tmp_path / "deck.pptx", os.O_RDONLY)
    try:
        with pytest.raises(LimitExceeded, match="took longer than 0.2 s"):
            deck_pdf("deck.pptx", fd, tmp_path / "cache", ExtractionLimits(timeout_seconds=0.2))
    finally:
        os.close(fd)
    assert not list((tmp_path / "cache").iterdir())  # the work folder is gone, nothing cached


async def test_without_libreoffice_the_error_names_the_install(make_settings: Any, workspace: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    write_deck(workspace / "deck.pptx")
    monkeypatch.setenv("PATH", "/nonexistent")
    async with connect(make_settings(), "auto") as client:
        result = await client.call_tool("render_page", {"path": "deck.pptx"})
        assert result.is_error and "apt-get install --no-install-recommends libreoffice-impress-nogui" in \
            result.content[0].text
