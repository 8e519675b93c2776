"""The document tools through the real SDK client (in memory), in both protocol eras."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.conftest import MODES, connect
from tests.docgen import Heading, Slide, make_docx, make_pdf, make_pptx, make_xlsx
from tests.index_sql import index_sql

pytestmark = [pytest.mark.anyio, pytest.mark.storage]

DOC_TOOLS = {"search_documents", "search_file", "index_path", "index_status", "remove_from_index", "cleanup_index"}


def fill(workspace: Path) -> None:
    docs = workspace / "docs"
    docs.mkdir()
    make_docx(docs / "report.docx", [Heading("Quarterly report"), "Q3营收增长率达到15%，客户数量增加。", "Baselines held."])
    make_pdf(docs / "paper.pdf", [["Sailing boats and running experiments."], ["第二页：营收分析。"]])
    make_xlsx(docs / "data.xlsx", {"Sales": [["Name", "Amount"], ["客户甲", 10], ["Customer Bravo", 20]]})
    make_pptx(docs / "deck.pptx", [Slide("Roadmap", ["Launch the café product"], notes="revenue growth")])
    (docs / "notes.md").write_text("# Notes\n\nline one\nthe baseline is here\nline three\n", encoding="utf-8")
    (docs / "broken.pdf").write_bytes(b"garbage")


async def call(client: Any, name: str, args: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    result = await client.call_tool(name, args, **kwargs)
    assert not result.is_error, result.content[0].text
    return result.structured_content  # type: ignore[no-any-return]


@pytest.mark.parametrize("mode", MODES)
async def test_index_search_status_remove(make_settings: Any, workspace: Path, mode: str) -> None:
    settings = make_settings(search_memory_min_chunks=1)  # keep even this small index in memory
    fill(workspace)
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with connect(settings, mode) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) >= DOC_TOOLS
        assert tools["search_documents"].annotations.read_only_hint is True
        assert tools["remove_from_index"].annotations.destructive_hint is True

        empty = await client.call_tool("search_documents", {"query": "x"})
        assert empty.is_error and "index_path" in empty.content[0].text

        report = await call(client, "index_path", {"path": "docs"}, progress_callback=on_progress)
        assert report["indexed"] == 5 and report["failed"][0]["path"] == "docs/broken.pdf"
        assert seen and seen[-1][0] == seen[-1][1] == 6

        found = await call(client, "search_documents", {"query": "营收"})
        assert {h["path"] for h in found["hits"]} == {"docs/report.docx", "docs/paper.pdf"}
        assert all(h["score"] > 0 and h["doc_id"] and h["end"] > h["start"] for h in found["hits"])
        pdf_hit = next(h for h in found["hits"] if h["path"] == "docs/paper.pdf")
        assert pdf_hit["page"] == 2
        cafe = await call(client, "search_documents", {"query": "cafe", "paths": ["*.pptx"]})
        assert [h["slide"] for h in cafe["hits"]] == [1]
        grouped = await call(client, "search_documents", {"query": "客户 baseline", "group_by_document": True})
        assert grouped["documents"][0]["path"] == "docs/report.docx" and grouped["documents"][0]["matched_chunks"]
        regex = await call(client, "search_documents", {"query": r"增长率达到\d+%", "use_regex": True})
        assert regex["hits"][0]["match"] == "增长率达到15%"
        bad = await client.call_tool("search_documents", {"query": "x AND (", "mode": "fts"})
        assert bad.is_error and "e.g." in bad.content[0].text
        slow = await client.call_tool("search_documents", {"query": "(a|aa)+$", "use_regex": True, "paths": ["docs"]})
        assert not slow.is_error  # no long run of a's here: quick, no matches

        lines = await call(client, "search_file", {"path": "docs/notes.md", "query": "baselines"})
        assert lines["searched"] == "lines" and lines["hits"][0]["line"] == 4
        assert lines["hits"][0]["before"] == "line one" and lines["hits"][0]["after"] == "line three"
        xlsx = await call(client, "search_file", {"path": "docs/data.xlsx", "query": "Bravo"})
        assert xlsx["hits"][0]["sheet"] == "Sales"

        status = await call(client, "index_status", {})
        assert status["files"] == 6 and status["failed_files"] == 1 and status["documents"] == 5
        with anyio.move_on_after(60):  # searches built the in-memory postings in the background
            while status["search"] != "in memory":
                await anyio.sleep(0.05)
                status = await call(client, "index_status", {})
        assert status["search"] == "in memory"
        fast = await call(client, "search_documents", {"query": "Q3营收增长率"})
        assert fast["hits"][0]["path"] == "docs/report.docx"
        one = await call(client, "index_status", {"path": "docs/report.docx"})
        assert one["path_status"]["indexed"] and one["path_status"]["fresh"] and one["path_status"]["chunks"] >= 1

        again = await call(client, "index_path", {"path": "docs"})
        assert again["unchanged"] == 5 and again["indexed"] == 0

        removed = await call(client, "remove_from_index", {"path": "docs/report.docx"})
        assert removed["removed_paths"] == 1 and removed["removed_documents"] == 1
        (workspace / "docs" / "notes.md").unlink()
        cleaned = await call(client, "cleanup_index", {})
        assert cleaned["examples"] == ["docs/notes.md"]

        outside = await client.call_tool("index_path", {"path": "/etc"})
        assert outside.is_error and "not allowed" in outside.content[0].text


async def test_cleanup_old_entries_and_paging(settings: Any, workspace: Path) -> None:
    import os
    import time

    for i in range(30):
        (workspace / f"n{i:02d}.md").write_text(f"# Note {i}\n\nshared lighthouse keeper {i}\n", encoding="utf-8")
    async with connect(settings) as client:
        await call(client, "index_path", {"path": "."})
        first = await call(client, "search_documents", {"query": "lighthouse", "max_results": 20})
        rest = await call(client, "search_documents", {"query": "lighthouse", "max_results": 20, "offset": 20})
        assert first["next_offset"] == 20 and rest["next_offset"] is None
        assert len(first["hits"]) + len(rest["hits"]) == 30
        old = time.time() - 10 * 86400
        index_sql(settings, "UPDATE files SET indexed_at = ? WHERE path LIKE ?", (old, "%n0_.md"))
        cleaned = await call(client, "cleanup_index", {"missing_files": False, "older_than_days": 5})
        assert cleaned["removed_paths"] == 10 and cleaned["removed_documents"] == 10
        status = await call(client, "index_status", {"path": "."})
        assert status["files"] == 20 and status["path_status"]["files"] == 20
        os.utime(workspace / "n29.md", (time.time(), time.time() + 5))
        status = await call(client, "index_status", {"path": "."})
        assert status["path_status"]["stale"] == 1 and status["path_status"]["fresh"] is False


async def test_damaged_index_is_moved_aside(settings: Any, workspace: Path, backend: str) -> None:
    if backend != "sqlite":
        pytest.skip("a damaged index file is SQLite's case")
    (workspace / "a.md").write_text("hello lighthouse\n", encoding="utf-8")
    (settings.data_dir / "index.sqlite3").write_bytes(b"this is not a database" * 100)
    async with connect(settings) as client:
        report = await call(client, "index_path", {"path": "."})
        assert report["indexed"] == 1
        found = await call(client, "search_documents", {"query": "lighthouse"})
        assert [h["path"] for h in found["hits"]] == ["a.md"]
    assert any(p.name.startswith("index.sqlite3.damaged-") for p in settings.data_dir.iterdir())


async def test_search_file_applies_the_configured_file_limits(make_settings: Any, workspace: Path) -> None:
    (workspace / "notes.txt").write_text("revenue grew in Q3\n" * 20)
    async with connect(make_settings(max_file_bytes=100)) as client:
        result = await client.call_tool("search_file", {"path": "notes.txt", "query": "revenue"})
    assert result.is_error and "notes.txt" in result.content[0].text


async def test_search_inside_a_large_file_is_not_quadratic(make_settings: Any, workspace: Path, backend: str) -> None:
    """A search inside one file of many chunks (search_file on a large file, or search_documents(paths=)),
    whose word is better matched in another file: the scoped FTS5 query scans the word's postings once
    (a 16 MB log took over three minutes: one scan of the postings per chunk of the file)."""
    settings = make_settings(chunk_max_chars=50, chunk_overlap_chars=0, chunk_min_chars=0)
    (workspace / "dense.txt").write_text("heron heron heron heron.\n\n" * 400, encoding="utf-8")
    (workspace / "log.txt").write_text("".join(f"entry {i} saw a heron today.\n\n" for i in range(24_000)),
                                       encoding="utf-8")
    async with connect(settings) as client:
        await call(client, "index_path", {"path": "."})
        with anyio.fail_after(10):  # under a second; half a minute when each chunk in scope rescanned the postings
            found = await call(client, "search_documents", {"query": "heron", "paths": ["log.txt"], "max_results": 3})
    assert [h["path"] for h in found["hits"]] == ["log.txt"] * 3


def heronry(workspace: Path, small: int = 50) -> None:
    """One file of 400 chunks saying 'heron' four times each (they fill the best chunks) and `small`
    files saying it once."""
    (workspace / "dense.txt").write_text("heron heron heron heron.\n\n" * 400, encoding="utf-8")
    for i in range(small):
        (workspace / f"s{i:02d}.txt").write_text(f"note {i}: a heron stood by the lake today.\n", encoding="utf-8")


async def grouped_pages(client: Any, query: str, per_page: int) -> list[dict[str, Any]]:
    """Every page of a grouped search, following next_offset."""
    pages = [await call(client, "search_documents", {"query": query, "group_by_document": True, "max_results": per_page})]
    while pages[-1]["next_offset"] is not None:
        pages.append(await call(client, "search_documents", {
            "query": query, "group_by_document": True, "max_results": per_page, "offset": pages[-1]["next_offset"]}))
    return pages


async def in_memory(client: Any) -> None:
    """Wait until searches use the in-memory postings (built in the background after a first search)."""
    await call(client, "search_documents", {"query": "heron"})
    with anyio.move_on_after(60):  # about a second; a loaded machine may take several
        while (await call(client, "index_status", {}))["search"] != "in memory":
            await anyio.sleep(0.05)
        return
    raise AssertionError("the in-memory postings were not built within 60 s")


@pytest.mark.parametrize("memory", [False, True], ids=["database", "memory"])
async def test_grouped_search_reaches_past_one_large_file(make_settings: Any, workspace: Path, memory: bool) -> None:
    """When the best chunks all come from one long file, the grouped search looks further down until the
    page is full: every file that holds the word is found, each once, and next_offset says there is more
    (it said null after one document: only the best ~250 chunks, all of the long file, were grouped).
    Both engines: the database's and the in-memory postings."""
    heronry(workspace)
    settings = make_settings(chunk_max_chars=50, chunk_overlap_chars=0, chunk_min_chars=0,
                             search_memory_min_chunks=1 if memory else 2_000)  # 450 chunks here
    async with connect(settings) as client:
        await call(client, "index_path", {"path": "."})
        if memory:
            await in_memory(client)
        first = await call(client, "search_documents", {"query": "heron", "group_by_document": True, "max_results": 50})
        assert len(first["documents"]) == 50 and first["next_offset"] == 50 and first["note"] is None
        assert first["documents"][0]["path"] == "dense.txt"
        pages = await grouped_pages(client, "heron", 7)
    paths = [d["path"] for page in pages for d in page["documents"]]
    assert len(paths) == len(set(paths)) == 51  # no file repeated or skipped across pages
    assert [d["path"] for d in first["documents"]] == paths[:50]


