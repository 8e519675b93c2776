"""The SQLite backend: one file per store in the data directory, exactly the files and behaviour
the stores had before the seam (WAL, busy timeout, BEGIN IMMEDIATE, PRAGMA user_version), so
existing data directories keep working."""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from foundation import sqlite_db
from foundation.storage.base import (
    Conn,
    Database,
    IntegrityError,
    Listener,
    LocalListeners,
    MigrationStatus,
    Row,
    Schema,
    StoreDb,
    T,
    ensure_data_dir,
    identifier,
    too_new_error,
)
from foundation.storage.pooled_reads import StatementConnections

TIMEOUT_SECONDS = 30.0
_IDLE_CONNECTIONS = 4


class SqliteConn(Conn):
    backend = "sqlite"

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.raw = conn
        self.notices: list[tuple[str, str]] = []

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        with _integrity():
            return self.raw.execute(sql, tuple(params))

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        with _integrity():
            self.raw.executemany(sql, (tuple(r) for r in rows))

    def insert_id(self, sql: str, params: Sequence[Any], id_column: str = "id") -> int:
        with _integrity():
            return int(self.raw.execute(sql, tuple(params)).lastrowid or 0)

    def copy_rows(self, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> int:
        names = ", ".join(identifier(c) for c in columns)
        marks = ", ".join("?" * len(columns))
        before = self.raw.total_changes
        with _integrity():
            self.raw.executemany(f"INSERT INTO {identifier(table)} ({names}) VALUES ({marks})",
                                 (tuple(r) for r in rows))
        return self.raw.total_changes - before

    def stream(self, sql: str, params: Sequence[Any] = (), batch: int = 1000) -> Iterator[Row]:
        cursor = self.raw.execute(sql, tuple(params))
        while rows := cursor.fetchmany(batch):
            yield from (tuple(r) for r in rows)

    def notify(self, channel: str, payload: str = "") -> None:
        self.notices.append((channel, payload))

    def identity_high(self, table: str, column: str) -> int:
        seq = self._sequence(table)
        top = self.raw.execute(f"SELECT MAX({identifier(column)}) FROM {identifier(table)}").fetchone()[0]
        return max(int(seq or 0), int(top or 0))

    def set_identity_high(self, table: str, column: str, value: int) -> None:
        if self._sequence(table) is None:
            self.raw.execute("INSERT INTO sqlite_sequence(name, seq) VALUES (?, ?)", (table, value))
        else:
            self.raw.execute("UPDATE sqlite_sequence SET seq = ? WHERE name = ?", (value, table))

    def _sequence(self, table: str) -> int | None:
        try:
            row = self.raw.execute("SELECT seq FROM sqlite_sequence WHERE name = ?", (table,)).fetchone()
        except sqlite3.OperationalError:  # no AUTOINCREMENT table in this file
            return None
        return None if row is None else int(row[0])


@contextmanager
def _integrity() -> Iterator[None]:
    try:
        yield
    except sqlite3.IntegrityError as exc:
        raise IntegrityError(f"The write was refused: {exc}.") from exc


class SqliteStoreDb(StoreDb):
    """A store's file, with a few pooled connections (readers run side by side in WAL mode) and
    one writer at a time: this process's writers queue on a lock, other processes on the file lock.

    A store read from many threads at once, statement by statement (the document index), also has
    `statements` (a fixed pool of autocommit read connections and one writer connection)."""

    def __init__(self, database: SqliteDatabase, schema: Schema, path: Path) -> None:
        super().__init__(database, schema)
        self.path = path
        self._idle: list[sqlite3.Connection] = []
        self._pool_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._closed = False
        self._statements: StatementConnections | None = None

    def _connect(self) -> sqlite3.Connection:
        return sqlite_db.connect(self.path, timeout=TIMEOUT_SECONDS, pragmas=self.schema.sqlite_pragmas)

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        with self._pool_lock:
            if self._closed:
                raise RuntimeError(f"{self.schema.name} store is closed")
            conn = self._idle.pop() if self._idle else None
        conn = conn or self._connect()
        try:
            yield conn
        finally:
            with self._pool_lock:
                keep = not self._closed and len(self._idle) < _IDLE_CONNECTIONS and not conn.in_transaction
                if keep:
                    self._idle.append(conn)
            if not keep:
                conn.close()

    @contextmanager
    def read(self) -> Iterator[Conn]:
        with self._connection() as raw:
            raw.execute("BEGIN")  # one snapshot for every statement inside
            try:
                yield SqliteConn(raw)
            finally:
                if raw.in_transaction:
                    raw.execute("COMMIT")

    def write(self, fn: Callable[[Conn], T]) -> T:
        with self._write_lock, self._connection() as raw:
            conn = SqliteConn(raw)
            with sqlite_db.write(raw):
                result = fn(conn)
        for channel, payload in conn.notices:
            self.database.notify(channel, payload)
        return result

    def statements(self, size: int) -> StatementConnections:
        """Its statement reads (`size` pooled autocommit read connections) and writer connection, made once."""
        with self._pool_lock:
            if self._statements is None:
                self._statements = StatementConnections(self._connect, size)
            return self._statements

    def connections(self) -> int:
        """Connections open now: the statement reads' pool, the writer and the idle ones."""
        return (self._statements.opened() if self._statements is not None else 0) + len(self._idle)

    def close(self) -> None:
        with self._pool_lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
        if self._statements is not None:
            self._statements.close()


class SqliteDatabase(Database):
    """SQLite files in `data_dir` (the default: no server needed)."""

    backend = "sqlite"
    poll_seconds = 0.25

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self._listeners = LocalListeners()
        self._lock = threading.Lock()
        self._open: list[SqliteStoreDb] = []

    def path(self, schema: Schema) -> Path:
        return self.data_dir / schema.sqlite_file

    def open(self, schema: Schema, *, migrate: bool = True) -> StoreDb:
        ensure_data_dir(self.data_dir)
        if migrate:
            self.migrate(schema)
        handle = SqliteStoreDb(self, schema, self.path(schema))
        with self._lock:
            self._open.append(handle)
        return handle

    def status(self, schema: Schema) -> MigrationStatus:
        known = len(schema.sqlite)
        path = self.path(schema)
        if not known or not path.exists():  # (no tables on this backend, or not created yet)
            return MigrationStatus(schema.name, 0, known)
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=TIMEOUT_SECONDS)
        try:
            return MigrationStatus(schema.name, int(conn.execute("PRAGMA user_version").fetchone()[0]), known)
        finally:
            conn.close()

    def migrate(self, schema: Schema) -> tuple[MigrationStatus, MigrationStatus]:
        if not schema.sqlite:  # a store that keeps no SQLite tables (the audit log is a file here)
            return self.status(schema), self.status(schema)
        ensure_data_dir(self.data_dir)
        path = self.path(schema)
        conn = sqlite_db.connect(path, timeout=TIMEOUT_SECONDS, pragmas=schema.sqlite_pragmas)
        try:
            before = MigrationStatus(schema.name, conn.execute("PRAGMA user_version").fetchone()[0], len(schema.sqlite))
            if before.too_new:
                raise too_new_error(before, str(path))
            if before.pending:
                sqlite_db.migrate(conn, schema.sqlite)
            after = MigrationStatus(schema.name, conn.execute("PRAGMA user_version").fetchone()[0], len(schema.sqlite))
        finally:
            conn.close()
        if schema.private:
            with contextlib.suppress(OSError):
                os.chmod(path, 0o600)
        return before, after

    def describe(self) -> str:
        return f"SQLite files in {self.data_dir}"

    def server_version(self) -> str:
        return f"SQLite {sqlite3.sqlite_version}"

    @contextmanager
    def advisory_lock(self, key: str, *, timeout: float | None = None) -> Iterator[bool]:
        folder = self.data_dir / ".locks"
        folder.mkdir(parents=True, exist_ok=True)
        name = hashlib.sha256(key.encode()).hexdigest()[:32] + ".lock"
        fd = os.open(folder / name, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            got = _flock(fd, timeout)
            try:
                yield got
            finally:
                if got:
                    _funlock(fd)
        finally:
            os.close(fd)

    def notify(self, channel: str, payload: str = "") -> None:
        self._listeners.notify(channel, payload)

    def listen(self, channel: str) -> Listener:
        return self._listeners.listen(channel)

    def close(self) -> None:
        with self._lock:
            handles, self._open = self._open, []
        for handle in handles:
            handle.close()


def _flock(fd: int, timeout: float | None) -> bool:
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: the lock covers this process only
        return True
    if timeout is None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return True
    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
        time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
        delay = min(delay * 2, 0.1)


def _funlock(fd: int) -> None:
    with contextlib.suppress(ImportError):
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_UN)
