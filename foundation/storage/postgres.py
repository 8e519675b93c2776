"""The PostgreSQL backend: every store's tables in one database (psycopg 3 + psycopg-pool).

One pool per process shared by all stores; autocommit connections on which each read opens a
REPEATABLE READ, READ ONLY transaction and each write a SERIALIZABLE one that is re-run on a
serialization failure or deadlock (so read-modify-write, such as a todo list's version, never
loses an update across processes). Migrations: one row per store in `schema_migrations`, applied
under an advisory lock in one transaction (PostgreSQL DDL is transactional). Advisory locks,
notification channels and the migration lock are keyed by the schema the tables live in
(`current_schema()`), so deployments in different schemas of one database stay apart.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from typing import Any

import psycopg
import psycopg_pool
from psycopg import errors as pg_errors
from psycopg import sql as pg_sql

from foundation.errors import Conflict
from foundation.storage.base import (
    Conn,
    Database,
    IntegrityError,
    Listener,
    MigrationStatus,
    Row,
    Schema,
    StorageError,
    StorageUnavailable,
    StoreDb,
    T,
    identifier,
    statements,
    too_new_error,
)
from foundation.storage.urls import mask_url, scrub

CONNECT_TIMEOUT_SECONDS = 5
POOL_SIZE = 8
POOL_WAIT_SECONDS = 30.0
WRITE_ATTEMPTS = 12
_RETRYABLE = (pg_errors.SerializationFailure, pg_errors.DeadlockDetected)
_MIGRATIONS_TABLE = """CREATE TABLE IF NOT EXISTS schema_migrations (
    store text PRIMARY KEY,
    version integer NOT NULL,
    updated_at double precision NOT NULL
)"""
_cursor_names = itertools.count(1)


@functools.lru_cache(maxsize=1024)
def to_pyformat(sql: str) -> str:
    """Portable `?` placeholders as psycopg's `%s` (a literal % doubled); `?` inside quotes kept."""
    out: list[str] = []
    quote: str | None = None
    for char in sql:
        if quote:
            out.append("%%" if char == "%" else char)
            if char == quote:
                quote = None
        elif char in "'\"":
            quote = char
            out.append(char)
        elif char == "?":
            out.append("%s")
        else:
            out.append("%%" if char == "%" else char)
    return "".join(out)


