"""The description of one registered tool: its function, title, hints and visibility tier."""

from __future__ import annotations

import difflib
import inspect
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal

from pydantic import BaseModel, ValidationError, create_model

from foundation.errors import InvalidInput
from foundation.schemas import accepts_null

_FIRST_SENTENCE = re.compile(r"(.+?(?<!e\.g)(?<!i\.e)\.)(?:\s|$)")
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
    changes_session: bool = False
    """Changes only the calling client's session (e.g. its tool list): the approval policy treats it
    as read-only, but it is not annotated readOnlyHint."""
    without_llm: str | None = None
    """For tools that use the configured LLM endpoint: what holds when none is configured (shown at
    the start of the description then, and by `doctor`)."""
    check_args: Callable[[dict[str, Any]], None] | None = None
    """`check_args(args)`: pure checks of the arguments that the signature cannot express (e.g. "exactly
    one of id or query"), raising InvalidInput. The dispatch point runs it before the approval gate, so a
    call that cannot run never asks the human first. Cheap, never blocking; `args` may lack defaults."""
    precheck: Callable[[Any, str | None, dict[str, Any]], None] | None = None
    """`precheck(rt, session_id, args)`: checks that need the workspace (e.g. "the file exists and
    old_string occurs in it once"), raising a GeneralAgentError. The dispatch point (and the approval
    question's resolver) run it before the approval gate, so a call that would fail never asks the human
    first. It may read files (it runs in a worker thread); it never changes anything."""
    quick: Callable[[Any, dict[str, Any]], bool] | None = None
    """`quick(rt, args)`: True when this call will finish in a few ms from data already in memory, with
    nothing to wait for (no lock, no network, no write). The dispatcher then runs it on the event loop
    instead of a worker thread (the crossing costs about 1 ms); a call that meets something to wait for
    after all is run again in a worker thread (`foundation.waiting`). Cheap, never blocking."""
    input_schema: dict[str, Any] | None = field(default=None, compare=False)
    """A tool of another MCP server (`fn(**arguments)`): its own JSON schema, used instead of one built from
    `fn`'s signature. Its arguments are checked for shape here; that server validates the rest."""

    @property
    def name(self) -> str:
        return self.name_override or self.fn.__name__

    @property
    def description(self) -> str:
        return inspect.cleandoc(self.fn.__doc__ or self.title)

    @property
    def summary(self) -> str:
        """The description's first sentence (up to the first '. ', not after "e.g."/"i.e.", or the end
        of the first paragraph): the one line README's table and the MCP Bundle manifest show."""
        paragraph = " ".join(self.description.split("\n\n")[0].split())
        match = _FIRST_SENTENCE.match(paragraph)
        return match.group(1) if match else paragraph


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
    if spec.input_schema is not None:
        return external_arguments(spec.name, spec.input_schema, args)
    model = arguments_model(spec)
    args = prepare_arguments(spec, args)
    try:
        validated = model(**args)
    except ValidationError as exc:
        raise InvalidInput(invalid_arguments_message(spec.name, exc)) from None
    return {name: getattr(validated, name) for name in model.model_fields}


def external_arguments(tool: str, schema: dict[str, Any], args: dict[str, Any]) -> dict[str, Any]:
    """The shape checks for another server's tool: an object, its required arguments present, no unknown
    ones when its schema says so (that server checks the values)."""
    if not isinstance(args, dict):
        raise InvalidInput(f"Invalid arguments for {tool}: send a JSON object.")
    found = schema.get("properties")
    properties: dict[str, Any] = found if isinstance(found, dict) else {}
    required = [name for name in schema.get("required") or [] if isinstance(name, str)]
    missing = [name for name in required if name not in args]
    if missing:
        raise InvalidInput(f"Invalid arguments for {tool}:\n- argument {missing[0]!r} is required.")
    if schema.get("additionalProperties") is False:
        unknown = [name for name in args if name not in properties]
        if unknown:
            raise InvalidInput(unknown_argument_message(tool, unknown[0], list(properties)))
    return args


