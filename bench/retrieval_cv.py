"""Grouped cross-validation of retrieval on the shared eval DEV queries.

    .venv/bin/python -m bench.retrieval_cv [--eval DIR] [--lang zh,en] [--folds 5] [--no-docs] [--plain]
                                           [--variants NAME,...] [--fts-path] [--chunking MAX:OVERLAP,...]
    .venv/bin/python -m bench.retrieval_cv --lang en --dense DIR [--dense-all] [--dense-depth 20,50,100]
                                           [--dense-fusion min-max,z-score,...] [--dense-union N]

The DEV queries are split into folds by article (every question of an article in one fold;
articles in sha256 order, each to the fold with the fewest questions so far). For each language
and view (passage; document with the contains-answer rule) it prints R@1 / MRR@10 per fold and
mean ± standard deviation across folds, for ours, the plain baselines (SQLite FTS5 OR with stop
words dropped, bm25s, tantivy) and the variants of `bench.retrieval_variants`.

Tuning protocol: a row "tuned: <group>" picks, for each fold, the member of a variant group with
the best MRR@10 on the OTHER folds and reports it on the held-out fold; "wins" counts the folds
where a variant's R@1 beats / falls below ours (the default). The index is the whole corpus for every fold (the
README's protocol); only the queries are split. `--chunking` adds document-view rows ranked by ours
over the articles chunked with other `chunk_max_chars:chunk_overlap_chars` (one index each).

`--dense DIR` prints the hybrid table instead (passage view): the re-rank of the lexical top
`--dense-depth` at each dense weight, per score normalisation of `--dense-fusion`, with a tuned row
(the weight chosen on the training folds) per depth and normalisation; "wins" there count against
the re-rank at the product's same-language weight (indexing.hybrid.WEIGHTS).
"""

from __future__ import annotations

import argparse
import hashlib
import re
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.retrieval import (
    DEFAULT_EVAL,
    K,
    Scores,
    bm25s_ranker,
    build_design_index,
    build_document_index,
    build_passage_index,
    design_rank_of,
    document_rankers,
    document_ranks,
    first_rank,
    load_jsonl,
    passage_rank_of,
    ranker_rank_of,
    score_ranks,
    served_searcher,
    tantivy_ranker,
    timed_ranks,
)
from bench.retrieval_variants import FUSIONS, GROUPS, VARIANTS, Variant, dense_name, dense_variants, stemming
from indexing.hybrid import WEIGHTS
from indexing.model import ChunkingOptions
from indexing.query import Mode
from indexing.search import ChunkHit, PathFilter, Searcher
from indexing.vectors import chunk_text

Ranks = list[int | None]


def fold_of(queries: list[dict], folds: int) -> list[int]:  # type: ignore[type-arg]
    """Each query's fold: articles in sha256 order, each to the fold with the fewest queries so far."""
    sizes: dict[str, int] = {}
    for q in queries:
        sizes[q["article_id"]] = sizes.get(q["article_id"], 0) + 1
    load = [0] * folds
    assigned: dict[str, int] = {}
    for article in sorted(sizes, key=lambda a: hashlib.sha256(a.encode()).hexdigest()):
        f = min(range(folds), key=lambda i: (load[i], i))
        assigned[article] = f
        load[f] += sizes[article]
    return [assigned[q["article_id"]] for q in queries]


def per_fold(ranks: Ranks, folds: list[int], k: int) -> list[Scores]:
    return [score_ranks(r for r, f in zip(ranks, folds, strict=True) if f == i) for i in range(k)]


def mean_sd(values: Sequence[float]) -> str:
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.fmean(values):.3f} ± {sd:.3f}"


def held_out(candidates: dict[str, Ranks], folds: list[int], k: int) -> tuple[Ranks, list[str]]:
    """Per fold, the candidate with the best MRR@10 on the other folds, scored on this fold."""
    out: Ranks = [None] * len(folds)
    chosen = []
    for i in range(k):
        def train_mrr(name: str, i: int = i) -> float:
            return score_ranks(r for r, f in zip(candidates[name], folds, strict=True) if f != i).mrr
        best = max(candidates, key=train_mrr)
        chosen.append(best)
        for n, f in enumerate(folds):
            if f == i:
                out[n] = candidates[best][n]
    return out, chosen


