"""Pictures in the index: a screenshot's words (PNG, JPEG; English and Chinese) are read by Tesseract and found by
search_documents after index_path; icons are not read; without OCR the pictures are counted by index_status like
unread scanned pages and read once OCR is on. Needs scripts/ocr.sh (skipped without it, failing under CI=true)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from bench.ocr_speed import accuracy
from foundation.errors import ExtractionError, LimitExceeded
from indexing.extract import extract_file
from indexing.model import ExtractionLimits
from tests.conftest import connect
from tests.test_ocr import EN, ZH, call, needs_tesseract

pytestmark = pytest.mark.anyio


def screenshot(text: str, fmt: str = "PNG", dpi: int = 96) -> bytes:
    """`text` drawn as a screen shows it (11 pt at 96 dpi: ~15 px letters) on a 500x200 pt window."""
    import pymupdf

    page = pymupdf.open().new_page(width=500, height=200)
    font = "china-s" if any("\u4e00" <= ch <= "\u9fff" for ch in text) else "helv"
    page.insert_textbox(pymupdf.Rect(10, 10, 490, 190), text, fontsize=11, fontname=font)
    image = Image.open(io.BytesIO(page.get_pixmap(dpi=dpi).tobytes("png")))
    out = io.BytesIO()
    image.save(out, fmt, **({"quality": 90} if fmt == "JPEG" else {}))
    return out.getvalue()


@needs_tesseract
async def test_screenshots_are_found_by_search(make_settings: Any, workspace: Path) -> None:
    (workspace / "invoice.png").write_bytes(screenshot(EN))
    (workspace / "contract.jpg").write_bytes(screenshot(ZH, "JPEG", dpi=144))
    (workspace / "icon.png").write_bytes(screenshot("Northwind", dpi=20))  # 139x56 px: an icon, not read
    async with connect(make_settings(), "auto") as client:
        report = await call(client, "index_path", {"path": "."})
        assert report["indexed"] == 3 and not report.get("failed")
        english = await call(client, "search_documents", {"query": "Northwind invoice Rotterdam"})
        assert [hit["path"] for hit in english["hits"]] == ["invoice.png"]
        assert "Rotterdam" in english["hits"][0]["text"]
        chinese = await call(client, "search_documents", {"query": "星河科技 绿茶"})
        assert chinese["hits"][0]["path"] == "contract.jpg" and "北京星河科技有限公司" in chinese["hits"][0]["text"]
        assert (await call(client, "index_status", {}))["unread_scanned_pages"] == 0
    for name, text in (("invoice.png", EN), ("contract.jpg", ZH)):
        extracted = extract_file(workspace / name)
        assert accuracy(text, extracted.text) >= 0.9 and "read by OCR" in extracted.warnings[0]
    assert extract_file(workspace / "icon.png").text == ""
    for dpi in (72, 288):  # letters ~10 px and ~40 px high
        (workspace / f"zh{dpi}.png").write_bytes(screenshot(ZH, dpi=dpi))
        assert accuracy(ZH, extract_file(workspace / f"zh{dpi}.png").text) >= 0.9


@pytest.mark.storage
async def test_without_ocr_pictures_are_counted_then_read(make_settings: Any, workspace: Path) -> None:
    (workspace / "shot.png").write_bytes(screenshot(EN))
    (workspace / "shot.webp").write_bytes(screenshot(ZH, "WEBP"))
    async with connect(make_settings(ocr_languages=""), "legacy") as client:
        await call(client, "index_path", {"path": "."})
        assert (await call(client, "index_status", {}))["unread_scanned_pages"] == 2
        assert not (await client.call_tool("search_documents", {"query": "Northwind"})).structured_content.get("hits")
    from indexing.extract.ocr import ocr_available

    if not ocr_available("eng+chi_sim"):
        return
    async with connect(make_settings(), "legacy") as client:
        report = await call(client, "index_path", {"path": "."})
        assert report["indexed"] == 2  # read again: OCR is on now
        assert (await call(client, "index_status", {}))["unread_scanned_pages"] == 0
        found = await call(client, "search_documents", {"query": "Northwind Rotterdam"})
        assert found["hits"][0]["path"] == "shot.png"


def test_bad_pictures_are_clear_errors(tmp_path: Path) -> None:
    (tmp_path / "cut.png").write_bytes(screenshot(EN)[:200])
    (tmp_path / "fake.jpg").write_bytes(b"not a picture at all" * 20)
    huge = io.BytesIO()
    Image.new("1", (9000, 8000)).save(huge, "PNG")  # 72 MP, a few KB
    (tmp_path / "huge.png").write_bytes(huge.getvalue())
    for name in ("cut.png", "fake.jpg"):
        with pytest.raises(ExtractionError, match=f"{name} is not a readable picture"):
            extract_file(tmp_path / name, ExtractionLimits(ocr_languages=""))
    with pytest.raises(LimitExceeded, match="9000x8000 px, over the 64 MP limit"):
        extract_file(tmp_path / "huge.png")
