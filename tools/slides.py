"""Slides as pictures: a .pptx/.odp deck converted to PDF by LibreOffice, then a page drawn like any PDF page.

LibreOffice (`soffice --headless --convert-to pdf`, hidden slides too, so slide N is page N as read_file and
search number them) is an optional system program: scripts/office.sh installs it; without it render_page
says how to. The conversion runs under the extraction limits: the worker's memory limit (RLIMIT_AS, via
`prlimit`), the per-file time budget (killed when over it or when the call is cancelled), and inside the OS
sandbox (tools/sandbox.py: no network at all, only its own work folder writable, the host's files outside
the system folders invisible; without the seccomp filter that blocks Unix sockets for shell commands, since
LibreOffice opens one for itself: in its own network namespace and file-system view it reaches no host
service). Without the sandbox it is not run. Unsandboxed, LibreOffice fetches a picture a deck links to
(tests/test_slides.py shows it does not here). The deck is checked first like any document (size, magic
bytes, zip checks).

Converted PDFs are cached by the deck's content hash in the data dir (`slides/`, the newest CACHE_FILES kept),
so drawing slide 2 after slide 1 does not convert again, and a changed deck is converted afresh.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from foundation.errors import Cancelled, ExtractionError, LimitExceeded, NotConfigured
from indexing.model import ExtractionLimits

DECK_KINDS = {".pptx": "pptx", ".odp": "odp"}
"""Deck suffixes render_page converts (with the extractor's kind, for the checks before conversion)."""
CACHE_FILES = 32
INSTALL_COMMAND = "sudo apt-get install --no-install-recommends libreoffice-impress-nogui fonts-wqy-microhei"
OFFICE_HINT = (f"install LibreOffice Impress ({INSTALL_COMMAND}; macOS: brew install --cask libreoffice), "
               "or export the deck to PDF and render that")
_FILTER = 'pdf:impress_pdf_Export:{"ExportHiddenSlides":{"type":"boolean","value":"true"}}'
_POLL_SECONDS = 0.1
_FONT_CACHES = (Path("/var/cache/fontconfig"),)
_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


def office_program() -> str | None:
    """LibreOffice's command (soffice) when installed."""
    return shutil.which("soffice") or shutil.which("libreoffice")


def deck_pdf(name: str, fd: int, cache: Path, limits: ExtractionLimits,
             should_cancel: Callable[[], bool] | None = None) -> Path:
    """The PDF of the deck open on `fd` (checked already), from the cache folder `cache` or converted now."""
    digest = _content_hash(fd)
    cached = cache / f"{digest}.pdf"
    with _lock_for(digest):  # calls on one deck at once: one converts, the others wait and use its PDF
        if cached.is_file():
            with contextlib.suppress(OSError):
                os.utime(cached)  # the newest are kept
            return cached
        _convert_into(cached, name, fd, cache, limits, should_cancel)
    _evict(cache)
    return cached


def _lock_for(digest: str) -> threading.Lock:
    with _LOCKS_GUARD:
        if len(_LOCKS) > 4 * CACHE_FILES:
            _LOCKS.clear()  # (held locks stay held by their callers; a later caller may convert again)
        return _LOCKS.setdefault(digest, threading.Lock())


def _convert_into(cached: Path, name: str, fd: int, cache: Path, limits: ExtractionLimits,
                  should_cancel: Callable[[], bool] | None) -> None:
    from tools.sandbox import sandbox_status

    program = office_program()
    if program is None:
        raise NotConfigured(f"Drawing slides needs LibreOffice, which is not installed: {OFFICE_HINT}.")
    if not (status := sandbox_status()).available:
        raise NotConfigured(f"Drawing slides runs LibreOffice in the OS sandbox (offline), which is missing here: "
                            f"{status.reason}.")
    cache.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="convert-", dir=cache))
    try:
        deck = work / f"deck{Path(name).suffix.lower()}"
        _copy(fd, deck)
        made = _convert(program, deck, work, limits, should_cancel, name)
        os.replace(made, cached)
    finally:
        _remove(work)


def _content_hash(fd: int) -> str:
    digest = hashlib.sha256()
    offset = 0
    while chunk := os.pread(fd, 1 << 20, offset):
        digest.update(chunk)
        offset += len(chunk)
    return digest.hexdigest()[:40]


