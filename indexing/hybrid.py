"""The hybrid (meaning-aware) mode: natural-language queries re-rank their lexical candidates by
lexical and embedding scores, both min-max normalised over the candidates, mixed by a weight
per query language (chosen under grouped cross-validation: bench/retrieval_cv.py --dense; a
Chinese query, one with Han characters, stays lexical, an English one can find Chinese text).

Everything else stays lexical: exact modes (all, phrase, fts), regex, quoted phrases, and any
query whose candidates do not all have a vector yet (the background worker is still embedding).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from foundation.waiting import MustWait
from indexing.analyzer import has_han
from indexing.fusion import fuse, reorder
from indexing.query import Query
from indexing.scoring import Scored
from indexing.search import Searcher

if TYPE_CHECKING:
    import numpy as np

    from indexing.embeddings import EmbeddingProvider, QueryVectors
    from indexing.postings import MemoryIndex
    from indexing.store import IndexStore
    from indexing.vectors import VectorWorker

log = logging.getLogger(__name__)

# The dense score's share. en: chosen on the training folds in 5 of 5 folds from 0.2-1.0 (bench/retrieval_cv.py
# --dense, 200 DEV queries sampled by fold, top 10: held-out R@1 0.810 -> 0.860; all 3,267 DEV queries, every
# passage embedded (--dense-all): chosen in 5 of 5 folds, R@1 0.846 -> 0.875, dense alone 0.752). zh: 0, Chinese queries stay
# lexical: no fold showed a gain (lexical R@1 is 0.98) and Chinese must never get worse.
DENSE_WEIGHT = {"en": 0.7, "zh": 0.0}


def dense_weight(text: str) -> float:
    return DENSE_WEIGHT["zh" if has_han(text) else "en"]


class DenseRerank:
    """The re-rank stage (`Searcher(rerank=[...])`): the scorer's (score, chunk id) best first -> the same
    candidates in fused order. Natural-language queries without quoted phrases only."""

    def __init__(
        self, provider: EmbeddingProvider, vectors_of: Callable[[Sequence[int]], dict[int, np.ndarray]],
        weight_of: Callable[[str], float] = dense_weight, queries: QueryVectors | None = None,
    ) -> None:
        from indexing.embeddings import QueryVectors

        self.vectors_of = vectors_of
        self.weight_of = weight_of
        self.query_vector = queries or QueryVectors(provider)  # the server's (kept across searches) when given

    def wants(self, query: Query) -> bool:
        """True for the queries this stage re-ranks (natural language, no quoted phrase, a dense weight)."""
        return self._weight(query) > 0

    def _weight(self, query: Query) -> float:
        """The dense score's share for this query; 0 for an exact mode or a quoted phrase."""
        return self.weight_of(query.text) if query.mode == "natural" and not query.parsed.phrases else 0.0

    def __call__(self, query: Query, scored: list[Scored]) -> list[Scored]:
        weight = self._weight(query)
        if len(scored) < 2 or weight <= 0:
            return scored
        ids = [chunk_id for _, chunk_id in scored]
        found = self.vectors_of(ids)
        if len(found) < len(ids):
            return scored  # lexical until every candidate has its vector
        try:
            vector = self.query_vector(query.text)
        except MustWait:  # a quick call whose query vector was dropped meanwhile: it moves to a worker thread
            raise
        except Exception as exc:  # an unreachable endpoint must not break search: stay lexical
            log.warning("query embedding failed, searching lexically: %s", exc)
            return scored
        dense = [float(found[chunk_id] @ vector) for chunk_id in ids]
        return reorder(ids, fuse([s for s, _ in scored], dense, weight))


def searcher(store: IndexStore, memory: MemoryIndex | None, worker: VectorWorker | None) -> Searcher:
    """The search engine of the tools: hybrid when an embedding provider is configured (and its
    worker is then kicked to embed what is missing), lexical otherwise."""
    if worker is None:
        return Searcher(store, memory=memory)
    worker.kick()
    return Searcher(store, memory=memory, rerank=[DenseRerank(worker.provider, worker.vectors.get, queries=worker.queries)])
