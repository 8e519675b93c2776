"""The hybrid (meaning-aware) mode: a natural-language query's candidates are its lexical top
`RankParams.candidates` and, once every chunk has a vector, the `NEAREST` nearest chunks of each
language (exact: `indexing.exact_vectors`; from `indexing.ann.FLAT_MAX` chunks on, an approximate index
re-scored exactly: `indexing.ann`), merged by `fused`: the first place where
the lexical and the dense scores agree best, the rest by meaning. So a paraphrase, or a question in the
other language, finds passages that share no word with it, and an ordinary question keeps its first place.

The model prefers the query's language (an English question's nearest Chinese passage has a lower
cosine than many unrelated English ones), so cosines are compared within a language: each chunk's
cosine is a z-score among the chunks of its language (`Nearest`), and each language gets its own
pool of nearest chunks, and the other language's z-scores are lowered by a small shift: the balanced merge.

Everything else stays lexical: exact modes (all, phrase, fts), regex, quoted phrases, and any search
while some chunk has no vector yet (the background worker is still embedding).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from foundation.waiting import MustWait
from indexing.analyzer import is_chinese
from indexing.fusion import min_max
from indexing.query import Query
from indexing.scope import PathFilter, active
from indexing.scoring import Scored
from indexing.search import Searcher

if TYPE_CHECKING:
    import numpy as np

    from indexing.embeddings import EmbeddingProvider, QueryVectors
    from indexing.postings import MemoryIndex
    from indexing.store import IndexStore
    from indexing.vectors import DenseVectors, VectorWorker

log = logging.getLogger(__name__)

NEAREST = 50  # nearest chunks taken from each language's pool
SPREAD_FLOOR = 1e-6  # a language's spread of cosines below this is none (z-scores then are the centred cosines)
NARROW_SCOPE = 5_000  # a `paths` filter of at most this many chunks: their exact cosines (~2 ms at 5,000)
SCOPE_OVERFETCH = 4  # a wider filter: this many times NEAREST from all chunks, those outside dropped
MIN_POOL = 20  # chunks of each language needed for its own spread of cosines (else one spread over all chunks;
# the language's mean is its own from 2 chunks on: the model's bias towards the query's language is ~0.05 in cosine)


@dataclass(frozen=True)
class Weights:
    """A query language's fusion constants. `same`: the dense share of the first place's score (the rest is
    lexical); `shift`: what a chunk of the other language loses in z-score units on the rest of the page
    (the prior that a question asks about its own language)."""

    same: float
    shift: float


# Chosen under 5 folds grouped by article with bench/retrieval_meaning.py --scope dev (a mixed index of the 1,047
# passages of every English and Chinese DEV article; 4,536 DEV questions and the tuning set
# tests/data/meaning_tuning.jsonl choose, tests/data/meaning_queries.jsonl reports): each fold's training folds
# chose same 0.5 (10 of 10 fold x language choices) and shift 0.25 (zh, 4 of 5) or 0.00 (en 5 of 5, tied with
# 0.25 there; zh 1 of 5); held out, the report set scores as with these. One pair for both languages.
WEIGHTS = {"en": Weights(same=0.5, shift=0.25), "zh": Weights(same=0.5, shift=0.25)}


def query_language(text: str) -> str:
    return "zh" if is_chinese(text) else "en"


def dense_weight(text: str) -> float:
    """The dense share of a query's own-language chunks (0: their order stays lexical)."""
    return WEIGHTS[query_language(text)].same


