"""Document search and index management: search_documents, search_file, index_path, index_status,
remove_from_index, cleanup_index. Thin wrappers over `indexing` (store, indexer, search, regex).

Paths are resolved with `foundation.paths.resolve_path` (inside the workspace roots); the index
stores real absolute paths and results show them relative to their root. The database is
`<data_dir>/index.sqlite3`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import (
    BaseModel,
    Field,
    GetJsonSchemaHandler,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    model_serializer,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from foundation.errors import ExtractionError, InvalidInput, LimitExceeded, NotFound
from foundation.globs import GlobPattern
from foundation.paths import display_path, fd_allowed, open_for_read, resolve_path, roots_for
from foundation.safe_open import open_inside, opened
from indexing.model import ChunkingOptions, ExtractionLimits
from tools.index_jobs import IndexJob, JobRegistry, Progress, Work
from tools.runtime import CallContext, Runtime, Service
from tools.skills import skill_hint

if TYPE_CHECKING:  # the index modules load on first use (start-up speed)
    from indexing.indexer import Indexer, IndexReport
    from indexing.postings import MemoryIndex
    from indexing.search import ChunkHit, PathFilter, Searcher
    from indexing.store import IndexStore, JobRow
    from indexing.vectors import VectorWorker

LIVE_TEXT_MAX_BYTES = 1_000_000  # larger text files are searched through the index
MAX_GLOB_FILES = 5000
LINE_CHARS = 500
STATUS_WALK_MAX = 20_000  # index_status counts unindexed files among this many folder entries
SearchMode = Literal["natural", "all", "phrase", "fts"]

QueryArg = Annotated[
    str,
    Field(
        min_length=1, max_length=2000,
        description='What to look for, in plain words (English or Chinese); "quoted phrases" must match '
        "exactly. With use_regex: a regular expression.",
    ),
]
ModeArg = Annotated[
    SearchMode,
    Field(
        description="natural: any words, best matches first (default); all: every word required; "
        'phrase: the words in this order; fts: raw SQLite FTS5 syntax (AND/OR/NOT, NEAR(), "...", prefix*).'
    ),
]
RegexArg = Annotated[bool, Field(description="Treat query as a regular expression (time-limited).")]
ContextArg = Annotated[
    int, Field(ge=0, le=2000, description="Characters of surrounding text to add before and after each hit.")
]


# -- services ---------------------------------------------------------------------------------


def index_store(rt: Runtime) -> IndexStore:
    """The shared index database of this server (re-analysed once if made by another analyzer)."""
    return _INDEX_STORE.of(rt)


def memory_index(rt: Runtime) -> MemoryIndex:
    """The in-memory postings of the shared index (built in the background, used when fresh)."""
    return _MEMORY_INDEX.of(rt)


def _new_memory_index(rt: Runtime) -> MemoryIndex:
    from indexing.postings import MemoryIndex

    s = rt.settings
    return MemoryIndex(index_store(rt), min_chunks=s.search_memory_min_chunks, max_chunks=s.search_memory_max_chunks)


def _open_store(path: Path) -> IndexStore:
    """Open the index; a damaged database file (derived data) is moved aside and started afresh."""
    import logging
    import sqlite3

    from indexing.analyzer import ANALYZER_VERSION, analyze
    from indexing.store import IndexStore

    try:
        store = IndexStore(path)
    except sqlite3.DatabaseError as exc:
        aside = path.with_name(f"{path.name}.damaged-{int(time.time())}")
        logging.getLogger("generalagent.index").warning("index %s is damaged (%s); moved to %s", path, exc, aside)
        for suffix in ("", "-wal", "-shm"):
            part = Path(str(path) + suffix)
            if part.exists():
                part.rename(Path(str(aside) + suffix))
        store = IndexStore(path)
    store.ensure_analysis(ANALYZER_VERSION, analyze)
    return store


def index_jobs(rt: Runtime) -> JobRegistry:
    """The index runs of this server (one per path at a time; background ones outlive their call)."""
    return _INDEX_JOBS.of(rt)


def _indexer(rt: Runtime, call: CallContext | None = None, should_cancel: Callable[[], bool] | None = None,
             session_id: str | None = None) -> Indexer:
    from indexing.indexer import Indexer
    s = rt.settings
    limits = rt.extraction_limits()
    chunking = ChunkingOptions(s.chunk_max_chars, s.chunk_overlap_chars, s.chunk_min_chars)
    if call is not None:
        should_cancel, session_id = (lambda: call.cancelled), call.session_id
    roots = roots_for(s, session_id)
    allowed = fd_allowed(s, roots)
    return Indexer(index_store(rt), limits, chunking, should_cancel=should_cancel,
                   opener=lambda path: open_inside(path, roots, allowed))


# -- result models ------------------------------------------------------------------------------


class OmitNone(BaseModel):
    """A result whose unset (None) fields are left out of the output, and so of its output schema."""

    @model_serializer(mode="wrap")
    def _without_nulls(self, handler: SerializerFunctionWrapHandler) -> object:
        return {k: v for k, v in handler(self).items() if v is not None}

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        schema = handler.resolve_ref_schema(handler(core_schema))  # (only ever used as output)
        required = set(schema.get("required", ()))
        for name, prop in schema.get("properties", {}).items():
            options = prop.get("anyOf")
            if name not in required and isinstance(options, list) and {"type": "null"} in options:
                rest = [o for o in options if o != {"type": "null"}]
                del prop["anyOf"]
                prop.update(rest[0] if len(rest) == 1 else {"anyOf": rest})
                prop.pop("default", None)
        return schema


class Hit(OmitNone):
    path: str = Field(description="File path (relative to its workspace root).")
    doc_id: str = Field(description="Content hash of the document (files with equal bytes share it).")
    chunk_index: int | None = Field(default=None, description="Chunk number in the document (0-based).")
    line: int | None = Field(default=None, description="Line number (live text-file search).")
    page: int | None = None
    slide: int | None = None
    sheet: str | None = None
    rows: list[int] | None = Field(default=None, description="First and last sheet row.")
    heading: str | None = None
    start: int = Field(description="Start offset in the document's extracted text (characters).")
    end: int = Field(description="End offset (exclusive).")
    score: float = Field(description="Relevance, higher is better.")
    text: str
    match: str | None = Field(default=None, description="The regex match.")
    before: str | None = Field(default=None, description="Text just before the hit.")
    after: str | None = Field(default=None, description="Text just after the hit.")
    _abs_path: str = PrivateAttr(default="")  # the real path, to check that the file still exists


class DocumentResult(BaseModel):
    path: str
    doc_id: str
    score: float = Field(description="Score of its best chunk.")
    matched_chunks: list[Hit]
    context_chunks: list[Hit] = Field(description="Neighbours of the best chunk.")


class SearchResult(BaseModel):
    query: str
    mode: str
    hits: list[Hit] = Field(default_factory=list)
    documents: list[DocumentResult] | None = Field(default=None, description="With group_by_document.")
    next_offset: int | None = Field(default=None, description="Pass as offset for more results; null at the end.")
    note: str | None = None


def _hit_model(h: ChunkHit, roots: tuple[Path, ...], match: str | None = None) -> Hit:
    hit = Hit(
        path=display_path(Path(h.path), roots) if h.path else "", doc_id=h.doc_hash[:16], chunk_index=h.index,
        page=h.page, slide=h.slide, sheet=h.sheet, rows=list(h.rows) if h.rows else None,
        heading=h.heading or None, start=h.start, end=h.end, score=round(h.score, 4), text=h.text, match=match,
        before=h.before or None, after=h.after or None,
    )
    hit._abs_path = h.path
    return hit


# -- search_documents ---------------------------------------------------------------------------


def search_documents(
    query: QueryArg,
    paths: Annotated[
        list[str] | None,
        Field(description="Only these files, folders or globs (e.g. reports/, *.pdf); default: everything indexed."),
    ] = None,
    max_results: Annotated[int, Field(ge=1, le=50, description="Hits (or documents) per page.")] = 10,
    offset: Annotated[int, Field(ge=0, le=10_000, description="Skip this many results (paging).")] = 0,
    group_by_document: Annotated[
        bool, Field(description="Rank documents by their best passage, each with its top passages and neighbours.")
    ] = False,
    use_regex: RegexArg = False,
    mode: ModeArg = "natural",
    context_chars: ContextArg = 0,
    *,
    rt: Runtime,
    call: CallContext,
) -> SearchResult:
    """Search every indexed document (PDF, DOCX, XLSX, PPTX, text) with BM25 ranking, English
    stemming and Chinese word segmentation. Index folders first with index_path."""
    store = index_store(rt)
    if not store.has_files():
        raise NotFound("The index is empty. Call index_path on a folder or file first.")
    roots = roots_for(rt.settings, call.session_id)
    scope = _path_filter(rt, paths, roots, call)
    from indexing.hybrid import searcher as make_searcher

    searcher = make_searcher(store, memory_index(rt), vector_worker(rt))
    for _ in range(2):  # once more when hits of deleted files were dropped from the index
        if use_regex:
            result = _regex_result(searcher, query, scope, max_results, offset, roots)
        elif group_by_document:
            result = _grouped_result(searcher, query, mode, scope, (max_results, offset), context_chars, roots)
        else:
            hits = searcher.search(
                query, mode=mode, limit=max_results + 1, offset=offset, paths=scope, context_chars=context_chars
            )
            result = SearchResult(
                query=query, mode=mode, hits=[_hit_model(h, roots) for h in hits[:max_results]],
                next_offset=offset + max_results if len(hits) > max_results else None,
            )
        if not _forget_deleted(rt, _result_paths(result), call):
            break
    if not result.hits and not result.documents:
        result.note = _no_hits_note(searcher, query, "regex" if use_regex else mode, scope, offset)
    if not paths:
        result.note = _join(result.note, _outside_roots_note(store, roots))
    return result


def _grouped_result(
    searcher: Searcher, query: str, mode: SearchMode, scope: PathFilter, page: tuple[int, int], context_chars: int,
    roots: tuple[Path, ...],
) -> SearchResult:
    limit, offset = page
    docs = searcher.search_documents(
        query, mode=mode, limit=limit + 1, offset=offset, paths=scope, context_chars=context_chars
    )
    models = [
        DocumentResult(
            path=display_path(Path(d.path), roots), doc_id=d.doc_hash[:16], score=round(d.score, 4),
            matched_chunks=[_hit_model(h, roots) for h in d.matched],
            context_chunks=[_hit_model(h, roots) for h in d.context],
        )
        for d in docs[:limit]
    ]
    more = len(docs) > limit
    return SearchResult(query=query, mode=mode, documents=models, next_offset=offset + limit if more else None)


def _result_paths(result: SearchResult) -> list[str]:
    return [h._abs_path for h in result.hits] + [d.matched_chunks[0]._abs_path for d in result.documents or [] if d.matched_chunks]


def _forget_deleted(rt: Runtime, paths: list[str], call: CallContext) -> bool:
    """Drop from the index the hit files that are gone from disk; True when any was."""
    gone = sorted({p for p in paths if p and not os.path.exists(p)})
    if not gone:
        return False
    indexer = _indexer(rt)
    store = index_store(rt)
    for path in gone:
        indexer.remove_path(path)
    with store.write() as conn:
        for doc_id in store.orphan_documents():
            store.drop_if_orphan(conn, doc_id)
    return True


def _outside_roots_note(store: IndexStore, roots: tuple[Path, ...]) -> str | None:
    from indexing.store import folder_range

    inside = sum(store.conn().execute(
        "SELECT count(*) FROM files WHERE path >= ? AND path < ?", folder_range(str(root))
    ).fetchone()[0] for root in roots)
    outside = store.totals()["files"] - inside
    if outside <= 0:
        return None
    files = "1 indexed file lies" if outside == 1 else f"{outside} indexed files lie"
    return f"{files} outside the workspace roots searched here; they are not searched."


def _join(a: str | None, b: str | None) -> str | None:
    return " ".join(x for x in (a, b) if x) or None


def _regex_result(
    searcher: Searcher, pattern: str, scope: PathFilter, limit: int, offset: int, roots: tuple[Path, ...]
) -> SearchResult:
    from indexing.regex_search import search_index

    found = search_index(searcher, pattern, limit=limit + 1, offset=offset, paths=scope)
    hits = [_hit_model(h, roots, match) for h, match in found[:limit]]
    return SearchResult(
        query=pattern, mode="regex", hits=hits, next_offset=offset + limit if len(found) > limit else None,
    )


def _no_hits_note(searcher: Searcher | None, query: str, mode: str, scope: PathFilter | None, offset: int) -> str:
    """Why nothing was found: no searchable words, past the last page, or no word matched."""
    from indexing.analyzer import analyze

    if mode == "regex":
        return "No chunk matches this pattern."
    if mode != "fts" and not analyze(query):
        return ("No matches: the query has only common words (stop words such as 'the', 'what', '的') that "
                "are not indexed. Add a specific word.")
    if offset > 0 and searcher is not None and searcher.search(query, mode=mode, limit=1, paths=scope):  # type: ignore[arg-type]
        return f"No more matches: offset {offset} is past the last result. Use offset=0 or a smaller offset."
    if mode == "natural":
        return "No matches. Try other or fewer words, check that the files are indexed (index_status)."
    return 'No matches. Try mode="natural", which needs only some of the words.'


def _path_filter(rt: Runtime, paths: list[str] | None, roots: tuple[Path, ...], call: CallContext) -> PathFilter:
    """Files/folders/globs → a filter on indexed paths; no paths → the workspace roots."""
    from indexing.search import PathFilter
    if not paths:
        return PathFilter(folders=tuple(str(r) for r in roots))
    files: list[str] = []
    folders: list[str] = []
    for raw in paths:
        if any(ch in raw for ch in "*?[{"):
            files += _glob_files(rt, raw, roots)
            continue
        real = resolve_path(rt.settings, raw, session_id=call.session_id)
        (folders if real.is_dir() else files).append(str(real))
    if not files and not folders:
        files = ["\x00no-match"]
    return PathFilter(files=tuple(files), folders=tuple(folders))


def _glob_files(rt: Runtime, pattern: str, roots: tuple[Path, ...]) -> list[str]:
    try:
        glob = GlobPattern(pattern)
    except ValueError as exc:
        raise InvalidInput(f"Bad glob {pattern!r}: {exc}.") from None
    out = []
    for row in index_store(rt).all_files():
        path = Path(row.path)
        rel = display_path(path, roots)
        if not os.path.isabs(rel) and glob.matches(rel):
            out.append(row.path)
            if len(out) > MAX_GLOB_FILES:
                raise LimitExceeded(f"{pattern!r} matches over {MAX_GLOB_FILES} indexed files; use a narrower one.")
    return out


# -- search_file ----------------------------------------------------------------------------------


class SearchFileResult(BaseModel):
    path: str
    kind: str = Field(description="text, pdf, docx, xlsx or pptx.")
    hits: list[Hit]
    searched: str = Field(description="'lines' (live, text files) or 'index'.")
    note: str | None = None


def search_file(
    path: Annotated[str, Field(description="The file to search (relative to the workspace root).")],
    query: QueryArg,
    max_results: Annotated[int, Field(ge=1, le=50, description="Maximum hits.")] = 5,
    context_chars: ContextArg = 0,
    use_regex: RegexArg = False,
    mode: ModeArg = "natural",
    *,
    rt: Runtime,
    call: CallContext,
) -> SearchFileResult:
    """Search inside one file. PDF/DOCX/XLSX/PPTX are indexed on first use (then reused while
    unchanged); text files are searched line by line, with line numbers."""
    from indexing.extract import detect_kind

    real = resolve_path(rt.settings, path, must_exist=True, session_id=call.session_id)
    if real.is_dir():
        raise InvalidInput(f"{path} is a folder. Use search_documents(paths=[{path!r}]) for folders.")
    roots = roots_for(rt.settings, call.session_id)
    shown = display_path(real, roots)
    try:
        kind = detect_kind(real)
    except ExtractionError as exc:
        raise InvalidInput(str(exc)) from None
    hits = None
    if kind == "text":
        with opened(open_for_read(rt.settings, real, call.session_id, shown=path)) as fd:
            if os.fstat(fd).st_size <= LIVE_TEXT_MAX_BYTES:  # small text files: searched live, by line
                hits = _search_lines(real, fd, query, mode, use_regex, max_results, context_chars,
                                     rt.extraction_limits())
                for hit in hits:
                    hit.path = shown
    if hits is not None:
        return SearchFileResult(
            path=shown, kind=kind, hits=hits, searched="lines",
            note=None if hits else _no_hits_note(None, query, "regex" if use_regex else mode, None, 0),
        )
    outcome = _indexer(rt, call).index_file(real)
    if outcome.status == "failed":
        raise ExtractionError(f"{shown} cannot be searched: {outcome.reason}")
    from indexing.search import PathFilter, Searcher

    scope = PathFilter(files=(str(real),))
    searcher = Searcher(index_store(rt))
    if use_regex:
        result = _regex_result(searcher, query, scope, max_results, 0, roots)
        note = None if result.hits else _no_hits_note(None, query, "regex", None, 0)
        return SearchFileResult(path=shown, kind=kind, hits=result.hits, searched="index", note=note)
    found = searcher.search(query, mode=mode, limit=max_results, paths=scope, context_chars=context_chars)
    return SearchFileResult(
        path=shown, kind=kind, hits=[_hit_model(h, roots) for h in found], searched="index",
        note=None if found else _no_hits_note(searcher, query, mode, scope, 0),
    )


def _search_lines(
    real: Path, fd: int, query: str, mode: SearchMode, use_regex: bool, limit: int, context_chars: int,
    limits: ExtractionLimits,
) -> list[Hit]:
    from indexing.extract import extract_file
    from indexing.search import rank_lines

    text = extract_file(real, limits, fd=fd).text
    lines = text.split("\n")
    found = _regex_lines(text, query, limit) if use_regex else rank_lines(text, query, mode, limit)
    out = []
    for h in found:
        before, after = _around(lines, h.line, text, h.start, h.end, context_chars)
        out.append(
            Hit(
                path="", doc_id="", line=h.line, start=h.start, end=h.end, score=h.score, text=h.text[:LINE_CHARS],
                match=h.match or None, before=before, after=after,
            )
        )
    return out


def _around(lines: list[str], line: int, text: str, start: int, end: int, chars: int) -> tuple[str | None, str | None]:
    """`chars` of text around the line, or else the line before and after (cut to 200 chars)."""
    if chars > 0:
        return text[max(0, start - chars) : start] or None, text[end : end + chars] or None
    before = lines[line - 2][:200] if line >= 2 else None
    after = lines[line][:200] if line < len(lines) else None
    return before, after


def _regex_lines(text: str, pattern: str, limit: int) -> list:  # type: ignore[type-arg]
    from indexing.regex_search import compile_pattern
    from indexing.search import LineHit

    timed = compile_pattern(pattern)
    out, pos, line_no = [], 0, 1
    for line in text.split("\n"):
        m = timed.search(line)
        if m is not None:
            out.append(LineHit(line_no, pos, pos + len(line), line, 1.0, m.group()[:200]))
            if len(out) >= limit:
                break
        pos += len(line) + 1
        line_no += 1
    return out


# -- index_path ------------------------------------------------------------------------------------


class FailedFile(BaseModel):
    path: str
    reason: str


class IndexResult(OmitNone):
    path: str
    job_id: str = Field(description="The index run; index_status lists runs with their progress.")
    state: str = Field(description="done, running (in the background), cancelled or failed.")
    files_done: int = Field(description="Files handled so far.")
    files_total: int = Field(description="Supported files found (0 while the folder is still being listed).")
    indexed: int = Field(description="Files read and indexed now (new or changed content).")
    unchanged: int = Field(description="Files skipped because they did not change.")
    removed: int = Field(description="Index entries dropped because their files are gone.")
    failed: list[FailedFile] = Field(description="Files that could not be indexed, with the reason.")
    skipped: int = Field(description="Files of unsupported types.")
    chunks_added: int
    seconds: float
    note: str | None = None
    skill_hint: str | None = Field(default=None, description="A skill with instructions for this file type.")  # skills


def index_path(
    path: Annotated[str, Field(description="File or folder to index (relative to the workspace root).")],
    recursive: Annotated[bool, Field(description="Include sub-folders.")] = True,
    wait: Annotated[
        bool,
        Field(description="False: return at once with a job id; index_status shows progress."),
    ] = True,
    *,
    rt: Runtime,
    call: CallContext,
) -> IndexResult:
    """Index a file or folder for search_documents (PDF, DOCX, XLSX, PPTX, text). Unchanged files are
    skipped, changed ones re-indexed, deleted ones dropped; a stopped run continues where it stopped."""
    real = resolve_path(rt.settings, path, must_exist=True, session_id=call.session_id)
    roots = roots_for(rt.settings, call.session_id)
    jobs = index_jobs(rt)
    job, joined = jobs.claim(str(real), background=not wait)
    if joined:
        if wait:
            jobs.wait(job, lambda: call.cancelled, call.report)
        return _index_result(job, roots, f"Joined index job {job.row.id}, already running for this path.")
    work = _index_work(rt, real, recursive, call.session_id)
    if not wait:
        jobs.start_background(job, work)
        return _index_result(job, roots, f"Indexing in the background (job {job.row.id}); index_status shows "
                                         "its progress. search_documents finds files as they are indexed.")
    jobs.run(job, work, should_cancel=lambda: call.cancelled, progress=call.report)
    return _index_result(job, roots, hint=None if real.is_dir() else skill_hint(rt, real))


def _index_work(rt: Runtime, real: Path, recursive: bool, session_id: str | None) -> Work:
    def work(should_cancel: Callable[[], bool], progress: Progress, report: IndexReport) -> None:
        indexer = _indexer(rt, should_cancel=should_cancel, session_id=session_id)
        if real.is_dir():
            indexer.index_tree(real, recursive=recursive, progress=progress, report=report)
        else:
            report.add(indexer.index_file(real))
            progress(1, 1, real.name)

        if (worker := vector_worker(rt)) is not None:
            worker.kick()  # chunk vectors of the hybrid mode, in the background

    return work


def _index_result(job: IndexJob, roots: tuple[Path, ...], note: str | None = None,
                  hint: str | None = None) -> IndexResult:
    row, report = job.snapshot(), job.report
    failed = [FailedFile(path=display_path(Path(f.path), roots), reason=f.reason[:300]) for f in report.failed[:50]]
    if report.truncated:
        note = "The folder walk stopped at its file limit; index sub-folders separately."
    if len(report.failed) > 50:
        note = f"{len(report.failed)} files failed; the first 50 are listed."
    if row.state == "running" and job.finished.is_set():
        row = job.row
    return IndexResult(
        path=display_path(Path(row.path), roots), job_id=row.id, state=row.state, files_done=row.done,
        files_total=row.total, indexed=report.indexed, unchanged=report.unchanged, removed=report.removed,
        failed=failed, skipped=report.skipped, chunks_added=report.chunks_added,
        seconds=round((row.finished_at or time.time()) - row.started_at, 2), note=note,
        skill_hint=hint,  # skills: the file-type hint
    )


# -- index_status ----------------------------------------------------------------------------------


class JobInfo(OmitNone):
    id: str
    path: str
    state: str = Field(description="running, done, cancelled, failed, or interrupted (the server stopped).")
    files_done: int
    files_total: int
    indexed: int
    failed: int
    seconds: float = Field(description="Time it ran (so far, while running).")
    error: str | None = None


class PathStatus(OmitNone):
    path: str
    indexed: bool
    fresh: bool | None = Field(
        default=None, description="True when everything is indexed and unchanged since (false while partial)."
    )
    partial: bool | None = Field(
        default=None, description="True when the last run here is running or stopped before the end."
    )
    indexed_at: str | None = None
    chunks: int | None = None
    error: str | None = None
    files: int | None = Field(default=None, description="For folders: indexed files under it.")
    stale: int | None = Field(default=None, description="For folders: indexed files changed or deleted since.")
    failed: int | None = Field(default=None, description="For folders: files that could not be indexed.")
    not_indexed: int | None = Field(default=None, description="For folders: supported files on disk not indexed.")
    job: JobInfo | None = Field(default=None, description="The last index run of this path (or a folder above).")
    note: str | None = None


class IndexStatus(BaseModel):
    database: str
    database_bytes: int
    files: int
    failed_files: int
    documents: int
    chunks: int
    characters: int
    search: str = ""
    jobs: list[JobInfo] = Field(default_factory=list, description="Index runs: running ones, then the latest.")
    vectors: str | None = Field(default=None, description="Hybrid mode: chunks embedded so far.")
    path_status: PathStatus | None = None


def index_status(
    path: Annotated[
        str | None, Field(description="A file or folder to report on; omit for index totals.")
    ] = None,
    *,
    rt: Runtime,
    call: CallContext,
) -> IndexStatus:
    """What is indexed: totals (files, documents, chunks, database size), or one file's or folder's
    state (indexed? complete? unchanged since? when? how many chunks?), and index jobs."""
    store = index_store(rt)
    totals = store.totals()
    roots = roots_for(rt.settings, call.session_id)
    status = IndexStatus(
        database=str(store.path), database_bytes=store.db_bytes(), files=totals["files"],
        failed_files=totals["failed"], documents=totals["documents"], chunks=totals["chunks"],
        characters=totals["chars"], search=memory_index(rt).state(*store.generation()),
        jobs=[_job_info(row, roots) for row in index_jobs(rt).recent()],
        vectors=worker.status() if (worker := vector_worker(rt)) is not None else None,
    )
    if path:
        real = resolve_path(rt.settings, path, session_id=call.session_id)
        job = index_jobs(rt).covering(str(real))
        status.path_status = _path_status(store, real, display_path(real, roots))
        _apply_job(status.path_status, _job_info(job, roots) if job else None)
    return status


def _job_info(row: JobRow, roots: tuple[Path, ...]) -> JobInfo:
    return JobInfo(
        id=row.id, path=display_path(Path(row.path), roots), state=row.state, files_done=row.done,
        files_total=row.total, indexed=row.indexed, failed=row.failed,
        seconds=round(_ended(row) - row.started_at, 1), error=row.error or None,
    )


def _ended(row: JobRow) -> float:
    """When the run ended (now while it runs; its start when it was interrupted without a record)."""
    return row.finished_at or (time.time() if row.state == "running" else row.started_at)


def _apply_job(status: PathStatus, job: JobInfo | None) -> None:
    """Make a folder's status honest about its last run: running or stopped means partial."""
    status.job = job
    if job is None or status.files is None and status.indexed and job.state != "running":
        return  # a file's own row tells the truth about that file
    status.partial = job.state != "done"
    if job.state == "running":
        status.fresh = False
        status.note = f"Indexing now (job {job.id}): {job.files_done} of {job.files_total or '?'} files done."
    elif status.partial:
        status.fresh = False
        status.note = (
            f"Partly indexed: the last run ({job.state}) stopped after {job.files_done} of {job.files_total or '?'} "
            "files. Run index_path again to continue; indexed files are skipped."
        )


