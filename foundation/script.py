"""The console script as a shell command that runs as printed (foundation/command.py adds the options
of the running settings; this part imports nothing of ours, so that the storage layer can name it)."""

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


def script_command() -> str:
    """`generalagent-mcp` alone, as a shell command that runs as printed (quoted when needed)."""
    script = running_script()
    if script is None:
        return f"{shlex.quote(sys.executable)} -m mcp_server"
    on_path = shutil.which(SCRIPT)
    if on_path and os.path.realpath(on_path) == os.path.realpath(script):
        return SCRIPT
    return shlex.quote(str(script))
