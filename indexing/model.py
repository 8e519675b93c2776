"""Data passed between extraction, chunking and the index (the contract between them).

Offsets are Python `str` indices (code points) into `Extracted.text`, end exclusive.
For plain-text files `Extracted.text` is exactly the decoded file content.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field


def is_secret_store(rule: str | None) -> bool:
    """Whether a secret rule's id is a deny rule (a secret store no tool reads), not one the user may approve."""
    return rule is not None and rule.endswith("secret_denied")


@dataclass(frozen=True)
class SecretFilter:
    """Paths the index never holds (the approval policy's secret paths). `named(path)`: the id of the rule
    that makes an absolute path a secret, or None; `key` changes when the rules do (the whole index is
    checked again then)."""

    named: Callable[[str], str | None]
    key: str

    def rule(self, path: str | os.PathLike[str]) -> str | None:
        """The rule making `path` a secret: by its own name or, for a symlink, its target's."""
        text = os.fspath(path)
        return self.named(text) or (self.named(os.path.realpath(text)) if os.path.islink(text) else None)


@dataclass(frozen=True)
class ExtractionLimits:
    """Bounds for reading one file (all configurable through Settings)."""

    max_file_bytes: int = 200 * 1024 * 1024
    max_extracted_chars: int = 20_000_000
    max_decompressed_bytes: int = 512 * 1024 * 1024
    timeout_seconds: float = 120.0
    max_zip_entries: int = 20_000  # zipped formats (DOCX, EPUB, ODT, ...): more entries than this is refused
    max_compression_ratio: float = 300.0  # per zip entry over 1 MiB uncompressed (zip bombs)
    max_worker_memory_bytes: int = 2 * 1024 * 1024 * 1024  # RLIMIT_AS of the extraction worker
    ocr_languages: str = "eng+chi_sim"  # Tesseract languages for scanned PDF pages; "" turns OCR off


@dataclass(frozen=True)
class Unit:
    """One extracted unit (a page, a slide, a batch of sheet rows, a section, a paragraph)."""

    start: int
    end: int
    kind: str  # "page" | "slide" | "row" (a sheet row) | "section" | "paragraph" | "text"
    page: int | None = None  # 1-based PDF page
    slide: int | None = None  # 1-based slide
    sheet: str | None = None
    rows: tuple[int, int] | None = None  # 1-based inclusive row range in the sheet
    heading_path: tuple[str, ...] = ()


@dataclass
class Extracted:
    """A whole document's extracted text plus where each part came from."""

    text: str
    units: list[Unit]
    kind: str  # "pdf" | "docx" | "xlsx" | "pptx" | "epub" | "odt" | "ods" | "odp" | "html" | "csv" | "eml" | "text"
    warnings: list[str] = field(default_factory=list)  # e.g. "PDF was repaired: text may be partial"
    encoding: str | None = None  # for text files
    title: str | None = None  # document title from metadata, when the file has one


@dataclass(frozen=True)
class ChunkingOptions:
    max_chars: int = 500  # CJK text stays inside a 512-token embedding window (multilingual-e5)
    overlap_chars: int = 80
    min_chars: int = 50


@dataclass(frozen=True)
class Chunk:
    index: int  # position in the document, 0-based
    start: int
    end: int
    text: str  # == Extracted.text[start:end]
    heading: str = ""  # heading path joined with " > "
    page: int | None = None
    slide: int | None = None
    sheet: str | None = None
    rows: tuple[int, int] | None = None
