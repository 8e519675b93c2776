"""Document search: search_documents (every indexed document) and search_file (one file; small text
files live, by line). Thin wrappers over `indexing.search`; the index itself is `tools.index_services`.

Paths are resolved with `foundation.paths.resolve_path` (inside the workspace roots); the index
stores real absolute paths and results show them relative to their root.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    BaseModel,
    Field,
    PrivateAttr,
)

from foundation.errors import ExtractionError, InvalidInput, LimitExceeded, NotFound, PathNotAllowed
from foundation.globs import GlobPattern
from foundation.paths import display_path, open_for_read, resolve_path, roots_for
from foundation.safe_open import opened
from foundation.schemas import OmitNone
from indexing.model import ExtractionLimits
from tools.runtime import CallContext, Runtime

if TYPE_CHECKING:  # the index modules load on first use (start-up speed)
    from indexing.search import ChunkHit, PathFilter, Searcher
    from indexing.store import IndexStore
from tools.index_services import (
    forget_paths,
    forget_secrets,
    index_of,
    index_store,
    indexer_for,
    search_ready,
    secret_refusal,
    vector_worker,
)
from tools.live_index import changed_note, fresh_page, search_running

QUICK_MAX_RANK = 50  # a quick search asks for hits among the first this many (the largest page)
LIVE_TEXT_MAX_BYTES = 1_000_000  # larger text files are searched through the index
MAX_GLOB_FILES = 5000
LINE_CHARS = 500
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
ContextArg = Annotated[int, Field(ge=0, le=2000, description="Characters of context around each hit.")]
FileModeArg = Annotated[SearchMode, Field(description="natural (default), all, phrase or fts, as in search_documents.")]


# -- result models ------------------------------------------------------------------------------


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
    by_meaning: bool | None = Field(default=None, description="True: found by meaning, not by the query's words.")
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
    next_offset: int | None = Field(
        default=None,
        description="Pass as offset for more results; null at the end (unless a note says more may match).",
    )
    note: str | None = None


def _hit_model(h: ChunkHit, roots: tuple[Path, ...], match: str | None = None) -> Hit:
    hit = Hit(
        path=display_path(h.path, roots) if h.path else "", doc_id=h.doc_hash[:16], chunk_index=h.index,
        page=h.page, slide=h.slide, sheet=h.sheet, rows=list(h.rows) if h.rows else None,
        heading=h.heading or None, start=h.start, end=h.end, score=round(h.score, 4), text=h.text, match=match,
        before=h.before or None, after=h.after or None, by_meaning=h.by_meaning or None,
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
    """Search every indexed document (PDF, Office, OpenDocument, EPUB, HTML, CSV, e-mail, text), in
    English and Chinese. Index folders first with index_path."""
    index = index_of(rt)
    store = index.store
    if not store.has_files():
        raise NotFound("The index is empty. Call index_path on a folder or file first.")
    roots = roots_for(rt.settings, call.session_id)
    scope = _path_filter(rt, paths, roots, call)
    from indexing.hybrid import searcher as make_searcher

    searcher = make_searcher(store, index.memory(), vector_worker(rt))
    is_secret = index.secret_hits(roots)
    with search_running(rt):  # background re-indexing waits for searches
        result, pending = _fresh_search(rt, searcher, is_secret, call, roots, query=query, scope=scope, page=(
            max_results, offset), use_regex=use_regex, group_by_document=group_by_document, mode=mode,
            context_chars=context_chars)
    if pending:
        result.note = _join(result.note, changed_note(len(pending)))
    elif not result.hits and not result.documents and result.note is None:
        result.note = _no_hits_note(searcher, query, "regex" if use_regex else mode, scope, offset)
    elif offset == 0 and _only_by_meaning(result):  # (the first hit is a word match whenever there is one)
        result.note = _join(result.note, ONLY_BY_MEANING)
    if not paths:
        result.note = _join(result.note, _outside_roots_note(store, roots))
    return result


def _fresh_search(
    rt: Runtime, searcher: Searcher, is_secret: Callable[[str], bool] | None, call: CallContext,
    roots: tuple[Path, ...], *, query: str, scope: PathFilter, page: tuple[int, int], use_regex: bool,
    group_by_document: bool, mode: SearchMode, context_chars: int,
) -> tuple[SearchResult, frozenset[str]]:
    """The page, never with text its file no longer holds: again when hits of deleted files or of secrets
    were dropped from the index or changed files were re-indexed; the changed files queued instead (their
    hits left out) are returned too."""
    max_results, offset = page
    pending: frozenset[str] = frozenset()
    for _ in range(3):
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
        if _forget_unwanted(rt, _result_paths(result), is_secret):
            continue
        check = fresh_page(rt, _result_paths(result), roots, call.session_id)
        pending |= check.pending
        if not check.reindexed:
            break
    else:  # the last search still met deleted files, secrets or changed files
        _drop_secret_hits(result, is_secret)
        pending |= fresh_page(rt, _result_paths(result), roots, call.session_id, inline=False).pending
    _drop_paths(result, pending)
    return result, pending


def _drop_paths(result: SearchResult, paths: frozenset[str]) -> None:
    """Leave out the hits of files that changed since they were indexed (queued to be re-indexed)."""
    if not paths:
        return
    result.hits = [h for h in result.hits if h._abs_path not in paths]
    if result.documents is not None:
        result.documents = [d for d in result.documents
                            if not any(h._abs_path in paths for h in d.matched_chunks)]


def _grouped_result(
    searcher: Searcher, query: str, mode: SearchMode, scope: PathFilter, page: tuple[int, int], context_chars: int,
    roots: tuple[Path, ...],
) -> SearchResult:
    limit, offset = page
    docs, pool_cap, pooled = searcher.search_documents(
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
    return SearchResult(
        query=query, mode=mode, documents=models, next_offset=offset + limit if more else None,
        note=None if pool_cap is None else _pool_cap_note(pool_cap, pooled),
    )


def _pool_cap_note(chunks: int, documents: int) -> str:
    """Why a grouped page ends early: its documents come from the best `chunks` passages only."""
    found = "1 document" if documents == 1 else f"{documents} documents"
    return (f"The {chunks} best-matching passages come from {found} only; more documents may "
            "match further down. To reach them, narrow the search with paths (folders or globs without the "
            "files that hold most matches) or page through passages with group_by_document=false.")


def _result_paths(result: SearchResult) -> list[str]:
    return [h._abs_path for h in result.hits] + [d.matched_chunks[0]._abs_path for d in result.documents or [] if d.matched_chunks]


def search_is_quick(rt: Runtime, args: dict[str, Any]) -> bool:
    """`ToolSpec.quick` of search_documents: a ranked natural-language search of everything, no quoted
    phrase (those go to the database's engine), one page of hits among the first 50, on an index whose
    in-memory postings are loaded and current, with no query to embed in hybrid mode (a few ms, nothing
    to wait for)."""
    if args.get("use_regex") or args.get("group_by_document") or args.get("paths"):
        return False
    if args.get("mode", "natural") != "natural" or '"' in str(args.get("query", "")):
        return False
    query = args.get("query")
    return (args.get("offset", 0) + args.get("max_results", 10) <= QUICK_MAX_RANK
            and search_ready(rt, query if isinstance(query, str) else None))


def _forget_unwanted(rt: Runtime, paths: list[str], is_secret: Callable[[str], bool] | None) -> bool:
    """Drop from the index the hit files that are gone from disk and, when a hit is a secret (indexed by an
    older version, or before the rules said so), every indexed secret; True when anything was."""
    gone = sorted({p for p in paths if p and not os.path.exists(p)})
    if gone:
        forget_paths(rt, gone)
    met_secret = is_secret is not None and any(is_secret(p) for p in paths if p)
    if met_secret:  # all at once: a document's next path may be one too (files with equal bytes share it)
        forget_secrets(rt)
    return bool(gone) or met_secret


def _drop_secret_hits(result: SearchResult, is_secret: Callable[[str], bool] | None) -> None:
    """Whatever is left of secrets (one searched again found more) is never returned."""
    if is_secret is None:
        return
    result.hits = [h for h in result.hits if not is_secret(h._abs_path)]
    if result.documents is not None:
        result.documents = [d for d in result.documents
                            if not any(is_secret(h._abs_path) for h in d.matched_chunks + d.context_chunks)]


def _outside_roots_note(store: IndexStore, roots: tuple[Path, ...]) -> str | None:
    outside = _count_outside(store, roots)
    if outside <= 0:
        return None
    files = "1 indexed file lies" if outside == 1 else f"{outside} indexed files lie"
    return f"{files} outside the workspace roots searched here; they are not searched."


def _count_outside(store: IndexStore, roots: tuple[Path, ...]) -> int:
    """Indexed paths outside every root (they are not searched here)."""
    return store.files_outside(str(root) for root in roots)


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


ONLY_BY_MEANING = ("No query word matched: these hits are the passages nearest in meaning, which may be "
                   "unrelated. Check them, or try other words.")


def _only_by_meaning(result: SearchResult) -> bool:
    """True when there are hits and none of them matched a query word (the dense candidates alone)."""
    hits = result.hits + [h for d in result.documents or [] for h in d.matched_chunks]
    return bool(hits) and all(h.by_meaning for h in hits)


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
    kind: str = Field(description="text, pdf, docx, xlsx, pptx, html, csv, epub, odt, ods, odp or eml.")
    hits: list[Hit]
    searched: str = Field(description="'lines' (live, text files) or 'index'.")
    note: str | None = None


def search_file(
    path: Annotated[str, Field(description="The file to search (relative to the workspace root).")],
    query: QueryArg,
    max_results: Annotated[int, Field(ge=1, le=50, description="Maximum hits.")] = 5,
    context_chars: ContextArg = 0,
    use_regex: RegexArg = False,
    mode: FileModeArg = "natural",
    *,
    rt: Runtime,
    call: CallContext,
) -> SearchFileResult:
    """Search inside one file: a document is indexed on first use (reused while unchanged), a text file
    searched line by line."""
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
        with opened(open_for_read(rt.settings, real, call.session_id, shown=path,
                                   secrets=rt.secret_paths)) as fd:
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
    outcome = indexer_for(rt, call).index_file(real)
    if outcome.status == "secret":
        raise PathNotAllowed(secret_refusal(shown, outcome.reason))
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