@dataclass
class Table:
    """The rows of one language and view: name -> first-hit ranks of every query."""

    title: str
    folds: list[int]
    k: int
    rows: dict[str, Ranks]
    ms: dict[str, float]
    notes: dict[str, str]
    reference: str = "ours"  # the row the "folds +/-" column compares with

    def render(self) -> str:
        reference = self.reference
        head = " | ".join(f"f{i + 1} R@1 / MRR" for i in range(self.k))
        lines = [f"\n### {self.title}\n", f"| system | {head} | R@1 mean ± sd | MRR@10 mean ± sd | "
                 f"folds +/- R@1 against {reference} | ms/q |",
                 "|---|" + "---|" * (self.k + 4)]
        ref = per_fold(self.rows[reference], self.folds, self.k) if reference in self.rows else None
        for name, ranks in self.rows.items():
            scores = per_fold(ranks, self.folds, self.k)
            cells = " | ".join(f"{s.r1:.3f} / {s.mrr:.3f}" for s in scores)
            wins = _wins(scores, ref) if ref and name != reference else ""
            label = name + (f" ({self.notes[name]})" if name in self.notes else "")
            lines.append(f"| {label} | {cells} | {mean_sd([s.r1 for s in scores])} | "
                         f"{mean_sd([s.mrr for s in scores])} | {wins} | {f'{self.ms[name]:.1f}' if name in self.ms else ''} |")
        return "\n".join(lines)


def _wins(scores: list[Scores], ref: list[Scores]) -> str:
    """Folds where R@1 beats / falls below the reference's: "+3 -1"."""
    better = sum(s.r1 > r.r1 for s, r in zip(scores, ref, strict=True))
    worse = sum(s.r1 < r.r1 for s, r in zip(scores, ref, strict=True))
    return f"+{better} -{worse}"


def add(table: Table, name: str, result: tuple[Ranks, float]) -> None:
    table.rows[name], table.ms[name] = result


def add_tuned(table: Table, groups: dict[str, list[str]] | None = None) -> None:
    """A held-out row per variant group (default: GROUPS): the member chosen on the training folds."""
    for group, members in (GROUPS if groups is None else groups).items():
        present = {m: table.rows[m] for m in members if m in table.rows}
        if len(present) > 1:
            ranks, chosen = held_out(present, table.folds, table.k)
            table.rows[f"tuned: {group}"] = ranks
            table.notes[f"tuned: {group}"] = "chose " + ", ".join(chosen)


def passage_table(lang: str, corpus: list[dict], queries: list[dict], args: argparse.Namespace, work: Path) -> Table:  # type: ignore[type-arg]
    folds = fold_of(queries, args.folds)
    table = Table(f"{lang} passage view (DEV, {len(queries)} queries, {args.folds} folds by article)",
                  folds, args.folds, {}, {}, {})
    if args.plain:  # plain text: the passages without their titles as headings (the baselines never see titles)
        corpus = [{**p, "title": ""} for p in corpus]
        table.title = table.title.replace("passage view", "passage view, plain text (no headings)")
    store = build_passage_index(corpus, work / f"{lang}-passages.sqlite3")
    for v in chosen_variants(args):
        with stemming(v.stem):
            own = store if v.stem is None else build_passage_index(corpus, work / f"{lang}-{len(table.rows)}.sqlite3")
            searcher = v.adapt(served_searcher(own, v.params, not args.fts_path))
            add(table, v.name, timed_ranks(passage_rank_of(searcher), queries))
    conn = build_design_index(corpus)
    add(table, "FTS5 OR, stop words dropped", timed_ranks(design_rank_of(conn, corpus, " OR ", stop=True), queries))
    conn.close()
    texts = [p["text"] for p in corpus]
    for name, ranker in (("bm25s", bm25s_ranker(texts)), ("tantivy", tantivy_ranker(texts))):
        if ranker is not None:
            add(table, name, timed_ranks(ranker_rank_of(ranker, corpus), queries))
    store.close()
    add_tuned(table)
    return table


