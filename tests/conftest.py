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
# Meaning-aware search is on by default where the bundled model is installed (embedding_provider=auto);
# tests (and the servers they start) stay lexical unless they ask for a provider.
os.environ["GENERALAGENT_EMBEDDING_PROVIDER"] = "off"

MODES = ["legacy", "auto"]

# Some test modules import usearch themselves: onnxruntime must be loaded first (indexing.embeddings.before_usearch).
from indexing.embeddings import before_usearch  # noqa: E402

before_usearch()

# The storage backend under test (tests/storage_fixtures.py): SQLite unless --backend postgresql
# or GA_TEST_BACKEND=postgresql; ./scripts/test.sh runs the storage tests on both.
pytest_plugins = ["tests.storage_fixtures"]


# The quick loop is `pytest -m "not slow"` (about a minute on 2 quiet cores); scripts/test.sh and CI run all.
# Slow: modules whose tests start processes or servers (the console script, uvicorn, PostgreSQL, bubblewrap,
# node), drive third-party clients or run benchmarks; and the tests listed in tests/slow_tests.txt (long
# property tests, timed load phases). tests/test_slow_marks.py keeps this list true.
SLOW_MODULES = frozenset({
    "test_approval_http_page", "test_approval_oob", "test_approval_stdio", "test_bash", "test_bench_mcp_overhead",
    "test_cli", "test_cli_errors", "test_cli_paths", "test_cli_printed_commands", "test_clients_http", "test_live_index",
    "test_conformance", "test_delegate_stdio", "test_external_servers", "test_http", "test_inspector", "test_mcpb", "test_peers",
    "test_policy_cli", "test_policy_corpus", "test_readme_first_page", "test_sandbox", "test_sandbox_allowlist", "test_sandbox_wiring", "test_slides", "test_stdio",
    "test_stdio_transport", "test_storage_index_processes", "test_storage_processes", "test_storage_transfer",
    "test_third_party_clients", "test_walk_skips", "test_workers",
})


SLOW_TESTS_FILE = Path(__file__).with_name("slow_tests.txt")


def slow_tests() -> frozenset[str]:
    """The `tests/<module>.py::<function>` names listed in tests/slow_tests.txt."""
    lines = SLOW_TESTS_FILE.read_text(encoding="utf-8").splitlines()
    return frozenset(line.strip() for line in lines if line.strip() and not line.startswith("#"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    listed = slow_tests()
    for item in items:
        name = f"tests/{module_of(item)}.py::{getattr(item, 'originalname', item.name)}"
        if module_of(item) in SLOW_MODULES or name in listed:
            item.add_marker(pytest.mark.slow)
    # The modules that start processes first, then those with long tests (each module's tests stay together, in
    # order): with two workers, a long test left for the end (test_workers', by name) kept one core idle.
    long = {name.split("/")[-1].split(".py::")[0] for name in listed}
    items.sort(key=lambda item: (module_of(item) not in SLOW_MODULES, module_of(item) not in long))


def module_of(item: pytest.Item) -> str:
    return item.module.__name__.rsplit(".", 1)[-1] if item.module is not None else ""


def require_os_sandbox() -> None:
    """Skip the test where no OS sandbox runs (fail under CI=true, where scripts/sandbox.sh installed it)."""
    from tools.sandbox import sandbox_status

    status = sandbox_status()
    if status.available:
        return
    message = f"no OS sandbox: {status.reason} (scripts/sandbox.sh installs bubblewrap as root)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail("CI=true and " + message)
    pytest.skip(message)


def require_office() -> None:
    """Skip the test where LibreOffice or the OS sandbox it runs in is missing (fail under CI=true, where
    scripts/office.sh and scripts/sandbox.sh installed them)."""
    from tools.slides import office_program

    require_os_sandbox()
    if office_program() is not None:
        return
    message = "LibreOffice (soffice) is not installed (scripts/office.sh installs it as root)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail("CI=true and " + message)
    pytest.skip(message)


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
                                  "database_url": database_url, "builtins_enabled": False,
                                  "embedding_provider": "off"}
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
    from tools.live_index import stop_live_index

    server, _ = build_server(settings)
    try:
        async with Client(server, mode=mode, **client_kwargs) as client:
            yield client
    finally:  # as the transports do when a server stops: its folder watcher (an inotify instance) goes too
        stop_live_index(server.runtime)


async def assert_lists_and_calls_now(client: Any) -> None:
    """The smoke check every transport test makes: `now` is listed and answers with a UTC time."""
    names = {tool.name for tool in (await client.list_tools()).tools}
    assert "now" in names
    result = await client.call_tool("now", {})
    assert not result.is_error, result
    assert result.structured_content["utc"].endswith("Z")
