"""JSON schema shaping shared by tools/list and the sub-agent's function schemas.

`portable_schema` turns pydantic's schemas into the one dialect every model provider accepts:
the OpenAI strict subset (every property required, optional ones nullable, objects closed with
`additionalProperties: false`, no string lengths) that is also inside Gemini's function-declaration
subset (no `$ref` / `$defs`, no exclusive bounds, no `type` arrays, no `default`, no `title`). The server still
validates calls against the real signatures, so what it accepts does not change: a `null` (or an
empty string at the top level) for an optional argument means its default (foundation.toolspec).
"""

from __future__ import annotations

import copy
import math
from typing import Any

from pydantic import BaseModel, GetJsonSchemaHandler, SerializerFunctionWrapHandler, model_serializer
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

ANY_VALUE: dict[str, Any] = {"anyOf": [{"type": t} for t in ("string", "number", "boolean", "object", "array", "null")]}
"""Accepts every JSON value, written without a `type` array (the spelling of `{}` that linters accept)."""

NULL = {"type": "null"}
_VALIDATION_ONLY = ("minLength", "maxLength")
"""String lengths are checked by the server only: OpenAI's strict mode does not take them (clients such
as pydantic-ai then send the tool non-strict); a too long or empty string gets an error naming the limit."""

# Closed schemas for conversation messages (OpenAI Chat or Anthropic Messages), so that tools taking
# `messages` stay strict-mode tools. They describe what clients send; the server validates messages
# itself (context.messages), accepts the full formats (e.g. a tool_use `input` object) and reads an
# optional field sent as null as absent.
_STR = {"type": "string"}
TEXT_BLOCK_SCHEMA: dict[str, Any] = {
    "type": "object", "properties": {"type": {"type": "string", "enum": ["text"]}, "text": _STR},
    "required": ["type", "text"],
}
CONTENT_BLOCK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "A part (text, image_url, ...) or block (text, tool_use, tool_result, ...).",
    "properties": {
        "type": _STR, "text": _STR, "id": _STR, "name": _STR,
        "input": {"type": "string", "description": "tool_use input as JSON text (an object is accepted too)."},
        "tool_use_id": _STR,
        "content": {"anyOf": [_STR, {"type": "array", "items": TEXT_BLOCK_SCHEMA}]},
        "is_error": {"type": "boolean"},
    },
    "required": ["type"],
}
TOOL_CALL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": _STR, "type": {"type": "string", "enum": ["function"]},
        "function": {"type": "object", "properties": {"name": _STR, "arguments": _STR},
                     "required": ["name", "arguments"]},
    },
    "required": ["id", "type", "function"],
}
MESSAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "role": {"type": "string", "enum": ["system", "developer", "user", "assistant", "tool"]},
        "content": {"anyOf": [_STR, {"type": "array", "items": CONTENT_BLOCK_SCHEMA}]},
        "name": _STR,
        "tool_calls": {"type": "array", "items": TOOL_CALL_SCHEMA},
        "tool_call_id": _STR,
    },
    "required": ["role"],
}
TEXT_MESSAGE_SCHEMA: dict[str, Any] = {
    "type": "object", "properties": {"role": _STR, "content": _STR}, "required": ["role", "content"],
}
"""A message reduced to its text (where only the words matter, e.g. recall's context)."""
_OUTPUT_ONLY_DOCS = ("description", "required", "enum")
"""Dropped from result schemas, which clients use to validate results (models read the results
themselves): what remains checks every value's type, in fewer tokens of tools/list."""
_MAPS = ("properties", "$defs", "definitions", "patternProperties")
_MAX_DEPTH = 40


def portable_schema(schema: dict[str, Any], output: bool = False) -> dict[str, Any]:
    """A portable copy of `schema`. Input schemas: strict and inlined. Output schemas: no type arrays,
    no untyped nodes, no titles/descriptions/defaults, no `$defs` (see `_inline_at_first_use`)."""
    if output:  # clients validate results with it; models never see it
        shaped = copy.deepcopy(schema)
        _shape(shaped, output)
        _untype_nested_objects(shaped, root=True)
        return _inline_at_first_use(shaped)
    result: dict[str, Any] = _inline_refs(copy.deepcopy(schema), schema.get("$defs", {}), 0)
    result.pop("$defs", None)
    result.pop("definitions", None)
    _shape(result, output)
    if result.get("type") == "object":
        result.setdefault("properties", {})
    return result


def _untype_nested_objects(node: Any, root: bool = False) -> None:
    """In result schemas, `type: object` beside `properties` below the root goes (the properties still
    check every field; our results are model dumps, so those values are always objects)."""
    if isinstance(node, list):
        for item in node:
            _untype_nested_objects(item)
        return
    if not isinstance(node, dict):
        return
    if not root and node.get("type") == "object" and isinstance(node.get("properties"), dict):
        del node["type"]
    for key, value in node.items():
        if key in _MAPS and isinstance(value, dict):
            for child in value.values():
                _untype_nested_objects(child)
        elif isinstance(value, dict | list):
            _untype_nested_objects(value)


