"""The ranking variants that bench.retrieval_cv measures under grouped folds.

A variant is a name, the RankParams it ranks with, and optionally an adapter that wraps the
searcher (query-side ideas such as pseudo-relevance feedback). The first variant is "ours", the
default; GROUPS name the sets a tuned row chooses from on the training folds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from dataclasses import replace as _replace

import numpy as np

from bench._feedback import rm3_scores
from bench.retrieval import HitSource
from indexing import analyzer
from indexing.fusion import reorder
from indexing.hybrid import DenseRerank
from indexing.query import parse, plan
from indexing.search import DEFAULT_RANK, ChunkHit, RankParams, Searcher
from indexing.store import IndexStore

RM3 = "RM3 feedback re-rank (10 docs; 10 terms; 0.5)"


def _same(searcher: Searcher) -> HitSource:
    return searcher


@dataclass(frozen=True)
class Variant:
    name: str
    params: RankParams = DEFAULT_RANK
    adapt: Callable[[Searcher], HitSource] = field(default=_same)
    stem: Callable[[str], str] | None = None  # another English stemmer (index and queries; passage view only)


@contextmanager
def stemming(stem: Callable[[str], str] | None) -> Iterator[None]:
    """The analyzer with `stem` in place of Porter's, for the duration (None: unchanged)."""
    if stem is None:
        yield
        return
    porter = analyzer.stem
    analyzer.stem = stem  # type: ignore[assignment]
    try:
        yield
    finally:
        analyzer.stem = porter


def s_stem(word: str) -> str:
    """Harman's S-stemmer (1991): plural endings only."""
    if len(word) < 4 or not word.isalpha():
        return word
    if word.endswith("ies") and not word.endswith(("eies", "aies")):
        return word[:-3] + "y"
    if word.endswith("es") and not word.endswith(("aes", "ees", "oes")):
        return word[:-1]
    if word.endswith("s") and not word.endswith(("us", "ss")):
        return word[:-1]
    return word


def _v(name: str, **changes: float) -> Variant:
    return Variant(name, _replace(DEFAULT_RANK, **changes))  # type: ignore[arg-type]


VARIANTS: dict[str, Variant] = {v.name: v for v in (
    Variant("ours"),
    _v("no proximity bonus", bigram_weight=0.0, window_weight=0.0),
    _v("proximity: bigram bonus only", window_weight=0.0),
    _v("proximity: minimal window only", bigram_weight=0.0),
    _v("proximity: minimal window only at weight 1", bigram_weight=0.0, window_weight=1.0),
    _v("heading weight 1 (no field weight)", head_weight=1.0, fts_head_weight=1.0),
    _v("heading weight 3", head_weight=3.0, fts_head_weight=3.0),
    Variant("stemming: S-stemmer (plurals only)", stem=s_stem),
    Variant("stemming: none", stem=lambda word: word),
)}

GROUPS: dict[str, list[str]] = {
    "proximity": ["ours", "no proximity bonus", "proximity: bigram bonus only", "proximity: minimal window only",
                  "proximity: minimal window only at weight 1"],
    "heading weight": ["ours", "heading weight 1 (no field weight)", "heading weight 3"],
    "stemming": ["ours", "stemming: S-stemmer (plurals only)", "stemming: none"],
}


class Reranked:
    """A searcher whose natural-language candidates (the top `RankParams.candidates`) are re-scored."""

    def __init__(
        self, searcher: Searcher, rescore: Callable[[str, list[ChunkHit]], list[float]], depth: int | None = None
    ) -> None:
        self.searcher = searcher
        self.rescore = rescore
        self.depth = depth or searcher.params.candidates

    def search(self, text: str, *, limit: int = 10) -> list[ChunkHit]:
        hits = self.searcher.rank(text, want=max(limit, self.depth))
        return [h for _, h in reorder(hits, self.rescore(text, hits))][:limit] if hits else []


def _rm3(searcher: Searcher) -> HitSource:
    def rescore(text: str, hits: list[ChunkHit]) -> list[float]:
        terms = set(parse(text).all_terms())
        return rm3_scores(searcher.store, [h.chunk_id for h in hits], [h.score for h in hits], terms)

    return Reranked(searcher, rescore)


VARIANTS[RM3] = Variant(RM3, adapt=_rm3)
GROUPS["feedback"] = ["ours", RM3]


# -- hybrid: dense re-rank with vectors computed once per corpus (bench/retrieval_cv.py --dense) ---------


class CachedQueries:
    """An embedding provider for the bench: the query vectors, computed beforehand, by query text."""

    name = "bench-cache"

    def __init__(self, vectors: dict[str, np.ndarray]) -> None:
        self.vectors = vectors

    def embed(self, texts: Sequence[str], *, query: bool) -> np.ndarray:
        return np.stack([self.vectors[t] for t in texts])


DENSE_WEIGHTS = (0.2, 0.3, 0.5, 0.7, 0.8, 1.0)


def dense_variants(
    passages: dict[str, np.ndarray], queries: dict[str, np.ndarray], store: IndexStore, depth: int
) -> list[Variant]:
    """Re-rank of the lexical top `depth` at each of DENSE_WEIGHTS (`passages`: vector by passage id)."""
    paths = store.conn().execute("SELECT c.id, f.path FROM chunks c JOIN files f ON f.doc_id = c.doc_id")
    by_chunk = {cid: passages[pid] for cid, path in paths if (pid := path[len("/eval/"):]) in passages}
    provider = CachedQueries(queries)

    def vectors_of(ids: Sequence[int]) -> dict[int, np.ndarray]:
        return {i: by_chunk[i] for i in ids if i in by_chunk}

    def variant(weight: float) -> Variant:
        rerank = DenseRerank(provider, vectors_of, lambda _text: weight)

        def rescore(text: str, hits: list[ChunkHit]) -> list[float]:
            fused = {chunk_id: s for s, chunk_id in rerank(plan(text), [(h.score, h.chunk_id) for h in hits])}
            return [fused[h.chunk_id] for h in hits]

        return Variant(f"hybrid: dense weight {weight}", adapt=lambda s: Reranked(s, rescore, depth))

    return [variant(w) for w in DENSE_WEIGHTS]


GROUPS["dense weight"] = ["ours", *(f"hybrid: dense weight {w}" for w in DENSE_WEIGHTS)]
