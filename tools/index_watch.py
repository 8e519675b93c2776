"""The folder watcher of the live index: the watched folders (kept in the index's meta table, so they are
watched across restarts and by whichever server process leads) are watched with `watchfiles` (the Rust
`notify` crate: inotify, FSEvents, ReadDirectoryChangesW), falling back to polling when events cannot be
had (inotify watches run out, or `watch_polling` is set). Changes are debounced (a batch is yielded once
no event came for STEP_MS), filtered by the indexing rules (no hidden entries, none of the server's own
folders) and queued (`tools.index_queue`); when the watch starts, each folder gets a quick stat pass
that catches what changed while nobody watched.

One watcher per data store: the process that holds the advisory lock `index-watcher` watches, the others
retry now and then (a follower takes over when the leader stops) and see its writes through the index
generation they already follow. Every META_CHECK_S the leader re-reads the watched folders (another
process's index_path may have added one) and checks that they still exist (a deleted watched folder's
entries are forgotten; it is watched again when it comes back).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from foundation.paths import INDEX_DIR_NAMES
from tools.index_queue import Entry, ReindexQueue

if TYPE_CHECKING:
    from indexing.store import IndexStore

log = logging.getLogger("generalagent.index")

WATCHED_KEY = "watched_folders"  # meta: JSON list of the watched folders (real absolute paths)
LOCK_KEY = "index-watcher"
STEP_MS = 80  # a batch of events is handed over once none came for this long (an editor's save: one batch)
DEBOUNCE_MS = 1_600  # and at the latest after this long (a long burst: `git checkout`)
TIMEOUT_MS = 1_000  # the watch wakes this often when nothing happens (checks the folder list)
META_CHECK_S = 2.0
FOLLOW_RETRY_S = 5.0  # a follower tries to lead this often
POLL_DELAY_MS = 2_000  # polling: each folder's files are listed and stat'ed this often
RETRY_S = 2.0


def watched_folders(store: IndexStore) -> list[str]:
    """The watched folders, as stored (real absolute paths, sorted)."""
    raw = store.get_meta(WATCHED_KEY)
    try:
        folders = json.loads(raw) if raw else []
    except ValueError:
        return []
    return sorted(str(f) for f in folders if isinstance(f, str))


def set_watched(store: IndexStore, add: Iterable[str] = (), remove: Iterable[str] = ()) -> list[str]:
    """Add and remove watched folders; returns the new list."""
    drop = set(remove)
    folders = sorted((set(watched_folders(store)) | set(add)) - drop)
    store.set_meta(WATCHED_KEY, json.dumps(folders))
    return folders


@dataclass
class WatchState:
    state: str = "starting"  # starting, watching, polling, follower, idle (no folders), stopped
    folders: tuple[str, ...] = ()
    missing: tuple[str, ...] = ()  # watched folders not on disk now
    reason: str = ""  # why polling, or the last error


class FolderWatcher:
    """Watches the stored folders (plus `extra`: every root, when asked) in a daemon thread of its own."""

    def __init__(
        self, store: IndexStore, lock: Callable[[], AbstractContextManager[bool]], queue: ReindexQueue, *,
        extra: tuple[str, ...] = (), polling: bool = False, skip: tuple[Path, ...] = (),
    ) -> None:
        self.store = store
        self._lock = lock
        self.queue = queue
        self.extra = extra
        self.polling = polling
        self.skip = skip  # folders never indexed (the server's data folder)
        self.status = WatchState()
        self._closing = threading.Event()
        self._restart = threading.Event()  # stops the current watch; the loop starts it again
        self._thread = threading.Thread(target=self._run, name="index-watcher", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def reload(self) -> None:
        """The folder list changed: watch the new one now (and give it its stat pass)."""
        self._restart.set()

    def close(self) -> None:
        self._closing.set()
        self._restart.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5.0)
        self.status.state = "stopped"

    # -- leading ---------------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._closing.is_set():
            try:
                with self._lock() as leader:
                    if leader:
                        self._lead()
                        continue
            except Exception as exc:  # the database went away for a moment: try again
                log.warning("index watcher: %s", exc)
                self.status.reason = f"{type(exc).__name__}: {str(exc)[:200]}"
            self.status.state = "follower"
            self._closing.wait(FOLLOW_RETRY_S)

    def _lead(self) -> None:
        while not self._closing.is_set():
            self._restart.clear()
            folders, missing = self._folders()
            self.status.folders, self.status.missing = tuple(folders), tuple(missing)
            self.queue.add([Entry(m, (Path(m),)) for m in missing if self.store.files_under(m)])
            if not folders:
                self.status.state = "idle"
                self._wait_for_change(folders, missing)
                continue
            try:
                self._watch(folders, missing)
            except Exception as exc:
                if self._folders() != (folders, missing):
                    continue  # a watched folder went away under the watch: watch the others
                if self.polling:
                    log.warning("index watcher stopped (%s); it starts again", exc)
                    self.status.reason = f"{type(exc).__name__}: {str(exc)[:200]}"
                    self._closing.wait(RETRY_S)
                else:  # no events here (inotify watches ran out, an unsupported file system): poll
                    log.warning("file-system events unavailable (%s); the index watcher polls instead", exc)
                    self.polling = True
                    self.status.reason = f"file-system events unavailable: {str(exc)[:200]}"

    def _folders(self) -> tuple[list[str], list[str]]:
        """(watched folders on disk, watched folders missing); nested ones are covered by their parent."""
        wanted = sorted(set(watched_folders(self.store)) | set(self.extra))
        present = [f for f in wanted if os.path.isdir(f)]
        missing = [f for f in wanted if f not in present]
        top = [f for f in present if not any(f.startswith(g.rstrip("/") + "/") for g in present if g != f)]
        return top, missing

    def _wait_for_change(self, folders: list[str], missing: list[str]) -> None:
        while not self._closing.is_set() and not self._restart.wait(META_CHECK_S):
            if self._folders() != (folders, missing):
                return

    def _watch(self, folders: list[str], missing: list[str]) -> None:
        import watchfiles

        self.status.state = "polling" if self.polling else "watching"
        scanned = False
        checked = time.monotonic()
        for changes in watchfiles.watch(
            *folders, watch_filter=self._wanted, debounce=DEBOUNCE_MS, step=STEP_MS, rust_timeout=TIMEOUT_MS,
            yield_on_timeout=True, stop_event=self._restart, raise_interrupt=False, force_polling=self.polling,
            poll_delay_ms=POLL_DELAY_MS, ignore_permission_denied=True,
        ):
            if not scanned:  # the watch is in place: what changed before it is found by the stat pass
                self.queue.add([Entry(f, (Path(f),), scan=True) for f in folders])
                scanned = True
            self.queue.add(self._entries(changes, folders))
            if self._closing.is_set():
                return
            if time.monotonic() - checked >= META_CHECK_S:
                checked = time.monotonic()
                if self._folders() != (folders, missing):
                    return

    def _entries(self, changes: Iterable[tuple[object, str]], folders: list[str]) -> list[Entry]:
        import watchfiles

        out = []
        for change, path in sorted(changes, key=lambda c: c[1]):
            if change == watchfiles.Change.modified and os.path.isdir(path):
                continue  # a folder's own metadata: its files' events say what changed
            root = _root_of(path, folders)
            if root is not None:
                out.append(Entry(path, (Path(root),)))
        return out

    def _wanted(self, change: object, path: str) -> bool:
        """The indexing rules: nothing hidden under the watched folder, none of the server's folders."""
        root = _root_of(path, self.status.folders)
        if root is None:
            return False
        rel = path[len(root) :].strip("/")
        parts = rel.split("/") if rel else []
        if any(p.startswith(".") or p in INDEX_DIR_NAMES for p in parts):
            return False
        return not any(path == str(s) or path.startswith(str(s) + "/") for s in self.skip)


