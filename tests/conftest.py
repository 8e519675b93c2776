"""Shared fixtures: an isolated data dir + workspace root, settings, and an in-memory SDK client."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

# The tests never touch the network and never the user's real data dir.
os.environ.pop("GENERALAGENT_DATA_DIR", None)
os.environ.setdefault("TIKTOKEN_CACHE_DIR", "")
for _key in list(os.environ):
    if _key.startswith("GENERALAGENT_"):
        del os.environ[_key]

MODES = ["legacy", "auto"]

# The storage backend under test (tests/storage_fixtures.py): SQLite unless --backend postgresql
# or GA_TEST_BACKEND=postgresql; ./scripts/test.sh runs the storage tests on both.
pytest_plugins = ["tests.storage_fixtures"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    path = tmp_path / "data"
    path.mkdir()
    return path


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "workspace"
    path.mkdir()
    return path


@pytest.fixture
def make_settings(data_dir: Path, workspace: Path, database_url: str | None) -> Callable[..., Any]:
    from foundation.settings import load_settings

    def make(**overrides: Any) -> Any:
        # Every tool listed: tests exercise tools; tier tests ask for tool_profile="default" explicitly.
        # No built-in skills or agent cards: tests count what they configure (test_builtins.py turns them on).
        values: dict[str, Any] = {"data_dir": data_dir, "roots": [workspace], "tool_profile": "full",
                                  "database_url": database_url, "builtins_enabled": False}
        values.update(overrides)
        return load_settings(values, environ={})

    return make


@pytest.fixture
def settings(make_settings: Callable[..., Any]) -> Any:
    return make_settings()


@pytest.fixture
def search_threads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The name of the thread each `Searcher.search` of the test ran in, in order (MainThread: the event loop's)."""
    import threading

    from indexing.search import Searcher

    threads: list[str] = []
    original = Searcher.search

    def spied(self: Searcher, *args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread().name)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Searcher, "search", spied)
    return threads


def shell_runtime(settings: Any) -> Any:
    """A Runtime for calling run_bash_command directly, with the policy's secret paths as the server gives it
    (without them the sandbox hides the whole home: it cannot tell the secret stores in it)."""
    from mcp_server.secret_paths import loaded_on_first_use
    from tools.runtime import Runtime

    rt = Runtime(settings)
    rt.secret_paths = loaded_on_first_use(settings)
    return rt


@asynccontextmanager
async def connect(settings: Any, mode: str = "legacy", **client_kwargs: Any) -> AsyncIterator[Any]:
    """An SDK client connected in memory to a freshly built server (`mode`: legacy or auto)."""
    from mcp.client import Client

    from mcp_server.server import build_server

    server, _ = build_server(settings)
    async with Client(server, mode=mode, **client_kwargs) as client:
        yield client


async def assert_lists_and_calls_now(client: Any) -> None:
    """The smoke check every transport test makes: `now` is listed and answers with a UTC time."""
    names = {tool.name for tool in (await client.list_tools()).tools}
    assert "now" in names
    result = await client.call_tool("now", {})
    assert not result.is_error, result
    assert result.structured_content["utc"].endswith("Z")
