"""The extraction worker: a long-lived child process that parses every file but plain text (PDF,
Office, EPUB, OpenDocument, HTML, CSV, e-mail).

Parsing untrusted office files runs outside the server process, under an address-space limit
(RLIMIT_AS, where the platform has it), with `defusedxml` hardening and a per-file time budget.
Workers are started lazily with the 'spawn' context (a fresh interpreter, safe with threads),
reused across files (no per-file interpreter start), and killed and replaced after a timeout, a
crash, a memory error, a cancellation, or TASKS_PER_WORKER files (parser heaps only grow). The
pool grows on demand up to `max_workers` so that several threads can extract in parallel.
Requests carry the path (for its name) and, when the caller opened the file race-free, a copy of
that descriptor (SCM_RIGHTS), which is then all the worker reads; replies carry the Extracted
value (IPC costs ~0.3 ms a file).

'spawn' re-imports the parent's main script in the worker, so a script that calls extract_file
must do so under `if __name__ == "__main__":` (the console script and pytest already do).
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import fields
from multiprocessing.connection import Connection
from multiprocessing.reduction import recv_handle, send_handle
from operator import attrgetter
from pathlib import Path
from typing import IO, Any

from foundation.errors import Cancelled, ExtractionError, GeneralAgentError, InvalidInput, LimitExceeded
from indexing.extract.render import RENDER_PREFIX, RenderedPage, render_task
from indexing.model import Extracted, ExtractionLimits, Unit

_POLL_SECONDS = 0.1
TASKS_PER_WORKER = 500
_BLOCKED_IMPORTS = ("pymupdf.layout", "pymupdf4llm", "numpy")
_ERRORS: dict[str, type[GeneralAgentError]] = {"ExtractionError": ExtractionError, "LimitExceeded": LimitExceeded,
                                               "InvalidInput": InvalidInput}


# ---------------------------------------------------------------- child side


def worker_main(conn: Connection, memory_bytes: int) -> None:
    """Child process loop: receive (kind, path, limits), reply ("ok", *pack(Extracted)) or an error tuple."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and kills us
    # stdin/stdout may be the MCP stdio stream: never read it, and send library prints to stderr.
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    # pymupdf and openpyxl import optional extras when installed (pymupdf.layout with onnx,
    # pymupdf4llm, numpy: ~1 s and much memory); plain text extraction needs none of them.
    for optional in _BLOCKED_IMPORTS:
        sys.modules.setdefault(optional, None)  # type: ignore[arg-type]
    _limit_memory(memory_bytes)
    import defusedxml

    defusedxml.defuse_stdlib()
    while True:
        try:
            kind, path, limits, with_fd = conn.recv()
            source = os.fdopen(recv_handle(conn), "rb") if with_fd else None
        except (EOFError, OSError):
            return
        try:
            conn.send(_handle(kind, Path(path), limits, source))
        finally:
            if source is not None:
                source.close()


def _limit_memory(memory_bytes: int) -> None:
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    except (ImportError, ValueError, OSError):  # Windows has no resource; macOS may refuse RLIMIT_AS
        pass


def _handle(kind: str, path: Path, limits: ExtractionLimits, source: IO[bytes] | None) -> tuple[Any, ...]:
    try:
        if kind.startswith(RENDER_PREFIX):  # a PDF page drawn as a picture (indexing/extract/render.py)
            return ("ok", render_task(kind, path, source))
        return ("ok", *pack(run_extractor(kind, path, limits, source)))
    except GeneralAgentError as exc:
        return ("error", type(exc).__name__, str(exc))
    except MemoryError:
        return (
            "memory",
            f"{path.name} needs more memory to read than the extraction limit "
            f"({limits.max_worker_memory_bytes / 2**30:.1f} GiB).",
        )
    except RecursionError:
        return ("error", "ExtractionError", f"{path.name} is nested too deeply to read.")
    except Exception as exc:  # any parser failure is a per-file error, never a crash
        return ("error", "ExtractionError", f"{path.name} could not be read ({type(exc).__name__}: {exc}).")