def _hash64(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big", signed=True)


@contextmanager
def _integrity() -> Iterator[None]:
    try:
        yield
    except pg_errors.IntegrityError as exc:
        raise IntegrityError(f"The write was refused: {str(exc).splitlines()[0]}.") from exc


class PgConn(Conn):
    backend = "postgresql"

    def __init__(self, raw: psycopg.Connection[Any], database: PostgresDatabase) -> None:
        self.raw = raw
        self.database = database

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        cursor = self.raw.cursor()
        with _integrity():
            cursor.execute(to_pyformat(sql), tuple(params))
        return cursor

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        batch = [tuple(r) for r in rows]
        if batch:
            with _integrity():
                self.raw.cursor().executemany(to_pyformat(sql), batch)

    def insert_id(self, sql: str, params: Sequence[Any], id_column: str = "id") -> int:
        row = self.execute(f"{sql} RETURNING {identifier(id_column)}", params).fetchone()
        return int(row[0])

    def copy_rows(self, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> int:
        statement = pg_sql.SQL("COPY {} ({}) FROM STDIN").format(
            pg_sql.Identifier(identifier(table)), pg_sql.SQL(", ").join(pg_sql.Identifier(identifier(c)) for c in columns))
        count = 0
        with _integrity(), self.raw.cursor().copy(statement) as copy:
            for row in rows:
                copy.write_row(tuple(row))
                count += 1
        return count

    def stream(self, sql: str, params: Sequence[Any] = (), batch: int = 1000) -> Iterator[Row]:
        with self.raw.cursor(name=f"ga_stream_{next(_cursor_names)}") as cursor:
            cursor.itersize = batch
            cursor.execute(to_pyformat(sql), tuple(params))
            for row in cursor:
                yield tuple(row)

    def notify(self, channel: str, payload: str = "") -> None:
        self.execute("SELECT pg_notify(?, ?)", (self.database.channel(channel), payload))

    def identity_high(self, table: str, column: str) -> int:
        seq = self._sequence(table, column)
        last, called = self.one(f"SELECT last_value, is_called FROM {seq}") or (0, False)
        top = self.scalar(f"SELECT MAX({identifier(column)}) FROM {identifier(table)}")
        return max(int(last) if called else 0, int(top or 0))

    def set_identity_high(self, table: str, column: str, value: int) -> None:
        seq = self._sequence(table, column)
        if value > 0:
            self.execute("SELECT setval(?::regclass, ?, true)", (seq, value))
        else:
            self.execute("SELECT setval(?::regclass, 1, false)", (seq,))

    def _sequence(self, table: str, column: str) -> str:
        seq = self.scalar("SELECT pg_get_serial_sequence(?, ?)", (identifier(table), identifier(column)))
        if not seq:
            raise StorageError(f"{table}.{column} has no generated-id sequence.")
        return str(seq)


class PgStoreDb(StoreDb):
    database: PostgresDatabase

    def close(self) -> None:
        pass  # the connections belong to the Database's pool

    @contextmanager
    def read(self) -> Iterator[Conn]:
        with self.database.connection() as raw:
            raw.execute("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            try:
                yield PgConn(raw, self.database)
            except BaseException:
                rollback(raw)
                raise
            raw.execute("COMMIT")

    def write(self, fn: Callable[[Conn], T]) -> T:
        delay = 0.005
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            try:
                return self._write_once(fn)
            except _RETRYABLE:
                if attempt == WRITE_ATTEMPTS:
                    break
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 0.5)
        raise Conflict(f"The {self.schema.name} tables stayed busy with concurrent writes ({WRITE_ATTEMPTS} tries); "
                       "nothing was changed. Retry the call.")

    def _write_once(self, fn: Callable[[Conn], T]) -> T:
        with self.database.connection() as raw:
            raw.execute("BEGIN ISOLATION LEVEL SERIALIZABLE")
            try:
                result = fn(PgConn(raw, self.database))
                raw.execute("COMMIT")
            except BaseException:
                rollback(raw)
                raise
            return result


def rollback(raw: psycopg.Connection[Any]) -> None:
    """End the connection's open transaction, if any (quietly: the connection may be broken)."""
    if not raw.closed and raw.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        with suppress(psycopg.Error):
            raw.execute("ROLLBACK")


class PgListener(Listener):
    def __init__(self, conn: psycopg.Connection[Any], channel: str) -> None:
        self.conn = conn
        conn.execute(pg_sql.SQL("LISTEN {}").format(pg_sql.Identifier(channel)))

    def wait(self, timeout: float) -> list[str]:
        payloads = [n.payload for n in self.conn.notifies(timeout=max(0.0, timeout), stop_after=1)]
        if payloads:  # whatever else already arrived, without waiting
            payloads += [n.payload for n in self.conn.notifies(timeout=0.0)]
        return payloads

    def close(self) -> None:
        self.conn.close()


class PostgresDatabase(Database):
    """Every store in one PostgreSQL database, reached with `url` (postgresql://user:pass@host/db)."""

    backend = "postgresql"
    poll_seconds = 5.0  # only a safety net: LISTEN/NOTIFY wakes waiters at once

    def __init__(self, url: str, *, pool_size: int = POOL_SIZE) -> None:
        self.url = url
        self.conninfo = _with_connect_timeout(url)
        first = self._connect()  # fails fast, with the server's reason, when the URL or server is wrong
        try:
            self.namespace, self._version = _namespace(first, mask_url(url))
        finally:
            first.close()
        self._read_pool: psycopg_pool.ConnectionPool[psycopg.Connection[Any]] | None = None
        self._reads_lock = threading.Lock()
        self._pool: psycopg_pool.ConnectionPool[psycopg.Connection[Any]] = psycopg_pool.ConnectionPool(
            self.conninfo, min_size=1, max_size=pool_size, kwargs={"autocommit": True}, open=False,
            check=psycopg_pool.ConnectionPool.check_connection, timeout=POOL_WAIT_SECONDS,
            name="generalagent", reconnect_timeout=60.0)
        try:
            self._pool.open(wait=True, timeout=CONNECT_TIMEOUT_SECONDS * 2)
        except psycopg_pool.PoolTimeout as exc:
            self._pool.close()
            raise self._unavailable("the connection pool could not open") from exc

    # -- connections

    def _connect(self) -> psycopg.Connection[Any]:
        try:
            return psycopg.connect(self.conninfo, autocommit=True)
        except psycopg.Error as exc:
            raise self._unavailable(str(exc)) from None

    def _unavailable(self, reason: str) -> StorageUnavailable:
        from foundation.script import script_command

        first = scrub(reason.strip().splitlines()[0] if reason.strip() else "no answer", self.url)
        return StorageUnavailable(
            f"Cannot use PostgreSQL at {mask_url(self.url)}: {first.rstrip('.')}. Check that the server is running "
            "and that GENERALAGENT_DATABASE_URL (or --database-url) names the right host, port, database, user "
            f"and password; `{script_command()} doctor` tests the connection (with GENERALAGENT_DATABASE_URL "
            "set to it).")

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A pooled autocommit connection (the caller opens and ends its transaction)."""
        try:
            with self._pool.connection() as raw:
                try:
                    yield raw
                except psycopg.OperationalError as exc:
                    if raw.closed or raw.broken:
                        raise self._unavailable(str(exc)) from exc
                    raise
        except psycopg_pool.PoolTimeout as exc:
            raise self._unavailable(f"no connection within {POOL_WAIT_SECONDS:.0f} s") from exc

    def read_rows(self, sql: str, params: Sequence[Any] = ()) -> tuple[list[Row], int, Any]:
        """One autocommit statement with `?` placeholders: (rows, rowcount, description). For many small
        reads: its connections come from a second pool that skips the liveness round trip on hand-out;
        when the connection turns out broken (a restarted server), the pool's idle connections are
        checked and the statement runs once more. Other errors are raised as they are."""
        for attempt in (1, 2):
            pool = self._reads()
            try:
                with pool.connection() as raw:
                    try:
                        cursor = raw.execute(to_pyformat(sql), tuple(params))
                        rows = [tuple(r) for r in cursor.fetchall()] if cursor.description else []
                        return rows, cursor.rowcount, cursor.description
                    except psycopg.OperationalError as exc:
                        if not raw.broken:
                            raise
                        if attempt == 2:
                            raise self._unavailable(str(exc)) from exc
            except psycopg_pool.PoolTimeout as exc:
                raise self._unavailable(f"no connection within {POOL_WAIT_SECONDS:.0f} s") from exc
            pool.check()  # drop the other dead connections before the second try
        raise AssertionError("unreachable")

    def _reads(self) -> psycopg_pool.ConnectionPool[psycopg.Connection[Any]]:
        with self._reads_lock:
            if self._read_pool is None:
                self._read_pool = psycopg_pool.ConnectionPool(
                    self.conninfo, min_size=1, max_size=POOL_SIZE, kwargs={"autocommit": True}, open=True,
                    timeout=POOL_WAIT_SECONDS, name="generalagent-reads", reconnect_timeout=60.0)
            return self._read_pool

    def channel(self, name: str) -> str:
        return "ga_" + hashlib.sha256(f"{self.namespace}\0{name}".encode()).hexdigest()[:24]

    # -- the Database interface

    def open(self, schema: Schema, *, migrate: bool = True) -> StoreDb:
        if migrate:
            self.migrate(schema)
        return PgStoreDb(self, schema)

    def status(self, schema: Schema) -> MigrationStatus:
        with self.connection() as raw:
            return MigrationStatus(schema.name, _version_of(raw, schema.name), len(schema.postgres))

    def migrate(self, schema: Schema) -> tuple[MigrationStatus, MigrationStatus]:
        known = len(schema.postgres)
        with self.connection() as raw:
            before = MigrationStatus(schema.name, _version_of(raw, schema.name), known)
            if before.too_new:
                raise too_new_error(before, self.describe())
            if not before.pending:
                return before, before
            raw.execute("BEGIN")
            try:
                raw.execute("SELECT pg_advisory_xact_lock(%s)", (_hash64(f"{self.namespace}\0schema_migrations"),))
                raw.execute(_MIGRATIONS_TABLE)
                applied = _version_of(raw, schema.name)  # another process may have migrated meanwhile
                for script in schema.postgres[applied:]:
                    for statement in statements(script):
                        raw.execute(statement)  # migrations are code, not input
                raw.execute(
                    "INSERT INTO schema_migrations (store, version, updated_at) VALUES (%s, %s, %s) "
                    "ON CONFLICT (store) DO UPDATE SET version = excluded.version, updated_at = excluded.updated_at",
                    (schema.name, known, time.time()))
                raw.execute("COMMIT")
            except BaseException:
                rollback(raw)
                raise
        return before, MigrationStatus(schema.name, known, known)

    def describe(self) -> str:
        where = f" (schema {self.namespace})" if self.namespace != "public" else ""
        return f"PostgreSQL at {mask_url(self.url)}{where}"

    def server_version(self) -> str:
        return f"PostgreSQL {self._version}"

    def lock_number(self, key: str) -> int:
        """The advisory-lock number of `key` in this deployment (pg_advisory_xact_lock takes it too)."""
        return _hash64(f"{self.namespace}\0lock\0{key}")

    @contextmanager
    def advisory_lock(self, key: str, *, timeout: float | None = None) -> Iterator[bool]:
        number = self.lock_number(key)
        conn = self._connect()  # its own session: the lock lasts as long as it, never a pooled one
        try:
            got = _advisory(conn, number, timeout)
            try:
                yield got
            finally:
                if got and not conn.closed:
                    conn.execute("SELECT pg_advisory_unlock(%s)", (number,))
        finally:
            conn.close()

    def notify(self, channel: str, payload: str = "") -> None:
        with self.connection() as raw:
            raw.execute("SELECT pg_notify(%s, %s)", (self.channel(channel), payload))

    def listen(self, channel: str) -> Listener:
        return PgListener(self._connect(), self.channel(channel))

    def close(self) -> None:
        self._pool.close()
        with self._reads_lock:
            if self._read_pool is not None:
                self._read_pool.close()
                self._read_pool = None


def _with_connect_timeout(url: str) -> str:
    if "connect_timeout" in url:
        return url
    return url + ("&" if "?" in url else "?") + f"connect_timeout={CONNECT_TIMEOUT_SECONDS}"


def _namespace(conn: psycopg.Connection[Any], where: str) -> tuple[str, str]:
    row = conn.execute("SELECT current_schema(), current_setting('server_version')").fetchone()
    if row is None or row[0] is None:
        raise StorageError(
            f"PostgreSQL at {where}: the search_path names no existing schema, so there is nowhere to create "
            "the tables. Create the schema (CREATE SCHEMA name) or fix `options=-csearch_path=...` in the URL.")
    return str(row[0]), str(row[1]).split(" ")[0]


def _version_of(raw: psycopg.Connection[Any], store: str) -> int:
    if raw.execute("SELECT to_regclass('schema_migrations')").fetchone() == (None,):
        return 0
    row = raw.execute("SELECT version FROM schema_migrations WHERE store = %s", (store,)).fetchone()
    return int(row[0]) if row else 0


def _advisory(conn: psycopg.Connection[Any], number: int, timeout: float | None) -> bool:
    if timeout is None:
        conn.execute("SELECT pg_advisory_lock(%s)", (number,))
        return True
    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        row = conn.execute("SELECT pg_try_advisory_lock(%s)", (number,)).fetchone()
        if row and row[0]:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
        delay = min(delay * 2, 0.1)
