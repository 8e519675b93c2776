"""The command a message tells a person to run, spelled so that it runs as printed.

The console script usually lives in a virtual environment's bin/ that is not on PATH (Claude
Desktop starts it by absolute path), so a bare `generalagent-mcp approve ...` would fail with
"command not found"; and a command without the running `--data-dir` (or `--root`, `--profile`)
would act on other state. Every message names a command through `cli_command(settings, words...)`:
the bare name only when that name on PATH is this very script, else the script's absolute path (or
`python -m mcp_server` without a script), then the global options of `settings` that select the
same state, then the sub-command's words, each quoted for the platform's shell (foundation/script.py:
POSIX sh, or PowerShell on Windows, where the script is `generalagent-mcp.exe`). A database URL is never printed (it
holds a password): `database_note` says that the terminal's GENERALAGENT_DATABASE_URL names it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from foundation.script import Shell, command_line, script_words

if TYPE_CHECKING:
    from foundation.settings import Settings


def global_options(settings: Settings | None, *, workspace: bool = False) -> list[str]:
    """The global options that select `settings`' state: `--data-dir` unless it is the default; with
    `workspace` (a command that starts a server) also each `--root` and a `--profile` other than default."""
    if settings is None:
        return []
    from foundation.settings import default_data_dir

    words: list[str] = []
    if settings.data_dir != default_data_dir():
        words += ["--data-dir", str(settings.data_dir)]
    if workspace:
        for root in settings.roots:
            words += ["--root", str(root)]
        if settings.tool_profile != "default":
            words += ["--profile", settings.tool_profile]
    return words


def cli_command(settings: Settings | None = None, *words: str, workspace: bool = False,
                shell: Shell | None = None) -> str:
    """The console script, the global options of `settings` and `words`, as one command line for `shell`
    (default: this platform's: PowerShell on Windows, else POSIX sh)."""
    return command_line([*script_words(), *global_options(settings, workspace=workspace), *words], shell)


def database_note(settings: Settings | None) -> str:
    """What the printed command relies on when the state is in PostgreSQL ("" with SQLite)."""
    if settings is None or not settings.database_url:
        return ""
    return " (in a terminal where GENERALAGENT_DATABASE_URL names the same database)"


def run_hint(settings: Settings | None, *words: str, workspace: bool = False) -> str:
    """`command` in backquotes, plus the database note: the form messages print."""
    return f"`{cli_command(settings, *words, workspace=workspace)}`{database_note(settings)}"
