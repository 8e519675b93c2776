"""The SQLite index's read connections: a small fixed pool shared by every thread (issue 11, memory)."""

from __future__ import annotations

import itertools
import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from foundation import sqlite_db
from foundation.storage.pooled_reads import ConnectionPool
from indexing.model import Chunk
from indexing.store import READ_CONNECTIONS, AnalyzedChunk, IndexStore


@pytest.fixture
def store(tmp_path: Path) -> IndexStore:
    s = IndexStore(tmp_path / "index.sqlite3")
    with s.write() as conn:
        for n in range(20):
            chunks = [AnalyzedChunk(Chunk(i, 0, 5, f"text {n} {i}"), "", f"term{n} word{i}") for i in range(5)]
            doc_id = s.insert_document(conn, f"hash{n}", "text", 25, chunks)
            s.link_file(conn, f"/ws/f{n:02d}.txt", doc_id, 25, 0)
    yield s
    s.close()


def read_everything(store: IndexStore) -> int:
    files = store.all_files()
    rows = sum(1 for _ in store.stream("SELECT id FROM chunks"))
    return len(files) + rows + store.totals()["chunks"]


def test_many_threads_share_a_bounded_number_of_connections(store: IndexStore) -> None:
    with ThreadPoolExecutor(max_workers=24) as pool:
        results = list(pool.map(lambda _: read_everything(store), range(200)))
    assert set(results) == {20 + 100 + 100}
    assert store.connections() <= READ_CONNECTIONS + 1  # the read pool and the writer


def test_threads_read_at_the_same_time_while_one_writes(store: IndexStore) -> None:
    barrier = threading.Barrier(6)
    seen: list[int] = []
    errors: list[BaseException] = []

    def reader() -> None:
        try:
            barrier.wait(30)
            for _ in range(50):
                seen.append(store.totals()["files"])
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion below
            errors.append(exc)

    def writer() -> None:
        try:
            barrier.wait(30)
            with store.write() as conn:
                store.link_file(conn, "/ws/new.txt", None, 0, 0, error="unreadable")
                assert store.file_row("/ws/new.txt") is not None  # the write sees itself
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(5)] + [threading.Thread(target=writer)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    assert set(seen) <= {20, 21}
    assert store.totals()["files"] == 21


def test_a_thread_reading_a_stream_can_run_other_statements(store: IndexStore) -> None:
    """Nested use on one thread takes no second connection: even with every other connection busy."""
    held = [store.stream("SELECT id FROM chunks") for _ in range(1)]
    release = threading.Event()
    started = threading.Barrier(READ_CONNECTIONS)

    def hold() -> None:
        rows = store.stream("SELECT id FROM chunks")
        next(rows)
        started.wait(5)
        release.wait(10)
        list(rows)

    others = [threading.Thread(target=hold) for _ in range(READ_CONNECTIONS - 1)]
    for t in others:
        t.start()
    started.wait(5)
    try:
        first = next(held[0])
        assert store.file_row("/ws/f03.txt") is not None
        assert len(list(held[0])) == 99 and first is not None
    finally:
        release.set()
        for t in others:
            t.join(10)
    assert store.connections() <= READ_CONNECTIONS + 1


def test_a_dropped_stream_gives_its_connection_back(store: IndexStore) -> None:
    for _ in range(READ_CONNECTIONS * 3):
        rows = store.stream("SELECT id FROM chunks")
        next(rows)
        del rows  # never read to the end
    done = []
    thread = threading.Thread(target=lambda: done.append(store.totals()["files"]))
    thread.start()
    thread.join(10)
    assert done == [20]


def test_a_closed_connection_is_replaced(store: IndexStore) -> None:
    store.totals()
    pool = store.dialect.statements.pool
    for conn in list(pool._idle):
        conn.close()  # e.g. closed under us
    assert store.totals()["files"] == 20
    assert store.file_row("/ws/f01.txt") is not None
    assert pool.opened <= READ_CONNECTIONS


def test_a_bad_statement_keeps_the_connection(store: IndexStore) -> None:
    store.totals()
    opened = store.dialect.statements.pool.opened
    import sqlite3

    with pytest.raises(sqlite3.OperationalError):
        store.conn().execute("SELECT nothing FROM nowhere")
    assert store.dialect.statements.pool.opened == opened
    assert store.totals()["files"] == 20


def test_closing_the_store_closes_its_connections(store: IndexStore) -> None:
    read_everything(store)
    store.close()
    assert store.connections() == 0


def test_a_slow_open_blocks_no_other_reader(tmp_path: Path) -> None:
    """A connection opens outside the pool's lock (an open waits up to the busy timeout while another
    process converts the file to WAL): meanwhile other threads give connections back and take them."""
    opens = itertools.count()
    opening, gate, opened = threading.Event(), threading.Event(), threading.Event()

    def connect() -> sqlite3.Connection:
        if next(opens) == 1:  # the second connection is slow to open: until the test lets it (60 s at most)
            opening.set()
            gate.wait(60)
            opened.set()
        return sqlite_db.connect(tmp_path / "pool.sqlite3", timeout=5)

    pool = ConnectionPool(connect, 2)
    first = pool.acquire()
    slow = threading.Thread(target=lambda: pool.release(pool.acquire()))
    slow.start()
    try:
        assert opening.wait(30)
        pool.release(first)
        again = pool.acquire()  # the connection just given back, while the other still opens
        assert again.conn is first.conn
        pool.release(again)
        assert not opened.is_set(), "giving back and taking a connection waited for the slow open"
    finally:
        gate.set()
        slow.join(30)
    assert pool.opened == 2
    pool.close()


def test_a_failed_open_gives_its_slot_back(tmp_path: Path) -> None:
    opens = itertools.count()

    def connect() -> sqlite3.Connection:
        if next(opens) == 0:
            raise sqlite3.OperationalError("database is locked")
        return sqlite_db.connect(tmp_path / "pool.sqlite3", timeout=5)

    pool = ConnectionPool(connect, 1)
    with pytest.raises(sqlite3.OperationalError):
        pool.acquire()
    assert pool.opened == 0
    pool.release(pool.acquire())
    assert pool.opened == 1
    pool.close()
