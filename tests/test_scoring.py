"""The one scorer behind the engine seam: a third engine plugs in with TermRows alone, rerank
stages see the scored pool and have the last word, and text-file lines go through the same scorer."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from indexing.analyzer import analyze
from indexing.engine import Candidates, Fields, TermRows
from indexing.indexer import Indexer
from indexing.lines import rank_lines
from indexing.query import Query, plan
from indexing.scope import PathFilter
from indexing.scoring import RankParams, Scored, bonus, bonus_ceiling, query_pairs, weighted_pairs
from indexing.search import Searcher
from indexing.store import IndexStore

DOCS = {
    "growth.md": "# Finance\n\nRevenue growth was strong in Q3. The revenue growth rate reached 15%.\n",
    "scattered.md": "# Misc\n\nGrowth of plants. Later, unrelated revenue figures appeared in the annex.\n",
    "harbour.md": "# Harbour\n\nThe lighthouse keeper counted ships in the harbour every night.\n",
    "zh.md": "# 财务\n\nQ3营收增长率达到15%，客户数量明显增加。\n",
}
QUERIES = ["revenue growth", "How did revenue grow?", "lighthouse harbour ships", "营收增长", "growth"]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> IndexStore:
    folder = tmp_path_factory.mktemp("scoring")
    for name, text in DOCS.items():
        (folder / name).write_text(text, encoding="utf-8")
    store = IndexStore(folder / "index.sqlite3")
    Indexer(store).index_tree(folder)
    return store


class ListEngine:
    """A third engine, as a PostgreSQL one would be: every chunk with its terms and the collection stats."""

    def __init__(self, store: IndexStore) -> None:
        self.store = store

    def candidates(self, query: Query, k: int, scope: PathFilter | None) -> Candidates | None:
        rows = [(i, head.split(), body.split()) for i, head, body in self.store.conn().execute(
            "SELECT id, head_terms, terms FROM chunks")]
        return TermRows(rows, *self.store.corpus_stats(), self.store.doc_freqs(query.parsed.all_terms()))


def test_a_new_engine_needs_only_term_rows(store: IndexStore) -> None:
    searcher = Searcher(store)
    other = Searcher(store)
    other.engines = [ListEngine(store)]
    for query in QUERIES:
        ours = [(h.chunk_id, h.score) for h in searcher.search(query)]
        theirs = [(h.chunk_id, h.score) for h in other.search(query)]
        assert theirs[: len(ours)] == ours, query  # FTS5 keeps every chunk that has a term: same scores


def test_rerank_stages_see_the_pool_and_decide_the_order(store: IndexStore) -> None:
    seen: list[list[Scored]] = []

    def reverse(query: Query, scored: list[Scored], paths: object) -> list[Scored]:
        seen.append(scored)
        return scored[::-1]

    plain, staged = Searcher(store), Searcher(store, rerank=[reverse])
    best = [h.chunk_id for h in plain.search("revenue growth lighthouse", limit=50)]
    got = [h.chunk_id for h in staged.search("revenue growth lighthouse", limit=2)]
    assert [i for _, i in seen[0]] == best  # the whole scored pool, best first
    assert got == best[::-1][:2]


def test_a_stage_that_leaves_a_query_as_it_is_is_not_given_the_pool(store: IndexStore,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A stage's `wants(query)` False: the query is scored one page deep (not `candidates` deep) and
    the stage is not called, so the hits are the plain searcher's; True: the stage gets the pool."""
    import indexing.search as search_module
    from indexing.postings import MemoryIndex
    from indexing.scoring import score as real_score

    depths: list[int] = []

    def counted(found: Candidates, parsed: object, want: int, p: object) -> list[Scored]:
        depths.append(want)
        return real_score(found, parsed, want, p)  # type: ignore[arg-type]

    class Picky:
        def __init__(self) -> None:
            self.called: list[str] = []

        def wants(self, query: Query) -> bool:
            return "lighthouse" in query.text

        def __call__(self, query: Query, scored: list[Scored], paths: object) -> list[Scored]:
            self.called.append(query.text)
            return scored[::-1]

    monkeypatch.setattr(search_module, "score", counted)
    picky = Picky()
    memory = MemoryIndex(store)
    memory.build_now()
    for engine in (None, memory):  # FTS5's candidates, the in-memory postings'
        deep = Searcher(store, memory=engine, rerank=[lambda query, scored, paths: scored])  # scored `candidates` deep
        staged = Searcher(store, memory=engine, rerank=[picky])
        for query in ("revenue growth", "growth", "the of"):
            for limit, offset in ((1, 0), (2, 0), (3, 2)):
                expected = [(h.chunk_id, h.score) for h in deep.search(query, limit=limit, offset=offset)]
                depths.clear()
                assert [(h.chunk_id, h.score) for h in staged.search(query, limit=limit, offset=offset)] == expected
                assert depths in ([], [limit + offset]) and picky.called == []  # ([]: no candidates at all)
    staged.search("revenue growth lighthouse", limit=2)
    assert depths[-1] == staged.params.candidates and picky.called == ["revenue growth lighthouse"]


