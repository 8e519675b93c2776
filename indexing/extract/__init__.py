"""Document extraction: `extract_file(path, limits) -> Extracted`, hardened against hostile files.

Kind is decided by the extension and confirmed by the file's magic bytes. Plain-text files
(`text.py`) are decoded in-process; every other kind (PDF, DOCX/XLSX/PPTX, EPUB, ODT/ODS/ODP, HTML,
CSV/TSV, e-mail) is parsed in a reused worker process (`worker.py`) under memory and time limits,
after zip checks (`safety.py`) for zipped formats.

Policy for the limits (all in ExtractionLimits):
- larger than `max_file_bytes` → LimitExceeded (nothing is read);
- more text than `max_extracted_chars` → the text is cut there, with a warning (not an error);
- zip entries / declared uncompressed size / compression ratio over the limits, or XML with a
  DTD → ExtractionError / LimitExceeded before any parser runs;
- slower than `timeout_seconds` → the worker is killed and LimitExceeded is raised.
A 0-byte file is not an error: it gives an empty Extracted (no units) with the warning "file is empty".
Every failure is a GeneralAgentError whose message names the file and what is wrong with it.

Opening: with `fd` (a descriptor the caller opened race-free, foundation/safe_open.py) only that
descriptor is read (workers receive a copy of it); without, the path is opened once with
O_NOFOLLOW and that descriptor is used throughout (size, magic bytes, content).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from foundation.errors import ExtractionError, LimitExceeded, NotFound
from indexing.extract.image_file import IMAGE_EXTENSIONS
from indexing.extract.render import RenderedPage
from indexing.model import Extracted, ExtractionLimits

__all__ = [
    "DOCUMENT_EXTENSIONS",
    "MARKUP_EXTENSIONS",
    "SUPPORTED_FORMATS",
    "SUPPORTED_EXTENSIONS",
    "TEXT_EXTENSIONS",
    "check_container",
    "detect_kind",
    "extract_file",
    "is_supported",
    "reads_as_source",
    "render_pdf_page",
    "warm_up",
]

# Binary documents (never edited as text).
DOCUMENT_EXTENSIONS = {
    ".pdf": "pdf", ".docx": "docx", ".xlsx": "xlsx", ".xlsm": "xlsx", ".pptx": "pptx", ".epub": "epub",
    ".odt": "odt", ".ods": "ods", ".odp": "odp",
    **IMAGE_EXTENSIONS,  # pictures: their words read by OCR (image_file.py)
}
# Text files whose index text is read by their structure (read_file and edit_file see their source).
MARKUP_EXTENSIONS = {
    ".html": "html", ".htm": "html", ".xhtml": "html", ".csv": "csv", ".tsv": "csv", ".eml": "eml",
}
ZIP_KINDS = frozenset({"docx", "xlsx", "pptx", "epub", "odt", "ods", "odp"})
_TEXT_SUFFIXES = """
    .txt .text .md .markdown .mdown .mkd .rst .adoc .asciidoc .org .tex .bib .srt .vtt
    .json .jsonl .ndjson .geojson .log .out .xml .xsd .xsl .css .scss .sass .less
    .yaml .yml .toml .ini .cfg .conf .properties .diff .patch
    .py .pyi .pyx .ipynb .js .jsx .mjs .cjs .ts .tsx .mts .cts .vue .svelte .go .rs .java .kt .kts .scala
    .groovy .gradle .c .h .cc .cpp .cxx .hpp .hh .hxx .cs .fs .swift .m .mm .rb .php .pl .pm .lua .r
    .jl .dart .ex .exs .erl .hs .ml .clj .elm .zig .nim .v .sv .vhd .sh .bash .zsh .fish .ps1 .psm1
    .bat .cmd .sql .graphql .gql .proto .thrift .cmake .mk .tf .hcl .nix .dockerfile
