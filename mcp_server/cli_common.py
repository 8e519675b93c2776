"""What the people-facing index commands (index, search, status) share."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

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


def shown_path(path: str) -> str:
    """A tool's display path (relative to the first root, which is / for people) as an absolute path."""
    return path if path.startswith("/") or path == "." else "/" + path


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