def run_extractor(kind: str, path: Path, limits: ExtractionLimits, source: IO[bytes] | None = None) -> Extracted:
    """Dispatch to the format's extractor (also usable in-process, e.g. by benchmarks); with
    `source`, the extractor reads that open file instead of `path`."""
    if kind == "warm":
        import docx  # noqa: F401
        import lxml.etree  # noqa: F401
        import openpyxl  # noqa: F401
        import pptx  # noqa: F401
        import pymupdf  # noqa: F401

        return Extracted(text="", units=[], kind="warm")
    if kind == "pdf":
        from indexing.extract.pdf import extract_pdf

        return extract_pdf(path, limits, source)
    if kind in ("html", "csv", "eml"):
        return _run_markup(kind, path, limits, source)
    if kind == "image":
        from indexing.extract.image_file import extract_image

        return extract_image(path, limits, source)
    from indexing.extract.safety import check_office_zip

    check_office_zip(path, kind, limits, source)
    if kind == "docx":
        from indexing.extract.docx_file import extract_docx

        return extract_docx(path, limits, source)
    if kind == "xlsx":
        from indexing.extract.xlsx_file import extract_xlsx

        return extract_xlsx(path, limits, source)
    if kind == "pptx":
        from indexing.extract.pptx_file import extract_pptx

        return extract_pptx(path, limits, source)
    if kind == "epub":
        from indexing.extract.epub_file import extract_epub

        return extract_epub(path, limits, source)
    if kind in ("odt", "ods", "odp"):
        from indexing.extract.odf_file import extract_odf

        return extract_odf(path, kind, limits, source)
    raise ExtractionError(f"{path.name}: no extractor for kind {kind!r}")


def _run_markup(kind: str, path: Path, limits: ExtractionLimits, source: IO[bytes] | None) -> Extracted:
    """Text formats read by structure: HTML, CSV/TSV, e-mail."""
    if kind == "html":
        from indexing.extract.html_file import extract_html

        return extract_html(path, limits, source)
    if kind == "csv":
        from indexing.extract.csv_file import extract_csv

        return extract_csv(path, limits, source)
    from indexing.extract.eml_file import extract_eml

    return extract_eml(path, limits, source, run_extractor)


_UNIT_VALUES = attrgetter(*(f.name for f in fields(Unit)))


def pack(extracted: Extracted) -> tuple[Any, ...]:
    """Extracted as plain tuples: pickling 100k Unit dataclasses (a sheet's rows) took ~2.6 s, tuples ~0.1 s."""
    units = list(map(_UNIT_VALUES, extracted.units))
    return extracted.text, units, extracted.kind, extracted.warnings, extracted.encoding, extracted.title


def unpack(packed: tuple[Any, ...]) -> Extracted:
    text, units, kind, warnings, encoding, title = packed
    return Extracted(text, [Unit(*u) for u in units], kind, warnings, encoding, title)


# ---------------------------------------------------------------- parent side


class _Worker:
    def __init__(self, memory_bytes: int) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.memory_bytes = memory_bytes
        self.tasks = 0
        self.process = ctx.Process(
            target=worker_main, args=(child, memory_bytes), daemon=True, name="generalagent-extract"
        )
        self.process.start()
        child.close()

    def call(
        self, kind: str, path: Path, limits: ExtractionLimits, should_cancel: Callable[[], bool] | None,
        fd: int | None = None,
    ) -> tuple[Any, ...]:
        try:
            self.tasks += 1
            self.conn.send((kind, str(path.absolute()), limits, fd is not None))
            if fd is not None:
                send_handle(self.conn, fd, self.process.pid or 0)
            deadline = time.monotonic() + limits.timeout_seconds
            while True:
                if should_cancel is not None and should_cancel():
                    return ("cancelled",)
                remaining = deadline - time.monotonic()
                if self.conn.poll(max(0.0, min(_POLL_SECONDS, remaining))):
                    break
                if remaining <= 0:
                    return ("timeout",)
            reply: tuple[Any, ...] = self.conn.recv()
            return reply
        except (EOFError, OSError):
            self.process.join(1.0)
            return ("crashed", self.process.exitcode)

    def alive(self) -> bool:
        return self.process.is_alive()

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(5.0)
        self.conn.close()


