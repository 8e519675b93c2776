"""Export and import: every store's rows in one portable file, so a SQLite data directory moves into
PostgreSQL (and back) without loss.

The file is JSON lines (gzip-compressed when its name ends in .gz):

    {"format": "generalagent-mcp export", "version": 1, "created": "...", "source": "..."}
    {"store": "todos"}
    {"table": "todo_items", "columns": ["list_id", ...], "identity_high": null}
    ["list-1", 0, "a1b2c3d4", "Write tests", "pending", "medium", null]      one array per row
    {"end": "todo_items", "rows": 1}
    ...
    {"end": "export", "stores": 6}

Values are JSON: text, integers, floats (written with repr's round-trip precision), null; bytes as
{"$bytes": base64}. A store is anything `Portable`: `SqlPortable` covers a Schema's tables; other
stores (the JSONL audit log) implement the same few methods. Which stores exist is the caller's
list (mcp_server/stores.py), so a new store only adds itself there.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import json
import os
import time
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Protocol

from foundation.storage.base import Row, StorageError, StoreDb, Table, identifier

FORMAT = "generalagent-mcp export"
VERSION = 1


class Portable(Protocol):
    """One store as export/import see it: named tables of rows."""

    name: str

    def tables(self) -> tuple[Table, ...]: ...

    def rows(self, table: Table) -> Iterator[Row]:
        """Every row, ordered by the table's key."""

    def identity_high(self, table: Table) -> int | None: ...

    def is_empty(self) -> bool: ...

    def load(self, tables: Iterator[tuple[Table, int | None, Iterator[Row]]]) -> dict[str, int]:
        """Insert every table's rows (the store must be empty), in one transaction where the backend
        allows; returns rows per table."""


class SqlPortable:
    """A Schema's tables through its StoreDb."""

    def __init__(self, db: StoreDb) -> None:
        self.db = db
        self.name = db.schema.name

    def tables(self) -> tuple[Table, ...]:
        return self.db.schema.tables

    def rows(self, table: Table) -> Iterator[Row]:
        columns = ", ".join(identifier(c) for c in table.columns)
        order = ", ".join(identifier(c) for c in table.key)
        with self.db.read() as conn:
            yield from conn.stream(f"SELECT {columns} FROM {identifier(table.name)} ORDER BY {order}")

    def identity_high(self, table: Table) -> int | None:
        if table.identity is None:
            return None
        with self.db.read() as conn:
            return conn.identity_high(table.name, table.identity)

    def is_empty(self) -> bool:
        with self.db.read() as conn:
            return all(conn.one(f"SELECT 1 FROM {identifier(t.name)} LIMIT 1") is None for t in self.tables())

    def load(self, tables: Iterator[tuple[Table, int | None, Iterator[Row]]]) -> dict[str, int]:
        def insert(conn: Any) -> dict[str, int]:
            counts: dict[str, int] = {}
            for table, high, rows in tables:
                counts[table.name] = conn.copy_rows(table.name, table.columns, rows)
                if table.identity is not None and high is not None:
                    conn.set_identity_high(table.name, table.identity, high)
            return counts

        return dict(self.db.write(insert))


@dataclass(frozen=True)
class Summary:
    stores: dict[str, dict[str, int]]  # store -> table -> rows

    def text(self) -> str:
        parts = [f"{store} ({', '.join(f'{t}: {n}' for t, n in tables.items()) or 'no tables'})"
                 for store, tables in self.stores.items()]
        return "; ".join(parts)


def _encode(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        return {"$bytes": base64.b64encode(bytes(value)).decode()}
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        return base64.b64decode(value["$bytes"])
    return value


def _open_write(path: Path, compressed: bool) -> IO[str]:
    if compressed:
        return gzip.open(path, "wt", encoding="utf-8")
    return path.open("w", encoding="utf-8")


def _open_read(path: Path) -> IO[str]:
    """The file as text, gunzipped when it is gzip data (whatever its name)."""
    with path.open("rb") as probe:
        compressed = probe.read(2) == b"\x1f\x8b"
    return gzip.open(path, "rt", encoding="utf-8") if compressed else path.open(encoding="utf-8")


def export_target(path: Path) -> None:
    """Refuse a target `export` cannot write, naming the fix (before anything is written)."""
    if path.is_dir():
        raise StorageError(f"{path} is a folder; give a file name (e.g. {path / 'export.jsonl.gz'}).")
    if not path.parent.is_dir():
        raise StorageError(f"The folder {path.parent} does not exist; create it first or give a file in an "
                           "existing folder.")
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise StorageError(f"The folder {path.parent} is not writable by this user; give a file in a folder "
                           "you can write.")


def export(stores: Sequence[Portable], path: Path, source: str) -> Summary:
    """Write every store's rows to `path` (written to a temporary name, renamed when complete; nothing is
    left behind when it fails)."""
    export_target(path)
    partial = path.with_name(path.name + ".partial")
    try:
        return _export(stores, path, partial, source)
    except OSError as exc:
        raise StorageError(f"Cannot write {path}: {exc.strerror or exc}. Give a file in a folder with room "
                           "that you can write.") from None
    finally:
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)


