"""File tools confined to the workspace roots: read (text and documents, paged), write, edit,
list and find. Every path goes through `foundation.paths.resolve_path`; approval is decided at
the dispatch point, never here.

read_file paging: `offset`/`next_offset` are character offsets into the file's text (for
documents, the text `indexing.extract` produces). A text file up to 100 KB comes whole, a
larger one in pages of up to 50,000 characters cut at line ends; documents come in pages cut
at unit boundaries (PDF 10 pages / 30K chars, DOCX 30K chars, XLSX 3 sheets / 20K, PPTX 15
slides / 25K). Every page is also sized so that, JSON-escaped, it uses at most 80% of
max_result_tokens: the dispatcher then never cuts it, and pages join back to the whole text.
Extractions are cached per (path, mtime, size) so paging does not re-parse a document.
"""

from __future__ import annotations

import os
import stat
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, Field

from foundation.bounding import dumps, estimate_tokens, past_end_note
from foundation.errors import InvalidInput, LimitExceeded, NotFound, PathNotAllowed
from foundation.filewalk import scan_folder, walk_files
from foundation.globs import GlobPattern
from foundation.paths import (
    INDEX_DIR_NAMES,
    display_path,
    open_folder,
    open_for_read,
    resolve_path,
    roots_for,
    server_data_dirs,
)
from foundation.pictures import IMAGE_FORMATS, WithPictures
from foundation.safe_open import opened, read_fd
from tools.atomic_files import atomic_write_at, version_at
from tools.runtime import CallContext, Runtime, Service
from tools.skills import skill_hint
from tools.text_diff import MAX_DIFF_CHARS, MAX_DIFF_LINES, count_or_raise, small_diff  # noqa: F401 (files.MAX_*)

TEXT_WHOLE_BYTES = 100_000
TEXT_PAGE_CHARS = 50_000
# format -> (max units per page, max characters per page); units: pages, sheets, slides
DOC_PREVIEW: dict[str, tuple[int | None, int]] = {
    "pdf": (10, 30_000),
    "docx": (None, 30_000),
    "xlsx": (3, 20_000),
    "pptx": (15, 25_000),
    "odt": (None, 30_000),
    "epub": (None, 30_000),
    "eml": (None, 30_000),
    "ods": (3, 20_000),
    "odp": (15, 25_000),
}
_PAGED_BY = {"pdf": "page", "pptx": "slide", "odp": "slide", "xlsx": "sheet", "ods": "sheet"}
RESULT_SHARE = 0.8  # share of max_result_tokens a page of content may use
MAX_EDIT_BYTES = 10 * 1024 * 1024
MAX_WRITE_CHARS = 10_000_000
MAX_LIST_SCAN = 100_000
FIND_MAX_ENTRIES = 200_000
FIND_MAX_DEPTH = 64

PathArg = Annotated[str, Field(description="File path (relative to the workspace root).")]


# -- read_file --------------------------------------------------------------------------------


class ReadFileResult(WithPictures):  # an image file's picture goes as image content (tools/images.py)
    path: str
    kind: str = Field(description="text, pdf, docx, xlsx, pptx, epub, odt, ods, odp, eml or image.")
    content: str
    next_offset: int | None = Field(description="Offset of the next page; null at the end.")
    total_chars: int
    location: str | None = Field(default=None, description="Pages, slides, sheets or lines shown.")
    warnings: list[str] = Field(default_factory=list)
    skill_hint: str | None = Field(default=None, description="A skill's instructions for this file type (or where).")  # skills


class _ExtractCache:
    """Recent extractions, keyed by (path, mtime, size), so paging does not re-extract.

    Bounded by total characters (the newest entry is always kept)."""

    def __init__(self, max_chars: int = 20_000_000) -> None:
        self.max_chars = max_chars
        self.items: OrderedDict[tuple[str, int, int], Any] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: tuple[str, int, int], make: Callable[[], Any]) -> Any:
        with self.lock:
            if key in self.items:
                self.items.move_to_end(key)
                return self.items[key]
        value = make()
        with self.lock:
            self.items[key] = value
            while len(self.items) > 1 and sum(len(v.text) for v in self.items.values()) > self.max_chars:
                self.items.popitem(last=False)
        return value