class WorkerPool:
    """Up to `max_workers` reusable extraction processes, started on demand."""

    def __init__(self, max_workers: int) -> None:
        self.max_workers = max(1, max_workers)
        self._idle: list[_Worker] = []
        self._count = 0
        self._cond = threading.Condition()

    def run(
        self,
        kind: str,
        path: Path,
        limits: ExtractionLimits,
        should_cancel: Callable[[], bool] | None = None,
        fd: int | None = None,
    ) -> Extracted:
        result = self._call(kind, path, limits, should_cancel, fd)
        assert isinstance(result, Extracted)
        return result

    def rendered(self, kind: str, path: Path, limits: ExtractionLimits, fd: int | None = None,
                 should_cancel: Callable[[], bool] | None = None) -> RenderedPage:
        """A PDF page drawn by a worker (`kind`: render_kind(page, side)), under the same limits."""
        result = self._call(kind, path, limits, should_cancel, fd)
        assert isinstance(result, RenderedPage)
        return result

    def _call(self, kind: str, path: Path, limits: ExtractionLimits, should_cancel: Callable[[], bool] | None,
              fd: int | None) -> Extracted | RenderedPage:
        worker = self._acquire(limits.max_worker_memory_bytes)
        reply: tuple[Any, ...] = ("crashed", None)
        try:
            reply = worker.call(kind, path, limits, should_cancel, fd)
        finally:
            self._release(worker, healthy=reply[0] in ("ok", "error"))
        return _unpack(reply, path, limits)

    def shutdown(self) -> None:
        with self._cond:
            idle, self._idle = self._idle, []
            self._count -= len(idle)
        for worker in idle:
            worker.kill()

    def _acquire(self, memory_bytes: int) -> _Worker:
        with self._cond:
            while True:
                while self._idle:
                    worker = self._idle.pop()
                    if worker.alive() and worker.memory_bytes == memory_bytes:
                        return worker
                    worker.kill()
                    self._count -= 1
                if self._count < self.max_workers:
                    self._count += 1
                    break
                self._cond.wait()
        try:
            return _Worker(memory_bytes)
        except BaseException:
            with self._cond:
                self._count -= 1
                self._cond.notify()
            raise

    def _release(self, worker: _Worker, healthy: bool) -> None:
        healthy = healthy and worker.tasks < TASKS_PER_WORKER  # recycle: parsers' heaps only grow
        if not healthy:
            worker.kill()
        with self._cond:
            if healthy:
                self._idle.append(worker)
            else:
                self._count -= 1
            self._cond.notify()


def _unpack(reply: tuple[Any, ...], path: Path, limits: ExtractionLimits) -> Extracted | RenderedPage:
    status = reply[0]
    if status == "ok":
        if len(reply) == 2 and isinstance(reply[1], RenderedPage):
            return reply[1]
        return unpack(reply[1:])
    if status == "error":
        raise _ERRORS.get(reply[1], ExtractionError)(reply[2])
    if status == "memory":
        raise LimitExceeded(reply[1])
    if status == "timeout":
        raise LimitExceeded(
            f"{path.name} took longer than {limits.timeout_seconds:g} s to read (file_timeout_seconds); "
            "raise the limit if the file is just large."
        )
    if status == "cancelled":
        raise Cancelled(f"Reading {path.name} was cancelled.")
    raise ExtractionError(
        f"{path.name} crashed the document reader (exit code {reply[1]}); the file is probably corrupt "
        "or needs more memory than the extraction limit. Not indexed."
    )


def default_pool_size() -> int:
    return max(1, min(4, os.cpu_count() or 1))


POOL = WorkerPool(default_pool_size())
atexit.register(POOL.shutdown)
