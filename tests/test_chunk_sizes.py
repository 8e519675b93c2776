"""Chunks respect chunk_max_chars in every format; spreadsheet rows are indexed once plus the overlap.

Real generated files (tests/docgen.py) go through extraction and chunking; a property test covers
the row windows for any row lengths."""

from __future__ import annotations

import random
import re
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from indexing.chunking import chunk_document
from indexing.extract import extract_file
from indexing.model import Chunk, ChunkingOptions, Extracted, Unit
from tests.docgen import Heading, Slide, make_docx, make_pdf, make_pptx, make_xlsx

OPTIONS = ChunkingOptions(max_chars=400, overlap_chars=80, min_chars=50)
WORDS = ["revenue", "growth", "region", "customer", "contract", "delivery", "quarter", "forecast", "note", "risk", "客户", "营收", "增长"]


def prose(rng: random.Random, chars: int) -> str:
    out: list[str] = []
    while sum(len(w) + 1 for w in out) < chars:
        out.append(rng.choice(WORDS) + ("." if rng.random() < 0.08 else ""))
    return " ".join(out)


def assert_rows_once_plus_overlap(chunks: list[Chunk], markers: list[str], overlap: int) -> None:
    for a, b in zip(chunks, chunks[1:], strict=False):
        if a.sheet == b.sheet:
            assert b.start > a.start and a.end - b.start <= overlap, (a, b)
    for marker in markers:
        assert 1 <= sum(marker in c.text for c in chunks) <= 2, marker


def test_xlsx_long_text_rows_fit_the_chunk_size(tmp_path: Path) -> None:
    rng = random.Random(13)
    rows: list[list[object]] = [["Id", "Customer", "Notes", "Amount"]]
    markers = []
    for n in range(120):
        marker = f"row{n:03d}x"
        markers.append(marker)
        rows.append([marker, prose(rng, rng.choice([20, 60, 200])), prose(rng, rng.choice([10, 150, 700, 1800])), n])
    path = make_xlsx(tmp_path / "long.xlsx", {"Log": rows, "Short": [["a", "b"], ["1", "2"]]})
    chunks = chunk_document(extract_file(path), OPTIONS)
    log = [c for c in chunks if c.sheet == "Log"]
    assert max(len(c.text) for c in chunks) <= 400
    assert_rows_once_plus_overlap(log, markers, 80)
    assert all(c.heading == "Log > Id | Customer | Notes | Amount" for c in log[1:])
    text_chars = sum(len(c.text) for c in log)
    sheet_chars = len(extract_file(path).text)
    assert text_chars <= sheet_chars * 1.3  # each row once plus the overlap (was ~3x)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=1200), min_size=1, max_size=60), st.integers(0, 150))
@example(lengths=[1, 1, 48, 242], overlap=55)  # the overlap rows left no room for the next row: a repeat window
@example(lengths=[186, 16, 42, 42, 186], overlap=91)  # rows a window repeats carried again: a row in 3 chunks
def test_row_windows_for_any_row_lengths(lengths: list[int], overlap: int) -> None:
    lines = [f"m{i}|" + "w " * (n // 2) for i, n in enumerate(lengths)]
    text = "\n".join(lines)
    units, pos = [], 0
    for i, line in enumerate(lines):
        units.append(Unit(pos, pos + len(line), "row", sheet="S", rows=(i + 1, i + 1), heading_path=("S", lines[0][:20])))
        pos += len(line) + 1
    options = ChunkingOptions(max_chars=300, overlap_chars=overlap, min_chars=20)
    chunks = chunk_document(Extracted(text=text, units=units, kind="xlsx"), options)
    assert all(len(c.text) <= 300 and c.text == text[c.start : c.end] for c in chunks)
    covered = set()
    for c in chunks:
        covered.update(range(c.start, c.end))
    assert all(i in covered for i, ch in enumerate(text) if not ch.isspace())
    for a, b in zip(chunks, chunks[1:], strict=False):
        assert b.start > a.start and a.end - b.start <= max(overlap, 20)  # the overlap (or a tail's min_chars)
        assert b.end > a.end  # every window brings something new
    for i in range(len(lines)):
        assert sum(bool(re.search(rf"(^|\n)m{i}\|", c.text)) for c in chunks) <= 2


def test_docx_pptx_pdf_chunks_fit_the_chunk_size(tmp_path: Path) -> None:
    rng = random.Random(7)
    paragraphs = [prose(rng, rng.choice([50, 300, 900, 2500])) for _ in range(20)]
    docx = make_docx(tmp_path / "a.docx", [Heading("Report"), *paragraphs[:10], Heading("More", 2), *paragraphs[10:]])
    pptx = make_pptx(tmp_path / "a.pptx", [Slide(f"S{i}", [p], notes=prose(rng, 600)) for i, p in enumerate(paragraphs[:6])])
    pdf = make_pdf(tmp_path / "a.pdf", [[p] for p in paragraphs[:6]])
    for path in (docx, pptx, pdf):
        chunks = chunk_document(extract_file(path), OPTIONS)
        assert chunks and max(len(c.text) for c in chunks) <= 400, path.name
