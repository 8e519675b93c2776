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
from typing import Any

import numpy as np

from bench._feedback import rm3_scores
from bench.retrieval import HitSource
from indexing import analyzer
from indexing.fusion import fuse, min_max, reorder
from indexing.hits import ranked_hits
from indexing.query import parse, plan
from indexing.scoring import score
from indexing.search import DEFAULT_RANK, ChunkHit, RankParams, Searcher
from indexing.store import IndexStore

RM3 = "RM3 feedback re-rank (10 docs; 10 terms; 0.5)"


class DenseRerank:
    """The former hybrid mode (before dense candidates, indexing.hybrid): re-order the lexical candidates by
    min-max lexical and dense scores mixed by `weight_of(text)`; kept for the re-rank rows of retrieval_cv --dense."""

    def __init__(self, provider: Any, vectors_of: Callable[[Sequence[int]], dict[int, np.ndarray]],
                 weight_of: Callable[[str], float]) -> None:
        self.provider, self.vectors_of, self.weight_of = provider, vectors_of, weight_of

    def __call__(self, query: Any, scored: list[tuple[float, int]], paths: object = None) -> list[tuple[float, int]]:
        weight = self.weight_of(query.text)
        ids = [chunk_id for _, chunk_id in scored]
        found = self.vectors_of(ids)
        if len(scored) < 2 or weight <= 0 or len(found) < len(ids):
            return scored
        vector = self.provider.embed([query.text], query=True)[0]
        return reorder(ids, fuse([s for s, _ in scored], [float(found[i] @ vector) for i in ids], weight))


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
    """A searcher whose natural-language candidates (the top `RankParams.candidates`, or `depth`) are re-scored."""

    def __init__(
        self, searcher: Searcher, rescore: Callable[[str, list[ChunkHit]], list[float]], depth: int | None = None,
        candidates: Callable[[str], list[ChunkHit]] | None = None,
    ) -> None:
        self.searcher = searcher
        self.rescore = rescore
        self.depth = depth or searcher.params.candidates
        self.candidates = candidates  # the candidates of a query (default: the searcher's top `depth`)

    def search(self, text: str, *, limit: int = 10) -> list[ChunkHit]:
        hits = self.candidates(text) if self.candidates else self.searcher.rank(text, want=max(limit, self.depth))
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
DEPTH = DEFAULT_RANK.candidates  # the product re-ranks the scorer's top `candidates`


def z_score(scores: Sequence[float]) -> list[float]:
    """`scores` as standard scores over the candidates (mean 0, sd 1; all equal: all 0)."""
    mean, sd = float(np.mean(scores)), float(np.std(scores))
    return [(s - mean) / sd if sd > 0 else 0.0 for s in scores]


def as_is(scores: Sequence[float]) -> list[float]:
    return [float(s) for s in scores]


def theoretical(low: float) -> Callable[[Sequence[float]], list[float]]:
    """Theoretical min-max (Bruch, Gai & Ingber 2023, "An Analysis of Fusion Functions for Hybrid
    Retrieval"): the score's lowest possible value (0 for BM25, -1 for a cosine) in place of the
    candidates' lowest, the candidates' highest as the top."""
    def normalise(scores: Sequence[float]) -> list[float]:
        span = max(scores) - low
        return [(s - low) / span if span > 0 else 0.0 for s in scores]
    return normalise


# How each score is normalised over the candidates before the convex mix, (lexical, dense) by name.
# "min-max" is the product's (indexing.fusion.fuse, through DenseRerank); the others are bench-only.
FUSIONS: dict[str, tuple[Callable[[Sequence[float]], list[float]], Callable[[Sequence[float]], list[float]]]] = {
    "min-max": (min_max, min_max),
    "z-score": (z_score, z_score),
    "raw cosine": (min_max, as_is),
    "theoretical min-max": (theoretical(0.0), theoretical(-1.0)),
}


def dense_name(weight: float, fusion: str = "min-max", depth: int = DEPTH, union: int = 0) -> str:
    """The row of one hybrid setting; the product's (min-max, top DEPTH lexical) has no qualifier."""
    qualifiers = [q for q in (fusion != "min-max" and fusion, depth != DEPTH and f"top {depth}",
                              union and f"+ dense top {union}") if q]
    qualified = f" ({', '.join(qualifiers)})" if qualifiers else ""
    return f"hybrid{qualified}: dense weight {weight}"