def dense_table(lang: str, corpus: list[dict], queries: list[dict], args: argparse.Namespace, work: Path) -> Table:  # type: ignore[type-arg]
    """The hybrid rows on a sample of `--dense-sample` queries per fold: lexical (ours), and the
    re-rank of the lexical top `--dense-depth` at each dense weight (1.0: dense order alone), for each
    normalisation of `--dense-fusion` (and, with `--dense-union`, of a candidate union with the dense top).
    "folds +/-" compares with the product's hybrid (min-max, top 50, the language's WEIGHTS same share)."""
    folds = fold_of(queries, args.folds)
    picked = sample(queries, folds, args.dense_sample)
    queries, folds = [queries[i] for i in picked], [folds[i] for i in picked]
    depths = [int(d) for d in args.dense_depth.split(",")]
    fusions = args.dense_fusion.split(",")
    table = Table(f"{lang} passage view, hybrid re-rank of the lexical top {args.dense_depth} "
                  f"({len(queries)} DEV queries{' sampled by fold' if args.dense_sample > 0 else ''})",
                  folds, args.folds, {}, {}, {}, dense_name(WEIGHTS[lang].same) if WEIGHTS[lang].same > 0 else "ours")
    store = build_passage_index(corpus, work / f"{lang}-dense.sqlite3")
    lexical = Remembered(served_searcher(store, None, not args.fts_path))
    add(table, "ours", timed_ranks(passage_rank_of(lexical), queries))
    by_id = {p["id"]: p for p in corpus}
    if args.dense_all:
        needed = set(by_id)
    else:
        needed = {h.path[len("/eval/"):] for q in queries for h in lexical.rank(q["query"], want=max(depths))}
    texts = {pid: chunk_text(by_id[pid].get("title", "").replace("_", " "), by_id[pid]["text"]) for pid in sorted(needed)}
    passages = cached_vectors(args.dense / lang, "passage", list(texts.values()), query=False)
    asked = cached_vectors(args.dense / lang, "query", [q["query"] for q in queries], query=True)
    vectors = {pid: passages[text] for pid, text in texts.items()}
    groups: dict[str, list[str]] = {}
    for union in sorted({0, args.dense_union}):
        for depth in depths:
            for fusion in fusions:
                variants, group = dense_variants(vectors, asked, store, depth, fusion, union)
                groups.update(group)
                for v in variants:
                    add(table, v.name, timed_ranks(passage_rank_of(v.adapt(lexical)), queries))
    if args.dense_all:
        add(table, "dense alone (whole corpus, exact cosine)", timed_ranks(dense_rank_of(vectors, asked), queries))
    store.close()
    add_tuned(table, groups)
    return table


class Remembered(Searcher):
    """A searcher that ranks each (query, depth) once: every hybrid row re-ranks the same lexical candidates."""

    def __init__(self, searcher: Searcher) -> None:
        super().__init__(searcher.store, searcher.params)
        self.engines = searcher.engines
        self.ranked: dict[tuple[str, int], list[ChunkHit]] = {}

    def rank(self, text: str, *, mode: Mode = "natural", want: int = 10, paths: PathFilter | None = None) -> list[ChunkHit]:
        if mode != "natural" or paths is not None:
            return super().rank(text, mode=mode, want=want, paths=paths)
        if (text, want) not in self.ranked:
            self.ranked[text, want] = super().rank(text, want=want)
        return self.ranked[text, want]


def dense_rank_of(vectors: dict[str, Any], asked: dict[str, Any]) -> Callable[[dict], int | None]:  # type: ignore[type-arg]
    """A query's gold-passage rank when every passage is ranked by its cosine to the query alone."""
    ids = list(vectors)
    matrix = np.stack([vectors[i] for i in ids])

    def rank_of(q: dict) -> int | None:  # type: ignore[type-arg]
        scores = matrix @ asked[q["query"]]
        top = np.argsort(-scores, kind="stable")[:10]
        return first_rank([ids[i] for i in top], q["passage_id"])

    return rank_of