def _inline_at_first_use(schema: dict[str, Any]) -> dict[str, Any]:
    """Each `$defs` entry inlined where it is first used; later uses point there (`#/properties/hits/items`).

    Result schemas stay as small as with `$defs` (tools/list tokens), and the values clients check most
    (a search's hits) need no reference lookups: a `$ref` costs validators such as the Python SDK
    client's jsonschema a resolution per value checked (most of the check's time for 10 hits)."""
    defs = schema.get("$defs")
    if not isinstance(defs, dict) or not defs:
        return schema
    body = {key: value for key, value in schema.items() if key != "$defs"}
    placed: dict[str, str] = {}
    result: dict[str, Any] = _place(body, defs, placed, "#", 0)
    return result


def _place(node: Any, defs: dict[str, Any], placed: dict[str, str], pointer: str, depth: int) -> Any:
    if depth > _MAX_DEPTH:
        raise ValueError("schema nests too deeply (a recursive model?)")
    if isinstance(node, list):
        return [_place(item, defs, placed, f"{pointer}/{i}", depth + 1) for i, item in enumerate(node)]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    name = ref.removeprefix("#/$defs/") if isinstance(ref, str) and ref.startswith("#/$defs/") else None
    if name is not None and name in defs:
        if name in placed:
            return {**node, "$ref": placed[name]}
        placed[name] = pointer
        node = {**copy.deepcopy(defs[name]), **{key: value for key, value in node.items() if key != "$ref"}}
    return {key: _place(value, defs, placed, f"{pointer}/{_pointer_part(key)}", depth + 1)
            for key, value in node.items()}


def _pointer_part(key: str) -> str:
    """`key` as one JSON-pointer reference token (RFC 6901)."""
    return key.replace("~", "~0").replace("/", "~1")