def _path_status(store: IndexStore, real: Path, shown: str) -> PathStatus:
    row = store.file_row(str(real))
    if row is not None:
        chunks = None
        if row.doc_id is not None:
            got = store.conn().execute("SELECT n_chunks FROM documents WHERE id=?", (row.doc_id,)).fetchone()
            chunks = got[0] if got else None
        return PathStatus(
            path=shown, indexed=row.error is None, fresh=_fresh(row.path, row.size, row.mtime_ns),
            indexed_at=_iso(row.indexed_at), chunks=chunks, error=row.error,
        )
    rows = store.files_under(str(real))
    missing = _not_indexed(real, {r.path for r in rows}) if real.is_dir() else 0
    if not rows:
        note = f"{missing} supported files here are not indexed; run index_path." if missing else None
        return PathStatus(path=shown, indexed=False, not_indexed=missing if real.is_dir() else None, note=note)
    stale = sum(not _fresh(r.path, r.size, r.mtime_ns) for r in rows[:20_000])
    return PathStatus(
        path=shown, indexed=True, fresh=stale == 0 and missing == 0, files=len(rows), stale=stale,
        failed=sum(r.error is not None for r in rows), indexed_at=_iso(max(r.indexed_at for r in rows)),
        not_indexed=missing,
        note=f"{missing} supported files are not indexed yet; run index_path to add them." if missing else None,
    )