def dense_group(fusion: str = "min-max", depth: int = DEPTH, union: int = 0) -> str:
    return "dense weight" + dense_name(0, fusion, depth, union)[len("hybrid"):-len(": dense weight 0")]


def dense_variants(
    passages: dict[str, np.ndarray], queries: dict[str, np.ndarray], store: IndexStore, depth: int,
    fusion: str = "min-max", union: int = 0,
) -> tuple[list[Variant], dict[str, list[str]]]:
    """Re-rank of the lexical top `depth` at each of DENSE_WEIGHTS (`passages`: vector by passage id),
    both scores normalised as FUSIONS[fusion] says; `union` > 0: the candidates are the lexical top
    `depth` and the `union` passages nearest the query (exact cosine over `passages`; a passage that
    does not match the query lexically scores 0 there). Also the group a tuned row chooses from."""
    paths = store.conn().execute("SELECT c.id, f.path FROM chunks c JOIN files f ON f.doc_id = c.doc_id")
    by_chunk = {cid: passages[pid] for cid, path in paths if (pid := path[len("/eval/"):]) in passages}
    provider = CachedQueries(queries)

    def vectors_of(ids: Sequence[int]) -> dict[int, np.ndarray]:
        return {i: by_chunk[i] for i in ids if i in by_chunk}

    def product(weight: float) -> Callable[[str, list[ChunkHit]], list[float]]:
        rerank = DenseRerank(provider, vectors_of, lambda _text: weight)

        def rescore(text: str, hits: list[ChunkHit]) -> list[float]:
            fused = {chunk_id: s for s, chunk_id in rerank(plan(text), [(h.score, h.chunk_id) for h in hits])}
            return [fused[h.chunk_id] for h in hits]

        return rescore

    def bench_only(weight: float) -> Callable[[str, list[ChunkHit]], list[float]]:
        lexical_norm, dense_norm = FUSIONS[fusion]

        def rescore(text: str, hits: list[ChunkHit]) -> list[float]:
            dense = [float(by_chunk[h.chunk_id] @ queries[text]) for h in hits]
            mixed = zip(lexical_norm([h.score for h in hits]), dense_norm(dense), strict=True)
            return [(1 - weight) * a + weight * b for a, b in mixed]

        return rescore

    def variant(weight: float) -> Variant:
        rescore = product(weight) if fusion == "min-max" and not union else bench_only(weight)
        if union:
            return Variant(dense_name(weight, fusion, depth, union), adapt=lambda s: Reranked(
                s, rescore, depth, candidates=lambda text: union_candidates(s, text)))
        return Variant(dense_name(weight, fusion, depth), adapt=lambda s: Reranked(s, rescore, depth))

    ids = list(by_chunk)
    matrix = np.stack([by_chunk[i] for i in ids]) if union else np.empty(0)
    found: dict[str, list[ChunkHit]] = {}

    def union_candidates(searcher: Searcher, text: str) -> list[ChunkHit]:
        """The lexical top `depth` and the `union` chunks nearest the query by cosine (hybrid retrieval's
        candidate union, Karpukhin et al. 2020, Ma et al. 2021); one that no query term reaches scores 0
        lexically, the BM25 of a text without a query term. Computed once per query, for every weight."""
        if text not in found:
            hits = searcher.rank(text, want=depth)
            taken = {h.chunk_id for h in hits}
            near = [ids[n] for n in np.argsort(-(matrix @ queries[text]), kind="stable")[:union]]
            lexical = lexical_scores(searcher, text)
            extra = [(lexical.get(c, 0.0), c) for c in near if c not in taken]
            found[text] = hits + ranked_hits(searcher.store, extra, None)
        return found[text]

    variants = [variant(w) for w in DENSE_WEIGHTS]
    return variants, {dense_group(fusion, depth, union): ["ours", *(v.name for v in variants)]}


def lexical_scores(searcher: Searcher, text: str) -> dict[int, float]:
    """The scorer's score of every chunk the first engine finds for `text` (a candidate's score does not
    depend on the others)."""
    query = plan(text)
    found = searcher.engines[0].candidates(query, 1 << 30, None)
    return {chunk_id: s for s, chunk_id in score(found, query.parsed, 1 << 30, searcher.params)} if found else {}
