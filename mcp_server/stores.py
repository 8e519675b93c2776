"""Every store of the deployment, in one list: what `migrate` migrates, `doctor` checks and
`export`/`import` copy (the document index included). A new store adds one `StoreKind` here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from foundation.storage import Database, Schema
from foundation.storage.transfer import Portable, SqlPortable


@dataclass(frozen=True)
class StoreKind:
    name: str
    schema: Schema
    portable: Callable[[Database, Path], Portable]  # (database, data dir) -> its rows for export/import


def _sql(schema: Schema) -> Callable[[Database, Path], Portable]:
    return lambda database, _data_dir: SqlPortable(database.open(schema))


def _audit(database: Database, data_dir: Path) -> Portable:
    from mcp_server.approval.audit import AuditPortable, audit_log_for

    return AuditPortable(audit_log_for(database, data_dir))


def _index(database: Database, data_dir: Path) -> Portable:
    """The index's rows as stored: never re-analysed here (this process may lack the server's jieba user
    dictionary); the server re-analyses an imported index itself when its analyzer differs."""
    from indexing.index import open_store
    from indexing.portable import IndexPortable

    return IndexPortable(open_store(database))


def store_kinds() -> list[StoreKind]:
    from context.memory import SCHEMA as MEMORY
    from context.store import SCHEMA as CONTEXT
    from context.subagent import SCHEMA as THREADS
    from context.todos import SCHEMA as TODOS
    from indexing.pg_schema import SCHEMA as INDEX
    from mcp_server.approval.audit import AUDIT_SCHEMA
    from mcp_server.approval.store import SCHEMA as APPROVALS
    from mcp_server.http_state import SCHEMA as HTTP_STATE

    kinds = [StoreKind(s.name, s, _sql(s)) for s in (TODOS, MEMORY, CONTEXT, THREADS, APPROVALS, HTTP_STATE)]
    kinds.append(StoreKind(AUDIT_SCHEMA.name, AUDIT_SCHEMA, _audit))
    kinds.append(StoreKind(INDEX.name, INDEX, _index))
    return kinds
