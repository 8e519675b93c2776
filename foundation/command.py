"""The command a message tells a person to run, spelled so that it runs as printed.

The console script usually lives in a virtual environment's bin/ that is not on PATH (Claude
Desktop starts it by absolute path), so a bare `generalagent-mcp approve ...` would fail with
"command not found". Messages use `cli_command()`: the bare name only when that name on PATH is
this very script, else the script's absolute path (or `python -m mcp_server` without a script).
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

SCRIPT = "generalagent-mcp"


def running_script() -> Path | None:
    """The console script of this Python environment (the running one when started through it)."""
    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if argv0 is not None and argv0.name == SCRIPT and argv0.is_file():
        return argv0.absolute()
    beside = Path(sys.executable).parent / SCRIPT
    return beside if beside.is_file() else None


def cli_command() -> str:
    """`generalagent-mcp` as a shell command that runs as printed (quoted when needed)."""
    script = running_script()
    if script is None:
        return f"{shlex.quote(sys.executable)} -m mcp_server"
    on_path = shutil.which(SCRIPT)
    if on_path and os.path.realpath(on_path) == os.path.realpath(script):
        return SCRIPT
    return shlex.quote(str(script))
