"""The front door to the document index: one `Index` per server owns the store (`indexing.store`, SQLite or
PostgreSQL), its in-memory postings (`indexing.postings`), the index runs (`indexing.jobs`) and the secret
filter (the approval policy's secret paths, as the index applies them). Tools reach the index through it and
the store's named methods: no SQL, no transactions and no retry loops in `tools/` (tests/test_index_front_door.py)."""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from indexing.model import SecretFilter

if TYPE_CHECKING:  # loaded on first use (start-up speed)
    from foundation.calls import SecretPaths
    from foundation.storage import Database
    from indexing.jobs import JobRegistry
    from indexing.postings import MemoryIndex
    from indexing.store import IndexStore

HIT_VERDICTS_KEPT = 16_384
"""Search hits' secret verdicts kept per index, all sessions' roots together (the rules never change while it runs)."""


@dataclass(frozen=True)
class PostingsPlace:
    """Where the in-memory postings are saved (`<data dir>/postings`) and when they are worth building."""

    directory: Path
    min_chunks: int
    max_chunks: int


def open_store(database: Database, *, move_damaged: bool = True) -> IndexStore:
    """The index's store on the deployment's database, its tables through the storage seam
    (`indexing.pg_schema.SCHEMA`): `index.sqlite3` in the data dir, or PostgreSQL. A damaged SQLite file
    (derived data) is moved aside and the index started afresh (unless not `move_damaged`: a reader
    beside the server, which leaves that to it)."""
    from indexing.store import IndexStore

    if database.backend == "postgresql":
        from foundation.storage.postgres import PostgresDatabase
        from indexing.pg_store import PgDialect

        assert isinstance(database, PostgresDatabase)
        return IndexStore(PgDialect(database))
    from foundation.storage.sqlite import SqliteDatabase
    from indexing.pg_schema import SCHEMA
    from indexing.sqlite_store import SqliteDialect

    assert isinstance(database, SqliteDatabase)
    try:
        return IndexStore(SqliteDialect.of(database.open(SCHEMA)))
    except sqlite3.DatabaseError as exc:
        if not move_damaged:
            raise
        _move_aside(database.path(SCHEMA), exc)
        return IndexStore(SqliteDialect.of(database.open(SCHEMA)))


def _move_aside(path: Path, exc: Exception) -> None:
    aside = path.with_name(f"{path.name}.damaged-{int(time.time())}")
    logging.getLogger("generalagent.index").warning("index %s is damaged (%s); moved to %s", path, exc, aside)
    for suffix in ("", "-wal", "-shm"):
        part = Path(str(path) + suffix)
        if part.exists():
            part.rename(Path(str(aside) + suffix))


def secret_filter(policy: SecretPaths | None, roots: tuple[Path, ...]) -> SecretFilter | None:
    """The approval policy's secret paths as seen from `roots` (None without a policy: tools alone)."""
    if policy is None:
        return None
    return SecretFilter(named=lambda path: policy.rule(path, roots), key=policy.key())


class Index:
    """One server's index. `policy()` gives the approval policy's secret paths now (None: no policy)."""

    def __init__(self, store: IndexStore, database: Database | None, postings: PostingsPlace,
                 policy: Callable[[], SecretPaths | None] = lambda: None) -> None:
        self.store = store
        self.database = database
        self.postings = postings
        self.policy = policy
        self._lock = threading.Lock()
        self._memory: MemoryIndex | None = None
        self._jobs: JobRegistry | None = None
        self._verdicts: dict[tuple[tuple[Path, ...], str], bool] = {}

    # -- what it owns ------------------------------------------------------------------------------

    def memory(self) -> MemoryIndex:
        """The memory-mapped postings (saved in `postings.directory` for either backend: derived data of this
        machine; rebuilt in the background when the index changed, used when fresh)."""
        with self._lock:
            if self._memory is None:
                from indexing.postings import MemoryIndex

                place = self.postings
                place.directory.mkdir(parents=True, exist_ok=True)
                from indexing.postings_child import ChildBuild

                child = ChildBuild.of(self.database) if self.database is not None else None
                self._memory = MemoryIndex(self.store, min_chunks=place.min_chunks, max_chunks=place.max_chunks,
                                           directory=place.directory, child=child)
            return self._memory

    def memory_if_made(self) -> MemoryIndex | None:
        """The postings when something asked for them already (None: not made yet)."""
        return self._memory

    def jobs(self) -> JobRegistry:
        """The index runs of this server (one per path at a time; background ones outlive their call)."""
        with self._lock:
            if self._jobs is None:
                from indexing.jobs import JobRegistry

                self._jobs = JobRegistry(self.store, self.database)
            return self._jobs

    def stop_jobs(self) -> None:
        """The server stops: its index runs stop too and say so (interrupted), when it has any."""
        if self._jobs is not None:
            self._jobs.close()

    def close(self) -> None:
        """The runtime closes: the postings stop following the index."""
        if self._memory is not None:
            self._memory.stop_following()

    # -- secrets ------------------------------------------------------------------------------------

    def secret_filter(self, roots: tuple[Path, ...]) -> SecretFilter | None:
        return secret_filter(self.policy(), roots)

    def secret_hits(self, roots: tuple[Path, ...]) -> Callable[[str], bool] | None:
        """Whether an indexed path found by a search is a secret (None without a policy). Each path's verdict
        is kept: a hit's indexed text is what its path held when it was indexed (the indexer checks again)."""
        secrets = self.secret_filter(roots)
        if secrets is None:
            return None
        kept = self._verdicts  # one bound for every session's roots

        def is_secret(path: str) -> bool:
            found = kept.get((roots, path))
            if found is None:
                if len(kept) >= HIT_VERDICTS_KEPT:
                    kept.clear()
                found = kept[(roots, path)] = secrets.rule(path) is not None
            return found

        return is_secret

    # -- changes ------------------------------------------------------------------------------------

    def forget(self, paths: Iterable[str], before: Callable[[], None] | None = None,
               after: Callable[[int], None] | None = None) -> None:
        """Drop these indexed paths (a document goes with its last path), then every document no file uses.
        `before()` runs before each path (a cancellation check), `after(done)` after each (progress)."""
        for done, path in enumerate(paths, start=1):
            if before is not None:
                before()
            self.store.forget_path(path)
            if after is not None:
                after(done)
        self.store.drop_orphans()