def _extract_any(real: Path, fd: int, limits: Any, call: CallContext) -> Any:
    """extract_file for supported types; other files are tried as text (binary ones are refused).
    Reads the opened descriptor `fd`, never the path again."""
    from indexing.extract import extract_file, is_supported, reads_as_source
    from indexing.model import Extracted

    if is_supported(real) and not reads_as_source(real):
        return extract_file(real, limits, should_cancel=lambda: call.cancelled, fd=fd)
    from indexing.extract.text import extract_text_file

    size = os.fstat(fd).st_size
    if size > limits.max_file_bytes:
        raise LimitExceeded(f"{real.name} is {size} bytes, over max_file_bytes ({limits.max_file_bytes}).")
    if size == 0:
        return Extracted(text="", units=[], kind="text", warnings=["file is empty"])
    return extract_text_file(real, limits, fd=fd)


def _extract(rt: Runtime, real: Path, fd: int, call: CallContext) -> Any:
    limits = rt.extraction_limits()
    cache = _EXTRACT_CACHE.of(rt)
    info = os.fstat(fd)
    key = (str(real), info.st_mtime_ns, info.st_size)
    return cache.get(key, lambda: _extract_any(real, fd, limits, call))


def _json_tokens(text: str) -> int:
    """Estimated tokens of `text` as it travels: JSON-escaped (quotes, backslashes, controls)."""
    return estimate_tokens(dumps(text))