class Nearest:
    """A query's cosines as z-scores within each language (chunks of one language compared with each other,
    not with the other language's, which the model scores lower). The mean and spread of each language's
    cosines come from the scorer's sums (exact: over every row; approximate index: from stored sums), so only
    the candidates' own cosines are computed here."""

    def __init__(self, matrix: DenseVectors, query: np.ndarray, among: Sequence[int] | None = None) -> None:
        import numpy as np

        self.matrix = matrix
        self.among = among  # the only chunks `top` may give (a narrow `paths` filter), else any
        self.scorer = matrix.scorer(query)
        counts = np.asarray(self.scorer.counts, dtype=np.float64)
        sums, squares = np.asarray(self.scorer.sums, np.float64), np.asarray(self.scorer.squares, np.float64)
        self.mean, self.spread = language_moments(counts, sums, squares)

    @property
    def z(self) -> np.ndarray:
        """Every chunk's z-score in `ids` order (exact matrices only: the benches' dense-alone ranking)."""
        import numpy as np

        from indexing.exact_vectors import ExactScorer, VectorMatrix

        scorer, matrix = self.scorer, self.matrix
        if not isinstance(scorer, ExactScorer) or not isinstance(matrix, VectorMatrix):
            raise TypeError("z-scores of every chunk: exact matrices only")
        z: np.ndarray = ((scorer.cos - self.mean[matrix.codes]) / self.spread[matrix.codes]).astype(np.float32)
        return z

    def top(self, k: int) -> list[int]:
        """Chunk ids of the `k` best z-scores of each language (within a language: the best cosines)."""
        if self.among is None:
            return self.scorer.top(k)
        return best_of_each_language(self.among, self.scorer.cosines(self.among), self.matrix, k)

    def of(self, ids: Sequence[int]) -> list[float | None]:
        """The z-score of each chunk (None: no vector)."""
        import numpy as np

        if not len(ids):
            return []
        cos = self.scorer.cosines(ids)
        at = self.matrix.position(ids)
        codes = self.matrix.chinese[at.clip(0)].astype(np.intp) if len(self.matrix) else np.zeros(len(ids), np.intp)
        z = (cos - self.mean[codes]) / self.spread[codes]
        return [None if np.isnan(v) else float(v) for v in z.astype(np.float32)]


def best_of_each_language(ids: Sequence[int], cos: np.ndarray, matrix: DenseVectors, k: int) -> list[int]:
    """Of `ids` (with their cosines, NaN: no vector), the `k` best of each language, Chinese first."""
    import numpy as np

    at = matrix.position(ids)
    known = np.flatnonzero(~np.isnan(cos) & (at >= 0))
    chinese = matrix.chinese[at[known]] if len(matrix) else np.zeros(0, bool)
    out: list[int] = []
    for pool in (known[chinese], known[~chinese]):
        best = pool[np.argsort(-cos[pool], kind="stable")[:k]]
        out += [int(ids[i]) for i in best]
    return out


