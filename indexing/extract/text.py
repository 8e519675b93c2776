"""Plain-text extraction, done in-process: encoding detection, binary detection, Markdown sections.

Decoding order: BOM (UTF-8, UTF-32, UTF-16) → UTF-16 without BOM (NUL pattern) → strict UTF-8 →
strict GB18030 → UTF-8 with undecodable bytes replaced (with a warning). The extracted text is
exactly the decoded content (a BOM is not content), so offsets point into the file as a reader
sees it. Files whose bytes look binary (NULs, many control characters) are refused. Markdown
files get one "section" Unit per ATX (`#`) or setext heading, with the heading path.
"""

from __future__ import annotations

import codecs
import re
from pathlib import Path
from typing import IO

from foundation.errors import ExtractionError
from indexing.model import Extracted, ExtractionLimits, Unit

_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
# Bytes that never occur in text: C0 controls except \t \n \v \f \r and ESC (ANSI colours in logs).
_CONTROL = bytes(b for b in range(32) if b not in (9, 10, 11, 12, 13, 27))
_NOT_CONTROL = bytes(b for b in range(256) if b not in _CONTROL)
_SAMPLE = 64 * 1024
MARKDOWN_EXTENSIONS = {".md", ".markdown", ".mdown", ".mkd"}


def extract_text_file(path: Path, limits: ExtractionLimits, fd: int | None = None) -> Extracted:
    """Read and decode one text file (the caller has checked its size); with `fd`, read that open
    descriptor (from its start) instead of opening `path`."""
    # 4 bytes per character is the worst case of every supported encoding: read no more than needed.
    byte_cap = limits.max_extracted_chars * 4 + 4
    if fd is not None:
        from foundation.safe_open import read_fd

        data = read_fd(fd, byte_cap + 1)
    else:
        with path.open("rb") as handle:
            data = handle.read(byte_cap + 1)
    more = len(data) > byte_cap
    data = data[:byte_cap]
    text, encoding, warnings = decode_bytes(data, path.name, final=not more)
    if more or len(text) > limits.max_extracted_chars:
        text = text[: limits.max_extracted_chars]
        warnings.append(
            f"text truncated at {limits.max_extracted_chars:,} characters (max_extracted_chars); "
            "the rest of the file is left out"
        )
    if not text:
        warnings.append("file is empty")
        return Extracted(text="", units=[], kind="text", warnings=warnings, encoding=encoding)
    if path.suffix.lower() in MARKDOWN_EXTENSIONS:
        units = markdown_units(text)
    else:
        units = [Unit(start=0, end=len(text), kind="text")]
    return Extracted(text=text, units=units, kind="text", warnings=warnings, encoding=encoding)


def read_source(path: Path, source: IO[bytes] | None, byte_cap: int) -> tuple[bytes, bool]:
    """Up to `byte_cap` bytes of `source` (an open file, from its position) or of `path`, and whether
    there was more."""
    if source is not None:
        data = source.read(byte_cap + 1)
    else:
        with path.open("rb") as handle:
            data = handle.read(byte_cap + 1)
    return data[:byte_cap], len(data) > byte_cap


def decode_bytes(data: bytes, name: str, final: bool = True) -> tuple[str, str, list[str]]:
    """Decode file bytes → (text, encoding, warnings). Raises ExtractionError for binary data."""
    if not data:
        return "", "utf-8", []
    guess = next((encoding for bom, encoding in _BOMS if data.startswith(bom)), None)
    guess = guess or _utf16_without_bom(data[:_SAMPLE])
    if guess:
        text, warnings = _decode_noting(data, guess, final)
        return text, guess, warnings
    _refuse_binary(data, name)
    for encoding in ("utf-8", "gb18030"):
        try:
            return _decode(data, encoding, final, errors="strict"), encoding, []
        except UnicodeDecodeError:
            continue
    return (
        _decode(data, "utf-8", final, errors="replace"),
        "utf-8",
        ["some bytes are not valid UTF-8 or GB18030 and were replaced with U+FFFD"],
    )


def _decode(data: bytes, encoding: str, final: bool, errors: str) -> str:
    decoder = codecs.getincrementaldecoder(encoding)(errors=errors)
    return decoder.decode(data, final=final)


def _decode_noting(data: bytes, encoding: str, final: bool) -> tuple[str, list[str]]:
    """Strict first (one pass for good data); bad bytes are then replaced with U+FFFD, with a note."""
    try:
        return _decode(data, encoding, final, errors="strict"), []
    except UnicodeDecodeError:
        note = f"some bytes are not valid {encoding} and were replaced with U+FFFD"
        return _decode(data, encoding, final, errors="replace"), [note]