def sample(queries: list[dict], folds: list[int], per_fold: int) -> list[int]:  # type: ignore[type-arg]
    """Positions of the `per_fold` queries of each fold with the smallest sha256 of their id (0: all)."""
    if per_fold <= 0:
        return list(range(len(queries)))
    order = sorted(range(len(queries)), key=lambda i: hashlib.sha256(queries[i]["id"].encode()).hexdigest())
    taken: dict[int, int] = {}
    out = []
    for i in order:
        if taken.get(folds[i], 0) < per_fold:
            taken[folds[i]] = taken.get(folds[i], 0) + 1
            out.append(i)
    return sorted(out)


def cached_vectors(folder: Path, kind: str, texts: list[str], query: bool) -> dict[str, Any]:
    """The local model's vector of each text (as the product runs it: embeddings.local_model), by text;
    cached one file per text in a subfolder of `folder` per model name (the onnxruntime and engine paths'
    vectors differ), so an interrupted run resumes. Prints the embedding speed."""
    from indexing.e5_onnx import NAME
    from indexing.embeddings import LocalE5, local_model, onnx_installed

    name = NAME if onnx_installed() else LocalE5.name  # the model local_model() loads (only when a vector is missing)
    folder = folder / re.sub(r"[^A-Za-z0-9._-]+", "_", name)
    folder.mkdir(parents=True, exist_ok=True)
    path = {t: folder / f"{kind}-{hashlib.sha1(t.encode()).hexdigest()}.npy" for t in texts}
    missing = [t for t in dict.fromkeys(texts) if not path[t].exists()]
    if missing:
        model, started = local_model(), time.perf_counter()
        if model.name != name:  # onnxruntime could not run the graph: its vectors are not this folder's
            raise RuntimeError(f"the local model loaded as {model.name}, not {name}: see the warning above")
        for i in range(0, len(missing), 8):
            batch = missing[i : i + 8]
            for text, vector in zip(batch, model.embed(batch, query=query), strict=True):
                np.save(path[text], vector)
        seconds = time.perf_counter() - started
        print(f"({kind}: {len(missing)} texts, {sum(map(len, missing))} chars embedded in {seconds:.0f} s: "
              f"{len(missing) / seconds:.2f} texts/s)", flush=True)
    return {t: np.load(path[t]) for t in dict.fromkeys(texts)}


def document_table(lang: str, docs: list[dict], queries: list[dict], args: argparse.Namespace, work: Path) -> Table:  # type: ignore[type-arg]
    folds = fold_of(queries, args.folds)
    shape = ", plain text files (no headings)" if args.plain else ""
    table = Table(f"{lang} document view{shape}, contains-answer rule (DEV, {args.folds} folds)", folds, args.folds, {}, {}, {})
    store, rows, where = build_document_index(docs, work, plain=args.plain)
    for n, v in enumerate(v for v in chosen_variants(args) if v.stem is None):
        rankers = document_rankers(rows, v.adapt(served_searcher(store, v.params, not args.fts_path)), n == 0)
        rankers[v.name] = rankers.pop("ours")
        for name, rank in rankers.items():
            started = time.perf_counter()
            table.rows[name] = document_ranks(rank, queries, docs, where)[1]
            table.ms[name] = (time.perf_counter() - started) * 1000 / max(1, len(queries))
    store.close()
    for spec in filter(None, args.chunking.split(",")):
        add(table, f"chunks {spec}", chunked_ranks(docs, queries, spec, work / f"chunks-{spec.replace(':', '-')}"))
    ours = {k: table.rows.pop(k) for k in list(table.rows) if k in ("bm25s", "tantivy")}
    table.rows.update(ours)  # baselines below our variants
    add_tuned(table)
    return table


