"""The in-memory postings: the same ranking as an exhaustive rerank, never stale, built in the background."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

from indexing.engine import TermRows
from indexing.hits import ChunkHit
from indexing.indexer import Indexer
from indexing.postings import MemoryIndex
from indexing.query import parse, plan
from indexing.scoring import DEFAULT_RANK, score
from indexing.search import PathFilter, Searcher
from indexing.store import IndexStore

EN = ["revenue", "growth", "margin", "customer", "churn", "lighthouse", "harbour", "engine", "turbine", "battery", "solar", "wind", "grid", "contract", "supplier", "invoice", "audit", "forecast", "budget", "quarter", "baseline", "running", "runner", "river", "bridge"]
ZH = ["营收", "增长", "客户", "利润", "合同", "供应商", "审计", "预算", "季度", "电池", "风电", "电网", "发动机", "灯塔", "港口", "河流", "桥梁"]


def _corpus(folder: Path, files: int = 60, seed: int = 3) -> None:
    rng = random.Random(seed)
    for n in range(files):
        words = EN if n % 2 else ZH
        sep = " " if n % 2 else ""
        heading = sep.join(rng.sample(words, 2))
        paras = [sep.join(rng.choices(words, k=rng.randint(8, 40))) for _ in range(rng.randint(1, 4))]
        (folder / f"doc{n:02}.md").write_text(f"# {heading}\n\n" + "\n\n".join(paras) + "\n", encoding="utf-8")


def _queries(seed: int = 5, n: int = 60) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.sample(EN, rng.randint(1, 5))) if i % 2 else "".join(rng.sample(ZH, rng.randint(1, 4)))
            for i in range(n)]


@pytest.fixture()
def indexed(tmp_path: Path) -> tuple[Path, IndexStore]:
    folder = tmp_path / "docs"
    folder.mkdir()
    _corpus(folder)
    store = IndexStore(tmp_path / "index.sqlite3")
    Indexer(store).index_tree(folder)
    return folder, store


def _exhaustive(store: IndexStore, query: str, k: int) -> list[tuple[int, float]]:
    """The reference: every chunk of the index scored from its stored terms (as FTS5 candidates are)."""
    rows = [(i, head.split(), body.split()) for i, head, body in store.conn().execute(
        "SELECT id, head_terms, terms FROM chunks")]
    parsed = parse(query)
    found = TermRows(rows, *store.corpus_stats(), store.doc_freqs(parsed.all_terms()))
    return [(i, s) for s, i in score(found, parsed, len(rows), DEFAULT_RANK) if s > 0][:k]


def _in_memory(searcher: Searcher, query: str) -> list[ChunkHit] | None:
    """The top 10 through the in-memory engine alone (None: it cannot answer now)."""
    return searcher.rank_by(searcher.engines[0], plan(query), 10, None)


def test_memory_ranking_equals_an_exhaustive_rerank(indexed: tuple[Path, IndexStore]) -> None:
    _, store = indexed
    memory = MemoryIndex(store)
    assert memory.build_now() is not None
    searcher = Searcher(store, memory=memory)
    for query in _queries():
        got = _in_memory(searcher, query)
        assert got is not None, "the fresh in-memory postings must serve natural queries"
        want = _exhaustive(store, query, 10)
        assert [h.chunk_id for h in got] == [i for i, _ in want], query
        assert [h.score for h in got] == pytest.approx([s for _, s in want], rel=1e-4), query


def test_stale_postings_are_never_used(indexed: tuple[Path, IndexStore]) -> None:
    folder, store = indexed
    memory = MemoryIndex(store)
    memory.build_now()
    searcher = Searcher(store, memory=memory)
    (folder / "new.md").write_text("# Zeppelin\n\nThe zeppelin hangar was rebuilt.\n", encoding="utf-8")
    Indexer(store).index_file(folder / "new.md")
    assert _in_memory(searcher, "zeppelin") is None  # index changed: FTS5 answers
    found = searcher.search("zeppelin")
    assert [Path(h.path).name for h in found] == ["new.md"]
    memory.build_now()
    fresh = _in_memory(searcher, "zeppelin")
    assert fresh is not None and [h.chunk_id for h in fresh] == [found[0].chunk_id]
    (folder / "new.md").unlink()
    Indexer(store).remove_path(str(folder / "new.md"))
    assert searcher.search("zeppelin hangar") == []
    memory.build_now()
    assert _in_memory(searcher, "zeppelin hangar") == []


def test_path_filters_and_other_modes_agree_with_fts(indexed: tuple[Path, IndexStore]) -> None:
    folder, store = indexed
    memory = MemoryIndex(store)
    memory.build_now()
    fast, slow = Searcher(store, memory=memory), Searcher(store)
    scopes = [PathFilter(files=(str(folder / "doc03.md"),)), PathFilter(globs=("*/doc1*.md",)),
              PathFilter(folders=(str(folder),))]
    for query in _queries(n=20):
        for scope in scopes:
            assert [h.chunk_id for h in fast.search(query, paths=scope)] == [
                h.chunk_id for h in slow.search(query, paths=scope)
            ] or len(slow.search(query, paths=scope, limit=50)) > 10  # FTS5 may miss a weak candidate
        assert [h.chunk_id for h in fast.search(query, mode="all")] == [h.chunk_id for h in slow.search(query, mode="all")]


def test_built_in_the_background_and_capped(indexed: tuple[Path, IndexStore]) -> None:
    _, store = indexed
    memory = MemoryIndex(store)
    assert memory.current(*store.generation()) is None  # starts a build
    deadline = time.monotonic() + 20
    while memory.current(*store.generation()) is None:
        assert time.monotonic() < deadline, "the background build never finished"
        time.sleep(0.02)
    capped = MemoryIndex(store, max_chunks=0)
    assert capped.current(*store.generation()) is None and capped.build_now() is None
    assert Searcher(store, memory=capped).search("revenue growth")  # FTS5 still answers
    memory.max_chunks = store.generation()[1] - 1  # the index outgrew the cap: the copy is dropped
    assert memory.build_now() is None and memory._snapshot is None
