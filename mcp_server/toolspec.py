"""The description of one registered tool: its function, title, hints and visibility tier."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

Tier = Literal["core", "default", "full"]
"""Visibility: `core` tools are listed in every profile, `default` ones in the default and full
profiles, `full` ones only in the full profile (or once enabled on demand)."""


@dataclass(frozen=True)
class ToolSpec:
    fn: Callable[..., Any]
    title: str
    read_only: bool
    destructive: bool = False
    idempotent: bool = False
    open_world: bool = False
    tier: Tier = "default"
    name_override: str | None = None

    @property
    def name(self) -> str:
        return self.name_override or self.fn.__name__

    @property
    def description(self) -> str:
        return inspect.cleandoc(self.fn.__doc__ or self.title)