def test_query_is_parsed_once_into_the_plan() -> None:
    assert plan('"revenue growth" margin').parsed.phrases == [["revenu", "growth"]]
    fts = plan('"revenue" AND growth*', "fts")
    assert fts.match is not None and "AND" in fts.match and "AND" not in fts.parsed.terms


def _reference_lines(text: str, query: str) -> dict[int, float]:
    """Natural-mode line scores written out: each present query term adds its idf over the lines,
    each query pair standing side by side adds half the smaller idf (once per line)."""
    qterms = set(analyze(query))
    lines = text.split("\n")
    analysed = {i + 1: analyze(line) for i, line in enumerate(lines)}
    df = {t: sum(t in terms for terms in analysed.values()) for t in qterms}
    idf = {t: math.log(1 + (len(lines) - df[t] + 0.5) / (df[t] + 0.5)) for t in qterms}
    pairs = set(query_pairs(plan(query).parsed))
    out = {}
    for line, terms in analysed.items():
        if set(terms) & qterms:
            adjacent = {(a, b) for a, b in zip(terms, terms[1:], strict=False) if (a, b) in pairs}
            out[line] = sum(idf[t] for t in set(terms) & qterms) + 0.5 * sum(min(idf[a], idf[b]) for a, b in adjacent)
    return out


WORDS = ["revenue", "growth", "margin", "harbour", "ship", "the", "of"]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from(WORDS), max_size=8).map(" ".join), min_size=1, max_size=12),
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(" ".join),
)
def test_lines_are_ranked_by_the_one_scorer(lines: list[str], query: str) -> None:
    text = "\n".join(lines)
    got = rank_lines(text, query, limit=5)
    want = _reference_lines(text, query)
    assert [h.score for h in got] == pytest.approx(sorted(want.values(), reverse=True)[:5], abs=1e-4)
    assert all(h.score == pytest.approx(want[h.line], abs=1e-4) for h in got)


def test_lines_all_and_phrase_modes(tmp_path: Path) -> None:
    text = "revenue growth was strong\ngrowth of revenue\nplants and growth\n"
    assert [h.line for h in rank_lines(text, "revenue growth", "all")] == [1, 2]
    assert [h.line for h in rank_lines(text, "revenue growth", "phrase")] == [1]
    assert [h.line for h in rank_lines(text, "revenue growth")][:2] == [1, 2]


def _adjacent_reference(pos: list[int], terms: list[str]) -> set[tuple[str, str]]:
    return {(terms[i], terms[i + 1]) for i in range(len(pos) - 1) if pos[i + 1] == pos[i] + 1}


def _window_reference(pos: list[int], terms: list[str], idfs: dict[str, float], width: int) -> float:
    """`scoring._best_window` as it was (before it found the adjacent pairs in the same pass)."""
    if len(pos) < 2:
        return 0.0
    best = mass = 0.0
    counts: dict[str, int] = {}
    left = 0
    for right, term in enumerate(terms):
        seen = counts.get(term, 0)
        counts[term] = seen + 1
        if not seen:
            mass += idfs[term]
        while pos[right] - pos[left] >= width:
            old = terms[left]
            counts[old] -= 1
            if not counts[old]:
                mass -= idfs[old]
            left += 1
        if mass > best:
            best = mass
    return best


