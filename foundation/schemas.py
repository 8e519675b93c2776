"""JSON schema shaping shared by tools/list and the sub-agent's function schemas."""

from __future__ import annotations

from typing import Any


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