def _budget_chars(text: str, start: int, end: int, budget_tokens: int) -> int:
    """The largest end' <= end whose slice fits the token budget once JSON-escaped (binary search),
    so the dispatcher never has to cut a page (a cut page would lose text between pages)."""
    if _json_tokens(text[start:end]) <= budget_tokens:
        return end
    lo, hi = start + 1, end
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _json_tokens(text[start:mid]) <= budget_tokens:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _snap_to_newline(text: str, start: int, end: int) -> int:
    """Move a cut back to just after a line break when one is in the last fifth of the page."""
    if end >= len(text):
        return end
    cut = text.rfind("\n", start + (end - start) * 4 // 5, end)
    return cut + 1 if cut > start else end


def _part_key(kind: str, unit: Any) -> Any:
    attribute = _PAGED_BY.get(kind)
    return getattr(unit, attribute) if attribute else None


def _document_end(extracted: Any, offset: int, max_units: int | None, max_chars: int) -> int:
    """Where a document page starting at `offset` ends: at a unit boundary within the limits."""
    text, units, kind = extracted.text, extracted.units, extracted.kind
    parts: set[Any] = set()
    end = offset
    for unit in units:
        if unit.end <= offset:
            continue
        key = _part_key(kind, unit)
        new_part = key is not None and key not in parts
        if max_units is not None and new_part and len(parts) >= max_units:
            break
        if unit.end - offset > max_chars:
            return end if end > offset else min(len(text), offset + max_chars)
        parts.add(key)
        end = unit.end
    else:
        if len(text) - offset <= max_chars:
            return len(text)
    return end if end > offset else min(len(text), offset + max_chars)


def _location(extracted: Any, start: int, end: int) -> str | None:
    units = [u for u in extracted.units if u.start < end and u.end > start]
    if not units:
        return None
    kind = extracted.kind
    if kind in ("pdf", "pptx", "odp"):
        word, attr = ("pages", "page") if kind == "pdf" else ("slides", "slide")
        numbers = [getattr(u, attr) for u in units if getattr(u, attr) is not None]
        total = max((getattr(u, attr) or 0 for u in extracted.units), default=0)
        return f"{word} {min(numbers)}-{max(numbers)} of {total}" if numbers else None
    if kind in ("xlsx", "ods"):
        sheets = list(dict.fromkeys(u.sheet for u in units if u.sheet))
        return "sheets: " + ", ".join(sheets) if sheets else None
    first = next(i for i, u in enumerate(extracted.units) if u is units[0])
    word = "sections" if kind in ("docx", "odt", "epub", "html") else "parts"
    return f"{word} {first + 1}-{first + len(units)} of {len(extracted.units)}"


def _text_location(text: str, start: int, end: int) -> str:
    first = text.count("\n", 0, start) + 1
    last = first + text.count("\n", start, max(start, end - 1))
    return f"lines {first}-{last}"


def read_file(
    path: PathArg,
    offset: Annotated[int, Field(ge=0, description="Character offset (a next_offset).")] = 0,
    limit: Annotated[int | None, Field(ge=200, le=TEXT_PAGE_CHARS, description="Max characters per page.")] = None,
    *,
    rt: Runtime,
    call: CallContext,
) -> ReadFileResult:
    """Read a workspace file: text, a document's text, or a picture (PNG/JPEG/GIF/WebP) as an image.
    Large files come in pages: call again with offset=next_offset until it is null."""
    session = call.session_id
    real = resolve_path(rt.settings, path, must_exist=True, session_id=session)
    if real.is_dir():
        raise InvalidInput(f"{path!r} is a folder. Call list_workspace_files with directory={path!r} "
                           '(enable_tools(["list_workspace_files"]) first if it is not listed).')
    with opened(open_for_read(rt.settings, real, session, shown=path, secrets=rt.secret_paths)) as fd:
        if real.suffix.lower() in IMAGE_FORMATS:
            from tools.images import read_image

            shown = read_image(rt, real, fd)
            return ReadFileResult(
                path=display_path(real, roots_for(rt.settings, session)), kind="image", content=shown.text,
                next_offset=None, total_chars=len(shown.text), location=shown.location, warnings=shown.warnings,
            ).with_pictures([shown.picture])
        small = os.fstat(fd).st_size <= TEXT_WHOLE_BYTES
        extracted = _extract(rt, real, fd, call)
    text: str = extracted.text
    if offset > len(text):
        raise InvalidInput(f"offset {offset} is past the end of {path!r} ({len(text)} characters). Use 0.")
    budget = int(rt.settings.max_result_tokens * RESULT_SHARE)
    if extracted.kind in DOC_PREVIEW:
        max_units, max_chars = DOC_PREVIEW[extracted.kind]
        end = _document_end(extracted, offset, max_units, min(max_chars, limit or max_chars))
    elif offset == 0 and limit is None and small:
        end = len(text)
    else:
        end = min(len(text), offset + (limit or TEXT_PAGE_CHARS))
    fitted = _budget_chars(text, offset, end, budget)
    if fitted < end:
        end = _snap_to_newline(text, offset, fitted)
    elif end < len(text) and extracted.kind not in DOC_PREVIEW:
        end = _snap_to_newline(text, offset, end)
    roots = roots_for(rt.settings, session)
    location = _location(extracted, offset, end) if extracted.units and extracted.kind != "text" else None
    return ReadFileResult(
        path=display_path(real, roots), kind=extracted.kind, content=text[offset:end],
        next_offset=end if end < len(text) else None, total_chars=len(text),
        location=location or _text_location(text, offset, end), warnings=list(extracted.warnings),
        skill_hint=skill_hint(rt, real, session) if offset == 0 else None,  # skills: the file-type hint
    )


# -- write_file and edit_file -----------------------------------------------------------------


class WriteFileResult(BaseModel):
    path: str
    bytes_written: int
    created: bool = Field(description="False when an existing file was replaced.")


def _writable_target(rt: Runtime, path: str, session: str | None) -> Path:
    real = resolve_path(rt.settings, path, for_write=True, session_id=session)
    if real.is_dir():
        raise InvalidInput(f"{path!r} is a folder; give a file path inside it.")
    if real.exists() and not real.is_file():
        raise InvalidInput(f"{path!r} is not a regular file and cannot be written.")
    return real


def write_file(
    path: PathArg,
    content: Annotated[str, Field(max_length=MAX_WRITE_CHARS, description="The whole new content.")],
    *,
    rt: Runtime,
    call: CallContext,
) -> WriteFileResult:
    """Create or overwrite a text file in the workspace (creates parent folders)."""
    session = call.session_id
    real = _writable_target(rt, path, session)
    data = _utf8(content, "content")
    with opened(open_folder(rt.settings, real.parent, session, create=True, shown=path,
                            secrets=rt.secret_paths)) as dir_fd:
        created = version_at(dir_fd, real.name) is None
        atomic_write_at(dir_fd, real.name, data, shown=path)
    return WriteFileResult(path=display_path(real, roots_for(rt.settings, session)), bytes_written=len(data),
                           created=created)


def _utf8(text: str, name: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"{name} contains unpaired surrogate characters, which are not valid text; "
                           "remove them.") from None


class EditFileResult(BaseModel):
    path: str
    replacements: int
    diff: str = Field(description="Unified diff (shortened when long).")


def _read_utf8(fd: int, path: str) -> tuple[str, bool]:
    from indexing.extract import DOCUMENT_EXTENSIONS

    kind = DOCUMENT_EXTENSIONS.get(Path(path).suffix.lower())
    if kind == "image":
        raise InvalidInput(f"{path!r} is a picture, not a text file; edit_file edits text files only. See it with "
                           "read_file.")
    if kind is not None:  # its bytes may even decode (an uncompressed PDF); never edit or replace them as text
        raise InvalidInput(f"{path!r} is a {kind.upper()} document, not a text file; edit_file edits text files "
                           "only, and write_file would replace the whole document by plain text. Read it with "
                           "read_file; to change it, write the edited text to a new file (e.g. a .md) and leave "
                           "the document as it is.")
    size = os.fstat(fd).st_size
    if size > MAX_EDIT_BYTES:
        raise LimitExceeded(f"{path!r} is {size} bytes; edit_file edits files up to {MAX_EDIT_BYTES} bytes. "
                            "Use write_file to replace it.")
    raw = read_fd(fd, MAX_EDIT_BYTES + 1)
    bom = raw.startswith(b"\xef\xbb\xbf")
    try:
        return raw[3 if bom else 0 :].decode("utf-8"), bom
    except UnicodeDecodeError:
        raise InvalidInput(f"{path!r} is not UTF-8 text; edit_file edits UTF-8 text only (read it with read_file, "
                           "then replace it with write_file; bytes that read_file showed as U+FFFD are then "
                           "replaced for good).") from None


def edit_file(
    path: PathArg,
    old_string: Annotated[str, Field(min_length=1, description="Exact text to replace.")],
    new_string: Annotated[str, Field(description="Replacement text.")],
    replace_all: Annotated[bool, Field(description="Replace every occurrence.")] = False,
    *,
    rt: Runtime,
    call: CallContext,
) -> EditFileResult:
    """Replace exact text in a workspace file; old_string must occur once unless replace_all."""
    session = call.session_id
    edit = _planned_edit(rt, session, path, old_string, new_string, replace_all)
    updated = edit.text.replace(edit.old, edit.new)
    data = (b"\xef\xbb\xbf" if edit.bom else b"") + _utf8(updated, "new_string")
    with opened(open_folder(rt.settings, edit.real.parent, session, shown=path, secrets=rt.secret_paths)) as dir_fd:
        atomic_write_at(dir_fd, edit.real.name, data, expect=edit.before, shown=path)
    name = display_path(edit.real, roots_for(rt.settings, session))
    return EditFileResult(path=name, replacements=edit.count, diff=small_diff(edit.text, updated, name))


@dataclass(frozen=True)
class _Edit:
    real: Path
    text: str
    bom: bool
    before: tuple[int, int]
    old: str
    new: str
    count: int


def _planned_edit(rt: Runtime, session: str | None, path: str, old_string: str, new_string: str,
                  replace_all: bool) -> _Edit:
    """What edit_file would change, read from the file now; raises when it cannot (no such file, old_string
    absent or not unique, same strings, not text)."""
    real = _writable_target(rt, path, session)
    if not real.exists():
        raise NotFound(f"{path!r} does not exist. Create it with write_file.")
    if old_string == new_string:
        raise InvalidInput("old_string and new_string are the same; nothing to change.")
    with opened(open_for_read(rt.settings, real, session, shown=path, secrets=rt.secret_paths)) as fd:
        info = os.fstat(fd)
        before = (info.st_mtime_ns, info.st_size)
        text, bom = _read_utf8(fd, path)
    if old_string not in text and "\r\n" in text and "\r\n" not in old_string:
        old_string, new_string = old_string.replace("\n", "\r\n"), new_string.replace("\n", "\r\n")
    count = count_or_raise(text, old_string, path, replace_all)
    return _Edit(real, text, bom, before, old_string, new_string, count)


def edit_file_precheck(rt: Runtime, session: str | None, args: dict[str, Any]) -> None:
    """edit_file's checks before the approval gate: the file exists, is text, and old_string occurs (once,
    unless replace_all). Reads only."""
    old, new = args.get("old_string"), args.get("new_string")
    if isinstance(args.get("path"), str) and isinstance(old, str) and old and isinstance(new, str):
        _planned_edit(rt, session, args["path"], old, new, bool(args.get("replace_all", False)))


# -- list_workspace_files and find_files ------------------------------------------------------


class FileEntry(BaseModel):
    name: str
    type: str = Field(description="file, dir or symlink.")
    size: int | None = Field(default=None, description="Bytes.")
    modified: str | None = Field(default=None, description="UTC.")


class ListFilesResult(BaseModel):
    directory: str
    roots: list[str] = Field(description="Workspace roots.")
    entries: list[FileEntry]
    total: int
    next_offset: int | None
    note: str | None = None


def _when(mtime: float) -> str:
    return datetime.fromtimestamp(mtime, UTC).strftime("%Y-%m-%d %H:%M")


def _entry(item: os.DirEntry[str]) -> FileEntry:
    try:
        if item.is_symlink():
            return FileEntry(name=item.name, type="symlink")
        info = item.stat(follow_symlinks=False)
    except OSError:
        return FileEntry(name=item.name, type="file")
    if stat.S_ISDIR(info.st_mode):
        return FileEntry(name=item.name, type="dir", modified=_when(info.st_mtime))
    return FileEntry(name=item.name, type="file", size=info.st_size, modified=_when(info.st_mtime))


def list_workspace_files(
    directory: Annotated[str, Field(description="Folder (relative to the workspace root).")] = ".",
    offset: Annotated[int, Field(ge=0, description="Entries to skip (a next_offset).")] = 0,
    limit: Annotated[int, Field(ge=1, le=500, description="Max entries.")] = 200,
    *,
    rt: Runtime,
    call: CallContext,
) -> ListFilesResult:
    """List a workspace folder: sub-folders, then files with sizes (hidden ones skipped)."""
    session = call.session_id
    real = resolve_path(rt.settings, directory or ".", must_exist=True, session_id=session)
    if not real.is_dir():
        raise InvalidInput(f"{directory!r} is a file, not a folder. Read it with read_file.")
    hidden_dirs = set(server_data_dirs(rt.settings))
    items: list[os.DirEntry[str]] = []
    notes: list[str | None] = []
    with opened(open_folder(rt.settings, real, session, shown=directory or ".", secrets=rt.secret_paths)) as dir_fd:
        try:
            scan = scan_folder(dir_fd, limit=MAX_LIST_SCAN)
        except PermissionError:
            raise PathNotAllowed(f"Folder {directory!r} cannot be read: permission denied. Give the server's user "
                                 "read access to it, or list another folder.") from None
        notes.append(scan.note())
        if scan.truncated:
            notes.append(f"Only the first {MAX_LIST_SCAN} entries were read; use find_files to narrow down.")
        for item in scan.entries:
            if item.name.startswith(".") or item.name in INDEX_DIR_NAMES or real / item.name in hidden_dirs:
                continue
            items.append(item)
        items.sort(key=lambda it: (not it.is_dir(follow_symlinks=False), it.name.casefold()))
        page = items[offset : offset + limit]
        entries = [_entry(it) for it in page]  # (their stat is taken through the folder's handle)
    roots = roots_for(rt.settings, session)
    end = offset + len(page)
    return ListFilesResult(
        directory=display_path(real, roots), roots=[str(r) for r in roots], entries=entries,
        total=len(items), next_offset=end if end < len(items) else None,
        note=" ".join(filter(None, (_past_end(offset, len(items), ("entry", "entries")), *notes))) or None,
    )


def _past_end(offset: int, total: int, nouns: tuple[str, str]) -> str | None:
    return past_end_note(offset, total, f"{total} {nouns[total != 1]}")


class FindFilesResult(BaseModel):
    matches: list[FileEntry] = Field(description="Newest first.")
    total_matches: int
    next_offset: int | None
    note: str | None = None


def find_files(
    pattern: Annotated[str, Field(description="Glob: * ? [abc] ** {pdf,docx}; no '/' = any depth.")],
    path: Annotated[str, Field(description="Folder to search in.")] = ".",
    offset: Annotated[int, Field(ge=0, description="Matches to skip (a next_offset).")] = 0,
    max_results: Annotated[int, Field(ge=1, le=500, description="Max matches.")] = 100,
    *,
    rt: Runtime,
    call: CallContext,
) -> FindFilesResult:
    """Find workspace files by glob pattern (case-insensitive), newest first."""
    session = call.session_id
    base = resolve_path(rt.settings, path or ".", must_exist=True, session_id=session)
    if not base.is_dir():
        raise InvalidInput(f"{path!r} is a file, not a folder. Give the folder to search in.")
    try:
        glob = GlobPattern(pattern)
    except ValueError as exc:
        raise InvalidInput(f"Bad pattern {pattern!r}: {exc}. Example: **/*.{{pdf,docx}}") from None
    roots = roots_for(rt.settings, session)
    walk = walk_files(base, max_depth=FIND_MAX_DEPTH, max_entries=FIND_MAX_ENTRIES,
                      skip_paths=server_data_dirs(rt.settings), confine_to=roots)
    found: list[tuple[float, str, int]] = []
    for count, entry in enumerate(walk):
        if count % 2000 == 0:
            call.check_cancelled()
            if count:
                call.report(count, None, f"{count} files scanned")
        if glob.matches(entry.rel):
            found.append((entry.mtime, display_path(entry.path, roots), entry.size))
    found.sort(key=lambda item: (-item[0], item[1]))
    page = found[offset : offset + max_results]
    end = offset + len(page)
    return FindFilesResult(
        matches=[FileEntry(name=name, type="file", size=size, modified=_when(mtime)) for mtime, name, size in page],
        total_matches=len(found), next_offset=end if end < len(found) else None,
        note=" ".join(filter(None, (_past_end(offset, len(found), ("match", "matches")), _walk_note(walk)))) or None,
    )


def _walk_note(walk: Any) -> str | None:
    notes = []
    if walk.truncated:
        notes.append(f"stopped after {walk.max_entries} entries; search a smaller folder")
    if walk.depth_capped:
        notes.append(f"{walk.depth_capped} folder(s) deeper than {walk.max_depth} levels skipped")
    if skipped := walk.skipped_note():
        notes.append(skipped)
    return "; ".join(notes) or None


_EXTRACT_CACHE: Service[_ExtractCache] = Service(lambda rt: _ExtractCache())