async def test_grouped_search_says_when_its_pool_ran_out(
    make_settings: Any, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When even the largest pool of chunks holds too few documents, the page says that more may match
    and how to reach them, instead of next_offset null alone (which claims the end)."""
    import indexing.search

    monkeypatch.setattr(indexing.search, "MAX_DOCUMENT_POOL", 300)  # a pool of 255 chunks cannot double
    heronry(workspace, small=5)
    async with connect(make_settings(chunk_max_chars=50, chunk_overlap_chars=0, chunk_min_chars=0)) as client:
        await call(client, "index_path", {"path": "."})
        found = await call(client, "search_documents", {"query": "heron", "group_by_document": True, "max_results": 50})
        past = await call(client, "search_documents",  # its pool of 260 chunks cannot double either
                          {"query": "heron", "group_by_document": True, "max_results": 50, "offset": 1})
    assert [d["path"] for d in found["documents"]] == ["dense.txt"] and found["next_offset"] is None
    assert "255 best-matching passages come from 1 document only" in found["note"] and "paths" in found["note"]
    assert past["documents"] == [] and "more documents may match" in past["note"] and "past" not in past["note"]


async def test_grouped_first_page_keeps_its_ranking(make_settings: Any, workspace: Path) -> None:
    """A query whose first pool of chunks (full: more chunks match) already holds a page of documents is
    ranked from that pool alone: documents in the order of their best chunk, as the passage search ranks
    them (the document view's numbers depend on this order)."""
    filler = "word " * 20
    for i in range(20):  # file i: one chunk saying 'heron' i + 1 times, four saying it once, all as long
        best = "heron " * (i + 1) + "word " * (20 - i)
        (workspace / f"f{i:02d}.txt").write_text(
            "\n\n".join([best] + [f"heron {filler}"] * 4) + "\n", encoding="utf-8"
        )
    async with connect(make_settings(chunk_max_chars=140, chunk_overlap_chars=0, chunk_min_chars=0)) as client:
        await call(client, "index_path", {"path": "."})
        status = await call(client, "index_status", {})
        grouped = await call(client, "search_documents", {"query": "heron", "group_by_document": True, "max_results": 5})
        hits = await call(client, "search_documents", {"query": "heron", "max_results": 20})
    assert status["chunks"] == 100  # 100 chunks match; the first pool of a 5-document page is 50 of them
    by_best_chunk = list(dict.fromkeys(h["path"] for h in hits["hits"]))[:5]
    assert [d["path"] for d in grouped["documents"]] == by_best_chunk == [f"f{i:02d}.txt" for i in (19, 18, 17, 16, 15)]
    assert grouped["next_offset"] == 5


async def test_index_status_of_a_path_that_does_not_exist(settings: Any, workspace: Path) -> None:
    """A path with nothing on disk and nothing indexed is said not to exist (it read indexed: false alone,
    as for a file not indexed yet)."""
    (workspace / "a.md").write_text("hello lighthouse\n", encoding="utf-8")
    async with connect(settings) as client:
        await call(client, "index_path", {"path": "."})
        status = (await call(client, "index_status", {"path": "no/such/report.pdf"}))["path_status"]
        here = (await call(client, "index_status", {"path": "a.md"}))["path_status"]
    assert status["indexed"] is False and "does not exist" in status["note"]
    assert "list_workspace_files" in status["note"] and "job" not in status
    assert here["indexed"] and "note" not in here


async def test_index_status_of_a_deleted_folder_still_indexed(settings: Any, workspace: Path) -> None:
    """A folder deleted from disk whose files are still indexed is reported as indexed and stale (not as a
    path that does not exist, nor as a file never indexed), so that the caller knows to clean up."""
    import shutil

    (workspace / "gone").mkdir()
    (workspace / "gone" / "a.md").write_text("hello lighthouse\n", encoding="utf-8")
    (workspace / "gone" / "b.md").write_text("hello harbour\n", encoding="utf-8")
    async with connect(settings) as client:
        await call(client, "index_path", {"path": "."})
        shutil.rmtree(workspace / "gone")
        status = (await call(client, "index_status", {"path": "gone"}))["path_status"]
    assert status["indexed"] is True and status["fresh"] is False, status
    assert status["files"] == 2 and status["stale"] == 2
    assert "does not exist" not in status.get("note", "")