def _not_indexed(folder: Path, indexed: set[str]) -> int:
    """Supported files under `folder` (first STATUS_WALK_MAX entries) that the index does not have."""
    from foundation.filewalk import FileWalk
    from indexing.extract import is_supported

    walk = FileWalk(folder, max_depth=64, max_entries=STATUS_WALK_MAX)
    return sum(1 for e in walk if is_supported(e.path) and str(e.path) not in indexed)


def _fresh(path: str, size: int, mtime_ns: int) -> bool:
    try:
        info = os.stat(path)
    except OSError:
        return False
    return info.st_size == size and info.st_mtime_ns == mtime_ns


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- remove_from_index / cleanup_index ------------------------------------------------------------


class RemoveResult(BaseModel):
    removed_paths: int
    removed_documents: int
    examples: list[str] = Field(description="Some removed paths.")
    vacuumed: bool = False
    database_bytes: int


def remove_from_index(
    path: Annotated[str, Field(description="Indexed file or folder to drop from the index (files stay on disk).")],
    *,
    rt: Runtime,
    call: CallContext,
) -> RemoveResult:
    """Remove a file, or every file under a folder, from the search index. Files on disk are untouched."""
    real = resolve_path(rt.settings, path, session_id=call.session_id)
    store = index_store(rt)
    row = store.file_row(str(real))
    targets = [row.path] if row is not None else [r.path for r in store.files_under(str(real))]
    if not targets:
        raise NotFound(f"{path} is not in the index. index_status shows what is indexed.")
    return _remove(rt, targets, call)