def _inline_refs(node: Any, defs: dict[str, Any], depth: int) -> Any:
    """Replace every local `$ref` by a copy of its target (our models are not recursive)."""
    if depth > _MAX_DEPTH:
        raise ValueError("schema nests too deeply (a recursive model?)")
    if isinstance(node, list):
        return [_inline_refs(item, defs, depth + 1) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/") and ref.removeprefix("#/$defs/") in defs:
        target = copy.deepcopy(defs[ref.removeprefix("#/$defs/")])
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return {key: _inline_refs(value, defs, depth + 1) for key, value in node.items()}


def _shape(node: Any, output: bool) -> None:
    """Rewrite one schema node (and everything below it) in place."""
    if not isinstance(node, dict):
        return
    for key in ("title", "default", "$schema") + (_OUTPUT_ONLY_DOCS if output else _VALIDATION_ONLY):
        node.pop(key, None)
    _split_type_list(node)
    _inclusive_bounds(node)
    _into_branches(node)
    if node == {} and output:
        node.update(copy.deepcopy(ANY_VALUE))
    for key, value in list(node.items()):
        if key in _MAPS and isinstance(value, dict):
            for child in value.values():
                _shape(child, output)
        elif isinstance(value, list) and key in ("anyOf", "oneOf", "allOf", "prefixItems"):
            for child in value:
                _shape(child, output)
        elif isinstance(value, dict) and key in ("items", "additionalProperties", "not", "contains"):
            _shape(value, output)
    if not output:
        _strict_object(node)


def _split_type_list(node: dict[str, Any]) -> None:
    """`type: [X, "null"]` becomes `anyOf: [{type: X, ...}, {type: null}]`."""
    types = node.get("type")
    if not isinstance(types, list):
        return
    if len(types) == 1:
        node["type"] = types[0]
        return
    keep = {k: node.pop(k) for k in ("description",) if k in node}
    rest = {k: node.pop(k) for k in list(node) if k != "type"}
    node.pop("type")
    node["anyOf"] = [{"type": t, **rest} if t != "null" else {"type": "null"} for t in types]
    node.update(keep)


_ANNOTATIONS = {"description", "anyOf", "title", "default", "examples", "$comment"}


def _into_branches(node: dict[str, Any]) -> None:
    """`{anyOf: [X, null], enum: [...]}` (assertions beside a nullable union, which also apply to the
    null) becomes `{anyOf: [{X, enum: [...]}, null]}`: the meaning intended, in one place."""
    options = node.get("anyOf")
    if not isinstance(options, list) or NULL not in options:
        return
    moved = {key: node.pop(key) for key in list(node) if key not in _ANNOTATIONS}
    if moved:
        node["anyOf"] = [option if option == NULL else {**option, **moved} for option in options]


def _inclusive_bounds(node: dict[str, Any]) -> None:
    """Exclusive bounds become inclusive ones: exact for integers; for numbers the bound itself is
    listed as allowed and the server's validation (unchanged) still rejects it."""
    integer = node.get("type") == "integer"
    for exclusive, inclusive, step, pick in (("exclusiveMinimum", "minimum", 1, max),
                                             ("exclusiveMaximum", "maximum", -1, min)):
        bound = node.pop(exclusive, None)
        if not isinstance(bound, int | float) or isinstance(bound, bool):
            continue
        value = (math.floor(bound) + 1 if step > 0 else math.ceil(bound) - 1) if integer else bound
        node[inclusive] = pick(node[inclusive], value) if inclusive in node else value


def _strict_object(node: dict[str, Any]) -> None:
    """A closed object lists every property as required; optional ones accept null (= default)."""
    properties = node.get("properties")
    if node.get("type") != "object" and not isinstance(properties, dict):
        return
    if "additionalProperties" in node and node["additionalProperties"] is not False:
        return  # an open mapping (dict[str, Any]): left as it is, the strict-mode check reports it
    node["type"] = "object"
    node["additionalProperties"] = False
    properties = node.setdefault("properties", {})
    required = set(node.get("required", []))
    for name, prop in properties.items():
        if name not in required and isinstance(prop, dict) and not accepts_null(prop):
            properties[name] = nullable(prop)
    node["required"] = list(properties)


def accepts_null(schema: dict[str, Any]) -> bool:
    options = schema.get("anyOf")
    return schema.get("type") == "null" or (isinstance(options, list) and NULL in options)


def nullable(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` or null; the description stays on the outside where models read it."""
    inner = {k: v for k, v in schema.items() if k != "description"}
    wrapped: dict[str, Any] = {"anyOf": [inner, dict(NULL)]}
    if "description" in schema:
        wrapped["description"] = schema["description"]
    return wrapped


def compact_schema(node: Any, is_mapping: bool = False, drop: tuple[str, ...] = ("title",),
                   output: bool = False) -> None:
    """Shrink a JSON schema in place without changing what it accepts; keeps tools/list small.

    Always drops pydantic's generated `title`s. For output schemas (`output=True`; clients validate
    results with them, models see the results themselves) also the `description`s and `default`s, and
    `anyOf: [{type: X}, {type: null}]` becomes the equivalent `type: [X, "null"]`. Mapping keys are
    names, not annotations: a property called "title" or "default" is kept.
    """
    if isinstance(node, list):
        for item in node:
            compact_schema(item, False, drop, output)
        return
    if not isinstance(node, dict):
        return
    if not is_mapping:
        for key in (*drop, "default") if output else drop:
            if key in node and (key == "default" or isinstance(node[key], str)):
                del node[key]
        if output:
            _nullable_to_type_list(node)
        else:
            _optional_to_plain(node)
    for key, value in node.items():
        compact_schema(value, not is_mapping and key in ("properties", "$defs", "definitions"), drop, output)


def _nullable_to_type_list(node: dict[str, Any]) -> None:
    options = node.get("anyOf")
    if not (isinstance(options, list) and len(options) == 2 and {"type": "null"} in options):
        return
    other = next(option for option in options if option != {"type": "null"})
    if isinstance(other, dict) and isinstance(other.get("type"), str) and not set(other) & set(node):
        del node["anyOf"]
        node.update(other)
        node["type"] = [other["type"], "null"]


def _optional_to_plain(node: dict[str, Any]) -> None:
    """An optional input `anyOf: [{X}, {type: null}]` with `default: null` becomes plain `X`, omitted when unused.

    The server still accepts an explicit null (pydantic validates the real signature); the listing
    just tells the model to leave the argument out.
    """
    options = node.get("anyOf")
    if "default" not in node or node["default"] is not None:
        return
    if not (isinstance(options, list) and len(options) == 2 and {"type": "null"} in options):
        return
    other = next(option for option in options if option != {"type": "null"})
    if isinstance(other, dict) and not set(other) & (set(node) - {"anyOf", "default"}):
        del node["anyOf"], node["default"]
        node.update(other)


class OmitNone(BaseModel):
    """A result whose unset (None) fields are left out of the output, and so of its output schema."""

    @model_serializer(mode="wrap")
    def _without_nulls(self, handler: SerializerFunctionWrapHandler) -> object:
        return {k: v for k, v in handler(self).items() if v is not None}

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        schema = handler.resolve_ref_schema(handler(core_schema))  # (only ever used as output)
        required = set(schema.get("required", ()))
        for name, prop in schema.get("properties", {}).items():
            options = prop.get("anyOf")
            if name not in required and isinstance(options, list) and {"type": "null"} in options:
                rest = [o for o in options if o != {"type": "null"}]
                del prop["anyOf"]
                prop.update(rest[0] if len(rest) == 1 else {"anyOf": rest})
                prop.pop("default", None)
        return schema
