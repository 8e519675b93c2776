"""OCR of scanned PDF pages: pages per second and character accuracy, English and Simplified Chinese.

Generated pages: text set in a page (11 or 14 pt), drawn to a 200 dpi grey picture, and a PDF made of
that picture alone (no text layer). Each is read through the real extractor (extract_pdf, Tesseract via
PyMuPDF at OCR_DPI); accuracy is 1 - edit distance / length, whitespace ignored.

Run: .venv/bin/python -m bench.ocr_speed [--pages 3] [--dpi 200]

Measured 2026-11-29 on the 2-core development machine under heavy load (load average 10-17), Tesseract 5.3.0,
one page at a time, full A4 pages (~1,000 English / ~300-500 Chinese characters):
- 200 dpi (OCR_DPI): English 5-14 s/page, Chinese 5-24 s/page (0.04-0.19 pages/s); character accuracy
  English 1.000, Chinese 0.988-0.997.
- 150 dpi: 3-8 s/page, the same accuracy on these pages (11 and 14 pt); 200 is kept for smaller print.
- rapidocr-onnxruntime 1.4.4 (same pages, same load, a throwaway venv): 76-118 s/page, Chinese 0.998 but
  English 0.52-0.60 (words run together and lost), and onnxruntime + OpenCV to install: not chosen.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from indexing.extract import ocr
from indexing.extract.pdf import extract_pdf
from indexing.model import ExtractionLimits

EN = ("The quarterly invoice from Northwind Traders lists 42 crates of green tea, shipped on 14 March to the "
      "Rotterdam warehouse. Payment is due within thirty days of delivery. Contract NW-2931 covers delivery, "
      "insurance and customs clearance; disputes are settled in Amsterdam under Dutch law. ")
ZH = ("本合同由甲方北京星河科技有限公司与乙方上海明月贸易公司签订。乙方应于三月十四日前交付四十二箱绿茶，"
      "货款在三十日内付清。合同编号为二九三一，涵盖运输、保险和清关费用。如有争议，双方应友好协商解决。")


def scanned_pdf(path: Path, text: str, fontsize: float) -> None:
    import pymupdf

    font = "china-s" if any("\u4e00" <= ch <= "\u9fff" for ch in text) else "helv"
    source = pymupdf.open()
    page = source.new_page(width=595, height=842)
    page.insert_textbox(pymupdf.Rect(60, 60, 535, 780), text, fontsize=fontsize, fontname=font)
    picture = page.get_pixmap(dpi=200, colorspace=pymupdf.csGRAY).tobytes("png")
    out = pymupdf.open()
    out.new_page(width=595, height=842).insert_image(pymupdf.Rect(0, 0, 595, 842), stream=picture)
    out.save(path)


def accuracy(expected: str, got: str) -> float:
    """Character accuracy: 1 - edit distance / expected length, whitespace ignored (floored at 0)."""
    a, b = "".join(expected.split()), "".join(got.split())
    previous = list(range(len(b) + 1))
    for i, char in enumerate(a, 1):
        current = [i]
        for j, other in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char != other)))
        previous = current
    return max(0.0, 1 - previous[-1] / max(1, len(a)))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pages", type=int, default=3, help="pages per language and size")
    parser.add_argument("--dpi", type=int, default=ocr.OCR_DPI, help="resolution the page is drawn at for OCR")
    args = parser.parse_args()
    ocr.OCR_DPI = args.dpi
    if not ocr.ocr_available("eng+chi_sim"):
        raise SystemExit("Tesseract with eng+chi_sim is not installed: run scripts/ocr.sh")
    with tempfile.TemporaryDirectory() as folder:
        for label, base in (("en", EN), ("zh", ZH)):
            for fontsize, repeat in ((14, 4), (11, 7)):
                seconds, scores = [], []
                for i in range(args.pages):
                    text = base * (repeat + i % 2)
                    path = Path(folder) / f"{label}{fontsize}-{i}.pdf"
                    scanned_pdf(path, text, fontsize)
                    started = time.perf_counter()
                    got = extract_pdf(path, ExtractionLimits(timeout_seconds=3600)).text
                    seconds.append(time.perf_counter() - started)
                    scores.append(accuracy(text, got))
                print(f"{label} {fontsize:>2} pt: {len(seconds) / sum(seconds):.2f} pages/s "
                      f"(median {statistics.median(seconds):.2f} s/page), character accuracy "
                      f"min {min(scores):.3f} mean {statistics.mean(scores):.3f}")


if __name__ == "__main__":
    main()
