"""The index in SQLite (the default: `index.sqlite3` in the data directory), as the strategy object
`indexing.store.IndexStore` is given (`indexing.dialect.IndexDialect`).

- WAL, a busy timeout, one writer at a time (`BEGIN IMMEDIATE`), schema as ordered migrations
  (`indexing.sqlite_schema`).
- Reads share a small fixed pool of connections, each statement on a free one; writes one writer connection.
- The FTS5 table `chunks_fts` is an external-content index over `chunks.head_terms`/`terms`, i.e.
  derived data that `reindex_all` regenerates; term statistics come from its vocabulary table.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from foundation import sqlite_db
from foundation.pooled_reads import ConnectionPool, PooledReads
from foundation.waiting import about_to_wait
from indexing.changelog import log_change
from indexing.dialect import CHUNK_TABLE_COLS, PAGE_SQL, ChunkTerms, ReadAll, Snapshot, pages_of
from indexing.query import quote
from indexing.sqlite_schema import MIGRATIONS

BUSY_TIMEOUT_S = 10.0
READ_CONNECTIONS = 4
"""Read connections of one index, shared by every thread (a connection, and its map of the file, per
thread multiplied with the SDK's worker threads)."""
MMAP_BYTES = 64 * 1024 * 1024
"""How much of the file each connection maps (SQLite maps no more than the file holds, and more as it
grows): reads map the file instead of copying pages (search fetches scattered rows). Each connection
maps its own copy, all counted in the server's RSS: 5 connections (the pool and the writer) map at
most 320 MiB."""


class SqliteDialect:
    """One index file. Thread-safe: reads share a small fixed pool of connections (`conn()`,
    `stream()`), writes one writer connection, one write at a time (`write()`)."""

    name: Literal["sqlite", "postgresql"] = "sqlite"
    engine_name = "FTS5"

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._pool = ConnectionPool(self._connect, READ_CONNECTIONS)
        self._reads = PooledReads(self._pool)
        self._writer: sqlite3.Connection | None = None
        self._writer_lock = threading.Lock()
        self._writing: int | None = None  # the thread inside write()
        self._migrate()

    # -- connections -----------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        return sqlite_db.connect(self.path, timeout=BUSY_TIMEOUT_S,
                                 pragmas=["synchronous=NORMAL", "foreign_keys=ON", f"mmap_size={MMAP_BYTES}"])

    def conn(self) -> Any:
        """This thread's write connection inside `write()`; else pooled reads (autocommit): each
        statement runs on a free read connection and its rows are fetched before it goes back."""
        if self._writing == threading.get_ident() and self._writer is not None:
            return self._writer
        return self._reads

    @contextmanager
    def _writer_conn(self) -> Iterator[sqlite3.Connection]:
        """The one writer connection, for one user at a time (other processes: SQLite's file lock)."""
        if self._writing == threading.get_ident():
            raise RuntimeError("nested index write")
        if not self._writer_lock.acquire(timeout=BUSY_TIMEOUT_S):
            raise sqlite3.OperationalError("database is locked")
        try:
            if self._writer is None:
                self._writer = self._connect()
            self._writing = threading.get_ident()
            yield self._writer
        finally:
            self._writing = None
            self._writer_lock.release()

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (BEGIN IMMEDIATE): all of it or nothing."""
        about_to_wait()  # the writer lock (a call on the event loop moves to a worker thread)
        with self._writer_conn() as raw, sqlite_db.write(raw) as conn:
            yield conn

    def connections(self) -> int:
        """Connections open now (the read pool's and the writer)."""
        return self._pool.opened + (self._writer is not None)

    def close(self) -> None:
        self._pool.close()
        with self._writer_lock:
            if self._writer is not None:
                self._writer.close()
                self._writer = None

    def reopened(self) -> SqliteDialect:
        return SqliteDialect(self.path)

    def _migrate(self) -> None:
        with self._writer_conn() as conn:
            sqlite_db.migrate(conn, MIGRATIONS)

    def stream(self, sql: str, params: Sequence[object] = ()) -> Iterator[tuple[Any, ...]]:
        """Rows of a query that may be large, read as they are consumed (on a read connection held
        until the last row is read or the iterator is dropped)."""
        conn = self.conn()
        if not isinstance(conn, PooledReads):
            return iter(conn.execute(sql, params))
        return conn.stream(sql, params)

    @contextmanager
    def snapshot_batches(self, wanted: Callable[[int], bool], size: int) -> Iterator[Snapshot | None]:
        """The batches are read while the context is open, each in a short read transaction of its own:
        one held for the whole build would keep every write since it began in the WAL (no checkpoint can
        pass a reader)."""
        conn = sqlite_db.connect(self.path, timeout=30.0)

        def read_page(after: int) -> tuple[int, list[ChunkTerms]]:
            conn.execute("BEGIN")
            try:
                (generation,) = conn.execute("SELECT generation FROM stats").fetchone()
                return int(generation), conn.execute(PAGE_SQL, (after, size)).fetchall()
            finally:
                conn.execute("COMMIT")

        try:
            generation, chunks = conn.execute("SELECT generation, chunks FROM stats").fetchone()
            if not wanted(int(chunks)):
                yield None
                return
            yield int(generation), pages_of(int(generation), read_page)
        finally:
            conn.close()

    @contextmanager
    def consistent_read(self) -> Iterator[ReadAll]:
        """Reads that all see one state of the index (one read transaction, `indexing.changelog`)."""
        conn = sqlite_db.connect(self.path, timeout=30.0)
        try:
            conn.execute("BEGIN")
            yield lambda sql, params: conn.execute(sql, params).fetchall()
        finally:
            conn.close()

    # -- search data: FTS5 -----------------------------------------------------------------------

    def add_chunk_rows(self, conn: Any, rows: list[tuple[object, ...]]) -> None:
        conn.executemany(f"INSERT INTO chunks({CHUNK_TABLE_COLS}) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
        conn.executemany("INSERT INTO chunks_fts(rowid, head_terms, terms) VALUES(?,?,?)",
                         [(row[0], row[12], row[13]) for row in rows])

    def drop_chunks(self, conn: Any, gone: list[tuple[int, str, str]]) -> None:
        conn.executemany("INSERT INTO chunks_fts(chunks_fts, rowid, head_terms, terms) VALUES('delete', ?, ?, ?)", gone)

    def reindex_all(self, conn: Any) -> None:
        conn.execute("INSERT INTO chunks_fts(chunks_fts) VALUES('rebuild')")

    def take_ids(self, conn: Any, table: str, n: int) -> int:
        """Ids are the highest so far plus one: the caller holds `write()`, so no other writer can take them."""
        return int(conn.execute(f"SELECT coalesce(max(id), 0) + 1 FROM {table}").fetchone()[0])

    def change_totals(self, conn: Any, chunks: int, terms: int) -> None:
        conn.execute("UPDATE stats SET chunks = chunks + ?, terms = terms + ?, generation = generation + 1",
                     (chunks, terms))

    def log_change(self, conn: Any, doc_id: int) -> None:
        log_change(conn, [doc_id])

    def settle(self) -> None:
        """Nothing is gathered: every statement is applied as it runs."""

    def doc_freqs(self, terms: list[str]) -> dict[str, int]:
        """From the FTS5 vocabulary."""
        marks = ",".join("?" * len(terms))
        rows = self.conn().execute(f"SELECT term, doc FROM chunks_vocab WHERE term IN ({marks})", terms)
        found = dict(rows.fetchall())
        return {t: int(found.get(t, 0)) for t in terms}

    def chunks_with_all(self, terms: list[str]) -> tuple[str, str, str, str]:
        match = " AND ".join(quote([t]) for t in terms)
        return "chunks_fts JOIN chunks c ON c.id = chunks_fts.rowid", "chunks_fts MATCH ?", "rank", match

    # -- upkeep ----------------------------------------------------------------------------------

    def db_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.path.parent.glob(self.path.name + "*") if p.is_file())

    def where(self) -> str:
        return str(self.path)

    def worth_vacuum(self) -> bool:
        """True when a quarter of the file (and at least 256 pages) is free: VACUUM would give it back."""
        conn = self.conn()
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        return bool(free >= 256 and free >= pages // 4)

    def vacuum(self) -> None:
        """Compact the database (after large removals)."""
        with self._writer_conn() as conn:
            conn.execute("INSERT INTO chunks_fts(chunks_fts) VALUES('optimize')")
            conn.execute("VACUUM")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
