"""Issue 13: tool schemas every provider accepts, argument checks, MCP logging, per-session tool lists.

All through the SDK's real client against the real server (in memory), full profile.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from agents.strict_schema import ensure_strict_json_schema

from mcp_server import registry
from tests.conftest import MODES, connect

pytestmark = pytest.mark.anyio

# Gemini's function declarations take a subset of OpenAPI 3.0's schema object: these keywords
# (ai.google.dev Schema / Vertex AI Schema reference), plus `additionalProperties: false`, which
# OpenAI's strict mode requires and Google's SDKs accept in parametersJsonSchema. Allow-list.
GEMINI_KEYWORDS = {"type", "format", "title", "description", "nullable", "enum", "maxItems", "minItems",
                   "properties", "required", "minProperties", "maxProperties", "minLength", "maxLength",
                   "pattern", "example", "anyOf", "propertyOrdering", "default", "items", "minimum", "maximum"}
GEMINI_TYPES = {"string", "number", "integer", "boolean", "array", "object", "null"}


def gemini_problems(node: Any, path: str = "$") -> list[str]:
    if not isinstance(node, dict):
        return [f"{path}: not a schema object"]
    problems = [f"{path}: {key}" for key in node if key not in GEMINI_KEYWORDS | {"additionalProperties"}]
    if "additionalProperties" in node and node["additionalProperties"] is not False:
        problems.append(f"{path}: open additionalProperties")
    if "type" in node and node["type"] not in GEMINI_TYPES:
        problems.append(f"{path}: type {node['type']!r}")
    if node.get("format") not in (None, "enum", "date-time"):
        problems.append(f"{path}: format {node['format']!r}")
    for name, child in (node.get("properties") or {}).items():
        problems += gemini_problems(child, f"{path}.{name}")
    if "items" in node:
        problems += gemini_problems(node["items"], f"{path}[]")
    for index, option in enumerate(node.get("anyOf") or []):
        problems += gemini_problems(option, f"{path}|{index}")
    return problems


def walk(node: Any) -> Any:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from walk(value)
    elif isinstance(node, list):
        for item in node:
            yield from walk(item)


async def listed_tools(settings: Any, mode: str = "legacy") -> list[dict[str, Any]]:
    async with connect(settings, mode) as client:
        result = await client.list_tools()
    return [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in result.tools]


async def test_every_input_schema_is_strict_and_inside_gemini_subset(settings: Any) -> None:
    tools = await listed_tools(settings)
    assert len(tools) == len(registry.TOOLS)
    for tool in tools:
        schema = tool["inputSchema"]
        # what the OpenAI Agents SDK does for an MCP tool in strict mode (no fallback): unchanged
        strict = ensure_strict_json_schema(copy.deepcopy(schema), _reject_open_objects=schema != {})
        assert strict == schema, tool["name"]
        assert gemini_problems(schema) == [], (tool["name"], gemini_problems(schema))


async def test_output_schemas_are_portable(settings: Any) -> None:
    for tool in await listed_tools(settings):
        for node in walk(tool.get("outputSchema", {})):
            assert not isinstance(node.get("type"), list), (tool["name"], node)
        properties = tool["outputSchema"]["properties"]
        assert all(value != {} for value in properties.values()), tool["name"]


@pytest.mark.parametrize("mode", MODES)
async def test_unknown_argument_named_with_the_closest_valid_one(settings: Any, mode: str) -> None:
    async with connect(settings, mode) as client:
        result = await client.call_tool("search_documents", {"query": "x", "max_result": 3})
        text = result.content[0].text
        assert result.is_error and "Unknown argument 'max_result'" in text
        assert "Did you mean 'max_results'?" in text and "group_by_document" in text
        # rejected before the approval gate: an extra key never reaches (or rides on) an approval
        write = await client.call_tool("write_file", {"path": "a.txt", "content": "x", "mode": "w"})
        assert write.is_error and "Unknown argument 'mode'" in write.content[0].text
        assert "approval" not in write.content[0].text.lower()


async def test_validation_errors_are_one_short_line_per_problem(settings: Any) -> None:
    async with connect(settings) as client:
        result = await client.call_tool("search_documents", {"query": "", "max_results": 500})
    lines = result.content[0].text.splitlines()
    assert result.is_error and lines[0] == "Invalid arguments for search_documents:"
    assert any(line.startswith("- argument 'max_results': ") and "50" in line for line in lines)
    assert any(line.startswith("- argument 'query': ") for line in lines)
    assert "pydantic" not in result.content[0].text and "validation error" not in result.content[0].text


@pytest.mark.parametrize("mode", MODES)
async def test_null_and_empty_optional_arguments_mean_the_default(settings: Any, workspace: Path,
                                                                  mode: str) -> None:
    (workspace / "notes.txt").write_text("the quick brown fox jumps over the lazy dog\n", encoding="utf-8")
    async with connect(settings, mode) as client:
        status = await client.call_tool("index_status", {"path": ""})
        assert not status.is_error, status.content[0].text
        indexed = await client.call_tool("index_path", {"path": "notes.txt", "recursive": None})
        assert not indexed.is_error, indexed.content[0].text
        strict_call = {"query": "fox", "paths": None, "max_results": None, "offset": None, "group_by_document": None,
                       "use_regex": None, "mode": None, "context_chars": None}
        found = await client.call_tool("search_documents", strict_call)
        assert not found.is_error and found.structured_content["hits"], found.content[0].text
        todos = await client.call_tool("todo_write", {"list_id": None, "todos": [
            {"content": "a", "status": "pending", "priority": None, "active_form": None, "id": None}]})
        assert not todos.is_error and todos.structured_content["items"][0]["priority"] == "medium"


async def test_strict_client_messages_with_null_fields(settings: Any) -> None:
    """A strict-mode model fills every field of the closed message schema, using null for the unused ones."""
    messages = [
        {"role": "user", "content": "What is 2+2?", "name": None, "tool_calls": None, "tool_call_id": None},
        {"role": "assistant", "content": None, "name": None, "tool_call_id": None,
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "calc", "arguments": "{\"x\": 1}"}}]},
        {"role": "tool", "content": "4", "name": None, "tool_calls": None, "tool_call_id": "c1"},
    ]
    async with connect(settings) as client:
        result = await client.call_tool("count_tokens", {"text": None, "messages": messages, "model": None,
                                                         "system": None})
    assert not result.is_error, result.content[0].text
    assert result.structured_content["messages"] == 3


async def test_logging_set_level_and_messages_2025(settings: Any, workspace: Path) -> None:
    (workspace / "good.txt").write_text("fine text\n", encoding="utf-8")
    (workspace / "bad.pdf").write_bytes(b"%PDF-1.4 this is not really a pdf")
    received: list[Any] = []

    async def on_log(params: Any) -> None:
        received.append(params)

    async with connect(settings, "legacy", logging_callback=on_log) as client:
        assert client.server_capabilities.logging is not None
        await client.set_logging_level("warning")
        result = await client.call_tool("index_path", {"path": "."})
        assert not result.is_error and result.structured_content["failed"]
        await client.set_logging_level("error")
        again = await client.call_tool("index_path", {"path": "bad.pdf"})
        assert not again.is_error
    warnings = [p for p in received if p.level == "warning"]
    assert any("bad.pdf" in json.dumps(p.data) for p in warnings), received
    assert len(warnings) == len(received)  # nothing below the chosen level, nothing after "error"


async def test_logging_opt_in_per_request_2026(settings: Any, workspace: Path) -> None:
    (workspace / "bad.pdf").write_bytes(b"%PDF-1.4 broken")
    received: list[Any] = []

    async def on_log(params: Any) -> None:
        received.append(params)

    async with connect(settings, "auto", logging_callback=on_log, log_level="warning") as client:
        result = await client.call_tool("index_path", {"path": "bad.pdf"})
        assert not result.is_error
    assert any("bad.pdf" in json.dumps(p.data) for p in received), received


async def test_approval_events_are_logged_to_the_client(settings: Any) -> None:
    received: list[Any] = []

    async def on_log(params: Any) -> None:
        received.append(params)

    async with connect(settings, "legacy", logging_callback=on_log) as client:
        await client.set_logging_level("info")
        result = await client.call_tool("write_file", {"path": "a.txt", "content": "x"})
        assert result.is_error and "Approval required" in result.content[0].text
    assert any(p.level == "notice" and "write_file" in json.dumps(p.data) for p in received), received


async def test_enable_tools_is_per_session_and_hidden_tools_say_how(make_settings: Any) -> None:
    from mcp.client import Client

    from mcp_server.server import build_server

    server, _ = build_server(make_settings(tool_profile="minimal"))
    async with Client(server, mode="legacy") as first, Client(server, mode="legacy") as second:
        hidden = await first.call_tool("list_workspace_files", {})
        assert hidden.is_error and "enable_tools([\"list_workspace_files\"])" in hidden.content[0].text
        assert "'full' profile" in hidden.content[0].text
        enabled = await first.call_tool("enable_tools", {"names": ["list_workspace_files"]})
        assert enabled.structured_content["enabled"] == ["list_workspace_files"]
        assert "list_workspace_files" in {t.name for t in (await first.list_tools()).tools}
        assert "list_workspace_files" not in {t.name for t in (await second.list_tools()).tools}
        assert not (await first.call_tool("list_workspace_files", {})).is_error
        assert (await second.call_tool("list_workspace_files", {})).is_error
        unknown = await first.call_tool("list_workspace_file", {})
        assert "Did you mean 'list_workspace_files'?" in unknown.content[0].text
    tools = {t.name: t for t in await server.list_tools()}
    assert tools["enable_tools"].annotations is not None
    assert tools["enable_tools"].annotations.read_only_hint is False


async def test_llm_tools_say_when_no_llm_is_configured(make_settings: Any) -> None:
    without = {t["name"]: t for t in await listed_tools(make_settings())}
    assert without["delegate_task"]["description"].startswith("Unavailable: no LLM endpoint is configured.")
    assert without["compact_context"]["description"].startswith("No LLM endpoint is configured")
    configured = make_settings(llm_base_url="http://127.0.0.1:9/v1", llm_model="m")
    with_llm = {t["name"]: t for t in await listed_tools(configured)}
    assert "LLM endpoint" not in with_llm["delegate_task"]["description"].splitlines()[0]


def test_doctor_and_serve_say_what_is_missing(tmp_path: Path) -> None:
    from tests.test_cli import run

    doctor = run(tmp_path, "doctor")
    assert "no LLM endpoint is configured, so delegate_task is unavailable and compact_context truncates" \
        in doctor.stdout
    missing = tmp_path / "no-such-folder"
    served = run(tmp_path, "--root", str(missing), "serve")  # stdin closed at once: serves nothing, exits
    assert served.returncode == 0, served.stderr
    assert f"warning: the configured root {missing} does not exist" in served.stderr
    assert "no LLM endpoint is configured" in served.stderr
