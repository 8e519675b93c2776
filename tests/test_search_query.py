"""Queries: modes, escaping (no user text ever raises an FTS syntax error), raw FTS errors with an
example, ranking details, paging, context, grouping, and time-bounded regex search."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from foundation.errors import PatternTooSlow, QuerySyntaxError
from indexing.indexer import Indexer
from indexing.postings import MemoryIndex
from indexing.query import parse, to_match
from indexing.regex_search import compile_pattern, required_words
from indexing.search import PathFilter, Searcher
from tests.storage_fixtures import index_store_for

DOCS = {
    "growth.md": "# Finance\n\nRevenue growth was strong in Q3. The revenue growth rate reached 15%.\n",
    "scattered.md": "# Misc\n\nGrowth of plants. Later, unrelated revenue figures appeared in the annex.\n",
    "zh.md": "# 财务\n\nQ3营收增长率达到15%，客户数量明显增加。\n",
    "zh2.md": "# 其他\n\n营业额下降，收到的客户投诉很多。\n",
    "version.md": "# Release\n\nVersion 4.1 of the C++ toolkit ships with NEAR support: a:b and -flags.\n",
    "long.md": "# Long\n\n" + "\n\n".join(
        f"Paragraph {i} talks about topic{i} and the shared subject of lighthouses." for i in range(40)
    ),
    "catastrophic.md": "# X\n\n" + "a" * 40 + "!\n",
}


@pytest.fixture(scope="module", params=["fts", "memory", "postgresql"])
def searcher(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Searcher:
    """Every ranking test runs on all three paths: FTS5, the in-memory postings, and PostgreSQL."""
    folder = tmp_path_factory.mktemp("q")
    for name, text in DOCS.items():
        (folder / name).write_text(text, encoding="utf-8")
    store = index_store_for(request, folder, "postgresql" if request.param == "postgresql" else "sqlite")
    Indexer(store).index_tree(folder)
    if request.param != "memory":
        return Searcher(store)
    memory = MemoryIndex(store)
    assert memory.build_now() is not None
    return Searcher(store, memory=memory)


def names(hits: list) -> list[str]:  # type: ignore[type-arg]
    return [Path(h.path).name for h in hits]


def test_natural_is_or_and_proximity_wins(searcher: Searcher) -> None:
    hits = searcher.search("How did revenue growth develop?")
    assert names(hits)[:2] == ["growth.md", "scattered.md"]
    assert hits[0].score > hits[1].score > 0


def test_chinese_two_char_words_prefer_adjacent(searcher: Searcher) -> None:
    assert names(searcher.search("营收"))[0] == "zh.md"
    assert names(searcher.search("客户"))[:2] == ["zh.md", "zh2.md"] or set(names(searcher.search("客户"))) == {
        "zh.md", "zh2.md"
    }
    assert names(searcher.search("Q3营收增长率"))[0] == "zh.md"


def test_all_and_phrase_modes(searcher: Searcher) -> None:
    assert set(names(searcher.search("revenue growth", mode="all"))) == {"growth.md", "scattered.md"}
    assert names(searcher.search("revenue growth", mode="phrase")) == ["growth.md"]
    assert names(searcher.search('"revenue growth" annex')) == ["growth.md"]  # phrase required
    assert names(searcher.search('"unrelated revenue" annex')) == ["scattered.md"]


def test_raw_fts_mode(searcher: Searcher) -> None:
    assert names(searcher.search('"revenue growth" NOT annex', mode="fts")) == ["growth.md"]
    assert names(searcher.search("NEAR(revenue annex, 5)", mode="fts")) == ["scattered.md"]
    assert "long.md" in names(searcher.search("lighthouse*", mode="fts"))
    with pytest.raises(QuerySyntaxError, match="e.g."):
        searcher.search("revenue AND", mode="fts")
    with pytest.raises(QuerySyntaxError, match='mode="natural"'):
        searcher.search("(revenue", mode="fts")


def test_symbols_are_plain_text(searcher: Searcher) -> None:
    for query in ["4.1", "C++", "AND", "NEAR(", '"', "a:b", "-flags", "OR NOT", "🙂", "*", "^x", "{col}:x"]:
        searcher.search(query)  # never raises
    assert names(searcher.search("C++ 4.1"))[0] == "version.md"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(alphabet=st.sampled_from(list('ab 营收"()*:^-+.,{}[]NEARORANDT\'\\/🙂\x00\t')), max_size=40))
def test_fuzz_never_raises_outside_fts_mode(searcher: Searcher, text: str) -> None:
    for mode in ("natural", "all", "phrase"):
        searcher.search(text, mode=mode)  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=30))
def test_fuzz_fts_mode_raises_only_query_errors(searcher: Searcher, text: str) -> None:
    try:
        searcher.search(text, mode="fts")
    except QuerySyntaxError as exc:
        assert "e.g." in str(exc)


def test_empty_and_stop_word_queries(searcher: Searcher) -> None:
    assert searcher.search("") == [] and searcher.search("what is the") == [] and searcher.search("？") == []
    assert to_match(parse("the of and")) is None


def test_paging_context_and_grouping(searcher: Searcher) -> None:
    total = len(searcher.search("lighthouses", limit=50))
    first = searcher.search("lighthouses", limit=3)
    second = searcher.search("lighthouses", limit=3, offset=3)
    assert total >= 6 and len(first) == 3 and len(second) == 3
    assert not {h.chunk_id for h in first} & {h.chunk_id for h in second}
    hit = searcher.search("topic7", context_chars=30)[0]
    assert hit.before and hit.after and len(hit.before) <= 30 and len(hit.after) <= 30
    docs = searcher.search_documents("lighthouses revenue", limit=3).documents
    assert len({d.doc_id for d in docs}) == len(docs)
    long_doc = next(d for d in docs if d.path.endswith("long.md"))
    assert 1 <= len(long_doc.matched) <= 3 and long_doc.context
    scoped = searcher.search("revenue", paths=PathFilter(globs=("*/scattered.md",)))
    assert names(scoped) == ["scattered.md"]


def test_regex_routing_and_results(searcher: Searcher) -> None:
    from indexing.regex_search import search_index

    assert required_words(r"revenue growth \d+") == ["growth"]
    assert required_words(r"\brevenue\b") == ["revenue"]
    assert required_words(r"foo|bar baz") == []
    found = search_index(searcher, r"growth rate reached \d+%", limit=5)
    assert [Path(h.path).name for h, _ in found] == ["growth.md"] and found[0][1] == "growth rate reached 15%"
    found = search_index(searcher, r"营收增长率达到\d+", limit=5)  # no usable literal: scan
    assert found and found[0][1] == "营收增长率达到15"


def test_invalid_and_catastrophic_regex(searcher: Searcher) -> None:
    from indexing.regex_search import search_index

    with pytest.raises(QuerySyntaxError, match="Invalid regex"):
        compile_pattern("(unclosed")
    started = time.monotonic()
    with pytest.raises(PatternTooSlow, match="pattern too slow, simplify it"):
        search_index(searcher, r"(a|aa)+$", limit=5, budget=0.5)
    assert time.monotonic() - started < 60  # bounded (unbounded, this pattern runs for ages); loose for loaded machines
