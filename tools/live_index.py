"""The live index: search follows the files as they change.

- `fresh_page`: before a search answers, the files of its page are checked against their indexed size and
  mtime (`indexing.freshness`: one stat per distinct file). A changed text file small enough to index
  within the inline budget is re-indexed at once (the search then runs again and answers from the new
  text); any other changed file is queued and its hits are left out, with a note saying so. Old text is
  never returned as current.
- `live_index(rt).queue` re-indexes queued paths in the background (`tools.index_queue`), and the folder
  watcher (`tools.index_watch`, started by the server, not by one-shot commands) queues what changes in
  the watched folders.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from foundation.errors import Cancelled
from foundation.settings import Settings
from foundation.waiting import about_to_wait
from tools.index_queue import (
    REINDEXING_FILE,
    SEARCHES_FILE,
    Entry,
    QueueStats,
    ReindexQueue,
    SearchGauge,
    SharedActivity,
    note_failure,
)
from tools.index_scan import stat_pass
from tools.index_watch import LOCK_KEY, FolderWatcher
from tools.runtime import Runtime, Service

if TYPE_CHECKING:
    from indexing.indexer import Indexer

log = logging.getLogger("generalagent.index")

INLINE_TEXT_BYTES = 16_000  # a changed text file up to this size is re-indexed inside the search (~25 ms here)
INLINE_TOTAL_BYTES = 32_000  # and no more than this much in one search
INLINE_SECONDS = 0.05  # nor for longer than this (checked after each file)
INLINE_MAX_BACKLOG = 8  # nothing inline while more than this many paths wait in the queue
SCAN_MAX_ENTRIES = 200_000
SWITCH_INTERVAL_S = 0.0005  # at 1M chunks, search p95 during a postings merge: 46-123 ms at 5 ms, 23-28 ms at this
INDEX_APPEARS_S = 2.0  # a server started before any index exists looks for one this often


class LiveIndex:
    """The queue (made on first use, in every process) and the watcher (started by the server)."""

    def __init__(self, rt: Runtime) -> None:
        self.rt = rt
        self.gauge = SearchGauge(SharedActivity.at(rt.settings.data_dir, SEARCHES_FILE))
        self.reindexing = SharedActivity.at(rt.settings.data_dir, REINDEXING_FILE)
        self.queue = ReindexQueue(lambda batch, stop, stats: handle(rt, self.queue, batch, stop, stats), self.gauge,
                                  self.reindexing)
        self.watcher: FolderWatcher | None = None
        self.closed = threading.Event()
        self.serving = False  # set by the server's warm-up: watch folders (one-shot commands never do)
        self._starting = threading.Lock()

    def start_watching(self) -> None:
        """Watch the stored folders (and every root with `watch_roots`) from now on; once per process."""
        s = self.rt.settings
        with self._starting:
            if self.watcher is None and s.watch_indexed and not self.closed.is_set():
                self._start(s)

    def _start(self, s: Settings) -> None:
        from tools.index_services import index_store

        extra: tuple[str, ...] = ()
        if s.watch_roots:
            from foundation.paths import roots_for

            extra = tuple(str(r) for r in roots_for(s))
        database = self.rt.database

        def lead() -> AbstractContextManager[bool]:  # (never, in an HTTP worker: the watcher process leads)
            return nullcontext(False) if _WATCHED_ELSEWHERE.is_set() else database.advisory_lock(LOCK_KEY, timeout=0)

        self.watcher = FolderWatcher(
            index_store(self.rt), lead, self.queue, extra=extra,
            polling=s.watch_polling, skip=(Path(os.path.realpath(s.data_dir)),),
        )
        self.watcher.start()

    def reindexing_elsewhere(self) -> bool:
        """True while another process of the data dir re-indexes changed files (`--workers N`: the watcher)."""
        return not self.queue.working and self.reindexing is not None and self.reindexing.running()

    def close(self) -> None:
        self.closed.set()
        if self.watcher is not None:
            self.watcher.close()
        self.queue.close()
        self.gauge.close()


_WATCHED_ELSEWHERE = threading.Event()


def watch_in_another_process() -> None:
    """This process is an HTTP worker of `--workers N`: a process of its own watches the folders
    (mcp_server.transports._watcher); this one's watcher only follows (index_status says so)."""
    _WATCHED_ELSEWHERE.set()


