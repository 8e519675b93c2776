"""Hostile and broken files: each gives a clear per-file error (or a warning), never a crash or hang."""

from __future__ import annotations

import io
import threading
import time
import zipfile
from pathlib import Path

import pytest

from foundation.errors import Cancelled, ExtractionError, LimitExceeded
from indexing.extract import extract_file
from indexing.model import ExtractionLimits
from tests.docgen import (
    Slide,
    make_corrupt_pdf,
    make_docx,
    make_entity_bomb_docx,
    make_entity_bomb_xlsx,
    make_huge_dimension_xlsx,
    make_lying_zip_docx,
    make_pdf,
    make_pptx,
    make_truncated_pdf,
    make_zip_bomb_docx,
)


def test_zip_bomb_docx_is_refused_by_ratio(tmp_path: Path) -> None:
    path = make_zip_bomb_docx(tmp_path / "bomb.docx", inflated_mib=64)
    assert path.stat().st_size < 200_000
    with pytest.raises(ExtractionError, match="zip bomb"):
        extract_file(path)


def test_zip_bomb_docx_is_refused_by_total_size(tmp_path: Path) -> None:
    path = make_zip_bomb_docx(tmp_path / "bomb.docx", inflated_mib=8)
    limits = ExtractionLimits(max_decompressed_bytes=4 * 2**20, max_compression_ratio=10_000)
    with pytest.raises(LimitExceeded, match="max_decompressed_bytes"):
        extract_file(path, limits)


def test_too_many_zip_entries(tmp_path: Path) -> None:
    path = make_docx(tmp_path / "many.docx", ["x"])
    with pytest.raises(LimitExceeded, match="zip entries"):
        extract_file(path, ExtractionLimits(max_zip_entries=3))


def test_zip_headers_lying_about_sizes(tmp_path: Path) -> None:
    path = make_lying_zip_docx(tmp_path / "liar.docx", real_mib=8)
    with zipfile.ZipFile(path) as archive:
        assert archive.getinfo("word/document.xml").file_size == 1024  # what it claims
    with pytest.raises(ExtractionError, match="damaged"):
        extract_file(path)


def test_billion_laughs_docx(tmp_path: Path) -> None:
    with pytest.raises(ExtractionError, match="DTD/entities"):
        extract_file(make_entity_bomb_docx(tmp_path / "laughs.docx"))


def test_billion_laughs_xlsx(tmp_path: Path) -> None:
    with pytest.raises(ExtractionError, match="DTD/entities"):
        extract_file(make_entity_bomb_xlsx(tmp_path / "laughs.xlsx"))


def test_utf16_encoded_doctype_in_pptx(tmp_path: Path) -> None:
    source = make_pptx(tmp_path / "src.pptx", [Slide("t", ["b"])])
    target = tmp_path / "evil.pptx"
    evil = '<?xml version="1.0" encoding="UTF-16"?><!DOCTYPE x [<!ENTITY a "aaaa">]><x>&a;</x>'.encode("utf-16")
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w") as new:
        for info in old.infolist():
            new.writestr(info.filename, evil if info.filename == "ppt/slides/slide1.xml" else old.read(info.filename))
    with pytest.raises(ExtractionError, match="DTD/entities"):
        extract_file(target)


def test_xlsx_claiming_the_whole_grid(tmp_path: Path) -> None:
    path = make_huge_dimension_xlsx(tmp_path / "grid.xlsx", [["name", "value"], ["a", 1], ["b", 2]])
    started = time.monotonic()
    result = extract_file(path)
    assert time.monotonic() - started < 10
    assert result.text == "name | value\na | 1\nb | 2"


def test_corrupt_pdf(tmp_path: Path) -> None:
    with pytest.raises(ExtractionError, match="not a readable PDF"):
        extract_file(make_corrupt_pdf(tmp_path / "broken.pdf"))


def test_encrypted_pdf(tmp_path: Path) -> None:
    path = make_pdf(tmp_path / "report.pdf", [["secret numbers"]], password="s3cret")
    with pytest.raises(ExtractionError) as info:
        extract_file(path)
    assert str(info.value) == "report.pdf is encrypted (password protected); remove the password and index it again."


def test_truncated_pdf_is_repaired_with_a_warning(tmp_path: Path) -> None:
    pages = [[f"Page {n} says revenue grew. " * 10] for n in range(1, 9)]
    path = make_truncated_pdf(tmp_path / "cut.pdf", pages)
    result = extract_file(path)
    assert any("repaired" in w and "partial" in w for w in result.warnings)
    assert "Page 8 says revenue grew" in result.text


