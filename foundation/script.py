"""The console script as a shell command that runs as printed (foundation/command.py adds the options
of the running settings; this part imports nothing of ours, so that the storage layer can name it).

A person runs the printed command in their terminal: a POSIX shell on Linux and macOS, PowerShell on
Windows (the default of Windows Terminal). `quote_for` spells one word for each shell, `command_line`
a whole command: POSIX single quotes; PowerShell single quotes, and `& ` before a quoted program; cmd.exe
double quotes by the C runtime's rules, with its own specials (`%`, a quote) outside them, escaped by `^`.
The words must not hold a line break or a NUL (no shell can pass those on one line; paths and ids never do).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys
from pathlib import Path
from typing import Literal

Shell = Literal["posix", "cmd", "powershell"]
SCRIPT = "generalagent-mcp"
_SAFE_POSIX = re.compile(r"[A-Za-z0-9_@%+=:,./-]+")
_SAFE_WINDOWS = re.compile(r"[A-Za-z0-9_+=:./\\-]+")  # bare in both cmd.exe and PowerShell
_PS_QUOTES = re.compile("(['\u2018\u2019\u201a\u201b])")


def default_shell(platform: str = os.name) -> Shell:
    """The shell a person on this platform types into: PowerShell on Windows, else a POSIX shell."""
    return "powershell" if platform == "nt" else "posix"


def script_name(platform: str = os.name) -> str:
    """The console script's file name on this platform (`.exe` on Windows)."""
    return f"{SCRIPT}.exe" if platform == "nt" else SCRIPT


def quote_for(word: str, shell: Shell) -> str:
    """`word` as one argument in `shell` (left bare when it needs no quoting)."""
    if shell == "posix":
        return shlex.quote(word)
    if word and _SAFE_WINDOWS.fullmatch(word):
        return word
    if shell == "powershell":  # (PowerShell takes the typographic single quotes for ' too)
        return "'" + _PS_QUOTES.sub(r"\1\1", word) + "'"
    return _cmd_quoted(word)


def _cmd_quoted(word: str) -> str:
    """cmd.exe, then the program's C runtime: double-quoted runs (backslashes before a closing quote doubled);
    a `"` as `\\^"` and a `%` as `^%` between runs (cmd expands `%NAME%` even inside quotes)."""
    parts: list[str] = []
    for k, piece in enumerate(word.split('"')):
        if k:
            parts.append('\\^"')
        for j, run in enumerate(piece.split("%")):
            if j:
                parts.append("^%")
            parts.append('"' + run + "\\" * (len(run) - len(run.rstrip("\\"))) + '"')
    return "".join(parts)


def command_line(words: list[str], shell: Shell | None = None) -> str:
    """The program `words[0]` with its arguments as one command line for `shell` (default: this platform's)."""
    shell = shell or default_shell()
    line = " ".join(quote_for(word, shell) for word in words)
    if shell == "powershell" and line.startswith("'"):
        return "& " + line  # a quoted program name is a string to PowerShell; `&` runs it
    return line


def running_script() -> Path | None:
    """The console script of this Python environment (the running one when started through it)."""
    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if argv0 is not None and argv0.name in (SCRIPT, f"{SCRIPT}.exe") and argv0.is_file():
        return argv0.absolute()
    beside = Path(sys.executable).parent / script_name()
    return beside if beside.is_file() else None


def script_words() -> list[str]:
    """`generalagent-mcp` alone as the words of a command: the bare name when that name on PATH is this very
    script, else its absolute path, else this Python with `-m mcp_server`."""
    script = running_script()
    if script is None:
        return [sys.executable, "-m", "mcp_server"]
    on_path = shutil.which(SCRIPT)
    if on_path and os.path.realpath(on_path) == os.path.realpath(script):
        return [SCRIPT]
    return [str(script)]


def script_command(shell: Shell | None = None) -> str:
    """`generalagent-mcp` alone, as a command that runs as printed in `shell` (default: this platform's)."""
    return command_line(script_words(), shell)