"""
TEXT_EXTENSIONS = frozenset(_TEXT_SUFFIXES.split())
SUPPORTED_EXTENSIONS = frozenset(TEXT_EXTENSIONS | DOCUMENT_EXTENSIONS.keys() | MARKUP_EXTENSIONS.keys())
# Extension-less files that are text by convention (compared lower-case).
_TEXT_NAME_WORDS = (
    "readme license licence copying authors changelog changes notice makefile dockerfile containerfile "
    "gemfile rakefile procfile vagrantfile jenkinsfile justfile"
)
TEXT_NAMES = frozenset(_TEXT_NAME_WORDS.split())
_MAGIC_HEAD = 1024


def detect_kind(path: Path) -> str:
    """The extractor's kind ('pdf', 'docx', 'html', 'csv', 'eml', ..., 'text') from the name;
    ExtractionError when unsupported."""
    suffix = path.suffix.lower()
    kind = DOCUMENT_EXTENSIONS.get(suffix) or MARKUP_EXTENSIONS.get(suffix)
    if kind:
        return kind
    if suffix in TEXT_EXTENSIONS or path.name.lower() in TEXT_NAMES:
        return "text"
    raise ExtractionError(
        f"{path.name}: unsupported file type ({suffix or 'no extension'}). Supported: {SUPPORTED_FORMATS}."
    )


SUPPORTED_FORMATS = (
    "PDF, DOCX, XLSX, PPTX, EPUB, ODT, ODS, ODP, HTML, CSV/TSV, e-mail (.eml), pictures (PNG, JPEG, GIF, WebP; "
    "by OCR) and text files (.txt, .md, .json, source code, ...)"
)


def reads_as_source(path: Path | str) -> bool:
    """Whether read_file shows the file's own text (plain text and markup such as HTML and CSV)
    rather than extracted text."""
    path = Path(path)
    return detect_kind(path) in ("text", "html", "csv") if is_supported(path) else False


def is_supported(path: Path | str) -> bool:
    path = Path(path)
    suffix = path.suffix.lower()
    return suffix in SUPPORTED_EXTENSIONS or (not suffix and path.name.lower() in TEXT_NAMES)


def extract_file(
    path: Path,
    limits: ExtractionLimits | None = None,
    *,
    should_cancel: Callable[[], bool] | None = None,
    fd: int | None = None,
) -> Extracted:
    """Extract one file's text and units. Raises ExtractionError / LimitExceeded / NotFound / Cancelled.

    Thread-safe; `should_cancel` is polled while a worker parses the file (then the worker is killed).
    `fd`: read this open descriptor (the caller keeps and closes it) instead of opening `path`.
    """
    path = Path(path)
    limits = limits or ExtractionLimits()
    kind = detect_kind(path)
    if fd is None:
        own = _open_plain(path)
        try:
            return _extract_fd(path, kind, limits, should_cancel, own)
        finally:
            os.close(own)
    return _extract_fd(path, kind, limits, should_cancel, fd)


def _extract_fd(
    path: Path, kind: str, limits: ExtractionLimits, should_cancel: Callable[[], bool] | None, fd: int
) -> Extracted:
    size = _file_size(path, fd)
    if size > limits.max_file_bytes:
        raise LimitExceeded(
            f"{path.name} is {size / 2**20:,.1f} MiB, over the {limits.max_file_bytes / 2**20:,.0f} MiB limit "
            "(max_file_bytes); raise the limit to read or index it."
        )
    if size == 0:
        return Extracted(text="", units=[], kind=kind, warnings=["file is empty"])
    if kind == "text":
        from indexing.extract.text import extract_text_file

        try:
            return extract_text_file(path, limits, fd=fd)
        except OSError as exc:
            raise ExtractionError(f"{path.name} cannot be read ({exc.strerror or exc}).") from exc
    _check_magic(path, kind, fd)
    from indexing.extract.worker import POOL

    return POOL.run(kind, path, limits, should_cancel, fd=fd)


def render_pdf_page(path: Path, page: int, side: int, limits: ExtractionLimits, *, fd: int,
                    should_cancel: Callable[[], bool] | None = None, unit: str = "page") -> RenderedPage:
    """Draw PDF page `page` (1-based) with its longest side `side` px, in an extraction worker under
    `limits` (size, memory, time). The caller opened `fd` race-free and keeps it. `path` names the file in
    errors (a deck converted to PDF: the deck, with `unit` "slide")."""
    size = _file_size(path, fd)
    if size > limits.max_file_bytes:
        raise LimitExceeded(f"{path.name} is {size / 2**20:,.1f} MiB, over the {limits.max_file_bytes / 2**20:,.0f} "
                            "MiB limit (max_file_bytes); raise the limit to read it.")
    _check_magic(path, "pdf", fd)
    from indexing.extract.render import render_kind
    from indexing.extract.worker import POOL

    return POOL.rendered(render_kind(page, side, unit), path, limits, fd=fd, should_cancel=should_cancel)


def check_container(path: Path, kind: str, limits: ExtractionLimits, *, fd: int) -> int:
    """The checks extraction makes before any parser runs (size, magic bytes, a zipped kind's zip checks), on
    the caller's open `fd`, for a file another program reads (a deck LibreOffice converts); returns its size."""
    size = _file_size(path, fd)
    if size > limits.max_file_bytes:
        raise LimitExceeded(f"{path.name} is {size / 2**20:,.1f} MiB, over the {limits.max_file_bytes / 2**20:,.0f} "
                            "MiB limit (max_file_bytes); raise the limit to read it.")
    _check_magic(path, kind, fd)
    if kind in ZIP_KINDS:
        from indexing.extract.safety import check_office_zip

        with os.fdopen(os.dup(fd), "rb") as source:
            check_office_zip(path, kind, limits, source)
    return size


def warm_up() -> None:
    """Start one worker and import the parsers in it (call from a background thread at start-up)."""
    from indexing.extract.worker import POOL

    POOL.run("warm", Path("warm-up"), ExtractionLimits())




def _open_plain(path: Path) -> int:
    """Open `path` read-only without following a symlink as its last component (and without
    blocking on a FIFO)."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError as exc:
        raise NotFound(f"{path.name} does not exist.") from exc
    except OSError as exc:
        raise ExtractionError(f"{path.name} cannot be read ({exc.strerror or exc}).") from exc
    os.set_blocking(fd, True)
    return fd


def _file_size(path: Path, fd: int) -> int:
    import stat

    try:
        info = os.fstat(fd)
    except OSError as exc:
        raise ExtractionError(f"{path.name} cannot be read ({exc.strerror or exc}).") from exc
    if not stat.S_ISREG(info.st_mode):
        raise ExtractionError(f"{path.name} is not a regular file.")
    return info.st_size


def _check_magic(path: Path, kind: str, fd: int) -> None:
    try:
        head = os.pread(fd, _MAGIC_HEAD, 0)
    except OSError as exc:
        raise ExtractionError(f"{path.name} cannot be read ({exc.strerror or exc}).") from exc
    if kind == "pdf":
        if b"%PDF-" not in head:
            raise ExtractionError(f"{path.name} is not a PDF (no %PDF header); check the file or its extension.")
        return
    if kind not in ZIP_KINDS:
        return
    if head.startswith(b"\xd0\xcf\x11\xe0"):
        raise ExtractionError(
            f"{path.name} is password-protected or an old binary Office file renamed to .{kind} "
            f"(it is an OLE container, not a zip); remove the password or save it as .{kind}, then index it again."
        )
    if not head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        raise ExtractionError(f"{path.name} is not a {kind.upper()} file (not a zip container); check the file.")
