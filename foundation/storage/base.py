"""The storage seam: what every store sees, whichever backend holds its tables.

A `Database` is opened once per process (`open_database`): SQLite files in the data directory,
or one PostgreSQL database. A store declares its tables as a `Schema` (ordered migrations per
backend, the tables that export/import copy) and gets a `StoreDb` from `Database.open(schema)`:

    with db.read() as conn:          one consistent snapshot (SQLite: a deferred transaction;
        conn.all("SELECT ...", (x,))  PostgreSQL: REPEATABLE READ, READ ONLY)
    db.write(lambda conn: ...)        one write transaction; SQLite: BEGIN IMMEDIATE (one writer
                                      per file); PostgreSQL: SERIALIZABLE, re-run on a serialization
                                      failure or deadlock, so `fn` must only touch the database

SQL is written once with `?` placeholders (translated to `%s` for psycopg) in the dialect both
share: ON CONFLICT upserts, COALESCE, LIMIT/OFFSET; `conn.insert_id` for generated ids.
Migrations are the one place with per-backend SQL.
"""

from __future__ import annotations

import os
import re
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from foundation.errors import GeneralAgentError

T = TypeVar("T")
Backend = Literal["sqlite", "postgresql"]
Row = tuple[Any, ...]
_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


class StorageError(GeneralAgentError):
    """The database cannot be used as it is (schema newer than this program, a failed import)."""


class IntegrityError(StorageError):
    """A write broke a key or reference rule (the same error on every backend)."""


class StorageUnavailable(StorageError):
    """The database server cannot be reached (down, wrong URL or credentials, timeout)."""


def identifier(name: str) -> str:
    """`name` when it is a plain lower-case SQL identifier (table and column names come from code)."""
    if not _IDENTIFIER.match(name):
        raise ValueError(f"not a plain SQL identifier: {name!r}")
    return name


@dataclass(frozen=True)
class Table:
    """One base table as export/import see it: its columns in a fixed order and the key that orders
    its rows. `identity`: a generated-id column whose counter moves with the imported ids."""

    name: str
    columns: tuple[str, ...]
    key: tuple[str, ...]
    identity: str | None = None

    def __post_init__(self) -> None:
        for name in (self.name, *self.columns, *self.key, *((self.identity,) if self.identity else ())):
            identifier(name)


@dataclass(frozen=True)
class Schema:
    """A store's tables: ordered migrations for each backend (step N of one backend need not match
    step N of the other; what must match is the final tables), and the tables export/import copy,
    parents before children. On SQLite the store is the file `sqlite_file` in the data directory,
    its version `PRAGMA user_version`; on PostgreSQL its version is `schema_migrations.version`
    for `name`."""

    name: str
    sqlite_file: str
    sqlite: tuple[str, ...]
    postgres: tuple[str, ...]
    tables: tuple[Table, ...] = ()
    sqlite_pragmas: tuple[str, ...] = ()
    private: bool = False  # the SQLite file is made owner-only (it holds exact tool arguments)

    def migrations(self, backend: Backend) -> tuple[str, ...]:
        return self.sqlite if backend == "sqlite" else self.postgres


@dataclass(frozen=True)
class MigrationStatus:
    store: str
    applied: int  # the version the database is at
    known: int  # how many migrations this program has

    @property
    def pending(self) -> int:
        return max(0, self.known - self.applied)

    @property
    def too_new(self) -> bool:
        return self.applied > self.known


def too_new_error(status: MigrationStatus, where: str) -> StorageError:
    return StorageError(
        f"The {status.store} tables in {where} are at schema version {status.applied}, newer than this "
        f"program knows ({status.known}): a newer generalagent-mcp wrote them. Upgrade generalagent-mcp "
        "(every process that shares this database) before using it.")


def statements(script: str) -> Iterator[str]:
    """The non-empty statements of a ';'-separated migration; a $$-quoted body (a PostgreSQL
    function) stays whole. No other ';' may stand inside a literal."""
    out: list[str] = []
    current: list[str] = []
    in_body = False
    for part in re.split(r"(\$\$)", script):
        if part == "$$" or in_body:
            in_body = not in_body if part == "$$" else in_body
            current.append(part)
            continue
        first, *rest = part.split(";")
        current.append(first)
        for piece in rest:
            out.append("".join(current))
            current = [piece]
    out.append("".join(current))
    return (s.strip() for s in out if s.strip())