def prefer_searches() -> None:
    """A serving process hands the GIL over every SWITCH_INTERVAL_S (Python's default: 5 ms): a search
    thread that gave it up (a database call, a numpy operation) waits that long for it again each time
    while a background thread computes (a postings merge, the re-index queue's extraction and analysis)."""
    import sys

    sys.setswitchinterval(SWITCH_INTERVAL_S)


def warm_up_watcher(rt: Runtime) -> None:
    """Start-up (the server's warm-up thread): searches first (`prefer_searches`); then watch the stored
    folders from now on, each after its stat pass (with `watch_roots`, every root too). A data dir without
    an index has nothing to watch."""
    prefer_searches()
    if not rt.settings.watch_indexed:
        return
    live_index(rt).serving = True
    if rt.settings.watch_roots or rt.database.backend == "postgresql":
        live_index(rt).start_watching()
        return
    live = live_index(rt)  # an index made later (by this process or another) is watched too, and its postings
    # follow it (the search warm-up follows only an index that exists); no file written before

    def when_indexed() -> None:
        from tools.index_services import has_index, memory_index

        while not live.closed.is_set():
            if has_index(rt):
                live.start_watching()
                memory_index(rt).follow()
                return
            live.closed.wait(INDEX_APPEARS_S)

    threading.Thread(target=when_indexed, name="index-watch-start", daemon=True).start()


def stop_live_index(rt: Runtime) -> None:
    """The server stops: its watcher and re-index queue stop (a file being written is finished first)."""
    live = _LIVE.peek(rt)
    if live is not None:
        live.close()


def search_running(rt: Runtime) -> AbstractContextManager[object]:
    """Held while a search runs: the re-index queue waits for it (none made yet: nothing to wait for; a
    quick search on the event loop makes nothing)."""
    live = _LIVE.peek(rt)
    return live.gauge if live is not None else nullcontext()


def live_index(rt: Runtime) -> LiveIndex:
    return _LIVE.of(rt)


def peek_live_index(rt: Runtime) -> LiveIndex | None:
    return _LIVE.peek(rt)


_LIVE: Service[LiveIndex] = Service(LiveIndex)


# -- search time ---------------------------------------------------------------------------------


@dataclass
class PageCheck:
    reindexed: int = 0  # changed files indexed inside this search: search again
    pending: frozenset[str] = frozenset()  # changed files queued: their hits are left out


def fresh_page(rt: Runtime, paths: list[str], roots: tuple[Path, ...], session_id: str | None,
               inline: bool = True) -> PageCheck:
    """Check the page's files (`paths`: indexed real paths) against the index; see the module doc.
    `inline=False`: the page is final, every changed file is queued."""
    from indexing.freshness import changed_files
    from tools.index_services import embed_new_chunks, index_store, indexer_for

    changed = changed_files(index_store(rt), paths)
    if not changed:
        return PageCheck()
    about_to_wait()  # an index write, or a queue (a quick call moves to a worker thread)
    live = live_index(rt)
    queue = live.queue
    busy = queue.queued() > INLINE_MAX_BACKLOG or live.reindexing_elsewhere()  # (a burst: the queue does it faster
    # alone; an inline write would wait for another process's write transaction)
    now, budget = [], INLINE_TOTAL_BYTES if inline and not busy else 0
    for c in sorted(changed, key=lambda c: c.size):
        if c.size <= min(INLINE_TEXT_BYTES, budget) and _is_text(c.path):
            now.append(c.path)
            budget -= c.size
    done = _index_within(indexer_for(rt, session_id=session_id), now, INLINE_SECONDS) if now else []
    if done:
        embed_new_chunks(rt, wait=True)  # the search runs again: by meaning too, when their vectors come in time
    later = [c.path for c in changed if c.path not in done]
    queue.add([Entry(p, roots) for p in later], first=True)
    return PageCheck(reindexed=len(done), pending=frozenset(later))


