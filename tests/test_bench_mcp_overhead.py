"""bench.mcp_overhead's raw JSON-RPC client (the server's cost without the SDK client's), on a tiny index."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import mcp_overhead
from indexing.indexer import analyze_chunks
from indexing.model import Chunk

TEXTS = ["The quarterly report covers revenue and costs.", "Meeting notes: the launch moves to May.",
         "Installation guide for the search server.", "Travel expenses are refunded within a month."]
QUERIES = ["quarterly revenue", "launch date", "search server installation", "travel refund"]


def test_raw_rows_for_our_server_the_plain_pipe_and_the_bare_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data, ws = tmp_path / "data", tmp_path / "ws"
    mcp_overhead.build_index(data, ws, analyze_chunks([Chunk(0, 0, len(text), text) for text in TEXTS]), 60)
    server_env, wait, searches = mcp_overhead.server_env, mcp_overhead.wait_for_postings_raw, []

    def waited(client: mcp_overhead.RawClient, queries: list[str]) -> None:
        wait(client, queries)
        searches.append(client.call_tool("index_status", {})["structuredContent"]["search"])

    monkeypatch.setattr(mcp_overhead, "WARM_UP", 2)
    monkeypatch.setattr(mcp_overhead, "server_env",  # the postings kept in memory even for 60 chunks
                        lambda *a: server_env(*a) | {"GENERALAGENT_SEARCH_MEMORY_MIN_CHUNKS": "1"})
    monkeypatch.setattr(mcp_overhead, "wait_for_postings_raw", waited)
    rows = mcp_overhead.over_raw(data, ws, QUERIES, 4)
    assert searches == ["in memory", "in memory"]  # the wait's phrase is still index_status's (both eras)
    ours = (mcp_overhead.RAW, mcp_overhead.RAW_MODERN, mcp_overhead.BARE_RAW)
    assert list(rows) == [*(f"search: {label}" for label in ours), f"search: {mcp_overhead.PLAIN}",
                          f"search: {mcp_overhead.FN_HERE}", *(f"todo_read: {label}" for label in ours)]
    assert all(p50 > 0 and p95 >= p50 and cpu >= 0 for p50, p95, cpu in rows.values())
    rows["search: the tool function"] = (1.0, 1.0, 1.0)
    over_plain, over_floor = mcp_overhead.floor_lines(rows)
    assert "MCP over the plain pipe" in over_plain and "Server overhead over the SDK floor" in over_floor


@pytest.fixture
def tiny_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    data, ws = tmp_path / "data", tmp_path / "ws"
    mcp_overhead.build_index(data, ws, analyze_chunks([Chunk(0, 0, len(text), text) for text in TEXTS]), 60)
    server_env = mcp_overhead.server_env
    monkeypatch.setattr(mcp_overhead, "WARM_UP", 2)
    monkeypatch.setattr(mcp_overhead, "server_env",  # the postings kept in memory even for 60 chunks
                        lambda *a: server_env(*a) | {"GENERALAGENT_SEARCH_MEMORY_MIN_CHUNKS": "1"})
    return data, ws


def test_third_party_rows(tiny_index: tuple[Path, Path]) -> None:
    rows = mcp_overhead.over_third_party(*tiny_index, QUERIES, 4)
    assert list(rows) == [f"search: {mcp_overhead.AGENTS}", f"search: {mcp_overhead.PYDANTIC_AI}"]
    assert all(p50 > 0 and p95 >= p50 and cpu >= 0 for p50, p95, cpu in rows.values())
