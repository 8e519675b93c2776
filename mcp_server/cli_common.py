"""What the people-facing index commands (index, search, status) share."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from foundation.errors import InvalidInput
from foundation.paths import is_within
from foundation.settings import Settings

if TYPE_CHECKING:
    from tools.runtime import Runtime


def cli_settings(settings: Settings) -> Settings:
    """The settings for a person's command: the whole file system when no roots are configured."""
    return settings if settings.roots else settings.model_copy(update={"roots": (Path("/"),)})


def cli_runtime(settings: Settings) -> Runtime:
    """The runtime of a person's command, with the approval policy's secret paths (never indexed, never
    found: the index is the server's too)."""
    from mcp_server.secret_paths import loaded_on_first_use
    from tools.runtime import Runtime

    rt = Runtime(cli_settings(settings))
    rt.secret_paths = loaded_on_first_use(settings)
    return rt


def cli_root(rt: Runtime) -> Path:
    """The first workspace root of a person's command: the tools show paths relative to it."""
    from foundation.paths import roots_for

    return roots_for(rt.settings)[0]


def cli_path(text: str) -> str:
    """A path a person typed, as the tools take it: relative to the current directory, as with every
    command line tool (the tools would take it relative to the first root); absolute ones as they are.
    Not normalised: the resolver applies '..' after symlinks, as the kernel does. Empty stays empty
    (refused as such)."""
    return str(Path(text).absolute()) if text else text


def cli_glob(pattern: str, root: Path) -> str:
    """A glob a person typed (relative to the current directory, or absolute) as the tools take it:
    relative to the first root. A pattern without '/' matches names at any depth below the current
    directory, as the tools' globs do below the root."""
    anchored = pattern if "/" in pattern.strip("/") else "**/" + pattern.strip("/")
    absolute = os.path.normpath(os.path.join(os.getcwd(), anchored))
    if not is_within(Path(absolute), [root]):
        raise InvalidInput(f"The glob {pattern!r} is outside the workspace root {root}: give one under it "
                           "(relative to the current directory, or absolute).")
    return os.path.relpath(absolute, root)


def shown_path(path: str, root: Path) -> str:
    """A tool's display path (relative to the first root `root`, "." for the root) as an absolute path,
    which a person can pass back to any command as it is."""
    return os.path.normpath(os.path.join(root, path))


# What the tools tell a model (call a tool, set a parameter) in the words of this command line; applied
# to every message and note the commands print, so that a person is never told to call a tool.
_CLI_WORDING: tuple[tuple[str, str], ...] = (
    ('Call list_workspace_files to see what exists (enable_tools(["list_workspace_files"]) first if it is not '
     "listed).", "Check the path (ls shows what exists)."),
    ("Call index_path on", "Run `generalagent-mcp index PATH` on"),
    ("(index_status)", "(`generalagent-mcp status`)"),
    ("or use_regex=false", "or search without --regex"),
    ('mode="natural"', "--mode natural"),
)


def for_people(text: str) -> str:
    """`text` (a tool's message or note) with its tool-call hints in this command line's words."""
    for model_words, cli_words in _CLI_WORDING:
        text = text.replace(model_words, cli_words)
    return text


def int_in(low: int, high: int, what: str) -> Callable[[str], int]:
    """An argparse type: a whole number from `low` to `high`, else argparse's usage error naming the range."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number (give {what}, {low}-{high})") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is out of range (give {what}, {low}-{high})")
        return value

    parse.__name__ = what  # argparse names the type in some messages
    return parse
