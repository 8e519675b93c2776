"""What the people-facing index commands (index, search, status) share."""

from __future__ import annotations

from pathlib import Path

from foundation.settings import Settings


def cli_settings(settings: Settings) -> Settings:
    """The settings for a person's command: the whole file system when no roots are configured."""
    return settings if settings.roots else settings.model_copy(update={"roots": (Path("/"),)})


def shown_path(path: str) -> str:
    """A tool's display path (relative to the first root, which is / for people) as an absolute path."""
    return path if path.startswith("/") or path == "." else "/" + path