def _root_of(path: str, folders: Iterable[str]) -> str | None:
    for folder in folders:
        if path == folder or path.startswith(folder.rstrip("/") + "/"):
            return folder
    return None


NETWORK_FILE_SYSTEMS = frozenset({"nfs", "nfs4", "cifs", "smb3", "smbfs", "fuse.sshfs", "9p", "ceph", "glusterfs",
                                  "afs", "davfs", "fuse.rclone", "virtiofs", "fuse.s3fs"})
INOTIFY_WATCHES = Path("/proc/sys/fs/inotify/max_user_watches")
DIRS_COUNTED = 200_000


def watch_health(folders: list[str], polling: bool) -> tuple[bool, str]:
    """For `doctor`: how the folders are watched and what the watcher cannot see there. False when events
    will not do (inotify watches too few for their folders; the watcher then polls by itself)."""
    if polling:
        return True, f"{len(folders)} folders, polling every {POLL_DELAY_MS / 1000:g} s (watch_polling)"
    notes, ok = [], True
    remote = [f"{f} ({fs})" for f in folders if (fs := _file_system(f)) in NETWORK_FILE_SYSTEMS]
    if remote:
        notes.append("on network drives, where events miss other machines' changes (set GENERALAGENT_WATCH_POLLING"
                     f"=true): {', '.join(remote)}")
    if INOTIFY_WATCHES.exists():
        limit = int(INOTIFY_WATCHES.read_text().split()[0])
        needed = sum(_count_dirs(f) for f in folders)
        if needed > limit:
            ok = False
            notes.append(f"{needed} folders to watch but fs.inotify.max_user_watches is {limit}: the watcher polls "
                         "instead; raise it (sysctl fs.inotify.max_user_watches=524288)")
        else:
            notes.append(f"{needed} of {limit} inotify watches needed")
    said = f"{len(folders)} folders, file-system events" + (f"; {'; '.join(notes)}" if notes else "")
    return ok, said


def _file_system(path: str) -> str:
    """The type of the file system `path` is on (Linux: the longest matching mount point), or ""."""
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return ""
    best, kind = "", ""
    for line in mounts:
        parts = line.split()
        if len(parts) > 2 and (path == parts[1] or path.startswith(parts[1].rstrip("/") + "/")) and len(parts[1]) > len(best):
            best, kind = parts[1], parts[2]
    return kind


def _count_dirs(folder: str) -> int:
    count = 0
    for _, dirs, _ in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in INDEX_DIR_NAMES]
        count += 1
        if count >= DIRS_COUNTED:
            break
    return count
