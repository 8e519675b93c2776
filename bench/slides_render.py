"""render_page on .pptx slides: the first call (LibreOffice converts the deck, sandboxed) and later calls (the
cached PDF), with the size of the pictures sent.

Generated deck: --slides slides, each with a title, a bullet list, a coloured shape and a photo-like picture
(blurred noise, the worst case for PNG). Drawn through the real tool function (tools/images.render_page).

Run: .venv/bin/python -m bench.slides_render [--slides 10]

Measured 2026-11-29 on the 2-core development machine under load (load average ~8; other engineers' tests),
LibreOffice 7.4.7 (Debian bookworm, libreoffice-impress-nogui), bubblewrap sandbox, 10 slides:
- first call (convert + draw): 5.9 s; later slides (cached PDF): 0.5-1.0 s each (median 0.68 s);
- pictures: 1568x1176 (the cap) PNG ~475 KB with the photo-like picture (tests/test_slides.py's text and shapes
  only: 8-15 KB); max_side=800: 800x600, 163 KB. A slide never exceeds 1 MB (encode_within_caps).
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import tempfile
import time
from pathlib import Path


def write_deck(path: Path, slides: int) -> None:
    from PIL import Image, ImageFilter
    from pptx import Presentation
    from pptx.dml.color import RGBColor
    from pptx.enum.shapes import MSO_SHAPE
    from pptx.util import Inches

    deck = Presentation()
    for number in range(1, slides + 1):
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = f"Quarter {number}: revenue 季度收入"
        slide.placeholders[1].text_frame.text = "Growth in the north\nNew customers 新客户\nHiring plan"
        box = slide.shapes.add_shape(MSO_SHAPE.ROUNDED_RECTANGLE, Inches(0.5), Inches(5.5), Inches(3), Inches(1.5))
        box.fill.solid()
        box.fill.fore_color.rgb = RGBColor(40 * (number % 6), 120, 200)
        photo = Image.frombytes("RGB", (800, 600), os.urandom(800 * 600 * 3)).filter(ImageFilter.GaussianBlur(2))
        data = io.BytesIO()
        photo.save(data, "JPEG", quality=85)
        data.seek(0)
        slide.shapes.add_picture(data, Inches(5.5), Inches(4), Inches(4))
    deck.save(str(path))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--slides", type=int, default=10)
    args = parser.parse_args()
    from foundation.pictures import pictures_of
    from foundation.settings import load_settings
    from tools.images import render_page
    from tools.runtime import CallContext, Runtime

    with tempfile.TemporaryDirectory() as tmp:
        root, data = Path(tmp) / "ws", Path(tmp) / "data"
        root.mkdir()
        data.mkdir()
        write_deck(root / "deck.pptx", args.slides)
        settings = load_settings({"data_dir": data, "roots": [root], "tool_profile": "full",
                                  "embedding_provider": "off"}, environ={})
        rt = Runtime(settings)
        timings: list[float] = []
        for page, side in [(n, 1568) for n in range(1, args.slides + 1)] + [(1, 800)]:
            start = time.perf_counter()
            result = render_page("deck.pptx", page, side, rt=rt, call=CallContext(tool="render_page"))
            took = time.perf_counter() - start
            sent = pictures_of(result)[0]
            print(f"slide {page:2} max_side {side}: {took:5.2f} s  {sent.width}x{sent.height} {sent.mime_type} "
                  f"{len(sent.data) / 1000:.0f} KB")
            timings.append(took)
        print(f"first (convert + draw) {timings[0]:.2f} s; cached median {statistics.median(timings[1:]):.2f} s")


if __name__ == "__main__":
    main()