def cleanup_index(
    missing_files: Annotated[bool, Field(description="Drop entries whose files no longer exist.")] = True,
    older_than_days: Annotated[
        float | None, Field(gt=0, description="Also drop entries indexed more than this many days ago.")
    ] = None,
    *,
    rt: Runtime,
    call: CallContext,
) -> RemoveResult:
    """Tidy the index: drop entries of deleted files (and, if asked, old entries), delete documents
    no file uses any more, and compact the database when that frees space."""
    store = index_store(rt)
    cutoff = time.time() - older_than_days * 86400 if older_than_days else None
    targets = [
        r.path for r in store.all_files()
        if (missing_files and not os.path.isfile(r.path)) or (cutoff is not None and r.indexed_at < cutoff)
    ]
    return _remove(rt, targets, call)


def _remove(rt: Runtime, targets: list[str], call: CallContext) -> RemoveResult:
    store = index_store(rt)
    docs_before = store.totals()["documents"]
    indexer = _indexer(rt)
    for i, target in enumerate(targets):
        call.check_cancelled()
        indexer.remove_path(target)
        if i % 100 == 99:
            call.report(i + 1, len(targets), "removing")
    with store.write() as conn:
        for doc_id in store.orphan_documents():
            store.drop_if_orphan(conn, doc_id)
    vacuumed = _vacuum_if_worthwhile(store)
    roots = roots_for(rt.settings, call.session_id)
    return RemoveResult(
        removed_paths=len(targets), removed_documents=docs_before - store.totals()["documents"],
        examples=[display_path(Path(t), roots) for t in targets[:20]], vacuumed=vacuumed,
        database_bytes=store.db_bytes(),
    )