class Conn(ABC):
    """A connection inside one transaction (from `StoreDb.read()` or `StoreDb.write(fn)`)."""

    backend: Backend

    @abstractmethod
    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """Run one statement with `?` placeholders; returns a DB-API cursor (fetchone, fetchall,
        rowcount, description, iteration)."""

    @abstractmethod
    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None: ...

    @abstractmethod
    def insert_id(self, sql: str, params: Sequence[Any], id_column: str = "id") -> int:
        """Run one INSERT (without RETURNING) and return the id the database generated."""

    @abstractmethod
    def copy_rows(self, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> int:
        """Bulk insert (COPY on PostgreSQL); returns the number of rows."""

    @abstractmethod
    def stream(self, sql: str, params: Sequence[Any] = (), batch: int = 1000) -> Iterator[Row]:
        """Rows of a large query without loading them all (a server-side cursor on PostgreSQL)."""

    @abstractmethod
    def notify(self, channel: str, payload: str = "") -> None:
        """Tell the channel's listeners, when (and only if) this transaction commits."""

    @abstractmethod
    def identity_high(self, table: str, column: str) -> int:
        """The highest id the table's generated-id counter has handed out (0: none)."""

    @abstractmethod
    def set_identity_high(self, table: str, column: str, value: int) -> None: ...

    def one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        row = self.execute(sql, params).fetchone()
        return None if row is None else tuple(row)

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        return [tuple(r) for r in self.execute(sql, params).fetchall()]

    def scalar(self, sql: str, params: Sequence[Any] = ()) -> Any:
        row = self.one(sql, params)
        return None if row is None else row[0]

    def dicts(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        cursor = self.execute(sql, params)
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


class StoreDb(ABC):
    """One store's view of the database (see the module docstring)."""

    def __init__(self, database: Database, schema: Schema) -> None:
        self.database = database
        self.schema = schema

    @property
    def backend(self) -> Backend:
        return self.database.backend

    @abstractmethod
    def read(self) -> AbstractContextManager[Conn]:
        """One consistent read-only snapshot."""

    @abstractmethod
    def write(self, fn: Callable[[Conn], T]) -> T:
        """Run `fn` in one write transaction and return its result; commit, or roll back when it
        raises. On PostgreSQL `fn` may run more than once (serialization failures are retried)."""

    @abstractmethod
    def close(self) -> None:
        """Release what this handle holds (the Database closes the rest)."""


class Listener(ABC):
    """Notifications on one channel (from `Database.listen`)."""

    @abstractmethod
    def wait(self, timeout: float) -> list[str]:
        """The payloads that arrived, waiting up to `timeout` seconds for the first one."""

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Listener:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


class Database(ABC):
    """All of one deployment's state: SQLite files in a data directory, or one PostgreSQL database.
    Thread-safe; one per process (it owns the connections), closed when the process ends."""

    backend: Backend
    poll_seconds: float  # how often a waiter re-checks when notifications may not reach it

    @abstractmethod
    def open(self, schema: Schema, *, migrate: bool = True) -> StoreDb:
        """The store's handle; its migrations are applied first unless `migrate` is False."""

    @abstractmethod
    def status(self, schema: Schema) -> MigrationStatus:
        """Where the store's migrations stand (creates nothing)."""

    @abstractmethod
    def migrate(self, schema: Schema) -> tuple[MigrationStatus, MigrationStatus]:
        """Apply the store's pending migrations: (before, after)."""

    @abstractmethod
    def describe(self) -> str:
        """Where the data is, safe to print (a PostgreSQL password is masked)."""

    @abstractmethod
    def server_version(self) -> str: ...

    @abstractmethod
    def advisory_lock(self, key: str, *, timeout: float | None = None) -> AbstractContextManager[bool]:
        """Hold a named lock shared by every process on this database (PostgreSQL: an advisory lock;
        SQLite: a lock file in the data directory). Yields False when `timeout` passed first
        (0: do not wait; None: wait as long as it takes)."""

    @abstractmethod
    def notify(self, channel: str, payload: str = "") -> None:
        """Tell the channel's listeners now (outside any store transaction)."""

    @abstractmethod
    def listen(self, channel: str) -> Listener:
        """Listen on `channel`. PostgreSQL: LISTEN/NOTIFY across processes. SQLite: notifications of
        this process only; waiters also poll (`wait_until`)."""

    @abstractmethod
    def close(self) -> None: ...

    def wait_until(self, check: Callable[[], T | None], channel: str, timeout: float) -> T | None:
        """`check()`'s first non-None result, re-checked whenever `channel` is notified and at least
        every `poll_seconds`; None when `timeout` seconds pass first."""
        deadline = time.monotonic() + timeout
        with self.listen(channel) as listener:
            while True:
                found = check()
                left = deadline - time.monotonic()
                if found is not None or left <= 0:
                    return found
                listener.wait(min(left, self.poll_seconds))


class LocalListeners:
    """In-process notifications (SQLite, and every backend's own process)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queues: dict[str, list[_LocalListener]] = {}

    def listen(self, channel: str) -> Listener:
        listener = _LocalListener(self, channel)
        with self._lock:
            self._queues.setdefault(channel, []).append(listener)
        return listener

    def notify(self, channel: str, payload: str) -> None:
        with self._lock:
            targets = list(self._queues.get(channel, ()))
        for listener in targets:
            listener.put(payload)

    def drop(self, listener: _LocalListener) -> None:
        with self._lock:
            group = self._queues.get(listener.channel, [])
            if listener in group:
                group.remove(listener)


class _LocalListener(Listener):
    def __init__(self, owner: LocalListeners, channel: str) -> None:
        self.owner, self.channel = owner, channel
        self._cond = threading.Condition()
        self._items: list[str] = []

    def put(self, payload: str) -> None:
        with self._cond:
            self._items.append(payload)
            self._cond.notify_all()

    def wait(self, timeout: float) -> list[str]:
        with self._cond:
            if not self._items:
                self._cond.wait(max(0.0, timeout))
            items, self._items = self._items, []
        return items

    def close(self) -> None:
        self.owner.drop(self)


def ensure_data_dir(data_dir: Path) -> Path:
    """Create the data dir; a file in its place or a folder this user cannot write is a StorageError
    naming the fix (not an OSError from deep inside a store)."""
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        what = ("is a file, not a folder" if isinstance(exc, FileExistsError) else "cannot be created: a part of "
                "its path is a file" if isinstance(exc, NotADirectoryError) else f"cannot be created ({exc.strerror})")
        where = exc.filename if isinstance(exc.filename, str) and exc.filename != str(data_dir) else None
        raise StorageError(f"The data dir {data_dir} {what}" + (f" (at {where})" if where else "") + ". Give a "
                           "folder this user can write with --data-dir or GENERALAGENT_DATA_DIR.") from None
    if not os.access(data_dir, os.W_OK | os.X_OK):
        raise StorageError(f"The data dir {data_dir} is not writable by this user. Give a folder this user can "
                           "write with --data-dir or GENERALAGENT_DATA_DIR (or fix its permissions).")
    return data_dir
