"""`serve --transport http --workers N`: N server processes accepting on one listening socket.

The parent binds the socket (transports.bind_socket), then forks N workers and one folder watcher
(transports._watcher: no socket, a lower CPU priority); each worker builds its own
server from the settings the parent read (inherited by fork, never re-read) and runs uvicorn on
that socket, so the kernel hands each new connection to one of them. The parent only supervises:
a worker that dies is logged and replaced (a worker that keeps dying at start-up stops the whole
server), and SIGTERM / SIGINT (Ctrl-C) stop every worker, gracefully and then by force.

Shared state must live where every worker sees it: the CLI refuses N > 1 without PostgreSQL.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from types import FrameType

from foundation.errors import GeneralAgentError, SettingsError
from foundation.peers import add_tree_root
from foundation.settings import Settings

log = logging.getLogger("generalagent.workers")

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
GRACE_SECONDS = 10.0
"""How long stopping workers may take to finish their requests before they are killed."""
FAST_DEATH_SECONDS = 5.0
MAX_FAST_DEATHS = 5
"""A worker that dies within FAST_DEATH_SECONDS of its start that many times in a row is a crash
loop: the server stops instead of forking forever."""
SETTINGS_EXIT = 2
"""A worker's exit code for a wrong setting (SettingsError): every worker would fail alike, so the
server stops at once, with the CLI's exit code for settings."""


def check_workers(workers: int, transport: str, settings: Settings) -> None:
    """Refuse a worker count that cannot work, naming the fix."""
    if workers < 1:
        raise SettingsError(f"--workers must be 1 or more (got {workers}).")
    if workers == 1:
        return
    if transport != "http":
        raise SettingsError("--workers N>1 needs --transport http: a stdio server is one process talking to one "
                            "client. Use --transport http, or --workers 1.")
    if not settings.database_url:
        raise SettingsError(
            f"--workers {workers} needs the state in PostgreSQL: with SQLite every process would keep its own "
            "caches of files on this one machine, and they would diverge. Set "
            "GENERALAGENT_DATABASE_URL=postgresql://... or use --workers 1.")
    if not hasattr(os, "fork"):
        raise SettingsError("--workers N>1 needs fork() (Linux, macOS); on this system use --workers 1 and run "
                            "several servers on different ports behind a load balancer.")


@dataclass
class Supervisor:
    """Keeps `count` workers running `serve(slot)` (slot 0..count-1) until told to stop; a worker that
    dies is replaced in its slot."""

    count: int
    serve: Callable[[int], None]
    started: dict[int, float] = field(default_factory=dict)  # pid -> when it was forked
    slots: dict[int, int] = field(default_factory=dict)  # pid -> its slot
    stopping: bool = False
    fast_deaths: int = 0

    def run(self) -> int:
        previous = {sig: signal.signal(sig, self._on_stop) for sig in STOP_SIGNALS}
        try:
            for slot in range(self.count):
                self._fork(slot)
            log.info("started %d workers: %s", self.count, ", ".join(map(str, self.started)))
            return self._watch()
        finally:
            self._stop_all()
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _on_stop(self, signum: int, _frame: FrameType | None) -> None:
        if not self.stopping:
            log.info("%s: stopping %d workers", signal.Signals(signum).name, len(self.started))
        self.stopping = True

    def _fork(self, slot: int) -> None:
        pid = os.fork()
        if pid == 0:  # the worker: never returns into the parent's code
            os._exit(_worker_main(partial(self.serve, slot), os.getppid()))
        self.started[pid] = time.monotonic()
        self.slots[pid] = slot

    def _watch(self) -> int:
        while not self.stopping:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                pid, status = 0, 0
            if pid == 0 or pid not in self.started:
                time.sleep(0.1)
                continue
            if self.stopping:
                break
            if os.WIFEXITED(status) and os.WEXITSTATUS(status) == SETTINGS_EXIT:
                self.started.pop(pid, None)
                log.error("worker %d stopped on a wrong setting; stopping the server", pid)
                return SETTINGS_EXIT
            if not self._replace(pid, status):
                return 1
        return 0

    def _replace(self, pid: int, status: int) -> bool:
        """Log a dead worker and fork another; False when workers keep dying at start-up."""
        lived, slot = time.monotonic() - self.started.pop(pid), self.slots.pop(pid)
        self.fast_deaths = self.fast_deaths + 1 if lived < FAST_DEATH_SECONDS else 0
        log.error("worker %d %s after %.1f s", pid, describe_status(status), lived)
        if self.fast_deaths >= MAX_FAST_DEATHS:
            log.error("workers keep dying at start-up (%d in a row); stopping the server: see the errors above",
                      self.fast_deaths)
            return False
        self._fork(slot)
        log.info("started worker %d in its place", max(self.started, key=self.started.__getitem__))
        return True

    def _stop_all(self) -> None:
        """SIGTERM to every worker; SIGKILL to those still running after GRACE_SECONDS."""
        for pid in list(self.started):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + GRACE_SECONDS
        while self.started and time.monotonic() < deadline:
            self._reap()
            time.sleep(0.05)
        for pid in list(self.started):
            log.warning("worker %d did not stop within %.0f s; killing it", pid, GRACE_SECONDS)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
            self.started.pop(pid, None)

    def _reap(self) -> None:
        for pid in list(self.started):
            with contextlib.suppress(ChildProcessError):
                done, _ = os.waitpid(pid, os.WNOHANG)
                if done == 0:
                    continue
            self.started.pop(pid, None)


def describe_status(status: int) -> str:
    """`exited with code 1` / `was killed by SIGKILL`, from a waitpid status."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        return f"was killed by {name}"
    return f"exited with code {os.waitstatus_to_exitcode(status)}"


def _worker_main(serve: Callable[[], None], parent: int) -> int:
    """Run one worker in the forked child; its exit code."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_DFL)  # uvicorn installs its own graceful handlers
    _die_with_parent(parent)
    add_tree_root(parent)  # a command another worker runs may not use this worker's approval page
    try:
        serve()
    except SettingsError as exc:
        print(f"generalagent-mcp: worker {os.getpid()}: {exc}", file=sys.stderr, flush=True)
        return SETTINGS_EXIT
    except GeneralAgentError as exc:
        print(f"generalagent-mcp: worker {os.getpid()}: {exc}", file=sys.stderr, flush=True)
        return 1
    except BaseException:
        log.exception("worker %d failed", os.getpid())
        return 1
    finally:
        logging.shutdown()
    return 0


def _die_with_parent(parent: int) -> None:
    """On Linux, a worker gets SIGTERM when the supervisor dies (even by SIGKILL): no orphans."""
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the supervisor died before the line above
        os._exit(1)
