"""A real PostgreSQL server for the tests: initdb + pg_ctl of the system's PostgreSQL in a temporary
directory, on a free loopback port, with password (SCRAM) authentication; stopped at the end.

initdb refuses to run as root: as root, the cluster belongs to the unprivileged `postgres` user
(Debian's package creates it) and the server runs as that user.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any
from urllib.parse import quote

INSTALL_HINT = (
    "PostgreSQL server binaries (initdb, pg_ctl) were not found in /usr/lib/postgresql/*/bin or on PATH. "
    "Install them with `sudo apt-get install postgresql-15` (Debian/Ubuntu; ./scripts/test.sh does this "
    "when run as root), `brew install postgresql@15` (macOS), or set GA_TEST_PG_BIN to the "
    "folder that has initdb and pg_ctl."
)
USER = "generalagent"
DATABASE = "tests"


def find_bindir() -> Path | None:
    """The folder with initdb and pg_ctl: GA_TEST_PG_BIN, the newest Debian install, or PATH."""
    wanted = os.environ.get("GA_TEST_PG_BIN")
    if wanted:  # an explicit folder is the only one tried
        folder = Path(wanted)
        return folder if (folder / "initdb").is_file() and (folder / "pg_ctl").is_file() else None
    candidates = [Path(p) for p in sorted(glob.glob("/usr/lib/postgresql/*/bin"),
                                           key=lambda p: int(Path(p).parent.name) if Path(p).parent.name.isdigit()
                                           else 0, reverse=True)]
    found = shutil.which("initdb")
    if found:
        candidates.append(Path(found).resolve().parent)
    for folder in candidates:
        if (folder / "initdb").is_file() and (folder / "pg_ctl").is_file():
            return folder
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PgServer:
    """One throwaway cluster; `url(...)` names a database or a schema in it."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.password = secrets.token_urlsafe(12)
        self.port = _free_port()
        self.root = Path(tempfile.mkdtemp(prefix="generalagent-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self._as: dict[str, Any] = {}
        self._counter = 0
        self._lock = threading.Lock()
        if os.geteuid() == 0:  # initdb refuses root: hand the folder to the postgres user
            account = pwd.getpwnam("postgres")
            os.chown(self.root, account.pw_uid, account.pw_gid)
            self._as = {"user": account.pw_uid, "group": account.pw_gid}

    def _run(self, *args: str) -> None:
        result = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=120,
                                stdin=subprocess.DEVNULL, cwd=self.root, **self._as)
        if result.returncode != 0:
            log = self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""
            raise RuntimeError(f"{args[0]} failed ({result.returncode}): {result.stderr or result.stdout}\n{log}")

    def start(self) -> None:
        pwfile = self.root / "pw"
        pwfile.write_text(self.password + "\n")
        if self._as:
            os.chown(pwfile, self._as["user"], self._as["group"])
        self._run(self.bindir / "initdb", "-D", str(self.data), "-U", USER, "--auth=scram-sha-256",
                  f"--pwfile={pwfile}", "-E", "UTF8", "--locale=C", "--no-sync")
        for attempt in range(3):  # another test process (pytest-xdist worker) may take the free port first
            options = (f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories='' "
                       "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=400 "
                       "-c shared_buffers=32MB -c max_locks_per_transaction=256")
            try:
                self._run(self.bindir / "pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w",
                          "-t", "60", "start")
                break
            except RuntimeError as error:
                if attempt == 2 or "already in use" not in str(error):
                    raise
                self.port = _free_port()
        import psycopg

        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {DATABASE}")

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self._run(self.bindir / "pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str = DATABASE, *, schema: str | None = None, app: str | None = None,
            password: str | None = None) -> str:
        secret = quote(self.password if password is None else password, safe="")
        url = f"postgresql://{USER}:{secret}@127.0.0.1:{self.port}/{database}"
        params = []
        if schema:
            params.append(f"options=-csearch_path%3D{schema}")
        if app:
            params.append(f"application_name={app}")
        return url + ("?" + "&".join(params) if params else "")

    def fresh_schema(self) -> tuple[str, str]:
        """(url, name) of a new empty schema, its connections tagged with the schema's name."""
        with self._lock:
            self._counter += 1
            name = f"t{self._counter}"
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {name}")
        return self.url(schema=name, app=name), name

    def disconnect(self, app: str) -> None:
        """End every connection tagged `app` (pools a test left open must not pile up)."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s "
                         "AND pid <> pg_backend_pid()", (app,))
