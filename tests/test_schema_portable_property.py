"""portable_schema never makes a client reject what the server accepts (property-based).

Random schemas in the shapes pydantic emits (objects with optional properties, `$defs`/`$ref`,
exclusive bounds, `type` lists, nullable unions with enums, string lengths) and random values valid
under them: every valid input, with the optional arguments a strict client leaves unused sent as
null, is valid under the portable input schema; every valid result is valid under the portable
output schema. And the portable schemas use no keyword outside the portable subset.
"""

from __future__ import annotations

from typing import Any

import jsonschema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foundation.schemas import portable_schema

NAMES = st.sampled_from(["a", "b", "c", "title", "default", "required", "items"])


def scalar_schemas() -> st.SearchStrategy[dict[str, Any]]:
    return st.one_of(
        st.integers(-5, 5).map(lambda n: {"type": "integer", "exclusiveMinimum": n}),
        st.integers(-5, 5).map(lambda n: {"type": "integer", "exclusiveMaximum": n, "minimum": n - 20}),
        st.floats(0, 1).map(lambda x: {"type": "number", "exclusiveMinimum": x, "maximum": x + 5}),
        st.integers(1, 8).map(lambda n: {"type": "string", "maxLength": n, "minLength": 1}),
        st.just({"type": ["string", "null"]}),
        st.just({"anyOf": [{"type": "string"}, {"type": "null"}], "enum": ["x", "y", None]}),
        st.just({"type": "boolean", "default": False, "title": "Flag"}),
    )


def schemas() -> st.SearchStrategy[dict[str, Any]]:
    def extend(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
        objects = st.dictionaries(NAMES, children, min_size=1, max_size=3).flatmap(
            lambda props: st.sets(st.sampled_from(sorted(props))).map(
                lambda req: {"type": "object", "properties": props, "required": sorted(req), "title": "M"}))
        arrays = children.map(lambda item: {"type": "array", "items": item, "description": "list"})
        return st.one_of(objects, arrays)

    return st.recursive(scalar_schemas(), extend, max_leaves=6)


def with_defs(schema: dict[str, Any], shared: bool = False) -> dict[str, Any]:
    """Move the first nested object into `$defs` behind a `$ref`, as pydantic does for models; `shared`:
    a second property (a list of them, under a name a JSON pointer must escape) refers to it too."""
    for name, prop in (schema.get("properties") or {}).items():
        if isinstance(prop, dict) and prop.get("type") == "object":
            props = {**schema["properties"], name: {"$ref": "#/$defs/Inner"}}
            if shared:  # first, so that the other use points into it
                props = {TWIN: {"type": "array", "items": {"$ref": "#/$defs/Inner"}}, **props}
            return {**schema, "properties": props, "$defs": {"Inner": prop}}
    return schema


TWIN = "twin/~0"


def value_for(schema: dict[str, Any], data: st.DataObject) -> Any:
    if "$ref" in schema:
        raise AssertionError("values are drawn from inlined schemas")
    kind = schema.get("type")
    if "anyOf" in schema:
        return data.draw(st.sampled_from(schema["enum"]))
    if isinstance(kind, list):
        return data.draw(st.one_of(st.none(), st.text(max_size=3)))
    if kind == "integer":
        low = schema.get("exclusiveMinimum", schema.get("minimum", -30) - 1) + 1
        high = schema.get("exclusiveMaximum", 31) - 1
        return data.draw(st.integers(low, high))
    if kind == "number":
        return data.draw(st.floats(schema["exclusiveMinimum"], schema["maximum"], exclude_min=True))
    if kind == "string":
        return data.draw(st.text(min_size=1, max_size=schema["maxLength"]))
    if kind == "boolean":
        return data.draw(st.booleans())
    if kind == "array":
        return [value_for(schema["items"], data) for _ in range(data.draw(st.integers(0, 2)))]
    present = [n for n in schema["properties"] if n in schema["required"] or data.draw(st.booleans())]
    return {name: value_for(schema["properties"][name], data) for name in present}


def as_strict_client_sends(value: Any, schema: dict[str, Any]) -> Any:
    """Every property present; the ones left out become null."""
    if isinstance(value, list):
        return [as_strict_client_sends(item, schema["items"]) for item in value]
    if isinstance(value, dict):
        props = schema["properties"]
        return {name: as_strict_client_sends(value[name], props[name]) if name in value else None for name in props}
    return value


def inline(schema: dict[str, Any]) -> dict[str, Any]:
    defs = schema.get("$defs", {})

    def resolved(node: Any) -> Any:
        if isinstance(node, list):
            return [resolved(item) for item in node]
        if not isinstance(node, dict):
            return node
        if node == {"$ref": "#/$defs/Inner"}:
            return resolved(defs["Inner"])
        return {key: resolved(value) for key, value in node.items() if key != "$defs"}

    result: dict[str, Any] = resolved(schema)
    return result


ALLOWED_INPUT = {"type", "description", "enum", "properties", "required", "anyOf", "items", "minimum", "maximum",
                 "additionalProperties"}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(root=st.dictionaries(NAMES, schemas(), min_size=1, max_size=4), data=st.data())
def test_portable_schemas_accept_what_the_server_accepts(root: dict[str, Any], data: st.DataObject) -> None:
    required = sorted(data.draw(st.sets(st.sampled_from(sorted(root)))))
    original = with_defs({"type": "object", "properties": root, "required": required}, data.draw(st.booleans()))
    plain = inline(original)
    jsonschema.Draft202012Validator.check_schema(original)
    value = value_for(plain, data)
    jsonschema.validate(value, original)

    portable_in = portable_schema(original)
    jsonschema.validate(as_strict_client_sends(value, plain), portable_in)
    portable_out = portable_schema(original, output=True)
    jsonschema.validate(value, portable_out)
    assert "$defs" not in portable_out  # inlined at the first use, later uses point there
    for node in _nodes(portable_out):
        if "$ref" in node:
            assert isinstance(pointed(portable_out, node["$ref"]), dict), node

    for node in _nodes(portable_in):
        assert set(node) <= ALLOWED_INPUT, node
        assert not isinstance(node.get("type"), list) and node.get("additionalProperties", False) is False
    for node in _nodes(portable_out):
        assert not isinstance(node.get("type"), list) and "exclusiveMinimum" not in node


def pointed(schema: dict[str, Any], ref: str) -> Any:
    """The node a local JSON pointer (`#/a/b~1c/0`) names (KeyError/IndexError when none)."""
    node: Any = schema
    for part in ref.removeprefix("#/").split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def _nodes(schema: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    if isinstance(schema, dict):
        found.append(schema)
        for key, value in schema.items():
            children = value.values() if key in ("properties", "$defs") and isinstance(value, dict) else [value]
            for child in children:
                found += _nodes(child) if isinstance(child, dict) else [
                    n for item in (child if isinstance(child, list) else []) for n in _nodes(item)]
    return found