def chunked_ranks(docs: list[dict], queries: list[dict], spec: str, work: Path) -> tuple[Ranks, float]:  # type: ignore[type-arg]
    """Contains-answer ranks of ours over the articles chunked as `spec` ("max_chars:overlap_chars")."""
    max_chars, overlap = (int(n) for n in spec.split(":"))
    work.mkdir()
    store, _, where = build_document_index(docs, work, ChunkingOptions(max_chars=max_chars, overlap_chars=overlap))
    searcher = served_searcher(store)
    started = time.perf_counter()
    ranks = document_ranks(lambda q: [h.chunk_id for h in searcher.search(q, limit=K)], queries, docs, where)[1]
    ms = (time.perf_counter() - started) * 1000 / max(1, len(queries))
    store.close()
    return ranks, ms


def first_articles(corpus: list[dict], queries: list[dict], n: int) -> tuple[list[dict], list[dict]]:  # type: ignore[type-arg]
    """The passages of the first `n` articles by name and the queries about them (a smaller corpus)."""
    kept = set(sorted({p["article_id"] for p in corpus})[:n])
    print(f"(first {n} articles by name: {sum(p['article_id'] in kept for p in corpus)} passages, "
          f"{sum(q['article_id'] in kept for q in queries)} queries)", flush=True)
    return [p for p in corpus if p["article_id"] in kept], [q for q in queries if q["article_id"] in kept]


def chosen_variants(args: argparse.Namespace) -> list[Variant]:
    names = args.variants.split(",") if args.variants else list(VARIANTS)
    return [VARIANTS[n] for n in names]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--eval", type=Path, default=DEFAULT_EVAL)
    parser.add_argument("--lang", default="zh,en")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--no-docs", action="store_true", help="skip the document view")
    parser.add_argument("--variants", default="", help="comma-separated names from bench.retrieval_variants "
                        "(default: all; the first one is the reference 'ours')")
    parser.add_argument("--dense", type=Path, default=None, metavar="DIR",
                        help="instead: the hybrid table (passage view), local-model vectors cached in DIR")
    parser.add_argument("--dense-sample", type=int, default=0, help="queries per fold for --dense (0: all)")
    parser.add_argument("--dense-depth", default="50", help="lexical candidates re-ranked (comma-separated: one row set each)")
    parser.add_argument("--dense-fusion", default="min-max",
                        help=f"comma-separated normalisations before the mix, of {', '.join(FUSIONS)}")
    parser.add_argument("--dense-union", type=int, default=0, metavar="N",
                        help="also rows whose candidates add the N passages nearest by cosine (needs --dense-all)")
    parser.add_argument("--dense-all", action="store_true",
                        help="embed every passage (not only the candidates) and add the dense-alone row")
    parser.add_argument("--articles", type=int, default=0,
                        help="only the first N articles by name and their queries (0: all; a shorter --dense run)")
    parser.add_argument("--fts-path", action="store_true", help="rank with FTS5 + rerank (no in-memory postings)")
    parser.add_argument("--plain", action="store_true",
                        help="plain text: passages without titles as headings, articles as .txt files without one")
    parser.add_argument("--chunking", default="", metavar="MAX:OVERLAP,...",
                        help="document-view rows over the articles chunked with these chunk_max_chars:chunk_overlap_chars")
    args = parser.parse_args(argv)
    if args.dense_union and not args.dense_all:
        parser.error("--dense-union needs --dense-all (the nearest passages come from every passage's vector)")
    started = time.perf_counter()
    for lang in args.lang.split(","):
        corpus = load_jsonl(args.eval / lang / "corpus.jsonl")
        queries = load_jsonl(args.eval / lang / "queries_dev.jsonl")
        if args.articles:
            corpus, queries = first_articles(corpus, queries, args.articles)
        with tempfile.TemporaryDirectory() as tmp:
            if args.dense is not None:
                print(dense_table(lang, corpus, queries, args, Path(tmp)).render(), flush=True)
                continue
            print(passage_table(lang, corpus, queries, args, Path(tmp)).render(), flush=True)
            if not args.no_docs:
                docs = load_jsonl(args.eval / lang / "docs.jsonl")
                print(document_table(lang, docs, queries, args, Path(tmp)).render(), flush=True)
    print(f"\n({time.perf_counter() - started:.0f} s)")
    return 0


Runner = Callable[..., Ranks]

if __name__ == "__main__":
    raise SystemExit(main())
