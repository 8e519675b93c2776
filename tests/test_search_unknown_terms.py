"""Query words the corpus does not contain never push out the ones it does: a query whose only known
word is a common one still finds the documents that contain it (through the tool, and as a
property over random mixes of known and unknown words on both ranking paths)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from indexing.indexer import Indexer
from indexing.postings import MemoryIndex
from indexing.search import Searcher
from tests.conftest import connect
from tests.storage_fixtures import index_store_for

KNOWN = ["绿茶", "lighthouse", "keeper", "harbour", "茶叶", "storm"]
UNKNOWN = ["zorblax", "quixotry", "泡", "苦", "不", "才", "flummox", "vexillology", "澳門", "glyph"]


def tea_notes(folder: Path) -> None:
    """20 notes that all mention 绿茶 (a common word here) plus a few English ones."""
    for i in range(20):
        (folder / f"tea{i:02d}.md").write_text(f"# 笔记{i}\n\n绿茶 产地 第{i}篇 茶叶 记录。\n", encoding="utf-8")
    for i in range(5):
        (folder / f"sea{i}.md").write_text(f"# Sea {i}\n\nThe lighthouse keeper watched the harbour storm {i}.\n",
                                           encoding="utf-8")


@pytest.mark.anyio
async def test_common_word_with_unknown_words_still_finds_it(settings: Any, workspace: Path) -> None:
    tea_notes(workspace)
    async with connect(settings) as client:
        indexed = await client.call_tool("index_path", {"path": "."})
        assert not indexed.is_error
        result = await client.call_tool("search_documents", {"query": "绿茶怎么泡才不苦"})
        assert not result.is_error, result.content[0].text
        hits = result.structured_content["hits"]
        assert hits and all("tea" in h["path"] for h in hits)


@pytest.fixture(scope="module", params=["fts", "memory", "postgresql"])
def searcher(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Searcher:
    folder = tmp_path_factory.mktemp("unknown")
    tea_notes(folder)
    store = index_store_for(request, folder, "postgresql" if request.param == "postgresql" else "sqlite")
    Indexer(store).index_tree(folder)
    memory = None
    if request.param == "memory":
        memory = MemoryIndex(store)
        assert memory.build_now() is not None
    return Searcher(store, memory=memory)


@given(
    known=st.lists(st.sampled_from(KNOWN), min_size=1, max_size=2),
    unknown=st.lists(st.sampled_from(UNKNOWN), min_size=0, max_size=8),
    order=st.randoms(use_true_random=False),
)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_known_word_gives_hits(searcher: Searcher, known: list[str], unknown: list[str], order: Any) -> None:
    words = known + unknown
    order.shuffle(words)
    hits = searcher.search(" ".join(words), limit=5)
    assert hits, words
