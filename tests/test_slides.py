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

from foundation.errors import ExtractionError, LimitExceeded
from foundation.safe_open import opened
from indexing.model import ExtractionLimits
from tests.conftest import connect, require_office
from tests.test_pictures import decoded

pytestmark = pytest.mark.anyio
RED, BLUE, GREEN = (230, 20, 20), (20, 40, 230), (20, 180, 40)
TITLE = "季度收入 Quarterly revenue"


def write_deck(path: Path) -> None:
    """Three 10x7.5 in slides: 1 a red box left and a Chinese and English title right, 2 (hidden) a blue picture right, 3 a green box bottom."""
    from pptx import Presentation
    from pptx.dml.color import RGBColor
    from pptx.enum.shapes import MSO_SHAPE
    from pptx.util import Inches, Pt

    deck = Presentation()
    blank = deck.slide_layouts[6]
    first = deck.slides.add_slide(blank)
    box = first.shapes.add_shape(MSO_SHAPE.RECTANGLE, Inches(0.5), Inches(2), Inches(3), Inches(3))
    box.fill.solid()
    box.fill.fore_color.rgb = RGBColor(*RED)
    title = first.shapes.add_textbox(Inches(4), Inches(0.5), Inches(6), Inches(1)).text_frame
    title.text = TITLE
    title.paragraphs[0].runs[0].font.size = Pt(28)
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


def read_line(picture: Image.Image) -> str:
    """One line of text read back from a picture by Tesseract (eng + chi_sim; scripts/ocr.sh installs it): the
    text was really drawn, with a Chinese font (not as empty boxes). Without Tesseract: the text itself."""
    import subprocess

    from indexing.extract.ocr import join_cjk, tesseract_for

    program = tesseract_for("eng+chi_sim")
    if program is None:
        assert os.environ.get("CI", "").lower() != "true", "CI=true and Tesseract (eng+chi_sim) is missing"
        return TITLE
    png = io.BytesIO()
    picture.save(png, "PNG")
    done = subprocess.run([program, "-", "-", "-l", "chi_sim+eng", "--psm", "7"], input=png.getvalue(),
                          capture_output=True, timeout=120, check=True)
    return join_cjk(done.stdout.decode("utf-8").strip())


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
        assert read_line(image.crop((int(image.width * 0.39), 0, image.width, int(image.width * 0.16)))) == TITLE
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


def linked_deck(path: Path, url: str) -> None:
    """A one-slide deck whose picture is not in the file but linked to `url` (LibreOffice fetches such
    pictures when it can reach them)."""
    from pptx import Presentation
    from pptx.util import Inches

    deck = Presentation()
    picture = io.BytesIO()
    Image.new("RGB", (50, 50), RED).save(picture, "PNG")
    deck.slides.add_slide(deck.slide_layouts[6]).shapes.add_picture(picture, Inches(1), Inches(1), Inches(3))
    made = io.BytesIO()
    deck.save(made)
    with zipfile.ZipFile(made) as source, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as out:
        for info in source.infolist():
            data = source.read(info.filename)
            if info.filename == "ppt/slides/_rels/slide1.xml.rels":
                data = data.replace(b'Target="../media/image1.png"', f'Target="{url}" TargetMode="External"'.encode())
            if info.filename == "ppt/slides/slide1.xml":
                data = data.replace(b"r:embed=", b"r:link=")
            if not info.filename.startswith("ppt/media/"):
                out.writestr(info, data)


async def test_the_conversion_has_no_network(make_settings: Any, workspace: Path) -> None:
    require_office()
    import http.server
    import threading

    asked: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
            asked.append(self.path)
            self.send_response(404)
            self.end_headers()

        do_OPTIONS = do_HEAD = do_GET  # noqa: N815

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        linked_deck(workspace / "linked.pptx", f"http://127.0.0.1:{server.server_address[1]}/pic.png")
        async with connect(make_settings(), "auto") as client:
            result = await client.call_tool("render_page", {"path": "linked.pptx"})
            assert not result.is_error, result.content[0].text
            decoded(result)
    finally:
        server.shutdown()
        server.server_close()
    assert asked == []  # LibreOffice outside the sandbox asks for the linked picture (OPTIONS, then GET)


async def test_render_page_draws_odp_slides(make_settings: Any, workspace: Path, tmp_path: Path) -> None:
    require_office()
    import subprocess

    from tools.slides import office_program

    write_deck(tmp_path / "deck.pptx")
    program = office_program()
    assert program is not None
    subprocess.run([program, f"-env:UserInstallation={(tmp_path / 'profile').as_uri()}", "--headless", "--convert-to",
                    "odp", "--outdir", str(workspace), str(tmp_path / "deck.pptx")], check=True, capture_output=True,
                   timeout=120, env={**os.environ, "HOME": str(tmp_path)})
    async with connect(make_settings(), "auto") as client:
        result = await client.call_tool("render_page", {"path": "deck.odp", "page": 3})
        assert not result.is_error, result.content[0].text
        assert near(at(decoded(result), 5, 6.5), GREEN) and result.structured_content["page_count"] == 3


def test_a_slow_or_greedy_conversion_is_stopped(tmp_path: Path) -> None:
    require_office()
    from tools.slides import deck_pdf

    write_deck(tmp_path / "deck.pptx")
    with opened(os.open(tmp_path / "deck.pptx", os.O_RDONLY)) as fd, \
            pytest.raises(LimitExceeded, match="took longer than 0.2 s"):
        deck_pdf("deck.pptx", fd, tmp_path / "cache", ExtractionLimits(timeout_seconds=0.2))
    assert not list((tmp_path / "cache").iterdir())  # the work folder is gone, nothing cached
    with opened(os.open(tmp_path / "deck.pptx", os.O_RDONLY)) as fd, \
            pytest.raises(ExtractionError, match="the extraction memory limit of 0.2 GiB"):
        deck_pdf("deck.pptx", fd, tmp_path / "cache", ExtractionLimits(max_worker_memory_bytes=200 * 2**20))


async def test_without_libreoffice_the_error_names_the_install(make_settings: Any, workspace: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from mcp_server.cmd_doctor import check_slides

    write_deck(workspace / "deck.pptx")
    monkeypatch.setenv("PATH", "/nonexistent")
    install = "sudo apt-get install --no-install-recommends libreoffice-impress-nogui"
    async with connect(make_settings(), "auto") as client:
        result = await client.call_tool("render_page", {"path": "deck.pptx"})
        assert result.is_error and install in result.content[0].text
    doctor = check_slides(make_settings())
    assert not doctor.ok and install in doctor.detail
