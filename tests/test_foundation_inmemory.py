"""The wiring end to end through the real SDK client, in both protocol eras."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from foundation.bounding import dumps, estimate_tokens
from foundation.errors import InvalidInput
from foundation.toolspec import ToolSpec
from mcp_server import registry
from mcp_server.dispatch import Dispatcher
from tests.conftest import MODES, connect
from tests.json_strategies import json_values
from tools.runtime import Runtime

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("mode", MODES)
async def test_list_and_call_now(settings: Any, mode: str) -> None:
    async with connect(settings, mode) as client:
        assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        now = tools["now"]
        assert now.annotations is not None and now.annotations.read_only_hint is True
        assert now.output_schema is not None and "utc" in now.output_schema["properties"]
        result = await client.call_tool("now", {})
        assert not result.is_error
        assert result.structured_content["utc"].endswith("Z")
        assert json.loads(result.content[0].text) == result.structured_content


@pytest.mark.parametrize("mode", MODES)
async def test_every_tool_is_described(settings: Any, mode: str) -> None:
    async with connect(settings.model_copy(update={"tool_profile": "full"}), mode) as client:
        for tool in (await client.list_tools()).tools:
            assert tool.description and len(tool.description) < 1200, tool.name
            assert tool.annotations is not None, tool.name
            assert tool.output_schema is not None, tool.name
            for name, prop in tool.input_schema.get("properties", {}).items():
                assert prop.get("description"), f"{tool.name}.{name} has no description"


def _boom() -> Any:
    """Always crashes."""
    raise ZeroDivisionError("division by zero")


def _huge() -> Any:
    """Returns far too much."""
    from pydantic import BaseModel

    class Big(BaseModel):
        items: list[str]

    return Big(items=["x" * 500 + str(i) for i in range(2000)])


async def test_crash_becomes_clear_error_and_server_survives(settings: Any, monkeypatch: Any) -> None:
    spec = ToolSpec(_boom, title="Boom", read_only=True, name_override="boom")
    monkeypatch.setattr(registry, "TOOLS", [*registry.TOOLS, spec])
    async with connect(settings) as client:
        result = await client.call_tool("boom", {})
        assert result.is_error
        assert "Internal error in boom" in result.content[0].text
        assert "ZeroDivisionError" in result.content[0].text
        assert not (await client.call_tool("now", {})).is_error


async def test_results_are_bounded(settings: Any) -> None:
    dispatcher = Dispatcher(Runtime(settings), [ToolSpec(_huge, title="Huge", read_only=True)])
    from foundation.calls import CallOrigin

    result = await dispatcher.run("_huge", {}, CallOrigin())
    data, text = dispatcher.bounded_payload(result)
    assert estimate_tokens(text) <= settings.max_result_tokens
    assert data["truncated"] is True and "offset" in data["note"]
    assert 0 < len(data["items"]) < 2000


async def test_subagent_style_validation_names_the_problem(settings: Any) -> None:
    from foundation.toolspec import validate_arguments

    spec = ToolSpec(lambda: None, title="x", read_only=True, name_override="x")
    with pytest.raises(InvalidInput, match="Unknown argument .nope."):
        validate_arguments(spec, {"nope": 1})


class _Loose(BaseModel):
    name: str
    score: float | None = None
    items: list[Any] = []
    extra: dict[str, Any] = {}


_values = json_values(max_leaves=40)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=st.text(), score=st.none() | st.floats(allow_nan=False, allow_infinity=False),
       items=st.lists(_values, max_size=60), extra=st.dictionaries(st.text(max_size=8), _values, max_size=5),
       limit=st.sampled_from([500, 2_000, 20_000]))
def test_a_payload_is_the_models_json_and_its_text_or_shrunk_to_fit(
        settings: Any, name: str, score: float | None, items: list[Any], extra: dict[str, Any], limit: int) -> None:
    """bounded_payload: the structured content is what model_dump(mode="json") gives and the text its JSON,
    when it fits the limit; else a shrunk copy marked truncated, within the limit (any JSON in any field)."""
    result = _Loose(name=name, score=score, items=items, extra=extra)
    dispatcher = Dispatcher(Runtime(settings.model_copy(update={"max_result_tokens": limit})), [])
    data, text = dispatcher.bounded_payload(result)
    assert text == dumps(data)
    if estimate_tokens(dumps(result.model_dump(mode="json"))) <= limit:
        assert data == result.model_dump(mode="json") and dispatcher.bounded_text(result) == text
    else:
        assert data["truncated"] is True and dispatcher.bounded_text(result) is None


def test_a_payload_nested_deeper_than_json_parsing_allows_is_still_answered(settings: Any) -> None:
    """pydantic-core writes JSON nested deeper (to ~254) than it parses (200): the structured content is then
    the model's own dump, the text unchanged."""
    deep: Any = "bottom"
    for _ in range(220):
        deep = [deep]
    result = _Loose(name="deep", items=[deep])
    data, text = Dispatcher(Runtime(settings), []).bounded_payload(result)
    assert text == result.model_dump_json() and data == result.model_dump(mode="json")


@given(st.lists(st.integers(), max_size=40), st.integers(0, 50), st.integers(1, 20))
def test_pages_of_items_cover_each_item_once_in_order(items: list[int], start: int, limit: int) -> None:
    """Following next_offset from any start yields every item from there exactly once, in order."""
    from foundation.bounding import page_of

    seen: list[int] = []
    offset: int | None = start
    while offset is not None:
        page, offset = page_of(items, offset, limit)
        assert len(page) <= limit and (offset is None or page)
        seen += page
    assert seen == items[start:]


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.text(max_size=400), st.integers(0, 400), st.integers(1, 300), st.integers(1, 60))
def test_text_pages_fit_their_budget_and_lose_nothing(text: str, start: int, max_chars: int, budget: int) -> None:
    """Each text page is at most max_chars, within the token budget once JSON-escaped (or one character),
    and the pages joined are the text."""
    from foundation.bounding import next_offset, text_page_end

    start = min(start, len(text))
    parts: list[str] = []
    offset: int | None = start
    while offset is not None and offset < len(text):
        end = text_page_end(text, offset, max_chars, budget)
        page = text[offset:end]
        assert 1 <= len(page) <= max_chars
        assert len(page) == 1 or estimate_tokens(dumps(page)) <= budget
        parts.append(page)
        offset = next_offset(end, len(text))
    assert "".join(parts) == text[start:]
