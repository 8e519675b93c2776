"""A small fixed pool of SQLite read connections shared by every thread (`ConnectionPool`), and
statements run on it with their rows fetched whole (`PooledReads`) or streamed on a held
connection (`_LeasedRows`); with one writer connection, `StatementConnections`: what a store read
from many threads at once, statement by statement, has (`SqliteStoreDb.statements`: the document index)."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from foundation.waiting import about_to_wait

POOL_WAIT_S = 60.0  # how long a reader waits for a free read connection before the call fails


class Result:
    """A fully fetched result, usable after its connection went back to the pool."""

    def __init__(self, rows: list[tuple[Any, ...]], rowcount: int, description: Any) -> None:
        self._rows, self.rowcount, self.description = rows, rowcount, description
        self._at = 0

    def fetchone(self) -> tuple[Any, ...] | None:
        if self._at >= len(self._rows):
            return None
        self._at += 1
        return self._rows[self._at - 1]

    def fetchall(self) -> list[tuple[Any, ...]]:
        rest, self._at = self._rows[self._at :], len(self._rows)
        return rest

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        rest, self._at = self._rows[self._at :] if self._at else self._rows, len(self._rows)
        return iter(rest)


@dataclass(eq=False)
class _Lease:
    conn: sqlite3.Connection
    thread: int
    users: int = 0
    ended: bool = False  # given back (or thrown away): its last users' releases change nothing


class ConnectionPool:
    """At most `size` connections, opened on demand and shared by every thread, one user at a time
    each. A thread that holds one (a stream being read) gets the same one for its other statements,
    so a thread never waits for a second connection while it holds one (no deadlock). A connection
    that failed as a connection (closed, damaged) is thrown away; a fresh one takes its place."""

    def __init__(self, connect: Callable[[], sqlite3.Connection], size: int) -> None:
        self._connect = connect
        self.size = size
        self.opened = 0
        self._idle: list[sqlite3.Connection] = []
        self._held: dict[int, _Lease] = {}
        self._ready = threading.Condition(threading.RLock())
        self._closed = False
        self._waiting = 0  # threads waiting in `_take` for a connection (a release wakes one only then)

    def acquire(self) -> _Lease:
        me = threading.get_ident()
        with self._ready:
            lease = self._held.get(me)
            if lease is not None:
                lease.users += 1
                return lease
            if self._idle and not self._closed:  # (the common case: taken and leased under one lock)
                lease = self._held[me] = _Lease(self._idle.pop(), me, users=1)
                return lease
            conn = self._take()
        if conn is None:  # a slot is ours: open outside the lock (other threads take and give back meanwhile)
            conn = self._open()
        with self._ready:
            lease = self._held[me] = _Lease(conn, me, users=1)
            return lease

    def release(self, lease: _Lease, broken: bool = False) -> None:
        """Give a use back; the connection returns to the pool after its last use (`broken`: at once,
        closed, and this thread's other streams on it fail at their next row)."""
        with self._ready:
            if lease.ended:
                return
            lease.users -= 1
            if lease.users > 0 and not broken:
                return
            lease.ended = True
            if self._held.get(lease.thread) is lease:
                del self._held[lease.thread]
            discard = broken or self._closed
            if discard:
                self.opened -= 1
            else:
                self._idle.append(lease.conn)
            if self._waiting:
                self._ready.notify()
        if discard:
            lease.conn.close()

    def _take(self) -> sqlite3.Connection | None:
        """An idle connection; None (a slot counted in `opened`, for the caller to open) while fewer
        than `size` are open; else the next one given back. The caller holds the lock."""
        deadline = time.monotonic() + POOL_WAIT_S
        while True:
            if self._closed:
                raise sqlite3.ProgrammingError("the index is closed")
            if self._idle:
                return self._idle.pop()
            if self.opened < self.size:
                self.opened += 1
                return None
            about_to_wait()  # every connection is busy (a call on the event loop moves to a worker thread)
            left = deadline - time.monotonic()
            if left <= 0:
                raise sqlite3.OperationalError(
                    f"all {self.size} read connections of the index stayed busy for {POOL_WAIT_S:.0f} s")
            self._waiting += 1
            try:
                self._ready.wait(left)
            finally:
                self._waiting -= 1

    def _open(self) -> sqlite3.Connection:
        """A new connection for the slot `_take` counted (given back to the pool when opening fails)."""
        try:
            return self._connect()
        except BaseException:
            with self._ready:
                self.opened -= 1
                self._ready.notify()  # a waiting thread may open one now
            raise

    def close(self) -> None:
        """Close the idle connections now and the others when they are given back."""
        with self._ready:
            self._closed = True
            idle, self._idle = self._idle, []
            self.opened -= len(idle)
            self._ready.notify_all()
        for conn in idle:
            conn.close()


class PooledReads:
    """`IndexStore.conn()` outside a write: each statement on a pooled read connection, fetched whole
    (once more on a fresh connection when the pooled one turns out closed or damaged)."""

    def __init__(self, pool: ConnectionPool) -> None:
        self.pool = pool

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Result:
        return self._run(lambda conn: _fetched(conn.execute(sql, params)))

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> Result:
        rows = list(rows)
        return self._run(lambda conn: Result([], conn.executemany(sql, rows).rowcount, None))

    def _run(self, statement: Callable[[sqlite3.Connection], Result]) -> Result:
        for attempt in (1, 2):
            lease = self.pool.acquire()
            broken = False
            try:
                return statement(lease.conn)
            except sqlite3.Error as exc:
                broken = _broken(exc)
                if not broken or attempt == 2:
                    raise
            finally:
                self.pool.release(lease, broken)
        raise AssertionError("unreachable")

    def stream(self, sql: str, params: Sequence[Any] = ()) -> Iterator[tuple[Any, ...]]:
        lease = self.pool.acquire()
        try:
            cursor = lease.conn.execute(sql, params)
        except sqlite3.Error as exc:
            self.pool.release(lease, _broken(exc))
            raise
        except BaseException:
            self.pool.release(lease)
            raise
        return _LeasedRows(cursor, self.pool, lease)


class StatementConnections:
    """A fixed pool of `size` autocommit read connections shared by every thread (`PooledReads`), and one
    writer connection for the store's write transactions, one thread at a time (other processes: SQLite's
    file lock). `conn()`: the writer inside `writer()` on this thread, else the pooled reads."""

    def __init__(self, connect: Callable[[], sqlite3.Connection], size: int) -> None:
        self._connect = connect
        self.pool = ConnectionPool(connect, size)
        self.reads = PooledReads(self.pool)
        self._writer: sqlite3.Connection | None = None
        self._writer_lock = threading.Lock()
        self._writing: int | None = None  # the thread inside writer()

    def conn(self) -> sqlite3.Connection | PooledReads:
        if self._writing == threading.get_ident() and self._writer is not None:
            return self._writer
        return self.reads

    @contextmanager
    def writer(self, timeout: float) -> Iterator[sqlite3.Connection]:
        """The writer connection, waiting `timeout` seconds at most for this process's other writer; the
        caller opens the transaction on it (`sqlite_db.write`)."""
        if self._writing == threading.get_ident():
            raise RuntimeError("nested write")
        if not self._writer_lock.acquire(timeout=timeout):
            raise sqlite3.OperationalError("database is locked")
        try:
            if self._writer is None:
                self._writer = self._connect()
            self._writing = threading.get_ident()
            yield self._writer
        finally:
            self._writing = None
            self._writer_lock.release()

    def opened(self) -> int:
        """Connections open now (the read pool's and the writer)."""
        return self.pool.opened + (self._writer is not None)

    def close(self) -> None:
        self.pool.close()
        with self._writer_lock:
            if self._writer is not None:
                self._writer.close()
                self._writer = None


def _fetched(cursor: sqlite3.Cursor) -> Result:
    return Result(cursor.fetchall(), cursor.rowcount, cursor.description)


class _LeasedRows:
    """A cursor's rows; its connection goes back to the pool after the last row, or when dropped."""

    def __init__(self, cursor: sqlite3.Cursor, pool: ConnectionPool, lease: _Lease) -> None:
        self._cursor, self._pool = cursor, pool
        self._lease: _Lease | None = lease

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return self

    def __next__(self) -> tuple[Any, ...]:
        if self._lease is None:
            raise StopIteration
        try:
            return tuple(next(self._cursor))
        except StopIteration:
            self.close()
            raise
        except sqlite3.Error as exc:
            self.close(broken=_broken(exc))
            raise

    def close(self, broken: bool = False) -> None:
        lease, self._lease = self._lease, None
        if lease is not None:
            self._cursor.close()
            self._pool.release(lease, broken)

    def __del__(self) -> None:
        self.close()


def _broken(exc: sqlite3.Error) -> bool:
    """True when the connection itself failed (closed, damaged, I/O): it is not used again. A bad
    statement, a constraint or a busy database leaves it usable."""
    if isinstance(exc, sqlite3.ProgrammingError):
        return "closed" in str(exc)
    if isinstance(exc, sqlite3.OperationalError):
        return "disk I/O" in str(exc)
    return not isinstance(exc, sqlite3.IntegrityError)
