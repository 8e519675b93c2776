"""Run one SQL statement on the index of a test server's settings, whichever backend holds it (a
test reaching past the tools, e.g. to age rows)."""

from __future__ import annotations

from typing import Any


def index_sql(settings: Any, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """`sql` with `?` placeholders on the index of `settings` (SQLite file or PostgreSQL)."""
    if settings.database_url:
        import psycopg

        from foundation.storage.postgres import to_pyformat

        with psycopg.connect(settings.database_url, autocommit=True) as conn:
            cursor = conn.execute(to_pyformat(sql), params)
            return [tuple(r) for r in cursor.fetchall()] if cursor.description else []
    import sqlite3

    with sqlite3.connect(settings.data_dir / "index.sqlite3") as conn:
        return [tuple(r) for r in conn.execute(sql, params).fetchall()]
