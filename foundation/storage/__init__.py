"""The storage seam (see base.py): `open_database` picks the backend from the settings' values.

Without a database URL: SQLite files in the data directory (the default, no server). With
`postgresql://...`: every store in that PostgreSQL database (psycopg 3, imported only then).
"""

from __future__ import annotations

from pathlib import Path

from foundation.storage.base import (
    Backend,
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
    Table,
    ensure_data_dir,
)
from foundation.storage.urls import is_postgres_url, mask_url

__all__ = [
    "Backend", "Conn", "Database", "IntegrityError", "Listener", "MigrationStatus", "Row", "Schema", "StorageError",
    "StorageUnavailable", "StoreDb", "Table", "ensure_data_dir", "is_postgres_url", "mask_url", "open_database",
]


def open_database(data_dir: Path, database_url: str | None = None) -> Database:
    """The deployment's database: PostgreSQL at `database_url`, else SQLite files in `data_dir`."""
    if database_url:
        if not is_postgres_url(database_url):
            raise StorageError(
                f"GENERALAGENT_DATABASE_URL {mask_url(database_url)!r} is not a PostgreSQL URL: use "
                "postgresql://USER:PASSWORD@HOST:PORT/DATABASE, or leave it unset for SQLite in the data dir.")
        from foundation.storage.postgres import PostgresDatabase

        return PostgresDatabase(database_url)
    from foundation.storage.sqlite import SqliteDatabase

    return SqliteDatabase(data_dir)
