"""What a tool function may receive besides its own arguments.

Tools stay plain functions with no MCP imports. The dispatch point injects, by
parameter name (these parameters never appear in the tool's input schema):

- `rt: Runtime`      - settings, the server's seams (typed fields) and lazily created shared
                        services (stores, indexes), each declared where it is used as a `Service`;
- `call: CallContext` - progress reporting, cancellation and the caller's identity.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

from foundation.calls import CallOrigin, Consent, SecretPaths, ToolCatalogView, ToolRunner, ToolSources
from foundation.errors import Cancelled, NotConfigured
from foundation.settings import Settings
from foundation.storage import Database, open_database
from foundation.waiting import about_to_wait

if TYPE_CHECKING:
    from indexing.model import ExtractionLimits

T = TypeVar("T")
_MISSING = object()

LogLevel = Literal["debug", "info", "notice", "warning", "error"]
_LEVELNO = {"debug": logging.DEBUG, "info": logging.INFO, "notice": logging.INFO + 5, "warning": logging.WARNING,
            "error": logging.ERROR}
ProgressSink = Callable[[float, float | None, str | None], Awaitable[None]]


class Runtime:
    """Settings, the seams the MCP layer fills in, and shared services kept for the server's life."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.tool_runner: ToolRunner | None = None  # the dispatch point (sub-agents run tools through it)
        self.catalog: ToolCatalogView | None = None  # tool tiers (what is listed, enable more)
        # the policy's secret paths: never indexed, never found (None: no policy, as in tests of tools alone)
        self.secret_paths: SecretPaths | None = None
        self.tool_sources: ToolSources | None = None  # other MCP servers' tools for sub-agents (None: none)
        self._services: dict[Service[Any], Any] = {}
        self._lock = threading.RLock()
        self._database: Database | None = None

    @property
    def database(self) -> Database:
        """The deployment's database (SQLite files in the data dir, or PostgreSQL), opened on first use."""
        with self._lock:
            if self._database is None:
                self._database = open_database(self.data_dir, self.settings.database_url)
            return self._database

    @property
    def data_dir(self) -> Path:
        from foundation.storage import ensure_data_dir

        return ensure_data_dir(self.settings.data_dir)

    def runner(self, feature: str) -> ToolRunner:
        if self.tool_runner is None:
            raise NotConfigured(f"{feature} needs the running server's dispatch point.")
        return self.tool_runner

    def extraction_limits(self) -> ExtractionLimits:
        """The configured bounds for reading one file (size, text, zip size, time)."""
        from indexing.model import ExtractionLimits

        s = self.settings
        return ExtractionLimits(max_file_bytes=s.max_file_bytes, max_extracted_chars=s.max_extracted_chars,
                                max_decompressed_bytes=s.max_decompressed_bytes, timeout_seconds=s.file_timeout_seconds,
                                ocr_languages=s.ocr_languages)

    def close(self) -> None:
        with self._lock:
            for service in reversed(self._services.values()):  # the last made first: it may use an earlier one
                closer = getattr(service, "close", None)
                if callable(closer):
                    closer()
            self._services.clear()
            if self._database is not None:
                self._database.close()
                self._database = None


class Service(Generic[T]):
    """A shared object created on first use per Runtime: `store = Service(make_store)`, then `store.of(rt)`."""

    def __init__(self, factory: Callable[[Runtime], T]) -> None:
        self.factory = factory

    def of(self, rt: Runtime) -> T:
        found = rt._services.get(self, _MISSING)
        if found is not _MISSING:
            return found  # type: ignore[no-any-return]
        about_to_wait()  # creating it (or waiting for another thread that does): not on the event loop
        with rt._lock:
            if self not in rt._services:
                rt._services[self] = self.factory(rt)
            return rt._services[self]  # type: ignore[no-any-return]

    def provide(self, rt: Runtime, value: T) -> None:
        """Use `value` as this service from now on (tests, and callers that made it already)."""
        with rt._lock:
            rt._services[self] = value

    def peek(self, rt: Runtime) -> T | None:
        """The service if it was created already; never creates it, never waits (not even for a creation
        in progress in another thread: None then)."""
        return rt._services.get(self)


@dataclass
class CallContext:
    """Per-call facilities. Safe to use from the worker thread a sync tool runs in."""

    tool: str
    client_id: str = "default"
    session_id: str | None = None
    sink: ProgressSink | None = None
    portal: Callable[..., Any] | None = None
    cancel_event: threading.Event = field(default_factory=threading.Event)
    origin: CallOrigin = field(default_factory=CallOrigin)
    log_sink: Callable[[str, str, str], None] | None = None  # (level, message, logger): to the client
    consent: Consent = "policy"  # who let this call run (set by the dispatch point from the gate's check)

    def check_cancelled(self) -> None:
        """Raise Cancelled when the client cancelled this call."""
        if self.cancel_event.is_set():
            raise Cancelled(f"{self.tool} was cancelled by the client.")

    @property
    def cancelled(self) -> bool:
        return self.cancel_event.is_set()

    def log(self, level: LogLevel, message: str) -> None:
        """A log message about this call: to the server's log, and to the client (an MCP
        `notifications/message` when it listens at that level: the MCP layer fills `log_sink`)."""
        logging.getLogger(f"generalagent.tool.{self.tool}").log(_LEVELNO[level], message)
        if self.log_sink is not None:
            with contextlib.suppress(Exception):  # logging is best effort
                self.log_sink(level, message, f"generalagent.tool.{self.tool}")

    def report(self, done: float, total: float | None = None, message: str | None = None) -> None:
        """Send a progress notification (from a sync tool running in a worker thread)."""
        if self.sink is None or self.portal is None:
            return
        with contextlib.suppress(Exception):  # progress is best effort; never fail the call over it
            self.portal(self.sink, done, total, message)

    async def areport(self, done: float, total: float | None = None, message: str | None = None) -> None:
        """Send a progress notification (from an async tool)."""
        if self.sink is not None:
            with contextlib.suppress(Exception):
                await self.sink(done, total, message)
