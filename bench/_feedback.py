"""Bench only (measured under folds and dropped: worse in every fold). Pseudo-relevance feedback (RM3, Lavrenko & Croft 2001; Abdul-Jaleel et al. 2004) as a re-rank
of the lexical candidates.

The top FB_DOCS candidates are assumed relevant; the relevance model P(w|R) = sum over them of
P(w|d) x P(d|q) (P(d|q): each one's share of their lexical scores) gives FB_TERMS expansion terms
that the query does not contain. Every candidate then gets the BM25 score of those terms,
weighted by P(w|R), and the two scores are mixed half and half (`indexing.fusion`). The three
constants are Anserini's RM3 defaults (fbDocs=10, fbTerms=10, originalQueryWeight=0.5), not fitted.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from indexing.fusion import fuse
from indexing.store import IndexStore

FB_DOCS = 10
FB_TERMS = 10
ORIGINAL_WEIGHT = 0.5
K1, B = 1.2, 0.75


def relevance_model(top: Sequence[tuple[float, list[str]]], query_terms: set[str]) -> dict[str, float]:
    """The FB_TERMS most likely expansion terms (not in the query) of the (score, terms) of the
    feedback chunks, with their normalised P(w|R)."""
    total = sum(max(score, 0.0) for score, _ in top) or 1.0
    model: dict[str, float] = {}
    for score, terms in top:
        if not terms:
            continue
        share = max(score, 0.0) / total / len(terms)
        for term, tf in Counter(terms).items():
            if term not in query_terms:
                model[term] = model.get(term, 0.0) + tf * share
    best = sorted(model.items(), key=lambda item: (-item[1], item[0]))[:FB_TERMS]
    mass = sum(p for _, p in best) or 1.0
    return {t: p / mass for t, p in best}


def expansion_scores(
    candidates: Sequence[list[str]], model: dict[str, float], dfs: dict[str, int], n_chunks: int, avgdl: float
) -> list[float]:
    """Each candidate's BM25 over the expansion terms, each term weighted by its P(w|R)."""
    idf = {t: math.log(1 + (n_chunks - dfs.get(t, 0) + 0.5) / (dfs.get(t, 0) + 0.5)) for t in model}
    out = []
    for terms in candidates:
        tf = Counter(t for t in terms if t in model)
        norm = K1 * (1 - B + B * len(terms) / max(avgdl, 1.0))
        out.append(sum(model[t] * idf[t] * n * (K1 + 1) / (n + norm) for t, n in tf.items()))
    return out


def rm3_scores(store: IndexStore, ids: Sequence[int], scores: Sequence[float], query_terms: set[str]) -> list[float]:
    """The candidates' (`ids`, best first, with their lexical `scores`) scores after RM3 feedback."""
    if len(ids) < 2:
        return list(scores)
    terms = chunk_terms(store, ids)
    model = relevance_model(list(zip(scores[:FB_DOCS], terms[:FB_DOCS], strict=False)), query_terms)
    if not model:
        return list(scores)
    n_chunks, avgdl = store.corpus_stats()
    extra = expansion_scores(terms, model, store.doc_freqs(model), n_chunks, avgdl)
    return fuse(scores, extra, 1 - ORIGINAL_WEIGHT)


def chunk_terms(store: IndexStore, ids: Sequence[int]) -> list[list[str]]:
    """The analysed body terms of the chunks `ids`, in the order given."""
    rows = store.conn().execute(f"SELECT id, terms FROM chunks WHERE id IN ({','.join(map(str, ids))})").fetchall()
    by_id = {i: t.split() for i, t in rows}
    return [by_id.get(i, []) for i in ids]
