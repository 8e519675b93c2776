"""The live index's re-index queue: paths whose files changed (seen by the folder watcher, by its start-up
stat pass, or by a search that met a changed file) are re-indexed in one background thread, a batch at a
time, after searches: between transactions the thread waits while searches run (`SearchGauge`), so it
never makes one slower than a transaction (`indexing.indexer.BATCH_SECONDS`). Queued paths are de-duplicated (an editor's several events per save make one entry).

An entry is a path and the roots it may be read under (the watched folder, or the searching session's
roots). What it is is decided when it is handled: a file is indexed (skipped when its size and mtime
are the indexed ones), a folder that appeared is indexed whole, a path that is gone is forgotten with
everything indexed under it. A `scan` entry is a folder's quick stat pass (size + mtime, no hashing).
A file that fails to extract is reported once per version (size, mtime): the index records the failure
and does not read it again until it changes.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from foundation.errors import Cancelled

log = logging.getLogger("generalagent.index")

BATCH_MAX = 64  # files handled in one indexer call at most
IDLE_WAIT_S = 0.5  # a batch waits this long at most for the searches running to end
SHARED_POLL_S = 0.003  # how often it looks whether the other processes' searches have ended
SEARCHES_FILE = ".searches.lock"  # in the data dir: held while a process searches (`SharedActivity`)
REINDEXING_FILE = ".reindexing.lock"  # and while a process re-indexes a batch of changed files
FAILURES_KEPT = 20


@dataclass(frozen=True)
class Entry:
    path: str
    roots: tuple[Path, ...]
    scan: bool = False  # a folder's stat pass, not a change


class SearchGauge:
    """How many searches run now; background work waits for none to run (a bounded wait). With `shared`, the
    searches of the other processes on this data dir count too (`--workers N`: the worker that re-indexes
    yields to the searches the others serve)."""

    def __init__(self, shared: SharedActivity | None = None) -> None:
        self._active = 0
        self._idle = threading.Condition()
        self._shared = shared

    def __enter__(self) -> SearchGauge:
        with self._idle:
            self._active += 1
            if self._active == 1 and self._shared is not None:
                self._shared.mark(True)
        return self

    def __exit__(self, *exc: object) -> None:
        with self._idle:
            self._active -= 1
            if not self._active:
                if self._shared is not None:
                    self._shared.mark(False)
                self._idle.notify_all()

    def wait_idle(self, at_most: float = IDLE_WAIT_S, until: Callable[[], bool] = lambda: False) -> None:
        """Until no search runs (the other processes' are looked at every SHARED_POLL_S), `until()` is
        True (asked as often), or `at_most` seconds passed."""
        deadline = time.monotonic() + at_most
        with self._idle:
            while not until():
                if self._active == 0 and (self._shared is None or not self._shared.running()):
                    return
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._idle.wait(min(left, SHARED_POLL_S))

    def close(self) -> None:
        with self._idle:
            shared, self._shared = self._shared, None
        if shared is not None:
            shared.close()


class SharedActivity:
    """Something any process of this data dir may be doing (searching, re-indexing): a process holds a shared
    `flock` on the activity's file while it does it, and a probe that cannot take it exclusively sees one.
    The kernel lets go of a lock when its process ends, so a killed process never leaves one behind. The
    file is made at the first use (a fresh data dir gets none). Linux and macOS (no `fcntl` on Windows: each
    process then sees its own activity only)."""

    def __init__(self, path: Path) -> None:
        import fcntl

        self._fcntl = fcntl
        self.path = path
        self._fds: tuple[int, int] | None = None  # (mark, probe)
        self._opening = threading.Lock()

    @classmethod
    def at(cls, data_dir: Path, name: str) -> SharedActivity | None:
        """The data dir's file `name`; None without `fcntl`."""
        try:
            return cls(data_dir / name)
        except ImportError:
            return None

    def _opened(self) -> tuple[int, int] | None:
        with self._opening:
            if self._fds is None:
                try:
                    mark = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
                except OSError:  # a read-only or vanished data dir: nobody sees it
                    return None
                self._fds = (mark, os.open(self.path, os.O_RDWR | os.O_CLOEXEC))
            return self._fds

    def mark(self, on: bool) -> None:
        """This process starts it (`on`) or has ended it."""
        fds, f = self._opened() if on else self._fds, self._fcntl
        if fds is None:
            return
        for _ in range(3):  # a probe holds the file for a few microseconds at most
            try:
                f.flock(fds[0], f.LOCK_SH | f.LOCK_NB if on else f.LOCK_UN)
                return
            except OSError:
                time.sleep(0)

    def running(self) -> bool:
        """True while any process (this one included) does it."""
        if self._fds is None and not self.path.exists():
            return False  # nobody marked it yet (and a probe makes no file)
        fds, f = self._opened(), self._fcntl
        if fds is None:
            return False
        try:
            f.flock(fds[1], f.LOCK_EX | f.LOCK_NB)
        except OSError:
            return True
        f.flock(fds[1], f.LOCK_UN)
        return False

    def close(self) -> None:
        with self._opening:
            fds, self._fds = self._fds, None
        for fd in fds or ():
            os.close(fd)


@dataclass
class QueueStats:
    done: int = 0  # entries handled
    reindexed: int = 0  # files indexed anew (changed content)
    removed: int = 0
    last_batch_at: float = 0.0
    failures: dict[str, tuple[int, int, str]] = field(default_factory=dict)  # path -> (size, mtime, reason)


Handler = Callable[[list[Entry], Callable[[], bool], QueueStats], None]


class ReindexQueue:
    """Entries waiting to be handled, in order, each once; one daemon thread handles them in batches."""

    def __init__(self, handle: Handler, gauge: SearchGauge, reindexing: SharedActivity | None = None) -> None:
        self._handle = handle
        self.gauge = gauge
        self.reindexing = reindexing  # marked while a batch is handled; closed with the queue
        self.stats = QueueStats()
        self._pending: dict[Entry, None] = {}
        self._lock = threading.Condition()
        self._closing = threading.Event()
        self._thread: threading.Thread | None = None
        self.working: list[Entry] = []

    def add(self, entries: list[Entry], first: bool = False) -> None:
        """Queue `entries` (at the front when `first`: a search is waiting for them)."""
        if not entries or self._closing.is_set():
            return
        with self._lock:
            if first:
                rest = [e for e in self._pending if e not in entries]
                self._pending = dict.fromkeys([*entries, *rest])
            else:
                self._pending.update(dict.fromkeys(entries))
            self._lock.notify_all()
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="live-index", daemon=True)
                self._thread.start()

    def queued(self) -> int:
        with self._lock:
            return len(self._pending) + len(self.working)

    def holds(self, path: str) -> bool:
        with self._lock:
            return any(e.path == path for e in [*self._pending, *self.working])

    def wait_empty(self, timeout: float) -> bool:
        """True once nothing is queued or being handled (tests, the CLI)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._pending or self.working:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._lock.wait(min(left, 0.1))
        return True

    def close(self) -> None:
        self._closing.set()
        with self._lock:
            self._pending.clear()
            self._lock.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        if self.reindexing is not None and (self._thread is None or not self._thread.is_alive()):
            self.reindexing.close()  # (a batch still running keeps it: its end unmarks it)

    def _take(self) -> list[Entry] | None:
        with self._lock:
            while not self._pending and not self._closing.is_set():
                self._lock.wait(1.0)
            if self._closing.is_set():
                return None
            batch = list(self._pending)[:BATCH_MAX]
            for entry in batch:
                del self._pending[entry]
            self.working = batch
            return batch

    def _run(self) -> None:
        while (batch := self._take()) is not None:
            self.gauge.wait_idle()
            if self.reindexing is not None:
                self.reindexing.mark(True)
            try:
                self._handle(batch, self._should_stop, self.stats)
            except Cancelled:
                pass
            except Exception:  # one bad batch never stops the queue
                log.exception("re-indexing %d changed paths failed", len(batch))
            finally:
                if self.reindexing is not None:
                    self.reindexing.mark(False)
            with self._lock:
                self.stats.done += len(batch)
                self.stats.last_batch_at = time.time()
                self.working = []
                self._lock.notify_all()

    def busy(self) -> bool:
        """The queue closes (asked inside a transaction). A search running does not end one: each commit is
        a new index generation, and at 1M chunks the first search of each re-weighs its terms' postings
        (`indexing.delta`): a burst of 100 saves, a commit per search, had search p50 3x its quiet value. A
        search that writes (an inline re-index) ends it by waiting for the write (`writers_waiting`)."""
        return self._closing.is_set()

    def pause(self, until: Callable[[], bool]) -> None:
        """Before a file is read and analysed, or written: wait while searches run (bounded; see Indexer)."""
        self.gauge.wait_idle(until=until)

    def _should_stop(self) -> bool:
        """Checked between files: yields to running searches first."""
        self.gauge.wait_idle()
        return self._closing.is_set()


def note_failure(stats: QueueStats, path: str, reason: str) -> None:
    """Report a file that failed to index once per version (size, mtime); keep the last few."""
    try:
        info = os.stat(path)
        version = (info.st_size, info.st_mtime_ns)
    except OSError:
        version = (-1, -1)
    known = stats.failures.get(path)
    if known is not None and known[:2] == version:
        return
    log.warning("live index: %s cannot be indexed: %s", path, reason[:200])
    stats.failures.pop(path, None)
    stats.failures[path] = (*version, reason[:300])
    while len(stats.failures) > FAILURES_KEPT:
        del stats.failures[next(iter(stats.failures))]
