"""Scanned PDFs are searchable: pages with no text layer (text drawn into a picture) are read by Tesseract,
in English and Chinese, and found by search_documents after index_path, with their page. Without OCR they
are counted by index_status. Needs scripts/ocr.sh (Tesseract eng + chi_sim): skipped without it, except
under CI=true, where a missing install step must fail."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.ocr_speed import accuracy
from indexing.extract.ocr import _CJK, MAX_OCR_PIXELS, OCR_DPI, join_cjk, ocr_available, ocr_dpi
from tests.conftest import MODES, connect

EN = ("The quarterly invoice from Northwind Traders lists 42 crates of green tea, shipped on 14 March to the "
      "Rotterdam warehouse. Payment is due within thirty days.")
ZH = "本合同由甲方北京星河科技有限公司与乙方上海明月贸易公司签订。乙方应于三月十四日前交付四十二箱绿茶，货款在三十日内付清。"

needs_tesseract = pytest.mark.skipif(
    not ocr_available("eng+chi_sim") and os.environ.get("CI") != "true",
    reason="Tesseract with eng+chi_sim is not installed (run scripts/ocr.sh)",
)


def write_scanned_pdf(path: Path, pages: list[tuple[str, bool]]) -> None:
    """A PDF whose pages are (text, scanned): a scanned page holds only a picture of its text (200 dpi, grey)."""
    import pymupdf

    out = pymupdf.open()
    for text, is_scanned in pages:
        font = "china-s" if any("\u4e00" <= ch <= "\u9fff" for ch in text) else "helv"
        target = out.new_page(width=595, height=842)
        if not is_scanned:
            target.insert_textbox(pymupdf.Rect(60, 60, 535, 700), text, fontsize=14, fontname=font)
            continue
        source = pymupdf.open()
        drawn = source.new_page(width=595, height=842)
        drawn.insert_textbox(pymupdf.Rect(60, 60, 535, 700), text, fontsize=14, fontname=font)
        picture = drawn.get_pixmap(dpi=200, colorspace=pymupdf.csGRAY).tobytes("png")
        target.insert_image(target.rect, stream=picture)
    out.save(path)


async def call(client: Any, name: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(name, args)
    assert not result.is_error, result.content[0].text
    return result.structured_content  # type: ignore[no-any-return]


@needs_tesseract
@pytest.mark.anyio
@pytest.mark.parametrize("mode", MODES[:1])
async def test_scanned_pages_are_found_by_search_with_their_page(make_settings: Any, workspace: Path, mode: str) -> None:
    write_scanned_pdf(workspace / "invoice.pdf", [("Cover page with a text layer.", False), (EN, True)])
    write_scanned_pdf(workspace / "contract.pdf", [(ZH, True)])
    write_scanned_pdf(workspace / "blank.pdf", [("", False)])
    async with connect(make_settings(), mode) as client:
        report = await call(client, "index_path", {"path": "."})
        assert report["indexed"] == 3
        english = await call(client, "search_documents", {"query": "Northwind invoice Rotterdam"})
        top = english["hits"][0]
        assert (top["path"], top["page"]) == ("invoice.pdf", 2) and "Rotterdam" in top["text"]
        chinese = await call(client, "search_documents", {"query": "星河科技 绿茶"})
        top = chinese["hits"][0]
        assert (top["path"], top["page"]) == ("contract.pdf", 1) and "北京星河科技有限公司" in top["text"]
        status = await call(client, "index_status", {})
        assert status["unread_scanned_pages"] == 0
        read = await call(client, "read_file", {"path": "contract.pdf"})
        assert accuracy(ZH, read["content"]) >= 0.9 and any("read by OCR" in w for w in read["warnings"])


@pytest.mark.anyio
@pytest.mark.storage
async def test_without_ocr_scanned_pages_are_counted(make_settings: Any, workspace: Path) -> None:
    write_scanned_pdf(workspace / "scan.pdf", [(EN, True), ("A page with text.", False), (EN, True)])
    write_scanned_pdf(workspace / "scan2.pdf", [(ZH, True)])
    async with connect(make_settings(ocr_languages=""), "legacy") as client:
        await call(client, "index_path", {"path": "."})
        status = await call(client, "index_status", {})
        assert status["unread_scanned_pages"] == 3
        found = await client.call_tool("search_documents", {"query": "Northwind"})
        assert not found.structured_content.get("hits")
        read = await call(client, "read_file", {"path": "scan.pdf"})
        assert any("2 page(s) without a text layer were not read: OCR is not available" in w for w in read["warnings"])


def test_ocr_languages_setting_is_checked(make_settings: Any) -> None:
    from foundation.errors import SettingsError

    with pytest.raises((SettingsError, ValueError)):
        make_settings(ocr_languages="eng; rm -rf /")


TEXT = st.text(alphabet="中文字合同星河。，、ab1 \n\t.", max_size=40)


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TEXT)
def test_join_cjk_only_removes_whitespace_between_cjk(text: str) -> None:
    import re

    joined = join_cjk(text)
    assert "".join(joined.split()) == "".join(text.split())  # nothing but whitespace is removed
    assert not re.search(rf"{_CJK}\s+{_CJK}", joined)
    if not re.search(_CJK, text):
        assert joined == text


@given(st.floats(1, 14_400), st.floats(1, 14_400))
def test_ocr_dpi_bounds_the_drawn_page(width: float, height: float) -> None:
    dpi = ocr_dpi(width, height)
    assert 1 <= dpi <= OCR_DPI
    assert dpi == 1 or (width / 72 * dpi) * (height / 72 * dpi) <= MAX_OCR_PIXELS
    if width * height <= 595 * 842 * 4:  # up to A2: the full resolution
        assert dpi == OCR_DPI


@needs_tesseract
@pytest.mark.anyio
@pytest.mark.storage
async def test_turning_ocr_on_reads_the_skipped_pages_again(make_settings: Any, workspace: Path) -> None:
    write_scanned_pdf(workspace / "scan.pdf", [("A page with text.", False), (EN, True)])
    async with connect(make_settings(ocr_languages=""), "legacy") as client:
        await call(client, "index_path", {"path": "."})
        assert (await call(client, "index_status", {}))["unread_scanned_pages"] == 1
    async with connect(make_settings(), "legacy") as client:
        report = await call(client, "index_path", {"path": "."})
        assert report["indexed"] == 1  # not skipped as unchanged: OCR is on now
        assert (await call(client, "index_status", {}))["unread_scanned_pages"] == 0
        found = await call(client, "search_documents", {"query": "Northwind Rotterdam"})
        assert (found["hits"][0]["path"], found["hits"][0]["page"]) == ("scan.pdf", 2)


def test_doctor_says_whether_ocr_reads_scans(make_settings: Any) -> None:
    from mcp_server.cmd_doctor import check_ocr

    off = check_ocr(make_settings(ocr_languages=""))
    assert off.ok and "off" in off.detail
    missing = check_ocr(make_settings(ocr_languages="eng+zzz_nolang"))
    assert not missing.ok and "sudo apt-get install tesseract-ocr tesseract-ocr-eng tesseract-ocr-zzz-nolang" in missing.detail


@needs_tesseract
def test_a_page_past_the_ocr_budget_is_counted_not_lost(tmp_path: Path) -> None:
    import time

    import pymupdf

    from indexing.extract.ocr import ocr_page
    from indexing.extract.pdf import _Ocr

    write_scanned_pdf(tmp_path / "scan.pdf", [(EN, True)])
    with pymupdf.open(tmp_path / "scan.pdf") as doc:
        assert ocr_page(doc[0], "eng+chi_sim", 0.05) is None  # Tesseract is killed at its time limit
        late = _Ocr("eng+chi_sim", time.monotonic() - 1)
        assert late.text_of(doc[0], "") == "" and late.out_of_time == 1
        assert late.warnings() == ["1 page(s) without a text layer were not read: the OCR time budget of this file "
                                   "ran out (raise GENERALAGENT_FILE_TIMEOUT_SECONDS)"]
        assert _Ocr("eng+chi_sim", time.monotonic() + 1).text_of(doc[0], "typed text") == "typed text"
