"""The description of one registered tool: its function, title, hints and visibility tier."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from pydantic import BaseModel, ValidationError, create_model

from foundation.errors import InvalidInput

INJECTED_PARAMS = ("rt", "call")
"""Parameters the dispatch point fills in (never part of a tool's input schema)."""

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


def tool_parameters(fn: Callable[..., Any]) -> list[inspect.Parameter]:
    """The tool's own parameters (injected ones removed), with annotations resolved."""
    hints = typing.get_type_hints(fn, include_extras=True)
    return [
        param.replace(annotation=hints.get(name, param.annotation))
        for name, param in inspect.signature(fn).parameters.items()
        if name not in INJECTED_PARAMS
    ]


def return_model(fn: Callable[..., Any]) -> Any:
    return typing.get_type_hints(fn, include_extras=True).get("return", Any)


def arguments_model(spec: ToolSpec) -> type[BaseModel]:
    """A pydantic model of the tool's own parameters (built once per tool function)."""
    return _arguments_model(spec.fn, spec.name)


@cache
def _arguments_model(fn: Callable[..., Any], name: str) -> type[BaseModel]:
    fields: dict[str, Any] = {}
    for param in tool_parameters(fn):
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[param.name] = (param.annotation, default)
    return create_model(f"{name}_args", **fields)


def validate_arguments(spec: ToolSpec, args: dict[str, Any]) -> dict[str, Any]:
    """Validate raw arguments (e.g. from a sub-agent's LLM) against the tool's signature."""
    model = arguments_model(spec)
    fields = model.model_fields
    unknown = sorted(set(args) - set(fields))
    if unknown:
        raise InvalidInput(f"{spec.name}: unknown argument(s) {unknown}. Allowed: {sorted(fields)}.")
    try:
        validated = model(**args)
    except ValidationError as exc:
        raise InvalidInput(f"{spec.name}: {validation_summary(exc)}") from None
    return {name: getattr(validated, name) for name in fields}


def validation_summary(exc: ValidationError) -> str:
    parts = [f"{'.'.join(str(p) for p in err['loc']) or 'value'}: {err['msg']}" for err in exc.errors()[:5]]
    return "; ".join(parts)
