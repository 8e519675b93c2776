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
    assert minimal < 4 * TARGET_DEFAULT and total < 4 * TARGET_DEFAULT  # sanity bound (a schema explosion)


def test_compact_schema_keeps_names_and_structure() -> None:
    from mcp_server.server import compact_schema

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
