"""Start generalagent-mcp from an MCP Bundle (copied into the bundle as server/bootstrap.py).

In a `uv` bundle (the source beside server/, no server/src) the app has provided Python and the
dependencies (uv run, from the bundle's pinned pyproject.toml): the server runs with the Python that
started this script, the bundle's source first on its path. In a `python` bundle:

Standard library only: it runs with the user's Python (python3 on macOS/Linux, python on Windows;
3.11 or newer). On first start (and after an update changed the pinned dependencies) it creates
server/venv beside itself and installs server/src into it with pip, pinned by
server/src/constraints.txt; pip needs the package index once, and its output goes to stderr (stdout
is the MCP protocol). Then it runs `python -m mcp_server serve` from that environment over stdio.

Arguments are the workspace folders (the bundle's user_config.roots, one argument each); they become
GENERALAGENT_ROOTS. GENERALAGENT_* variables left empty (optional settings the user skipped) are
dropped so that the server's defaults apply. GENERALAGENT_BUNDLE_PYTHON=/path/to/python uses an
existing environment that has generalagent-mcp installed instead of server/venv.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
import venv
from pathlib import Path

HERE = Path(__file__).resolve().parent
SRC = HERE / "src"
UV_LAYOUT = not SRC.is_dir() and (HERE.parent / "mcp_server").is_dir()
VENV = HERE / "venv"
STAMP = VENV / "generalagent-installed.txt"
LOCK = HERE / "venv.lock"
MIN_PYTHON = (3, 11)
LOCK_WAIT_S = 900


def say(message: str) -> None:
    print(f"[generalagent-mcp bundle] {message}", file=sys.stderr, flush=True)


def venv_python() -> Path:
    return VENV / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def wanted_stamp() -> str:
    digest = hashlib.sha256()
    for name in ("pyproject.toml", "constraints.txt"):
        digest.update((SRC / name).read_bytes())
    return f"{digest.hexdigest()} python={sys.version_info[0]}.{sys.version_info[1]}"


def installed() -> bool:
    return venv_python().exists() and STAMP.exists() and STAMP.read_text(encoding="utf-8").strip() == wanted_stamp()


def install() -> None:
    """Create server/venv and pip-install server/src with its pinned constraints (once, under a lock)."""
    with _lock():
        if installed():
            return
        say(f"first start: installing into {VENV} (needs the package index once; a minute or two)")
        venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
        command = [str(venv_python()), "-m", "pip", "install", "--disable-pip-version-check", "--no-input",
                   "-c", str(SRC / "constraints.txt"), f"{SRC}[semantic]"]  # as mcpb.BUNDLED_EXTRAS
        done = subprocess.run(command, stdout=sys.stderr, stderr=sys.stderr, check=False)
        if done.returncode != 0:
            raise SystemExit(f"generalagent-mcp bundle: pip install failed (exit {done.returncode}); see above.")
        STAMP.write_text(wanted_stamp() + "\n", encoding="utf-8")
        say("installed")


class _lock:
    """A lock folder, so that two starts at once do not install twice (stale after LOCK_WAIT_S)."""

    def __enter__(self) -> None:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                LOCK.mkdir()
                return
            except FileExistsError:
                if time.monotonic() > deadline or time.time() - LOCK.stat().st_mtime > LOCK_WAIT_S:
                    LOCK.rmdir()
                    continue
                time.sleep(1)

    def __exit__(self, *exc: object) -> None:
        LOCK.rmdir()


def server_env(roots: list[str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("GENERALAGENT_") and (not v.strip() or "${user_config." in v))}
    folders = [r for r in roots if r.strip() and "${user_config." not in r]
    if folders:
        env["GENERALAGENT_ROOTS"] = os.pathsep.join(folders)
    return env


def main() -> int:
    if sys.version_info < MIN_PYTHON:
        say(f"needs Python {MIN_PYTHON[0]}.{MIN_PYTHON[1]} or newer; this is {sys.version.split()[0]} "
            f"({sys.executable}). Install a newer Python and restart the app.")
        return 1
    python = os.environ.get("GENERALAGENT_BUNDLE_PYTHON", "")
    env = server_env(sys.argv[1:])
    if UV_LAYOUT:  # the app's uv made this Python's environment from the bundle's pyproject.toml
        python = python or sys.executable
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE.parent), env.get("PYTHONPATH", "")) if p)
    elif not python:
        if not installed():
            install()
        python = str(venv_python())
    command = [python, "-m", "mcp_server", "serve"]
    if os.name == "nt":  # exec does not keep the stdio handles the way the app expects on Windows
        return subprocess.run(command, env=env, check=False).returncode
    os.execve(python, command, env)
    return 0  # not reached


if __name__ == "__main__":
    raise SystemExit(main())
