"""The ranking variants that bench.retrieval_cv measures under grouped folds.

A variant is a name, the RankParams it ranks with, and optionally an adapter that wraps the
searcher (query-side ideas such as pseudo-relevance feedback). The first variant is "ours", the
default; GROUPS name the sets a tuned row chooses from on the training folds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from dataclasses import replace as _replace

from bench.retrieval import HitSource
from indexing.feedback import rm3_scores
from indexing.fusion import reorder
from indexing.query import parse
from indexing.search import DEFAULT_RANK, ChunkHit, RankParams, Searcher

RM3 = "RM3 feedback re-rank (10 docs; 10 terms; 0.5)"


def _same(searcher: Searcher) -> HitSource:
    return searcher


@dataclass(frozen=True)
class Variant:
    name: str
    params: RankParams = DEFAULT_RANK
    adapt: Callable[[Searcher], HitSource] = field(default=_same)


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
)}

GROUPS: dict[str, list[str]] = {
    "proximity": ["ours", "no proximity bonus", "proximity: bigram bonus only", "proximity: minimal window only",
                  "proximity: minimal window only at weight 1"],
    "heading weight": ["ours", "heading weight 1 (no field weight)", "heading weight 3"],
}


class Reranked:
    """A searcher whose natural-language candidates (the top `RankParams.candidates`) are re-scored."""

    def __init__(self, searcher: Searcher, rescore: Callable[[str, list[ChunkHit]], list[float]]) -> None:
        self.searcher = searcher
        self.rescore = rescore

    def search(self, text: str, *, limit: int = 10) -> list[ChunkHit]:
        hits = self.searcher.rank(text, want=max(limit, self.searcher.params.candidates))
        return [h for _, h in reorder(hits, self.rescore(text, hits))][:limit] if hits else []


def _rm3(searcher: Searcher) -> HitSource:
    def rescore(text: str, hits: list[ChunkHit]) -> list[float]:
        terms = set(parse(text).all_terms())
        return rm3_scores(searcher.store, [h.chunk_id for h in hits], [h.score for h in hits], terms)

    return Reranked(searcher, rescore)


VARIANTS[RM3] = Variant(RM3, adapt=_rm3)
GROUPS["feedback"] = ["ours", RM3]
