"""The index in SQLite (the default: `index.sqlite3` in the data directory), as the strategy object
`indexing.store.IndexStore` is given (`indexing.dialect.IndexDialect`).

- The file is a store of the storage seam (`foundation.storage.sqlite.SqliteStoreDb`, schema
  `indexing.pg_schema.SCHEMA`, migrated when opened): WAL, a busy timeout, one writer at a time
  (`BEGIN IMMEDIATE`). Reads share a small fixed pool of connections, each statement on a free one
  (`statement_reads`); writes go through its one writer connection.
- The FTS5 table `chunks_fts` is an external-content index over `chunks.head_terms`/`terms`, i.e.
  derived data that `reindex_all` regenerates; term statistics come from its vocabulary table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

from foundation import sqlite_db
from foundation.storage import StoreDb
from foundation.storage.pooled_reads import PooledReads
from foundation.storage.sqlite import SqliteDatabase, SqliteStoreDb
from foundation.waiting import about_to_wait
from indexing.changelog import log_change
from indexing.dialect import CHUNK_TABLE_COLS
from indexing.query import quote

BUSY_TIMEOUT_S = 10.0  # how long a write waits for this process's other writer
READ_CONNECTIONS = 4
"""Read connections of one index, shared by every thread (a connection, and its map of the file, per
thread multiplied with the SDK's worker threads)."""


class SqliteDialect:
    """One index file. Thread-safe: reads share a small fixed pool of connections (`conn()`,
    `stream()`), writes one writer connection, one write at a time (`write()`)."""

    name: Literal["sqlite", "postgresql"] = "sqlite"
    engine_name = "FTS5"

    def __init__(self, db: SqliteStoreDb) -> None:
        self.db = db
        self.path = db.path
        self.statements = db.statements(READ_CONNECTIONS)
        self.conn: Callable[[], Any] = self.statements.conn
        """This thread's write connection inside `write()`; else pooled reads (autocommit): each
        statement runs on a free read connection and its rows are fetched before it goes back."""

    @classmethod
    def at(cls, path: Path) -> SqliteDialect:
        """The index in the SQLite file at `path` (migrated first)."""
        from indexing.pg_schema import SCHEMA

        return cls.of(SqliteDatabase(path.parent).open(replace(SCHEMA, sqlite_file=path.name)))

    @classmethod
    def of(cls, store: StoreDb) -> SqliteDialect:
        """The index in `store` (opened by a `SqliteDatabase`)."""
        assert isinstance(store, SqliteStoreDb)
        return cls(store)

    # -- connections -----------------------------------------------------------------------

    @contextmanager
    def write(self) -> Iterator[Any]:
        """One write transaction (BEGIN IMMEDIATE): all of it or nothing."""
        about_to_wait()  # the writer lock (a call on the event loop moves to a worker thread)
        with self.statements.writer(BUSY_TIMEOUT_S) as raw, sqlite_db.write(raw) as conn:
            yield conn

    def connections(self) -> int:
        """Connections open now (the read pool's and the writer)."""
        return self.statements.opened()

    def close(self) -> None:
        self.db.close()

    def reopened(self) -> SqliteDialect:
        return SqliteDialect.at(self.path)

    def stream(self, sql: str, params: Sequence[object] = ()) -> Iterator[tuple[Any, ...]]:
        """Rows of a query that may be large, read as they are consumed (on a read connection held
        until the last row is read or the iterator is dropped)."""
        conn = self.conn()
        if not isinstance(conn, PooledReads):
            return iter(conn.execute(sql, params))
        return conn.stream(sql, params)

    # -- search data: FTS5 -----------------------------------------------------------------------

    def add_chunk_rows(self, conn: Any, rows: list[tuple[object, ...]]) -> None:
        conn.executemany(f"INSERT INTO chunks({CHUNK_TABLE_COLS}) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)
        conn.executemany("INSERT INTO chunks_fts(rowid, head_terms, terms) VALUES(?,?,?)",
                         [(row[0], row[12], row[13]) for row in rows])

    def remove_chunks(self, conn: Any, doc_id: int) -> list[tuple[int, str, str]]:
        gone = [tuple(r) for r in conn.execute("SELECT id, head_terms, terms FROM chunks WHERE doc_id=?", (doc_id,))]
        conn.executemany("INSERT INTO chunks_fts(chunks_fts, rowid, head_terms, terms) VALUES('delete', ?, ?, ?)", gone)
        conn.execute("DELETE FROM chunks WHERE doc_id=?", (doc_id,))
        return gone

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
        with self.statements.writer(BUSY_TIMEOUT_S) as conn:
            conn.execute("INSERT INTO chunks_fts(chunks_fts) VALUES('optimize')")
            conn.execute("VACUUM")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