def _bonus_reference(at: Fields[str], pairs: list[tuple[str, str]], idfs: dict[str, float], p: RankParams) -> float:
    total = 0.0
    if pairs and p.bigram_weight:
        present = _adjacent_reference(list(at.pos), list(at.terms))
        if at.head_pos:
            present |= _adjacent_reference(list(at.head_pos), list(at.head_terms))
        total += p.bigram_weight * sum(min(idfs[a], idfs[b]) for a, b in pairs if (a, b) in present)
    if p.window_weight:
        total += p.window_weight * _window_reference(list(at.pos), list(at.terms), idfs, p.window)
    return total


_TERM = st.sampled_from("abcde")
_QUERY_TERM = st.sampled_from("abcdez")  # z: a query term no chunk has
_OCCURRENCES = st.lists(st.tuples(st.integers(0, 30), _TERM), max_size=14).map(lambda o: sorted(dict(o).items()))


@settings(max_examples=400, deadline=None)
@given(body=_OCCURRENCES, head=_OCCURRENCES, idfs=st.lists(st.floats(0.01, 12.0), min_size=5, max_size=5),
       pairs=st.lists(st.tuples(_QUERY_TERM, _QUERY_TERM), max_size=6), window=st.integers(1, 12),
       weights=st.sampled_from([(0.5, 0.5), (0.0, 0.5), (0.5, 0.0), (1.3, 0.7)]))
def test_bonus_equals_its_two_pass_reference(body: list[tuple[int, str]], head: list[tuple[int, str]],
                                             idfs: list[float], pairs: list[tuple[str, str]], window: int,
                                             weights: tuple[float, float]) -> None:
    """The window and the adjacent pairs found in one pass, the pairs' weights made once a query:
    the same float, bit for bit, as the two passes with a min() per pair and row."""
    at = Fields([p for p, _ in body], [t for _, t in body], [p for p, _ in head], [t for _, t in head])
    idf = dict(zip("abcde", idfs, strict=True))
    p = RankParams(bigram_weight=weights[0], window=window, window_weight=weights[1])
    assert bonus(at, weighted_pairs(pairs, idf), idf, p) == _bonus_reference(at, pairs, idf, p)


@settings(max_examples=300, deadline=None)
@given(body=_OCCURRENCES, head=_OCCURRENCES, idfs=st.lists(st.floats(0.01, 12.0), min_size=5, max_size=5),
       pairs=st.lists(st.tuples(_QUERY_TERM, _QUERY_TERM), max_size=6), window=st.integers(1, 12),
       weights=st.sampled_from([(0.5, 0.5), (0.0, 0.5), (0.5, 0.0), (1.3, 0.7)]), base=st.floats(0.0, 40.0, width=32))
def test_the_ceiling_is_never_below_the_score(body: list[tuple[int, str]], head: list[tuple[int, str]],
                                              idfs: list[float], pairs: list[tuple[str, str]], window: int,
                                              weights: tuple[float, float], base: float) -> None:
    """The bound the scorer stops at (made once per set of terms a row holds): at least the row's score."""
    import numpy as np

    at = Fields([p for p, _ in body], [t for _, t in body], [p for p, _ in head], [t for _, t in head])
    idf = dict(zip("abcde", idfs, strict=True))
    p = RankParams(bigram_weight=weights[0], window=window, window_weight=weights[1])
    held = {t for _, t in body} | {t for _, t in head}
    present = np.array([sum(1 << j for j, t in enumerate(idf) if t in held)], dtype=np.int64)
    weighted = weighted_pairs([(a, b) for a, b in pairs if a != b], idf)
    ceiling = bonus_ceiling(np.array([base], dtype=np.float32), present, idf, weighted, p)
    assert ceiling[0] >= float(np.float32(base)) + bonus(at, weighted, idf, p)