def prepare_arguments(spec: ToolSpec, args: dict[str, Any]) -> dict[str, Any]:
    """Reject unknown argument names; an optional argument sent as null (or "" at the top level)
    means its default, so it is dropped (also for optional fields of nested objects).

    Raises InvalidInput naming the unknown argument, the closest valid name and all valid names.
    """
    fields = arguments_model(spec).model_fields
    unknown = [name for name in args if name not in fields]
    if unknown:
        raise InvalidInput(unknown_argument_message(spec.name, unknown[0], list(fields)))
    schema = arguments_schema(spec)
    optional = {name for name, field in fields.items() if not field.is_required()}
    kept = {name: value for name, value in args.items()
            if not (name in optional and (value is None or value == ""))}
    properties = schema.get("properties", {})
    return {name: _drop_null_fields(value, properties.get(name, {}), schema) for name, value in kept.items()}


def unknown_argument_message(tool: str, name: str, valid: list[str]) -> str:
    close = difflib.get_close_matches(name, valid, n=1, cutoff=0.6)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    return f"Unknown argument {name!r} for {tool}.{hint} Valid arguments: {', '.join(valid) or '(none)'}."


def arguments_schema(spec: ToolSpec) -> dict[str, Any]:
    """The JSON schema of the tool's real signature (what the server validates), built once."""
    if spec.input_schema is not None:
        return spec.input_schema
    return _arguments_schema(spec.fn, spec.name)


@cache
def _arguments_schema(fn: Callable[..., Any], name: str) -> dict[str, Any]:
    return _arguments_model(fn, name).model_json_schema()


def _drop_null_fields(value: Any, schema: dict[str, Any], root: dict[str, Any], depth: int = 0) -> Any:
    """Drop null-valued optional fields of nested objects (a strict client sends every field)."""
    if depth > 20 or not isinstance(schema, dict):
        return value
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        schema = root.get("$defs", {}).get(ref.removeprefix("#/$defs/"), {})
    branches = [b for b in schema.get("anyOf", []) if isinstance(b, dict)] or [schema]
    for branch in branches:
        if isinstance(value, list) and "items" in branch:
            return [_drop_null_fields(item, branch["items"], root, depth + 1) for item in value]
        properties = branch.get("properties")
        if isinstance(value, dict) and isinstance(properties, dict):
            required = set(branch.get("required", []))
            return {key: _drop_null_fields(item, properties.get(key, {}), root, depth + 1)
                    for key, item in value.items()
                    if not (item is None and key not in required and not _takes_null(properties.get(key, {})))}
    return value


def _takes_null(schema: Any) -> bool:
    return not isinstance(schema, dict) or accepts_null(schema)


def invalid_arguments_message(tool: str, exc: ValidationError) -> str:
    """One short line per problem, naming the argument and what to send instead."""
    lines = [_problem_line(err) for err in exc.errors()[:8]]
    more = len(exc.errors()) - len(lines)
    tail = [f"- ... and {more} more."] if more > 0 else []
    return "\n".join([f"Invalid arguments for {tool}:", *lines, *tail])


def _problem_line(err: Any) -> str:
    where = _location(err["loc"])
    if err["type"] == "missing":
        return f"- {where} is required."
    message = str(err["msg"])
    message = message.removeprefix("Value error, ")
    got = _short(err.get("input"))
    fix = message[0].lower() + message[1:] if message else "invalid"
    return f"- {where}: {fix} (got {got})."


def _location(loc: tuple[Any, ...]) -> str:
    parts = [str(p) for p in loc if not str(p).startswith(("function-", "json-or-python", "lax-", "strict-"))]
    if not parts:
        return "arguments"
    name, rest = parts[0], "".join(f"[{p}]" if p.isdigit() else f".{p}" for p in parts[1:])
    return f"argument {name!r}" if not rest else f"argument {name!r} at {name}{rest}"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def validation_summary(exc: ValidationError) -> str:
    parts = [f"{'.'.join(str(p) for p in err['loc']) or 'value'}: {err['msg']}" for err in exc.errors()[:5]]
    return "; ".join(parts)
