"""tools/list size (cl100k tokens) and the schema compaction behind it."""

from __future__ import annotations

from bench.tools_list_tokens import TARGET_DEFAULT, measure


def test_tools_list_token_figures(capsys: object) -> None:
    """Prints the figures; the 5,000-token target of the default profile is tracked by the bench
    (bench/tools_list_tokens.py, run by scripts/bench.sh)."""
    minimal, _, _ = measure("minimal")
    total, count, per_tool = measure("default")
    print(f"tools/list: minimal {minimal} tokens; default {count} tools, {total} tokens (cl100k_base); "
          f"largest {per_tool[:3]}")
    assert minimal < total <= TARGET_DEFAULT  # the default profile's listing stays small (deterministic count)


def test_optional_inputs_are_listed_without_the_null_arm() -> None:
    from foundation.schemas import compact_schema

    schema = {"type": "object", "properties": {
        "q": {"anyOf": [{"type": "string", "maxLength": 5}, {"type": "null"}], "default": None, "description": "Q."},
        "n": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": 3},
    }}
    compact_schema(schema)
    assert schema["properties"]["q"] == {"type": "string", "maxLength": 5, "description": "Q."}
    assert "anyOf" in schema["properties"]["n"]  # a non-null default keeps its exact schema


def test_compact_schema_keeps_names_and_structure() -> None:
    from foundation.schemas import compact_schema

    schema = {
        "title": "Args", "type": "object", "required": ["title"],
        "properties": {
            "title": {"title": "Title", "type": "string", "description": "A field called title."},
            "items": {"type": "array", "items": {"$ref": "#/$defs/Item"}, "description": "d"},
        },
        "$defs": {"Item": {"title": "Item", "description": "One item.", "type": "object",
                           "properties": {"description": {"type": "string", "title": "Description"}}}},
    }
    compact_schema(schema)
    assert "title" not in schema and schema["properties"]["title"] == {"type": "string",
                                                                     "description": "A field called title."}
    assert schema["$defs"]["Item"]["description"] == "One item."
    compact_schema(schema, drop=("title", "description"))
    assert schema["properties"]["title"] == {"type": "string"} and schema["required"] == ["title"]
    assert schema["$defs"]["Item"]["properties"] == {"description": {"type": "string"}}


def test_compact_output_schema_accepts_the_same_values() -> None:
    import jsonschema

    from foundation.schemas import compact_schema

    schema = {
        "type": "object", "required": ["a"],
        "properties": {
            "a": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None, "description": "A."},
            "default": {"type": "integer", "default": 3},
            "b": {"anyOf": [{"$ref": "#/$defs/B"}, {"type": "null"}]},
        },
        "$defs": {"B": {"type": "object", "properties": {"x": {"type": "integer"}}}},
    }
    compact_schema(schema, drop=("title", "description"), output=True)
    assert schema["properties"]["a"] == {"type": ["string", "null"]}
    assert schema["properties"]["default"] == {"type": "integer"}  # a property called "default" stays
    assert "anyOf" in schema["properties"]["b"]  # only simple types are folded
    for value in ({"a": None, "default": 1, "b": None}, {"a": "x", "b": {"x": 2}}):
        jsonschema.validate(value, schema)
    try:
        jsonschema.validate({"a": 5}, schema)
    except jsonschema.ValidationError:
        pass
    else:
        raise AssertionError("a number must still be rejected")
