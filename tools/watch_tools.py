"""Watched folders as the tools see them: index_path watches the folders it indexes (`watch_folder`),
unwatch_path stops that, index_status shows the watcher (`watcher_info`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import Field

from foundation.errors import NotFound
from foundation.paths import display_path, resolve_path, roots_for
from foundation.schemas import OmitNone
from tools.index_services import index_store
from tools.index_watch import set_watched, watched_folders
from tools.live_index import peek_live_index
from tools.runtime import CallContext, Runtime

FAILURES_SHOWN = 5


def watch_folder(rt: Runtime, folder: Path, watch: bool) -> bool:
    """After index_path indexed `folder`: watch it from now on (or, `watch=False`, stop watching it).
    Returns whether it is watched now."""
    store = index_store(rt)
    key = str(folder)
    listed = key in watched_folders(store)
    if not watch or not rt.settings.watch_indexed:
        if listed and not watch:
            set_watched(store, remove=[key])
            _reload(rt)
        return False if not watch else listed
    if not listed:
        set_watched(store, add=[key])
    _reload(rt)
    return True


def _reload(rt: Runtime) -> None:
    """Start or refresh this server's watcher (one-shot commands have none: a server picks the list up)."""
    live = peek_live_index(rt)
    if live is None or not live.serving:
        return
    live.start_watching()
    if live.watcher is not None:
        live.watcher.reload()


class UnwatchResult(OmitNone):
    unwatched: list[str] = Field(description="Folders no longer watched (their index entries stay).")
    watched: list[str] = Field(description="Folders still watched.")


def unwatch_path(
    path: Annotated[str, Field(description="A watched folder (or a folder above watched ones).")],
    *,
    rt: Runtime,
    call: CallContext,
) -> UnwatchResult:
    """Stop re-indexing a folder's changes as they happen (its index entries stay; index_path updates them)."""
    real = str(resolve_path(rt.settings, path, session_id=call.session_id))
    store = index_store(rt)
    folders = watched_folders(store)
    gone = [f for f in folders if f == real or f.startswith(real.rstrip("/") + "/")]
    if not gone:
        raise NotFound(f"{path} is not watched. index_status lists the watched folders.")
    left = set_watched(store, remove=gone)
    _reload(rt)
    roots = roots_for(rt.settings, call.session_id)
    return UnwatchResult(unwatched=[display_path(Path(f), roots) for f in gone],
                         watched=[display_path(Path(f), roots) for f in left])


class WatcherInfo(OmitNone):
    state: str = Field(description="watching (file-system events), polling, follower (another server process "
                                   "watches), idle (nothing to watch), not running (this process does not watch), off.")
    folders: list[str] = Field(description="Watched folders.")
    missing: list[str] | None = Field(default=None, description="Watched folders not on disk now.")
    queued: int = Field(default=0, description="Changed paths waiting to be re-indexed in this process.")
    done: str | None = Field(default=None, description="Since the server started: files re-indexed and dropped.")
    failures: list[str] | None = Field(default=None, description="Latest files that could not be indexed: 'path: reason'.")
    note: str | None = None


def watcher_info(rt: Runtime, roots: tuple[Path, ...]) -> WatcherInfo:
    folders = watched_folders(index_store(rt))
    shown = [display_path(Path(f), roots) for f in folders]
    live = peek_live_index(rt)
    if not rt.settings.watch_indexed:
        return WatcherInfo(state="off", folders=shown, note="watch_indexed is off: folders are indexed when asked.")
    if live is None:
        return WatcherInfo(state="not running", folders=shown)
    stats = live.queue.stats
    store = index_store(rt)
    if live.watcher is not None and live.watcher.status.state == "follower":  # another process re-indexes them
        failing = [(r.path, r.error or "") for r in reversed(store.failed_files(folders, FAILURES_SHOWN))]
    else:
        failing = [(p, r) for p, (_, _, r) in list(stats.failures.items())
                   if (row := store.file_row(p)) is not None and row.error]  # not fixed since (a save caught halfway)
    failures = [f"{display_path(Path(p), roots)}: {r}" for p, r in failing[-FAILURES_SHOWN:]] or None
    info = WatcherInfo(state="not running", folders=shown, queued=live.queue.queued(),
                       done=f"{stats.reindexed} re-indexed, {stats.removed} dropped", failures=failures)
    if live.watcher is not None:
        status = live.watcher.status
        info.state = status.state
        info.missing = [display_path(Path(f), roots) for f in status.missing] or None
        info.note = status.reason or None
        if status.state == "follower":
            info.note = "Another server process on this data store watches the folders; its changes show here too."
    return info