def _vacuum_if_worthwhile(store: IndexStore) -> bool:
    conn = store.conn()
    free = conn.execute("PRAGMA freelist_count").fetchone()[0]
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    if free < 256 or free < pages // 4:
        return False
    store.vacuum()
    return True


def warm_up_search(rt: Runtime) -> None:
    """Start-up warm-up (background thread): load jieba's dictionary and, when there is an index,
    its in-memory postings. A data dir that holds an index also keeps a faster copy of the
    dictionary; fresh data dirs get no files written."""
    from indexing.analyzer import warm_up

    has_index = (rt.settings.data_dir / "index.sqlite3").exists()
    warm_up(rt.settings.data_dir / "cache" if has_index else None)
    if has_index:
        memory_index(rt).build_now()


_INDEX_STORE: Service[IndexStore] = Service(lambda rt: _open_store(rt.data_dir / "index.sqlite3"))
_MEMORY_INDEX: Service[MemoryIndex] = Service(_new_memory_index)
_INDEX_JOBS: Service[JobRegistry] = Service(lambda rt: JobRegistry(index_store(rt)))


def vector_worker(rt: Runtime) -> VectorWorker | None:
    """The background embedder of the hybrid mode; None when no embedding provider is configured."""
    return _VECTOR_WORKER.of(rt)


def _new_vector_worker(rt: Runtime) -> VectorWorker | None:
    from indexing.embeddings import make_provider
    from indexing.vectors import VectorWorker

    provider = make_provider(rt.settings)
    return None if provider is None else VectorWorker(index_store(rt), provider)


_VECTOR_WORKER: Service[VectorWorker | None] = Service(_new_vector_worker)