def _copy(fd: int, target: Path) -> None:
    offset = 0
    with open(target, "xb") as out:
        while chunk := os.pread(fd, 1 << 20, offset):
            out.write(chunk)
            offset += len(chunk)


def _command(program: str, deck: Path, work: Path, limits: ExtractionLimits) -> list[str]:
    """soffice converting `deck` into work/out, under the memory limit and inside the OS sandbox."""
    from tools.sandbox import SandboxSpec, sandbox_status, wrap

    home = work / "home"
    home.mkdir()
    argv = [program, f"-env:UserInstallation={(work / 'profile').as_uri()}", "--headless", "--norestore",
            "--nolockcheck", "--convert-to", _FILTER, "--outdir", str(work / "out"), str(deck)]
    prlimit = shutil.which("prlimit")
    if prlimit is not None:
        argv = [prlimit, f"--as={limits.max_worker_memory_bytes}", "--", *argv]
    status = sandbox_status()
    spec = SandboxSpec(roots=(work,), cwd=work, home=home, roots_writable=True, readable=_FONT_CACHES)
    return wrap(argv, spec, status)


def _convert(program: str, deck: Path, work: Path, limits: ExtractionLimits,
             should_cancel: Callable[[], bool] | None, name: str) -> Path:
    argv = _command(program, deck, work, limits)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(work / "home"), "LANG": "C.UTF-8",
           "SAL_USE_VCLPLUGIN": "svp"}
    log = work / "log.txt"
    with open(log, "wb") as out:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env, cwd=work,
                                   start_new_session=True)
        _wait(process, limits.timeout_seconds, should_cancel, name)
    made = work / "out" / f"{deck.stem}.pdf"
    if process.returncode != 0 or not made.is_file() or made.stat().st_size == 0:
        raise ExtractionError(f"LibreOffice could not convert {name} to PDF ({_why(process.returncode, log, limits)}; "
                              f"exit code {process.returncode}). Check that it opens in an office suite, or read its "
                              "text with read_file.")
    return made


def _why(code: int, log: Path, limits: ExtractionLimits) -> str:
    """What a failed conversion most likely means: a crash (a signal: out of memory, mostly) or a bad deck."""
    said = log.read_text("utf-8", "replace")
    memory = f"{limits.max_worker_memory_bytes / 2**30:.1f} GiB"
    if "bad_alloc" in said or code < 0 or code > 128:
        return f"it crashed, most likely out of memory under the extraction memory limit of {memory}"
    return f"it is damaged or not a presentation, or needs more than the extraction memory limit of {memory}"


def _wait(process: subprocess.Popen[bytes], seconds: float, should_cancel: Callable[[], bool] | None,
          name: str) -> None:
    deadline = time.monotonic() + seconds
    try:
        while process.poll() is None:
            if should_cancel is not None and should_cancel():
                raise Cancelled(f"Drawing {name} was cancelled.")
            if time.monotonic() > deadline:
                raise LimitExceeded(f"Converting {name} to PDF took longer than {seconds:g} s (file_timeout_seconds); "
                                    "raise the limit if the deck is just large.")
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(_POLL_SECONDS)
    finally:
        if process.poll() is None:
            with contextlib.suppress(OSError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _remove(work: Path) -> None:
    """Remove a work folder; a killed conversion's processes may still be dying and writing for a moment."""
    for _ in range(50):
        shutil.rmtree(work, ignore_errors=True)
        if not work.exists():
            return
        time.sleep(0.1)


def _evict(cache: Path) -> None:
    """Keep the CACHE_FILES most recently used PDFs; remove work folders a stopped server left (an hour old)."""
    try:
        pdfs = sorted(cache.glob("*.pdf"), key=lambda p: p.stat().st_mtime, reverse=True)
        stale = [w for w in cache.glob("convert-*") if w.stat().st_mtime < time.time() - 3600]
    except OSError:
        return
    for old in pdfs[CACHE_FILES:]:
        with contextlib.suppress(OSError):
            old.unlink()
    for work in stale:
        shutil.rmtree(work, ignore_errors=True)