def _index_within(indexer: Indexer, paths: list[str], seconds: float) -> list[str]:
    """Index `paths` one by one until `seconds` have passed (checked after each); returns those indexed."""
    deadline, done = time.monotonic() + seconds, []
    for path in paths:
        if time.monotonic() > deadline:
            break
        indexer.index_files([Path(path)])
        done.append(path)
    return done


def _is_text(path: str) -> bool:
    from foundation.errors import ExtractionError
    from indexing.extract import detect_kind

    try:
        return detect_kind(Path(path)) == "text"
    except ExtractionError:
        return False


def changed_note(count: int) -> str:
    files = "1 file" if count == 1 else f"{count} files"
    verb = "it is" if count == 1 else "they are"
    return (f"{files} changed since {'it was' if count == 1 else 'they were'} indexed; {verb} being re-indexed "
            "and left out of these results. Search again in a moment.")


# -- the queue's work ----------------------------------------------------------------------------


def handle(rt: Runtime, queue: ReindexQueue, batch: list[Entry], should_stop: Callable[[], bool],
           stats: QueueStats) -> None:
    """Handle queued entries: files indexed a roots-group at a time, new folders indexed whole, gone paths
    forgotten, stat passes turned into the entries they find."""
    from tools.index_services import embed_new_chunks, indexer_for

    files: dict[tuple[Path, ...], list[Path]] = {}
    gone: list[str] = []
    for entry in batch:
        if should_stop():
            raise Cancelled("the server stops")
        if entry.scan:
            queue.add(stat_pass(rt, entry))  # (the files it finds are handled after this batch)
            continue
        kind = _kind(entry.path, entry.roots)
        if kind == "gone":
            gone.append(entry.path)
        elif kind == "dir":
            report = indexer_for(rt, should_cancel=should_stop, roots=entry.roots, busy=queue.busy,
                                 pause=queue.pause).index_tree(Path(entry.path))
            _count(stats, report)
        elif kind == "file":
            files.setdefault(entry.roots, []).append(Path(entry.path))
    for roots, paths in files.items():
        indexer = indexer_for(rt, should_cancel=should_stop, roots=roots, busy=queue.busy, pause=queue.pause)
        _count(stats, indexer.index_files(paths))
    if gone:
        stats.removed += _forget(rt, gone)
    embed_new_chunks(rt)


def _kind(path: str, roots: tuple[Path, ...]) -> str:
    """gone, dir, file (a supported regular file) or other. As the folder walk: a symlinked file counts when
    its target is inside the roots, a symlinked folder never."""
    from foundation.paths import is_within
    from indexing.extract import is_supported

    try:
        info = os.stat(path)
    except OSError:
        return "gone"
    if os.path.islink(path):
        inside = is_within(Path(os.path.realpath(path)), roots)
        return "file" if inside and stat.S_ISREG(info.st_mode) and is_supported(path) else "other"
    if stat.S_ISDIR(info.st_mode):
        return "dir"
    return "file" if stat.S_ISREG(info.st_mode) and is_supported(path) else "other"


def _count(stats: QueueStats, report: object) -> None:
    from indexing.indexer import IndexReport

    assert isinstance(report, IndexReport)
    stats.reindexed += report.indexed
    stats.removed += report.removed
    for failed in report.failed:
        note_failure(stats, failed.path, failed.reason)


def _forget(rt: Runtime, gone: list[str]) -> int:
    """Forget gone paths and everything indexed under them (a folder); returns the paths forgotten."""
    from tools.index_services import forget_paths, index_store

    store = index_store(rt)
    targets: list[str] = []
    for path in gone:
        if os.path.exists(path):  # it came back meanwhile (an editor's rename)
            continue
        if store.file_row(path) is not None:
            targets.append(path)
        targets += [row.path for row in store.files_under(path) if not os.path.exists(row.path)]
    if targets:
        forget_paths(rt, targets)
    return len(targets)