def _utf16_without_bom(sample: bytes) -> str | None:
    """UTF-16 text without a BOM has NULs in every other byte (ASCII-range characters)."""
    if len(sample) < 8 or b"\x00" not in sample:
        return None
    even, odd = sample[0::2], sample[1::2]
    even_nul, odd_nul = even.count(0) / len(even), odd.count(0) / len(odd)
    if odd_nul > 0.4 and even_nul < 0.05:
        return "utf-16-le"
    if even_nul > 0.4 and odd_nul < 0.05:
        return "utf-16-be"
    return None


_BINARY_KINDS = (
    (b"%PDF-", "a PDF saved under another extension: rename it to .pdf and its text is extracted"),
    (b"PK\x03\x04", "a zip file: a DOCX, XLSX or PPTX saved under another extension (rename it to that "
     "extension and its text is extracted), or an archive (unpack it first)"),
    (b"\xd0\xcf\x11\xe0", "a legacy Office file (.doc, .xls, .ppt): save it as DOCX, XLSX or PPTX and its text "
     "is extracted"),
    (b"\x7fELF", "an executable program"),
    (b"\x89PNG", "a PNG image"),
    (b"GIF8", "a GIF image"),
    (b"\xff\xd8\xff", "a JPEG image"),
)
_TEXT_SOURCES = "Text comes only from text files and from PDF, DOCX, XLSX and PPTX documents."


def _refuse_binary(data: bytes, name: str) -> None:
    """ExtractionError saying what the file is (by its magic bytes, when known) and where text comes from."""
    sample = data[:_SAMPLE]
    what = next((kind for magic, kind in _BINARY_KINDS if sample.startswith(magic)), None)
    if what is None and b"\x00" in sample:
        what = "it contains NUL bytes"
    if what is None and len(sample) - len(sample.translate(None, _CONTROL)) > max(8, len(sample) // 20):
        what = "many control bytes"
    if what is not None:
        raise ExtractionError(f"{name} is binary, not text ({what}). {_TEXT_SOURCES}")


_FENCE = re.compile(r"^[ ]{0,3}(`{3,}|~{3,})")
_ATX = re.compile(r"^[ ]{0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^[ ]{0,3}(=+|-+)[ \t]*$")


def markdown_units(text: str) -> list[Unit]:
    """One "section" Unit per Markdown heading (ATX or setext), outside fenced code blocks."""
    headings = _markdown_headings(text)
    units: list[Unit] = []
    path: list[tuple[int, str]] = []
    previous_start = 0
    previous_path: tuple[str, ...] = ()
    for start, level, title in headings:
        if start > previous_start:
            units.append(Unit(start=previous_start, end=start, kind="section", heading_path=previous_path))
        while path and path[-1][0] >= level:
            path.pop()
        path.append((level, title))
        previous_start, previous_path = start, tuple(t for _, t in path)
    units.append(Unit(start=previous_start, end=len(text), kind="section", heading_path=previous_path))
    return [u for u in units if text[u.start : u.end].strip()]


def _markdown_headings(text: str) -> list[tuple[int, int, str]]:
    """(offset of the heading's first line, level, title) for each heading."""
    found: list[tuple[int, int, str]] = []
    fence: str | None = None
    pos = 0
    prev_start, prev_line = -1, ""
    for line in text.splitlines(keepends=True):
        stripped = line.rstrip("\r\n")
        fence_match = _FENCE.match(stripped)
        if fence is not None:
            if fence_match and fence_match.group(1)[0] == fence[0] and len(fence_match.group(1)) >= len(fence):
                fence = None
            prev_line = ""
        elif fence_match:
            fence, prev_line = fence_match.group(1), ""
        elif len(stripped) < 1000 and (atx := _ATX.match(stripped)):
            found.append((pos, len(atx.group(1)), (atx.group(2) or "").strip()))
            prev_line = ""
        elif prev_line.strip() and _SETEXT.match(stripped) and not _is_list_or_quote(prev_line):
            found.append((prev_start, 1 if stripped.strip()[0] == "=" else 2, prev_line.strip()))
            prev_line = ""
        else:
            prev_start, prev_line = pos, stripped
        pos += len(line)
    return found


def _is_list_or_quote(line: str) -> bool:
    return bool(re.match(r"^\s*([-*+>]|\d+[.)])\s", line)) or len(line) > 1000
