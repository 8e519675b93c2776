"""The index as export/import see it (`foundation.storage.transfer`): its base tables, without the
search data derived from them (FTS5 on SQLite; the tsvector and term statistics on PostgreSQL),
which the target computes as it loads the chunks. A SQLite index moves into PostgreSQL and back
searchable, with its vectors, index runs and analyzer version."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice
from typing import Any

from foundation.storage import Row, Table
from indexing.store import CHUNK_TABLE_COLS, IndexStore

BATCH = 1000
CHUNK_COLUMNS = tuple(CHUNK_TABLE_COLS.replace('"', "").split(", "))
TABLES: tuple[Table, ...] = (
    Table("documents", ("id", "hash", "kind", "chars", "n_chunks", "warnings", "created_at"), ("id",)),
    Table("files", ("path", "doc_id", "size", "mtime_ns", "indexed_at", "error"), ("path",)),
    Table("chunks", CHUNK_COLUMNS, ("id",)),
    Table("chunk_vectors", ("chunk_id", "vec", "scale"), ("chunk_id",)),
    Table("meta", ("key", "value"), ("key",)),
    Table("index_jobs", ("id", "path", "state", "done", "total", "indexed", "unchanged", "failed", "removed",
                         "chunks_added", "error", "started_at", "finished_at"), ("id",)),
)


def _columns(table: Table) -> str:
    return ", ".join(f'"{c}"' for c in table.columns)  # quoted: `end` is reserved in PostgreSQL


LOCAL_META = {"postings_id"}  # names this database's saved postings: neither exported nor imported (a copy keeps its own)


class IndexPortable:
    name = "index"

    def __init__(self, store: IndexStore) -> None:
        self.store = store

    def tables(self) -> tuple[Table, ...]:
        return TABLES

    def rows(self, table: Table) -> Iterator[Row]:
        order = ", ".join(f'"{c}"' for c in table.key)
        rows = self.store.stream(f"SELECT {_columns(table)} FROM {table.name} ORDER BY {order}")
        yield from (r for r in rows if r[0] not in LOCAL_META) if table.name == "meta" else rows

    def identity_high(self, table: Table) -> int | None:
        return None  # ids are the highest so far plus one (see IndexStore.insert_document)

    def is_empty(self) -> bool:
        return not self.store.has_files() and self.store.totals()["documents"] == 0

    def load(self, tables: Iterator[tuple[Table, int | None, Iterator[Row]]]) -> dict[str, int]:
        """Every table in one write; chunks are indexed as they go in, then the totals are counted."""
        with self.store.write() as conn:
            counts = {table.name: self._load_table(conn, table, rows) for table, _high, rows in tables}
            self.store.recount_totals(conn)
        return counts

    def _load_table(self, conn: Any, table: Table, rows: Iterator[Row]) -> int:
        count = 0
        marks = ", ".join("?" * len(table.columns))
        while batch := [tuple(r) for r in islice(rows, BATCH)]:
            if table.name == "chunks":
                self.store.add_chunk_rows(conn, batch)
            elif table.name == "meta":  # a fresh index already notes its analyzer version
                conn.executemany("INSERT INTO meta(key, value) VALUES(?, ?) "
                                 "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                                 [r for r in batch if r[0] not in LOCAL_META])
            else:
                conn.executemany(f"INSERT INTO {table.name}({_columns(table)}) VALUES({marks})", batch)
            count += len(batch)
        return count

