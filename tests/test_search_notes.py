"""Search results say why nothing was found, and what they do not search (through the real client)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import MODES, connect

pytestmark = [pytest.mark.anyio, pytest.mark.storage]


async def call(client: Any, name: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(name, args)
    assert not result.is_error, result.content[0].text
    return result.structured_content  # type: ignore[no-any-return]


def fill(workspace: Path) -> None:
    for folder in ("a", "b"):
        (workspace / folder).mkdir()
        (workspace / folder / "notes.md").write_text(f"# {folder}\n\nthe quokka lives in {folder}\n", encoding="utf-8")


@pytest.mark.parametrize("mode", MODES)
async def test_no_matches_notes(settings: Any, workspace: Path, mode: str) -> None:
    fill(workspace)
    async with connect(settings, mode) as client:
        await call(client, "index_path", {"path": "."})
        stop = await call(client, "search_documents", {"query": "what is the"})
        assert stop["hits"] == [] and "stop words" in stop["note"]
        past = await call(client, "search_documents", {"query": "quokka", "offset": 5})
        assert past["hits"] == [] and "past the last result" in past["note"]
        none = await call(client, "search_documents", {"query": "wombat"})
        assert "No matches" in none["note"] and "outside" not in none["note"]
        found = await call(client, "search_documents", {"query": "quokka"})
        assert "note" not in found or found["note"] is None
        lines = await call(client, "search_file", {"path": "a/notes.md", "query": "quokka"})
        assert lines["hits"][0]["path"] == "a/notes.md" and lines["hits"][0]["line"] == 3
        assert "doc_id" in lines["hits"][0] and "page" not in lines["hits"][0]


async def test_indexed_files_outside_the_roots_are_named(make_settings: Any, workspace: Path) -> None:
    fill(workspace)
    async with connect(make_settings(), "legacy") as client:
        await call(client, "index_path", {"path": "."})
    narrower = make_settings(roots=[workspace / "a"])
    async with connect(narrower, "legacy") as client:
        found = await call(client, "search_documents", {"query": "quokka"})
        assert [h["path"] for h in found["hits"]] == ["notes.md"]
        assert "1 indexed file lies outside the workspace roots" in found["note"]
        scoped = await call(client, "search_documents", {"query": "quokka", "paths": ["notes.md"]})
        assert scoped.get("note") is None
