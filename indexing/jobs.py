"""Index runs as jobs: one run per path at a time, in the caller's thread (index_path wait=true) or
in a background thread (wait=false) that outlives the call, the client's timeout and its disconnect.

Every run is recorded in the index database (`index_jobs`) when it starts, every second while it
runs and when it ends, so index_status tells the truth after a cancel, a cut-off or a restart: a
run left "running" by a process that is gone shows as "interrupted". Files a stopped run indexed
stay indexed; the next run skips them (unchanged size and mtime) and continues with the rest.

A run holds the deployment-wide lock `index-path:<path>` (`Database.advisory_lock`: a lock file
with SQLite, an advisory lock with PostgreSQL) while it runs, so one path is indexed by one run
across every server process, and a stored "running" row whose lock is free is "interrupted".
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from foundation.errors import Cancelled, Conflict

if TYPE_CHECKING:
    from foundation.storage import Database
    from indexing.indexer import IndexReport
    from indexing.store import IndexStore, JobRow

Progress = Callable[[int, int, str], None]
Work = Callable[[Callable[[], bool], Progress, "IndexReport"], None]  # (should_cancel, progress, report)
SAVE_EVERY_S = 1.0
WAIT_POLL_S = 0.25
CLOSE_WAIT_S = 5.0
CLAIM_WAIT_S = 0.25  # another process's status check holds a free path's lock for a moment
log = logging.getLogger("generalagent.index")


@dataclass
class IndexJob:
    row: JobRow
    report: IndexReport
    background: bool
    cancel: threading.Event = field(default_factory=threading.Event)
    finished: threading.Event = field(default_factory=threading.Event)
    saved_at: float = 0.0
    held: ExitStack = field(default_factory=ExitStack)  # the path's cross-process lock
    server_stopping: bool = False  # set by JobRegistry.close: the run is stopped, not cancelled by a caller

    def snapshot(self) -> JobRow:
        """The row with the counts so far."""
        r = self.report
        return replace(
            self.row, indexed=r.indexed, unchanged=r.unchanged, failed=len(r.failed), removed=r.removed,
            chunks_added=r.chunks_added,
        )


class JobRegistry:
    """The index runs of one server: live ones in memory, all of them in the store."""

    def __init__(self, store: IndexStore, database: Database | None = None) -> None:
        self.store = store
        self.database = database  # None: runs are only kept apart inside this process
        self._live: dict[str, IndexJob] = {}
        self._lock = threading.Lock()

    def claim(self, path: str, background: bool) -> tuple[IndexJob, bool]:
        """A new job for `path`, or (the running one, True) when `path` is being indexed already."""
        from indexing.indexer import IndexReport
        from indexing.store import JobRow

        with self._lock:
            if path in self._live:
                return self._live[path], True
            row = JobRow(id=uuid.uuid4().hex[:12], path=path, state="running", started_at=time.time())
            job = IndexJob(row, IndexReport(), background)
            if not self._hold(job):
                raise Conflict(f"{path} is being indexed by another server process; index_status shows its "
                               "progress. Call index_path again when it has finished.")
            self._live[path] = job
        try:
            self.store.save_job(row)
        except BaseException:
            self._release(job)
            raise
        return job, False

    def _path_lock(self, path: str, timeout: float) -> AbstractContextManager[bool] | None:
        return None if self.database is None else self.database.advisory_lock(f"index-path:{path}", timeout=timeout)

    def _hold(self, job: IndexJob) -> bool:
        """Take `job`'s path lock (waiting CLAIM_WAIT_S at most); False when another process holds it."""
        lock = self._path_lock(job.row.path, CLAIM_WAIT_S)
        if lock is None:
            return True
        if job.held.enter_context(lock):
            return True
        job.held.close()
        return False

    def _release(self, job: IndexJob) -> None:
        with self._lock:
            if self._live.get(job.row.path) is job:
                del self._live[job.row.path]
        try:
            job.held.close()
        except Exception:  # a lost database connection frees its locks anyway
            log.exception("releasing the lock of index job %s", job.row.id)

    def run(self, job: IndexJob, work: Work, should_cancel: Callable[[], bool], progress: Progress) -> None:
        """Run `work` for `job` in this thread and record how it ended (re-raises its error)."""
        def on_progress(done: int, total: int, message: str) -> None:
            job.row.done, job.row.total = done, total
            progress(done, total, message)
            if time.monotonic() - job.saved_at >= SAVE_EVERY_S:
                job.saved_at = time.monotonic()
                self.store.save_job(job.snapshot())

        state, error = "failed", "stopped unexpectedly"
        try:
            work(lambda: job.cancel.is_set() or should_cancel(), on_progress, job.report)
            state, error = "done", ""
        except Cancelled as exc:
            state, error = "cancelled", str(exc)
            raise
        except Exception as exc:
            error = f"{type(exc).__name__}: {str(exc)[:300]}"
            raise
        finally:
            if job.server_stopping and state != "done":  # whatever it met on the way out (a pool shut down)
                state, error = "interrupted", (
                    f"The server stopped after {job.row.done} of {job.row.total} files; those are kept. "
                    "Run index_path again to continue (indexed files are skipped).")
            self._finish(job, state, error)

    def start_background(self, job: IndexJob, work: Work) -> None:
        """Run `job` in a daemon thread of its own; it is not tied to any call."""
        def target() -> None:
            try:
                self.run(job, work, lambda: False, lambda done, total, message: None)
            except Cancelled:  # recorded (cancelled or interrupted); nothing went wrong
                pass
            except Exception:
                log.exception("index job %s for %s failed", job.row.id, job.row.path)

        threading.Thread(target=target, name=f"index-job-{job.row.id}", daemon=True).start()

    def wait(self, job: IndexJob, cancelled: Callable[[], bool], progress: Progress) -> None:
        """Wait for a job someone else started; a cancelled waiter leaves the job running."""
        while not job.finished.wait(WAIT_POLL_S):
            if cancelled():
                raise Cancelled(f"Stopped waiting; index job {job.row.id} keeps running (see index_status).")
            progress(job.row.done, job.row.total, "indexing")

    def _finish(self, job: IndexJob, state: str, error: str) -> None:
        job.row = replace(job.snapshot(), state=state, error=error, finished_at=time.time())
        try:
            self.store.save_job(job.row)
        except Exception:  # the run's files are written; only its record failed
            log.exception("cannot record the end of index job %s", job.row.id)
        self._release(job)
        job.finished.set()

    # -- reading -------------------------------------------------------------------------------

    def recent(self, limit: int = 5) -> list[JobRow]:
        """Running jobs, then the newest finished ones (`limit` in all, at least every running one)."""
        with self._lock:
            live = [job.snapshot() for job in self._live.values()]
        seen = {row.id for row in live}
        stored = [self._as_seen(row) for row in self.store.recent_jobs(limit + len(live)) if row.id not in seen]
        return (live + stored)[: max(limit, len(live))]

    def covering(self, path: str) -> JobRow | None:
        """The newest run of `path` or of a folder containing it (live counts for a running one)."""
        with self._lock:
            live = [job for job in self._live.values() if _covers(job.row.path, path)]
        if live:
            return max(live, key=lambda job: job.row.started_at).snapshot()
        row = self.store.last_job_covering(path)
        return self._as_seen(row) if row is not None else None

    def _as_seen(self, row: JobRow) -> JobRow:
        """A stored row; "running" without a live job means its process stopped: "interrupted"."""
        if row.state != "running":
            return row
        with self._lock:
            job = self._live.get(row.path)
        if job is not None:  # this process runs the path: the row is that run, or one that was cut off
            return job.snapshot() if job.row.id == row.id else replace(row, state="interrupted")
        return row if self._running_elsewhere(row.path) else replace(row, state="interrupted")

    def _running_elsewhere(self, path: str) -> bool:
        """True when another process holds `path`'s lock (its run is alive; the row has its counts)."""
        lock = self._path_lock(path, 0)
        if lock is None:
            return False
        with lock as free:
            return not free

    def close(self) -> None:
        """The server stops: stop the running jobs at their next file (they record themselves as
        interrupted, their files so far kept) and wait a little for them."""
        with self._lock:
            jobs = list(self._live.values())
        for job in jobs:
            job.server_stopping = True
            job.cancel.set()
        for job in jobs:
            job.finished.wait(CLOSE_WAIT_S)


def _covers(folder: str, path: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")
