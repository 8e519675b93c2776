"""Index management: index_path (in the foreground or as a background job), index_status,
remove_from_index and cleanup_index. The database is `<data_dir>/index.sqlite3`, or PostgreSQL with `database_url`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

from pydantic import (
    BaseModel,
    Field,
)

from foundation.errors import NotFound, PathNotAllowed
from foundation.paths import display_path, resolve_path, roots_for
from foundation.schemas import OmitNone
from indexing.jobs import IndexJob, Progress, Work
from tools.runtime import CallContext, Runtime
from tools.skills import skill_hint
from tools.watch_tools import WatcherInfo, watch_folder, watcher_info

if TYPE_CHECKING:  # the index modules load on first use (start-up speed)
    from indexing.indexer import IndexReport
    from indexing.store import IndexStore, JobRow
from tools.index_services import (
    forget_paths,
    index_jobs,
    index_of,
    index_store,
    indexer_for,
    memory_index,
    secret_refusal,
    secrets_note,
    vector_worker,
)

STATUS_WALK_MAX = 20_000  # index_status counts unindexed files among this many folder entries
SecretRule = Callable[[str], str | None]  # the id of the rule that makes a path a secret, or None


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
    secrets: int = Field(default=0, description="Files skipped as secrets (keys, credentials, .env); never indexed.")
    chunks_added: int
    seconds: float
    note: str | None = None
    watched: bool | None = Field(default=None, description="For folders: true when watched from now on (changes "
                                 "re-indexed as they happen, across restarts; unwatch_path stops it).")
    skill_hint: str | None = Field(default=None, description="A skill's instructions for this file type (or where).")  # skills


def index_path(
    path: Annotated[str, Field(description="File or folder to index (relative to the workspace root).")],
    recursive: Annotated[bool, Field(description="Include sub-folders.")] = True,
    wait: Annotated[
        bool,
        Field(description="False: return at once with a job id; index_status shows progress."),
    ] = True,
    watch: Annotated[
        bool,
        Field(description="Folders: re-index changes as they happen, across restarts. False: index once."),
    ] = True,
    *,
    rt: Runtime,
    call: CallContext,
) -> IndexResult:
    """Index a file or folder (any format search_documents reads) and keep a folder indexed as its files
    change. Unchanged files are skipped; a stopped run continues. Secrets (keys, credentials, .env files)
    are never indexed."""
    real = resolve_path(rt.settings, path, must_exist=True, session_id=call.session_id)
    roots = roots_for(rt.settings, call.session_id)
    if not real.is_dir():
        _refuse_secret(rt, real, path, roots)
    else:
        _check_readable_folder(real, path)
    jobs = index_jobs(rt)
    job, joined = jobs.claim(str(real), background=not wait)
    if joined:
        if wait:
            jobs.wait(job, lambda: call.cancelled, call.report)
        return _index_result(job, roots, f"Joined index job {job.row.id}, already running for this path.")
    watched: list[bool] = []  # whether the folder is watched now, once the run is done
    work = _index_work(rt, real, recursive, call.session_id, watch if recursive else False, watched)
    if not wait:
        jobs.start_background(job, work)
        return _index_result(job, roots, f"Indexing in the background (job {job.row.id}); index_status shows "
                                         "its progress. search_documents finds files as they are indexed.")
    jobs.run(job, work, should_cancel=lambda: call.cancelled, progress=call.report)
    result = _index_result(job, roots, hint=None if real.is_dir() else skill_hint(rt, real, call.session_id))
    result.watched = watched[0] if watched else None
    return result


def _refuse_secret(rt: Runtime, real: Path, shown: str, roots: tuple[Path, ...]) -> None:
    """A file the approval policy treats as a secret is not indexed (an entry from before is forgotten)."""
    secrets = index_of(rt).secret_filter(roots)
    rule = secrets.rule(real) if secrets is not None else None
    if rule is None:
        return
    if index_store(rt).file_row(str(real)) is not None:
        forget_paths(rt, [str(real)])
    raise PathNotAllowed(secret_refusal(shown, rule))


def _check_readable_folder(real: Path, shown: str) -> None:
    try:
        with os.scandir(real):
            pass
    except PermissionError:
        raise PathNotAllowed(f"Folder {shown!r} cannot be read: permission denied. Give the server's user read "
                             "access to it, or index another folder.") from None


def _index_work(rt: Runtime, real: Path, recursive: bool, session_id: str | None, watch: bool,
                notes: list[bool]) -> Work:
    """The run; a folder indexed (recursively) whole is then watched (`watch`), or no longer (`notes`: whether
    it is watched now)."""
    def work(should_cancel: Callable[[], bool], progress: Progress, report: IndexReport) -> None:
        indexer = indexer_for(rt, should_cancel=should_cancel, session_id=session_id)
        if real.is_dir():
            indexer.index_tree(real, recursive=recursive, progress=progress, report=report)
            if not report.truncated:
                notes.append(watch_folder(rt, real, watch))
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
    if report.secrets:
        note = _join(note, secrets_note(report.secrets, report.secrets_denied))
    if report.walk_note:
        note = _join(note, report.walk_note[0].upper() + report.walk_note[1:] + ".")
    if row.state == "running" and job.finished.is_set():
        row = job.row
    return IndexResult(
        path=display_path(Path(row.path), roots), job_id=row.id, state=row.state, files_done=row.done,
        files_total=row.total, indexed=report.indexed, unchanged=report.unchanged, removed=report.removed,
        failed=failed, skipped=report.skipped, secrets=report.secrets, chunks_added=report.chunks_added,
        seconds=round((row.finished_at or time.time()) - row.started_at, 2), note=note,
        skill_hint=hint,  # skills: the file-type hint
    )


def _join(a: str | None, b: str | None) -> str | None:
    return " ".join(x for x in (a, b) if x) or None


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
    secrets: int | None = Field(default=None, description="For folders: files skipped as secrets (never indexed).")
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
    unread_scanned_pages: int = Field(default=0, description="PDF pages without a text layer left unread (no "
                                      "OCR installed, or out of time); the documents' warnings say which.")
    search: str = ""
    jobs: list[JobInfo] = Field(default_factory=list, description="Index runs: running ones, then the latest.")
    vectors: str | None = Field(default=None, description="Hybrid mode: chunks embedded so far.")
    watcher: WatcherInfo | None = Field(default=None, description="Watched folders and their re-index queue.")
    path_status: PathStatus | None = None


def index_status(
    path: Annotated[
        str | None, Field(description="A file or folder; omit for totals.")
    ] = None,
    *,
    rt: Runtime,
    call: CallContext,
) -> IndexStatus:
    """What is indexed: totals, or one file's or folder's state (indexed? unchanged since? chunks?), the
    index jobs and the folder watcher."""
    store = index_store(rt)
    totals = store.totals()
    roots = roots_for(rt.settings, call.session_id)
    status = IndexStatus(
        database=store.where(), database_bytes=store.db_bytes(), files=totals["files"],
        failed_files=totals["failed"], documents=totals["documents"], chunks=totals["chunks"],
        characters=totals["chars"], unread_scanned_pages=store.unread_scanned_pages(),
        search=memory_index(rt).state(*store.generation()),
        jobs=[_job_info(row, roots) for row in index_jobs(rt).recent()],
        vectors=worker.status() if (worker := vector_worker(rt)) is not None else None,
        watcher=watcher_info(rt, roots),
    )
    if path:
        real = resolve_path(rt.settings, path, session_id=call.session_id)
        job = index_jobs(rt).covering(str(real))
        secrets = index_of(rt).secret_filter(roots)
        status.path_status = _path_status(store, real, display_path(real, roots), secrets.rule if secrets else None)
        if status.path_status.indexed or real.exists():  # a last run says nothing of a path that is nowhere
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


def _path_status(store: IndexStore, real: Path, shown: str, secret: SecretRule | None) -> PathStatus:
    row = store.file_row(str(real))
    if row is not None:
        chunks = store.document_chunks(row.doc_id) if row.doc_id is not None else None
        return PathStatus(
            path=shown, indexed=row.error is None, fresh=_fresh(row.path, row.size, row.mtime_ns),
            indexed_at=_iso(row.indexed_at), chunks=chunks, error=row.error,
        )
    rule = secret(str(real)) if secret is not None and not real.is_dir() else None
    if rule:
        return PathStatus(path=shown, indexed=False, note=f"{shown} looks like a secret (rule {rule}); it is not indexed.")
    rows = store.files_under(str(real))
    if not rows and not real.exists():
        return PathStatus(
            path=shown, indexed=False,
            note=f"{shown} does not exist: no file or folder there, and nothing under it is indexed. "
                 "Check the path with list_workspace_files (enable_tools([\"list_workspace_files\"]) first "
                 "if it is not listed).",
        )
    missing, secrets = _not_indexed(real, {r.path for r in rows}, secret) if real.is_dir() else (0, 0)
    if not rows:
        note = f"{missing} supported files here are not indexed; run index_path." if missing else None
        folder = real.is_dir()  # a file's own counts: none
        return PathStatus(path=shown, indexed=False, not_indexed=missing if folder else None,
                          secrets=secrets if folder else None, note=note)
    stale = sum(not _fresh(r.path, r.size, r.mtime_ns) for r in rows[:20_000])
    return PathStatus(
        path=shown, indexed=True, fresh=stale == 0 and missing == 0, files=len(rows), stale=stale,
        failed=sum(r.error is not None for r in rows), indexed_at=_iso(max(r.indexed_at for r in rows)),
        not_indexed=missing, secrets=secrets,
        note=f"{missing} supported files are not indexed yet; run index_path to add them." if missing else None,
    )


def _not_indexed(folder: Path, indexed: set[str], secret: SecretRule | None) -> tuple[int, int]:
    """Supported files under `folder` (first STATUS_WALK_MAX entries) that the index does not have: those
    to be indexed, and the secrets (never indexed)."""
    from foundation.filewalk import FileWalk
    from indexing.extract import is_supported

    missing = secrets = 0
    for entry in FileWalk(folder, max_depth=64, max_entries=STATUS_WALK_MAX):
        if not is_supported(entry.path) or str(entry.path) in indexed:
            continue
        if secret is not None and secret(str(entry.path)):
            secrets += 1
        else:
            missing += 1
    return missing, secrets


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

    def progress(done: int) -> None:
        if done % 100 == 0:
            call.report(done, len(targets), "removing")

    forget_paths(rt, targets, before=call.check_cancelled, after=progress)
    vacuumed = _vacuum_if_worthwhile(store)
    roots = roots_for(rt.settings, call.session_id)
    return RemoveResult(
        removed_paths=len(targets), removed_documents=docs_before - store.totals()["documents"],
        examples=[display_path(Path(t), roots) for t in targets[:20]], vacuumed=vacuumed,
        database_bytes=store.db_bytes(),
    )


def _vacuum_if_worthwhile(store: IndexStore) -> bool:
    if not store.worth_vacuum():
        return False
    store.vacuum()
    return True
