"""Storage fixtures: which backend the tests use, and a real PostgreSQL server when they need one.

`--backend postgresql` (or GA_TEST_BACKEND=postgresql) makes `database_url`, and so every
`settings` and `database` fixture, point at a fresh schema of a PostgreSQL server that this test
session starts (tests/pg_server.py). Tests that compare the backends ask for `pg_url` directly.
Without PostgreSQL binaries those tests skip, saying how to install them; under CI=true they fail
(./scripts/test.sh installs postgresql-15).
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.pg_server import INSTALL_HINT, PgServer, find_bindir


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--backend", choices=["sqlite", "postgresql"],
                     default=os.environ.get("GA_TEST_BACKEND", "sqlite"),
                     help="Storage backend for the tests (env GA_TEST_BACKEND); default sqlite.")


@pytest.fixture(scope="session")
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.config.getoption("--backend"))


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    bindir = find_bindir()
    if bindir is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but no PostgreSQL server binaries: " + INSTALL_HINT, pytrace=False)
        pytest.skip(INSTALL_HINT)
    server = PgServer(bindir)
    try:
        server.start()
    except BaseException:
        server.stop()
        raise
    yield server
    server.stop()


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """A URL whose tables land in a new, empty schema of the test server."""
    url, name = pg_server.fresh_schema()
    yield url
    for pool in [p for p in list(_POOLS) if f"application_name={name}" in str(p.conninfo)]:
        pool.close(timeout=1)
    pg_server.disconnect(name)


# Every PostgreSQL connection pool opened in this test process. The pools a test leaves open (a gate or a runtime
# it never closes) are closed with its schema: they reconnected after `disconnect`, held connections until the
# worker ended and, once the server stopped, logged a reconnection error each second (~450 lines a run).
_POOLS: weakref.WeakSet[Any] = weakref.WeakSet()


def _track_pools() -> None:
    try:
        import psycopg_pool
    except ImportError:
        return
    opened = psycopg_pool.ConnectionPool.__init__

    def tracked(self: Any, *args: Any, **kwargs: Any) -> None:
        opened(self, *args, **kwargs)
        _POOLS.add(self)

    psycopg_pool.ConnectionPool.__init__ = tracked  # type: ignore[method-assign]


_track_pools()


@pytest.fixture
def database_url(request: pytest.FixtureRequest, backend: str) -> str | None:
    """None on SQLite; on PostgreSQL a fresh schema's URL (see pg_url)."""
    return None if backend == "sqlite" else str(request.getfixturevalue("pg_url"))


@pytest.fixture
def database(data_dir: Path, database_url: str | None) -> Iterator[Any]:
    """The backend under test, opened as the server opens it (closed after the test)."""
    from foundation.storage import open_database

    db = open_database(data_dir, database_url)
    yield db
    db.close()


def index_store_for(request: pytest.FixtureRequest, folder: Path, backend: str) -> Any:
    """An index on `backend` ("sqlite": `folder/index.sqlite3`; "postgresql": a fresh schema of the
    session's test server, skipped without PostgreSQL binaries)."""
    from indexing.store import IndexStore

    if backend == "sqlite":
        return IndexStore(folder / "index.sqlite3")
    from foundation.storage import open_database
    from indexing.pg_store import pg_index

    url, _name = request.getfixturevalue("pg_server").fresh_schema()
    database = open_database(folder, url)
    request.addfinalizer(database.close)
    return pg_index(database)  # type: ignore[arg-type]