def _export(stores: Sequence[Portable], path: Path, partial: Path, source: str) -> Summary:
    counts: dict[str, dict[str, int]] = {}
    with _open_write(partial, path.suffix == ".gz") as out:
        out.write(json.dumps({"format": FORMAT, "version": VERSION, "source": source,
                              "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}) + "\n")
        for store in stores:
            out.write(json.dumps({"store": store.name}) + "\n")
            counts[store.name] = {}
            for table in store.tables():
                out.write(json.dumps({"table": table.name, "columns": list(table.columns),
                                      "identity_high": store.identity_high(table)}) + "\n")
                n = 0
                for row in store.rows(table):
                    out.write(json.dumps([_encode(v) for v in row], ensure_ascii=False) + "\n")
                    n += 1
                out.write(json.dumps({"end": table.name, "rows": n}) + "\n")
                counts[store.name][table.name] = n
        out.write(json.dumps({"end": "export", "stores": len(stores)}) + "\n")
    partial.replace(path)
    return Summary(counts)


def import_(stores: Sequence[Portable], path: Path) -> Summary:
    """Load an export file into `stores`, which must all be empty (nothing is merged or overwritten)."""
    by_name = {s.name: s for s in stores}
    busy = [s.name for s in stores if not s.is_empty()]
    if busy:
        raise StorageError(f"The target already holds data in: {', '.join(busy)}. Import only into an empty "
                           "database (a new PostgreSQL database or schema, or an empty data dir).")
    try:
        return _import(by_name, path)
    except (UnicodeDecodeError, gzip.BadGzipFile, EOFError, zlib.error) as exc:
        raise StorageError(f"{path} is not a generalagent-mcp export file (not UTF-8 JSON lines: "
                           f"{type(exc).__name__}). Give a file written by `export`.") from None
    except OSError as exc:
        raise StorageError(f"Cannot read {path}: {exc.strerror or exc}.") from None


def _import(by_name: dict[str, Portable], path: Path) -> Summary:
    counts: dict[str, dict[str, int]] = {}
    with _open_read(path) as handle:
        reader = _Reader(handle, path)
        reader.header()
        while (name := reader.next_store()) is not None:
            store = by_name.get(name)
            if store is None:
                raise StorageError(f"{path} holds the store {name!r}, which this version of generalagent-mcp "
                                   f"does not know (it knows {', '.join(by_name)}). Upgrade generalagent-mcp.")
            counts[name] = store.load(reader.tables(store))
            reader.check_counts(counts[name])
    return Summary(counts)


class _Reader:
    """Reads the export file record by record, checking its structure as it goes."""

    def __init__(self, handle: IO[str], path: Path) -> None:
        self.lines = enumerate(handle, start=1)
        self.path = path
        self.pending: Any = None
        self.expected: dict[str, int] = {}

    def _next(self) -> Any:
        if self.pending is not None:
            record, self.pending = self.pending, None
            return record
        for number, line in self.lines:
            try:
                return json.loads(line)
            except json.JSONDecodeError as exc:
                raise self._bad(f"line {number} is not JSON ({exc.msg})") from None
        raise self._bad("it ends early (no end record): the export was cut off")

    def _bad(self, what: str) -> StorageError:
        return StorageError(f"{self.path} is not a complete generalagent-mcp export: {what}. Export it again.")

    def header(self) -> None:
        head = self._next()
        if not isinstance(head, dict) or head.get("format") != FORMAT:
            raise self._bad("the first line is not its header")
        if head.get("version") != VERSION:
            raise StorageError(f"{self.path} is export version {head.get('version')}; this generalagent-mcp reads "
                               f"version {VERSION}. Use the same version to export and import.")

    def next_store(self) -> str | None:
        record = self._next()
        if isinstance(record, dict) and record.get("end") == "export":
            return None
        if not isinstance(record, dict) or "store" not in record:
            raise self._bad(f"a store section was expected, found {str(record)[:80]}")
        return str(record["store"])

    def tables(self, store: Portable) -> Iterator[tuple[Table, int | None, Iterator[Row]]]:
        known = {t.name: t for t in store.tables()}
        self.expected = {}
        while True:
            record = self._next()
            if not isinstance(record, dict) or "table" not in record:
                self.pending = record
                return
            table = known.get(str(record["table"]))
            if table is None or list(table.columns) != list(record.get("columns", [])):
                raise StorageError(
                    f"{self.path}: table {record.get('table')!r} of store {store.name!r} has columns "
                    f"{record.get('columns')}, which this version does not store that way. Use the same "
                    "version of generalagent-mcp to export and import.")
            yield table, record.get("identity_high"), self._rows(table)

    def _rows(self, table: Table) -> Iterator[Row]:
        width = len(table.columns)
        while True:
            record = self._next()
            if isinstance(record, dict):
                if record.get("end") != table.name:
                    raise self._bad(f"table {table.name} has no end record")
                self.expected[table.name] = int(record.get("rows", -1))
                return
            if not isinstance(record, list) or len(record) != width:
                raise self._bad(f"a row of {table.name} does not have {width} values")
            yield tuple(_decode(v) for v in record)

    def check_counts(self, loaded: dict[str, int]) -> None:
        for name, rows in self.expected.items():
            if loaded.get(name) != rows:
                raise self._bad(f"table {name} should have {rows} rows, {loaded.get(name)} were read")


def rows_of(lines: Iterable[str]) -> Iterator[Row]:
    """One-column rows of text lines (for stores kept as lines, such as the JSONL audit log)."""
    return ((line,) for line in lines)


class EmptyPortable:
    """A store whose tables were never created (its file or tables do not exist yet): exported as empty
    tables without creating anything."""

    def __init__(self, name: str, tables: tuple[Table, ...]) -> None:
        self.name = name
        self._tables = tables

    def tables(self) -> tuple[Table, ...]:
        return self._tables

    def rows(self, table: Table) -> Iterator[Row]:
        return iter(())

    def identity_high(self, table: Table) -> int | None:
        return None

    def is_empty(self) -> bool:
        return True

    def load(self, tables: Iterator[tuple[Table, int | None, Iterator[Row]]]) -> dict[str, int]:
        raise StorageError(f"{self.name} cannot be loaded without its tables")  # import opens real stores
