"""What a tool function may receive besides its own arguments.

Tools stay plain functions with no MCP imports. The dispatch point injects, by
parameter name (these parameters never appear in the tool's input schema):

- `rt: Runtime`      - settings and lazily created shared services (stores, indexes);
- `call: CallContext` - progress reporting, cancellation and the caller's identity.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from mcp_server.errors import Cancelled
from mcp_server.settings import Settings

if TYPE_CHECKING:
    from indexing.model import ExtractionLimits

T = TypeVar("T")
INJECTED_PARAMS = ("rt", "call")

ProgressSink = Callable[[float, float | None, str | None], Awaitable[None]]


class Runtime:
    """Settings plus shared services, created on first use and kept for the server's life."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._services: dict[str, Any] = {}
        self._lock = threading.RLock()

    @property
    def data_dir(self) -> Path:
        path = self.settings.data_dir
        path.mkdir(parents=True, exist_ok=True)
        return path

    def extraction_limits(self) -> ExtractionLimits:
        """The configured bounds for reading one file (size, text, zip size, time)."""
        from indexing.model import ExtractionLimits

        s = self.settings
        return ExtractionLimits(max_file_bytes=s.max_file_bytes, max_extracted_chars=s.max_extracted_chars,
                                max_decompressed_bytes=s.max_decompressed_bytes, timeout_seconds=s.file_timeout_seconds)

    def service(self, key: str, factory: Callable[[], T]) -> T:
        """Return the service stored under `key`, creating it with `factory` the first time."""
        with self._lock:
            if key not in self._services:
                self._services[key] = factory()
            return self._services[key]  # type: ignore[no-any-return]

    def close(self) -> None:
        with self._lock:
            for service in self._services.values():
                closer = getattr(service, "close", None)
                if callable(closer):
                    closer()
            self._services.clear()


@dataclass
class CallContext:
    """Per-call facilities. Safe to use from the worker thread a sync tool runs in."""

    tool: str
    client_id: str = "default"
    session_id: str | None = None
    sink: ProgressSink | None = None
    portal: Callable[..., Any] | None = None
    cancel_event: threading.Event = field(default_factory=threading.Event)
    extras: dict[str, Any] = field(default_factory=dict)

    def check_cancelled(self) -> None:
        """Raise Cancelled when the client cancelled this call."""
        if self.cancel_event.is_set():
            raise Cancelled(f"{self.tool} was cancelled by the client.")

    @property
    def cancelled(self) -> bool:
        return self.cancel_event.is_set()

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
