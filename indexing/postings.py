"""A copy of the index's postings as numpy arrays, for fast natural-language ranking.

FTS5 has to visit and score every chunk that matches any query term (an OR query over 100k
chunks takes milliseconds). This module keeps, per term, the rows that contain it with their
BM25F term weight precomputed, plus every chunk's term sequence for the proximity bonus, as
numpy arrays. A query then scores all matching chunks exactly with a few vectorised operations.

It is derived data, like the FTS table: built from `chunks.terms`/`chunks.head_terms` by a
streaming build in a background thread, written to files on disk (`indexing.postings_files`),
tagged with the index generation it was built at, and memory-mapped: a restart opens the files
of the current generation at once, the operating system pages in what queries touch, and a copy
is never used once the index has changed (search falls back to FTS5 until the rebuild is done).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import os
import shutil
import tempfile
import threading
import time
import uuid
import weakref
from pathlib import Path
from typing import TYPE_CHECKING

from indexing.scoring import DEFAULT_WEIGHTING, Weighting
from indexing.snapshot import Occurrences as Occurrences
from indexing.snapshot import Snapshot as Snapshot
from indexing.snapshot import TermInfo as TermInfo
from indexing.snapshot import TermTable as TermTable
from indexing.snapshot import build_snapshot as build_snapshot
from indexing.snapshot import open_snapshot as open_snapshot

if TYPE_CHECKING:
    from indexing.delta import DeltaSnapshot
    from indexing.postings_child import ChildBuild
    from indexing.store import IndexStore

log = logging.getLogger(__name__)

DEFAULT_MAX_CHUNKS = 5_000_000  # memory-mapped files: about 1 GB on disk per million chunks


class MemoryIndex:
    """The current Snapshot of one index database: opened from its files when they hold the index's
    generation, else rebuilt in the background (and saved) once the index has changed.

    `directory` holds the saved snapshots (one directory per generation, named after the index,
    its generation and the weighting; older ones are removed once a newer one is in use). Without
    one, a private temporary directory is used and removed with this object. With `child`, builds run
    in a child process (`indexing.postings_child`: lower priority, one build per directory at a time)."""

    def __init__(
        self, store: IndexStore, weighting: Weighting = DEFAULT_WEIGHTING, *, min_chunks: int = 1,
        max_chunks: int = DEFAULT_MAX_CHUNKS, directory: Path | None = None, child: ChildBuild | None = None,
    ) -> None:
        self.store = store
        self.weighting = weighting
        self.min_chunks = max(1, min_chunks)
        self.max_chunks = max_chunks
        if directory is None:
            directory = Path(tempfile.mkdtemp(prefix="postings-"))
            weakref.finalize(self, shutil.rmtree, directory, True)
        self.directory = directory
        self.child = child
        self.builds = 0  # snapshots built from the index rows (not opened from saved files)
        self._snapshot: Snapshot | None = None
        self._index_id: str | None = None
        self._lock = threading.Lock()
        self._build_lock = threading.Lock()
        self._building = False
        self._delta: DeltaSnapshot | None = None
        self._delta_lock = threading.Lock()
        self._following: threading.Event | None = None  # set: stop following
        self._follower: threading.Thread | None = None

    @property
    def loaded(self) -> bool:
        """True when a snapshot is loaded (of some generation: `holds` says which)."""
        return self._snapshot is not None

    def holds(self, generation: int) -> bool:
        """True when the snapshot of `generation` is loaded (`current` then returns it at once)."""
        snap, delta = self._snapshot, self._delta
        return snap is not None and (snap.generation == generation or (
            delta is not None and delta.base is snap and delta.generation >= generation))

    def current(self, generation: int, chunks: int) -> Snapshot | DeltaSnapshot | None:
        """The snapshot of `generation` (opened from its files if saved, else the last one with a
        delta of the documents changed since), or None (and a rebuild starts) when there is none yet.
        A delta is merged (the postings rebuilt in the background) once the index is quiet."""
        snap = self._snapshot
        if snap is not None and snap.generation == generation:
            return snap
        if not self._worth_it(chunks):
            self._snapshot = None  # outside the size range now: free the stale copy
            return None
        delta = self._delta
        if delta is not None and delta.base is snap and delta.generation >= generation:
            if time.monotonic() - delta.made >= MERGE_QUIET_S:
                self._start_build()
            return delta
        if self._build_lock.acquire(blocking=False):  # (a running build opens or makes it itself)
            try:
                snap = self._open_saved(generation, chunks)
            except Exception:  # never fail a search over saved files: the database engine answers
                log.exception("opening the saved postings failed; they are rebuilt")
                snap = None
            finally:
                self._build_lock.release()
            if snap is not None:
                return snap
        delta = self._delta_of(generation)
        if delta is None or delta.n_rows - delta.base.n_rows > max(MERGE_ROWS, delta.base.n_rows // 8):
            self._start_build()
        return delta

    def _delta_of(self, generation: int) -> DeltaSnapshot | None:
        """The base with a delta of the documents changed since (`indexing.delta`), of `generation`
        or later; None when the change log cannot say what changed, or too much did."""
        from indexing.changelog import read_changes
        from indexing.delta import DeltaSnapshot

        with self._delta_lock:
            base, delta = self._snapshot, self._delta
            if delta is not None and delta.base is base and delta.generation >= generation:
                return delta
            if base is None or not base.tf_exact or base.tf is None or base.generation > generation:
                return None
            before = delta if delta is not None and delta.base is base else None
            try:
                changes = read_changes(self.store, before.generation if before else base.generation, MAX_DELTA_DOCS)
                fits = changes is not None and len(before.masked.docs if before else ()) + len(changes.doc_ids) <= MAX_DELTA_DOCS
                self._delta = DeltaSnapshot(base, changes, self.weighting, before) if changes is not None and fits else None
            except Exception:  # never fail a search over a delta: a rebuild follows
                log.exception("making the postings' delta failed; they are rebuilt")
                self._delta = None
            return self._delta

    def _worth_it(self, chunks: int) -> bool:
        return self.min_chunks <= chunks <= self.max_chunks

    def state(self, generation: int, chunks: int) -> str:
        """How natural-language search runs now, for index_status (starts a build when stale)."""
        if chunks > self.max_chunks:
            return f"{self.store.engine_name}: over search_memory_max_chunks ({self.max_chunks:,})"
        if chunks < self.min_chunks:
            return f"{self.store.engine_name}: under search_memory_min_chunks ({self.min_chunks:,})"
        if self.current(generation, chunks) is not None:
            return "in memory"
        return f"{self.store.engine_name} while the postings are built"

    def build_now(self) -> Snapshot | None:
        """Open (when saved) or build the snapshot of the index's generation in this thread; None
        when the index is outside the size range or changed during the build."""
        with self._build_lock:
            generation, chunks = self.store.generation()
            if not self._worth_it(chunks):
                self._snapshot = None
                return None
            snap = self._snapshot
            if snap is not None and snap.generation == generation:
                return snap
            return self._open_saved(generation, chunks) or self._build_somewhere()

    def _build_somewhere(self) -> Snapshot | None:
        """The snapshot built by a child process (or found saved by another's build), else by this one: without
        a child, or when it failed (logged); None when the index is outside the size range or changed."""
        if self.child is None:
            return self._build()
        from indexing.postings_child import build_in_child

        try:
            built = build_in_child(self.child, self.directory, self.weighting, self.min_chunks, self.max_chunks)
        except (OSError, RuntimeError, ValueError) as exc:
            log.warning("building the postings in a child process failed (%s); this process builds them", exc)
            return self._build()
        if built is None:
            return None
        self.builds += built.built
        return self._open_saved(built.generation, built.chunks)

    def _build(self) -> Snapshot | None:
        """The snapshot built from the index's rows; None when they are not wanted (size range) or
        changed while they were read (the rows of one generation only: a later search builds again)."""
        from indexing.postings_files import write_snapshot
        from indexing.store import IndexChanged

        with self.store.snapshot_batches(self._worth_it) as read:  # the generation and the rows agree
            if read is None:
                self._snapshot = None
                return None
            generation, batches = read
            path = self._path(generation)
            scratch = path.with_name(f"{path.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
            try:
                write_snapshot(scratch, generation, batches, self.weighting)
                self.builds += 1
                scratch.rename(path)
            except IndexChanged as exc:
                log.info("postings not built: %s; a later search builds them again", exc)
                return None
            except OSError:
                if not path.is_dir():
                    raise
                log.info("postings %s were saved by another process meanwhile", path.name)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
        return self._use(open_snapshot(path, generation, self.weighting), path)

    def _open_saved(self, generation: int, chunks: int) -> Snapshot | None:
        """The saved snapshot of `generation` with `chunks` rows; None when there is none (a damaged
        one, or one of another index that shares the id, e.g. a restored backup, is removed)."""
        from indexing.postings_files import SnapshotDamaged

        path = self._path(generation)
        if not path.is_dir():
            return None
        try:
            snap = open_snapshot(path, generation, self.weighting)
            if snap.n_rows != chunks:
                raise SnapshotDamaged(f"{snap.n_rows} rows, the index has {chunks} chunks")
        except SnapshotDamaged as exc:
            log.warning("saved postings %s cannot be used (%s); they are rebuilt", path, exc)
            shutil.rmtree(path, ignore_errors=True)
            return None
        return self._use(snap, path)

    def _use(self, snap: Snapshot, path: Path) -> Snapshot:
        self._snapshot = snap
        self._delta = None  # (merged)
        with contextlib.suppress(OSError):
            os.utime(path)  # opened now: another index's processes leave it alone for a day (`_remove_unused`)
        self._remove_unused(path.name)
        return snap

    def _path(self, generation: int) -> Path:
        from indexing.postings_files import FORMAT

        w = self.weighting
        tag = hashlib.sha256(f"{FORMAT}:{w.k1!r}:{w.b!r}:{w.head_weight!r}".encode()).hexdigest()[:10]
        return self.directory / f"{self._identity()}-{generation}-{tag}"

    def _identity(self) -> str:
        """The random id in the index's meta table (made by its migration, once per database; made
        here under the store's one writer only if it went missing): saved snapshots of another index
        (a new database, another backend, an import) never match, whatever its generation."""
        if self._index_id is None:
            self._index_id = self.store.meta_once(INDEX_ID_KEY, uuid.uuid4().hex[:16])
        return self._index_id

    def _remove_unused(self, keep: str) -> None:
        """Remove this index's snapshots of older generations (another process of this machine may
        use a newer one), scratch directories of builds whose process died, and other indexes'
        snapshots (a deleted and re-created, damaged or imported index's) no process opened for a day."""
        mine = f"{self._identity()}-"
        kept = _generation_of(keep)
        for entry in self.directory.iterdir():
            name = entry.name
            if name.startswith("."):
                continue  # (the child builds' lock)
            if ".tmp-" in name:
                unused = not _alive(entry)
            elif name.startswith(mine):
                unused = _generation_of(name) < kept
            else:
                unused = not _recent(entry)
            if unused:
                shutil.rmtree(entry, ignore_errors=True)

    def follow(self) -> None:
        """From now on (once; a serving process), follow the index in a background thread: a new generation's
        delta is made as soon as it is seen, and merged after MERGE_QUIET_S, rather than by the next search
        (at 1M chunks a delta of 64 changed files is ~18 ms; searches after a change waited for it). It looks
        every FOLLOW_BUSY_S for FOLLOW_BUSY_FOR_S after a change, else every FOLLOW_QUIET_S."""
        with self._lock:
            if self._following is not None:
                return
            self._following = threading.Event()
            self._follower = threading.Thread(target=self._follow, args=(self._following,), name="postings-follow",
                                              daemon=True)
        self._follower.start()

    def stop_following(self) -> None:
        with self._lock:
            if self._following is not None:
                self._following.set()

    def _follow(self, stop: threading.Event) -> None:
        seen, changed_at, failed, built_at = None, -FOLLOW_BUSY_FOR_S, 0, -math.inf
        while not stop.wait(FOLLOW_BUSY_S if time.monotonic() - changed_at < FOLLOW_BUSY_FOR_S else FOLLOW_QUIET_S):
            try:
                generation, chunks = self.store.generation()
                now = time.monotonic()
                if seen is not None and generation != seen:
                    changed_at = now
                seen, failed = generation, 0
                if self._snapshot is not None and (self._delta is not None or not self.holds(generation)):
                    self.current(generation, chunks)  # (a delta older than MERGE_QUIET_S: its merge starts)
                elif self._snapshot is None and self._worth_it(chunks) and now - changed_at >= MERGE_QUIET_S and (
                        now - built_at >= FOLLOW_REBUILD_S):
                    built_at = now  # none yet (an index made after the start), or a write made the last build give up
                    self._start_build()
            except Exception:  # a closed or unreachable database: try again later (less often), never stop serving
                log.debug("following the index failed", exc_info=True)
                failed += 1
                stop.wait(min(FOLLOW_GIVE_UP_S, FOLLOW_QUIET_S * 2**failed))

    def _start_build(self) -> None:
        with self._lock:
            if self._building:
                return
            self._building = True
        threading.Thread(target=self._build_in_background, name="postings-build", daemon=True).start()

    def _build_in_background(self) -> None:
        try:
            self.build_now()
        except Exception:  # the FTS5 path keeps working; try again on a later search
            log.exception("building the postings failed")
        finally:
            with self._lock:
                self._building = False


INDEX_ID_KEY = "postings_id"
MAX_DELTA_DOCS = 5_000  # documents changed since the base beyond which the postings are rebuilt whole
MERGE_ROWS = 50_000  # delta rows beyond which a merge (rebuild) starts at once (also an eighth of the base)
MERGE_QUIET_S = 2.0  # a delta unchanged this long is merged into a new base in the background
FOLLOW_BUSY_S = 0.01  # how often `follow` looks at the generation while the index changes (a search is ~5 ms)
FOLLOW_BUSY_FOR_S = 5.0  # and for this long after a change
FOLLOW_QUIET_S = 0.5  # else (one cheap read of the stats row)
FOLLOW_GIVE_UP_S = 60.0  # the longest wait after failed reads (a database that went away)
FOLLOW_REBUILD_S = 10.0  # with no postings, `follow` builds them once the index is MERGE_QUIET_S quiet, at most this often
SCRATCH_MAX_AGE_S = 86_400  # a build takes about a minute at 1M chunks; also how long another index's
# snapshot is kept after a process last opened it (removing one still mapped costs its user nothing on
# POSIX, where the map outlives the file; on Windows the mapped files stay and the rest is rebuilt)


def _generation_of(name: str) -> int:
    """The generation in a snapshot directory's name (`<index id>-<generation>-<weighting tag>`)."""
    try:
        return int(name.split("-")[1])
    except (IndexError, ValueError):
        return -1


def _recent(path: Path) -> bool:
    """True when `path` was modified (a snapshot: opened, see MemoryIndex._use) less than a day ago."""
    try:
        return time.time() - path.stat().st_mtime <= SCRATCH_MAX_AGE_S
    except OSError:
        return False


def _alive(scratch: Path) -> bool:
    """True while the build writing this scratch directory (`<name>.tmp-<pid>-<nonce>`) may still run:
    it is younger than a day and (on POSIX) its process exists. No signal is sent on Windows, where
    os.kill(pid, 0) would be a Ctrl+C; a killed build's folder goes after a day there, or after a
    pid reuse here."""
    try:
        pid = int(scratch.name.rsplit(".tmp-", 1)[1].split("-")[0])
    except (IndexError, ValueError):
        return False
    if not _recent(scratch):
        return False
    if pid == os.getpid() or os.name != "posix":
        return True  # another MemoryIndex of this process may be writing it
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
