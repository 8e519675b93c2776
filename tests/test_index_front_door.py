"""One front door to the index (issue 31): tool modules hold no SQL, no transactions and no retry loops;
they reach the index through `indexing.index.Index` and the store's named methods. And the index's
SQLite/PostgreSQL difference is a strategy object, not a subclass of the SQLite store."""

from __future__ import annotations

import ast
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

TOOLS = Path(__file__).resolve().parent.parent / "tools"
SQL = re.compile(r"\b(SELECT\s.+\bFROM|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM|CREATE\s+(TABLE|INDEX)|"
                 r"PRAGMA\s)|^\s*(BEGIN|COMMIT|ROLLBACK)\b", re.IGNORECASE | re.DOTALL)
DATABASE_CALLS = {"execute", "executemany", "executescript", "conn", "stream", "consistent_read", "snapshot_batches",
                  "cursor", "commit", "rollback"}
TRANSACTIONS = {"write", "read"}  # `with store.write() as conn:` (a store's `write(list_id, items)` is a named method)
RETRY_WORDS = re.compile(r"\b(retry|attempts?|OperationalError|SerializationFailure|database is locked)\b", re.IGNORECASE)


def _sources() -> list[tuple[Path, ast.Module]]:
    return [(path, ast.parse(path.read_text(encoding="utf-8"))) for path in sorted(TOOLS.rglob("*.py"))]


def _strings(tree: ast.Module) -> list[tuple[int, str]]:
    """Every string constant outside docstrings, with its line."""
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]


def test_no_sql_in_tool_modules() -> None:
    found = [f"{path.name}:{line}: {text[:60]!r}" for path, tree in _sources() for line, text in _strings(tree)
             if SQL.search(text)]
    assert not found, "SQL belongs behind the index's front door (indexing/), not in tools/: " + "; ".join(found)


def test_no_database_calls_or_transactions_in_tool_modules() -> None:
    """No `.execute(`, `.conn()`, `with store.write()` (a transaction) or the like on anything a tool holds."""
    found = [f"{path.name}:{node.lineno}: .{node.func.attr}()" for path, tree in _sources() for node in ast.walk(tree)
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and _on_a_store(node.func.value)
             and (node.func.attr in DATABASE_CALLS or node.func.attr in TRANSACTIONS and not node.args)]
    assert not found, "database calls belong in indexing/ or the stores: " + "; ".join(found)


def _on_a_store(target: ast.expr) -> bool:
    """The call's object names a store, a connection or a database (`store.write()`, `conn.execute(...)`)."""
    text = ast.unparse(target).lower()
    return any(word in text for word in ("store", "conn", "database", "db", "cursor", "index"))


def test_no_retry_loops_around_the_index_in_tool_modules() -> None:
    """A retry of a busy database is the storage seam's job (foundation/storage), never a tool's."""
    found = [f"{path.name}:{node.lineno}" for path, tree in _sources() for node in ast.walk(tree)
             if isinstance(node, ast.For | ast.While) and _index_retry(node)]
    assert not found, "retry loops around the index belong in the storage seam: " + "; ".join(found)


def _index_retry(loop: ast.For | ast.While) -> bool:
    """A loop that catches a database error and goes round again (the shape of a retry)."""
    body = ast.unparse(loop)
    return "except" in body and bool(RETRY_WORDS.search(body)) and ("store" in body or "index" in body)



def test_the_index_backends_are_strategies_not_subclasses() -> None:
    import indexing.pg_store as pg_store
    from indexing.store import IndexStore

    subclasses = [name for name, value in vars(pg_store).items()
                  if isinstance(value, type) and issubclass(value, IndexStore)]
    assert not subclasses, f"PostgreSQL's index is a backend given to IndexStore, not a subclass: {subclasses}"


@pytest.mark.storage
def test_the_index_is_a_store_of_the_storage_seam(database: Any) -> None:
    """Its tables are migrated by the seam (`Database.status` knows them), and it reads and writes there."""
    from indexing.index import open_store
    from indexing.model import Chunk
    from indexing.pg_schema import SCHEMA
    from indexing.store import AnalyzedChunk

    store = open_store(database)
    status = database.status(SCHEMA)
    assert status.pending == 0 and status.applied == len(SCHEMA.migrations(database.backend))
    with store.write() as conn:
        doc_id = store.insert_document(conn, "hash", "text", 5, [AnalyzedChunk(Chunk(0, 0, 5, "hello"), "", "hello")])
        store.link_file(conn, "/ws/a.txt", doc_id, 5, 0)
    assert store.document_chunks(doc_id) == 1 and store.files_outside(["/elsewhere"]) == 1
    assert store.files_outside(["/ws"]) == 0
    store.close()


@pytest.mark.storage
def test_an_index_written_by_a_newer_program_is_refused_and_kept(database: Any, data_dir: Path) -> None:
    """The seam's too-new check holds for the index too: a clear error, and the file is not moved aside as damaged."""
    from foundation.storage import StorageError
    from indexing.index import open_store

    open_store(database).close()
    if database.backend == "sqlite":
        with sqlite3.connect(data_dir / "index.sqlite3") as conn:
            conn.execute("PRAGMA user_version = 99")
    else:
        with database.connection() as raw:  # autocommit
            raw.execute("UPDATE schema_migrations SET version = 99 WHERE store = 'index'")
    with pytest.raises(StorageError, match="newer than this program knows"):
        open_store(database)
    assert not list(data_dir.glob("index.sqlite3.damaged-*"))