def language_moments(counts: np.ndarray, sums: np.ndarray, squares: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per language (0: other, 1: Chinese), the mean and spread that make a cosine a z-score, from the count of
    its chunks and the sums of their cosines and squared cosines: its own mean from 2 chunks on (else the mean of
    all), its own spread around it from MIN_POOL chunks of each language on (else one spread over all chunks)."""
    import numpy as np

    total = max(float(counts.sum()), 1.0)
    mean = sums / np.maximum(counts, 1)
    mean[counts < 2] = sums.sum() / total if counts.sum() else 0.0  # one chunk of a language: nothing to compare
    deviation = np.maximum(squares - 2 * mean * sums + counts * mean * mean, 0.0)  # sum of (cos - mean)^2
    if counts.min() < MIN_POOL:  # too few for a language's own spread
        spread = np.full(2, np.sqrt(deviation.sum() / total))
    else:
        spread = np.sqrt(deviation / np.maximum(counts, 1))
    spread[spread <= SPREAD_FLOOR] = 1.0  # every cosine the same (the sums leave rounding noise, not 0)
    return mean, spread


def by_max(scores: Sequence[float]) -> list[float]:
    """Scores divided by the best (a lexical match keeps a share above the chunks that do not match)."""
    top = max(scores, default=0.0)
    return [s / top if top > 0 else 0.0 for s in scores]


def fused(lexical: list[Scored], nearest: Nearest, weights: Weights, query_chinese: bool, depth: int = NEAREST) -> list[Scored]:
    """The union of the lexical candidates and the nearest chunks of each language, best first: a head
    and a tail.
    - First place: the best (1 - same) x lexical + same x dense (lexical divided by the best one, no
      lexical score: 0; dense: the z-scores min-max normalised over the union), where a word match and a
      meaning match agree: an ordinary question keeps (or gains) its first place. It is a lexical candidate
      whenever there is one (so a page whose first hit came by meaning alone had no word match).
    - The rest: by z-score within the chunk's language, the other language's lowered by `shift`: the
      balanced merge, so a paraphrase (no shared word) and a question in the other language reach the
      first page whatever the lexical noise.
    Scores are on [0, 1], non-increasing (the first 1, the rest min-max of their shifted z); ties keep
    the lexical order."""
    ids = [chunk_id for _, chunk_id in lexical]
    seen = set(ids)
    ids += [i for i in nearest.top(depth) if i not in seen]
    if not ids:
        return []
    lex = by_max([s for s, _ in lexical]) + [0.0] * (len(ids) - len(lexical))
    z = nearest.of(ids)
    known = [v for v in z if v is not None]
    floor = min(known) if known else 0.0
    zs = [floor if v is None else v for v in z]
    dense = min_max(zs)
    firsts = range(len(lexical) or len(ids))  # a word match whenever there is one (the page says when there is none)
    head = max(firsts, key=lambda n: ((1 - weights.same) * lex[n] + weights.same * dense[n], -n))
    at = nearest.matrix.position(ids)
    chinese = nearest.matrix.chinese[at.clip(0)] if len(nearest.matrix) else [query_chinese] * len(ids)
    tail = [v if (at[n] < 0 or bool(chinese[n]) == query_chinese) else v - weights.shift for n, v in enumerate(zs)]
    scaled = min_max(tail)
    rest = sorted((n for n in range(len(ids)) if n != head), key=lambda n: (-tail[n], n))
    return [(1.0, ids[head])] + [(scaled[n], ids[n]) for n in rest]


class DenseCandidates:
    """The hybrid stage (`Searcher(rerank=[...])`): the scorer's (score, chunk id) best first -> the union
    with the nearest chunks, in fused order. Natural-language queries without quoted phrases only."""

    def __init__(
        self, provider: EmbeddingProvider | None, matrix_of: Callable[[], DenseVectors | None],
        weights: dict[str, Weights] | None = None, queries: QueryVectors | Callable[[str], np.ndarray] | None = None,
        store: IndexStore | None = None,
    ) -> None:
        from indexing.embeddings import QueryVectors

        self.store = store  # to list the chunks of a narrow `paths` filter
        self.matrix_of = matrix_of
        self.weights = WEIGHTS if weights is None else weights
        if queries is None:
            assert provider is not None, "DenseCandidates needs a provider or query vectors"
            queries = QueryVectors(provider)
        self.query_vector = queries

    def wants(self, query: Query) -> bool:
        """True for the queries this stage may change (natural language, no quoted phrase)."""
        return query.mode == "natural" and not query.parsed.phrases

    def __call__(self, query: Query, scored: list[Scored], paths: PathFilter | None = None) -> list[Scored]:
        """`paths`: the nearest chunks are looked for among the filter's chunks when there are at most
        NARROW_SCOPE of them (exact cosines), else among all and SCOPE_OVERFETCH times as many (Searcher drops
        those outside it)."""
        if not self.wants(query):
            return scored
        matrix = self.matrix_of()
        if matrix is None or len(matrix) == 0:
            return scored  # lexical until every chunk has its vector
        try:
            vector = self.query_vector(query.text)
        except MustWait:  # a quick call whose query vector was dropped meanwhile: it moves to a worker thread
            raise
        except Exception as exc:  # an unreachable endpoint must not break search: stay lexical
            log.warning("query embedding failed, searching lexically: %s", exc)
            return scored
        chinese = is_chinese(query.text)
        among, depth = self.scope(paths)
        try:
            return fused(scored, Nearest(matrix, vector, among), self.weights["zh" if chinese else "en"], chinese, depth)
        except (IndexError, KeyError, ValueError) as exc:  # the approximate index changed under this search: lexical once
            log.warning("dense candidates failed, searching lexically: %s", exc)
            return scored

    def scope(self, paths: PathFilter | None) -> tuple[list[int] | None, int]:
        """(the chunks of a narrow `paths` filter, or None: any; how many nearest of each language to take)."""
        if (scope := active(paths)) is None:
            return None, NEAREST
        if self.store is not None:
            cond, args = scope.documents_sql(self.store.backend)
            ids = [int(r[0]) for r in self.store.conn().execute(
                f"SELECT id FROM chunks WHERE doc_id IN {cond} LIMIT {NARROW_SCOPE + 1}", args)]
            if len(ids) <= NARROW_SCOPE:
                return ids, NEAREST
        return None, NEAREST * SCOPE_OVERFETCH


def searcher(store: IndexStore, memory: MemoryIndex | None, worker: VectorWorker | None) -> Searcher:
    """The search engine of the tools: hybrid when an embedding provider is configured (its worker is then
    kicked to embed what is missing, and waited for briefly when that is a few chunks indexed since its
    last run: VectorWorker.catch_up), lexical otherwise."""
    if worker is None:
        return Searcher(store, memory=memory)
    worker.catch_up()
    stage = DenseCandidates(worker.provider, worker.matrix, queries=worker.queries, store=store)
    return Searcher(store, memory=memory, rerank=[stage])