def test_pdf_cut_beyond_repair(tmp_path: Path) -> None:
    pages = [[f"Page {n} says revenue grew. " * 10] for n in range(1, 9)]
    with pytest.raises(ExtractionError, match="not a readable PDF"):
        extract_file(make_truncated_pdf(tmp_path / "cut.pdf", pages, keep=0.5))


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("fake.pdf", b"hello, I am text\n" * 10, "not a PDF"),
        ("fake.docx", b"plain text pretending\n" * 10, "not a DOCX file"),
        ("old.xlsx", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 600, "password-protected or an old binary"),
        ("zip.pptx", b"", None),
    ],
)
def test_wrong_content_for_the_extension(tmp_path: Path, name: str, data: bytes, message: str | None) -> None:
    path = tmp_path / name
    if message is None:  # a real zip that is not a presentation
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive:
            archive.writestr("hello.txt", "hi")
        path.write_bytes(buffer.getvalue())
        message = "not a PPTX document"
    else:
        path.write_bytes(data)
    with pytest.raises(ExtractionError, match=message):
        extract_file(path)


def test_truncated_docx_container(tmp_path: Path) -> None:
    path = make_docx(tmp_path / "cut.docx", ["some text"] * 50)
    path.write_bytes(path.read_bytes()[:2000])
    with pytest.raises(ExtractionError, match="damaged"):
        extract_file(path)


def test_timeout_kills_the_worker_and_the_next_file_works(tmp_path: Path) -> None:
    big = make_pdf(tmp_path / "big.pdf", [[f"page {n} " * 20] for n in range(60)])
    with pytest.raises(LimitExceeded, match="took longer than"):
        extract_file(big, ExtractionLimits(timeout_seconds=0.001))
    assert "page 59" in extract_file(big).text


def test_cancel_while_parsing(tmp_path: Path) -> None:
    path = make_pdf(tmp_path / "c.pdf", [["cancel me"]])
    with pytest.raises(Cancelled):
        extract_file(path, should_cancel=lambda: True)
    assert extract_file(path).text == "cancel me"


def test_worker_memory_limit_is_a_per_file_error(tmp_path: Path) -> None:
    path = make_pdf(tmp_path / "m.pdf", [["memory"]])
    with pytest.raises((LimitExceeded, ExtractionError)):
        extract_file(path, ExtractionLimits(max_worker_memory_bytes=64 * 2**20))
    assert extract_file(path).text == "memory"


def test_killed_worker_is_replaced(tmp_path: Path) -> None:
    from indexing.extract.worker import POOL

    path = make_pdf(tmp_path / "k.pdf", [["still fine"]])
    extract_file(path)
    for worker in list(POOL._idle):
        worker.process.kill()
        worker.process.join()
    assert extract_file(path).text == "still fine"


def test_parallel_extraction_from_threads(tmp_path: Path) -> None:
    paths = [make_pdf(tmp_path / f"t{n}.pdf", [[f"thread {n}"]]) for n in range(6)]
    results: dict[int, str] = {}

    def run(n: int) -> None:
        results[n] = extract_file(paths[n]).text

    threads = [threading.Thread(target=run, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert results == {n: f"thread {n}" for n in range(6)}


def test_worker_never_writes_to_stdout_nor_reads_stdin(tmp_path: Path) -> None:
    """Under the stdio transport stdout/stdin carry the MCP protocol: the worker must not touch them."""
    import subprocess
    import sys

    broken = make_truncated_pdf(tmp_path / "cut.pdf", [["repaired text"]])
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from indexing.extract import extract_file\n"
        "if __name__ == '__main__':\n"
        f"    result = extract_file(Path({str(broken)!r}))\n"
        "    print('RESULT', result.text, len(result.warnings))\n"
        "    print('STDIN', sys.stdin.read())\n"
    )
    (tmp_path / "run.py").write_text(script)
    done = subprocess.run(
        [sys.executable, str(tmp_path / "run.py")], input="protocol bytes", capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "RESULT repaired text 1\nSTDIN protocol bytes\n"


def test_worker_is_recycled_after_many_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from indexing.extract import worker as worker_module

    monkeypatch.setattr(worker_module, "TASKS_PER_WORKER", 2)
    path = make_pdf(tmp_path / "r.pdf", [["recycle"]])
    pids = set()
    for _ in range(4):
        assert extract_file(path).text == "recycle"
        pids |= {w.process.pid for w in worker_module.POOL._idle}
    assert len(worker_module.POOL._idle) <= 1 and len(pids) >= 2
