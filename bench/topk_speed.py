"""Natural-language query time as the index grows: `Snapshot.top` (exact MaxScore, `indexing.topk`)
against the dense pass it replaced (every posting of every query term scattered into an n-row array),
at about 100k and 1M chunks.

    .venv/bin/python -m bench.topk_speed [--eval DIR] [--queries N] [--k K ...] [--search]

100k: the DEV passages chunked and analysed, replicated with a distinct marker per copy (as in
`bench.index_speed`), built with `build_snapshot`; 1M: ten tiles of that snapshot's arrays with
offset rows and chunk ids (the postings a 1M build of the same copies has, idf aside). Two sets of
weights: `copies` (every copy of a passage scores the same: many ties) and `jitter` (every posting's
weight times a random factor in [0.5, 1), so copies differ as real documents do). Per query: wall
clock and CPU time (`time.process_time`; the machine may be shared), the least of 3 runs, p50 / p95
in ms, old and new timed alternately on the same queries. Every answer of the new `top` is checked against the old one.

--search also times the whole `Searcher.search` path (query text in, top 10 with texts out) over a
SQLite store of the 100k chunks; at 1M its snapshot is the tiled one with the chunk ids of the store.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from bench.index_speed import chunk_corpora, fill_store, replicas
from bench.retrieval import DEFAULT_EVAL, load_jsonl
from indexing.postings import MemoryIndex, Snapshot, TermInfo, build_snapshot
from indexing.query import plan
from indexing.scoring import DEFAULT_WEIGHTING
from indexing.search import Searcher
from indexing.store import AnalyzedChunk, IndexStore

Top = tuple[np.ndarray, np.ndarray, np.ndarray]


def dense_top(snap: Snapshot, terms: Sequence[str], k: int) -> Top:
    """`Snapshot.top` before MaxScore: every posting scattered into an n-row array, then partitioned."""
    infos = [snap.terms[t] for t in dict.fromkeys(terms) if t in snap.terms]
    if not infos or k <= 0:
        return np.empty(0, np.int64), np.empty(0, np.float32), np.empty(0, np.int64)
    scores = np.zeros(snap.n_rows, dtype=np.float32)
    touched = []
    for info in infos:
        rows = snap.rows[info.start : info.end]
        scores[rows] += snap.weights[info.start : info.end]
        touched.append(rows)
    cand = np.concatenate(touched) if len(touched) > 1 else touched[0]
    wide = k * len(touched)
    if len(cand) > wide:
        cand = cand[np.argpartition(scores[cand], len(cand) - wide)[len(cand) - wide :]]
    cand = np.unique(cand)
    if len(cand) > k:
        cand = cand[np.argpartition(scores[cand], len(cand) - k)[len(cand) - k :]]
    best = scores[cand]
    order = np.lexsort((snap.chunk_ids[cand], -best))
    cand = cand[order]
    present = np.zeros(len(cand), dtype=np.int64)
    for bit, rows in enumerate(touched[:63]):
        at = np.searchsorted(rows, cand)
        at[at == len(rows)] = 0
        present |= (rows[at] == cand).astype(np.int64) << bit
    return cand, best[order], present


def snapshot_of(chunks: list[AnalyzedChunk], total: int) -> Snapshot:
    """`total` replicated chunks, ids 1.. in `replicas` order (the order `fill_store` writes them)."""
    rows: list[tuple[int, int, str, str]] = []
    for doc, (_key, group) in enumerate(replicas(chunks, total), start=1):
        rows += [(len(rows) + 1, doc, a.head_terms, a.terms) for a in group]
    return build_snapshot(1, rows, DEFAULT_WEIGHTING)


def tile(snap: Snapshot, copies: int, jitter: np.random.Generator | None, *, same_ids: bool = False) -> Snapshot:
    """`copies` tiles of `snap` (rows and, unless `same_ids`, chunk ids offset per tile); `jitter`:
    each posting weight times a random factor in [0.5, 1)."""
    infos = sorted(snap.terms.values(), key=lambda i: i.start)  # the postings, term after term
    lens = np.array([i.end - i.start for i in infos])
    n, total = snap.n_rows, len(snap.rows)
    first = np.repeat(np.array([i.start for i in infos]), lens)  # each posting's term's first posting
    size = np.repeat(lens, lens)
    within = np.arange(total) - first
    rows = np.empty(total * copies, dtype=snap.rows.dtype)
    weights = np.empty(total * copies, dtype=np.float32)
    for c in range(copies):  # a term's postings in tile c follow its postings in tiles 0..c-1
        at = first * copies + c * size + within
        rows[at] = snap.rows + c * n
        w = snap.weights
        weights[at] = w if jitter is None else (w * jitter.uniform(0.5, 1.0, total)).astype(np.float32)
    terms = {t: TermInfo(i.tid, i.start * copies, i.end * copies, i.idf) for t, i in snap.terms.items()}
    step = 0 if same_ids else int(snap.chunk_ids.max()) + 1
    ids = np.concatenate([snap.chunk_ids + c * step for c in range(copies)])
    docs = np.concatenate([snap.doc_ids + c * (0 if same_ids else int(snap.doc_ids.max()) + 1) for c in range(copies)])
    body, body_off = _tile_seq(snap.body, snap.body_off, copies)
    head, head_off = _tile_seq(snap.head, snap.head_off, copies)
    return Snapshot(snap.generation, snap.weighting, terms, ids, docs, rows, weights, body, body_off, head, head_off)


def _tile_seq(seq: np.ndarray, off: np.ndarray, copies: int) -> tuple[np.ndarray, np.ndarray]:
    return np.tile(seq, copies), np.concatenate([off[:-1] + c * len(seq) for c in range(copies)] + [[len(seq) * copies]])


def jittered(snap: Snapshot, rng: np.random.Generator) -> Snapshot:
    return replace(snap, weights=(snap.weights * rng.uniform(0.5, 1.0, len(snap.weights))).astype(np.float32))


def agree(new: Top, old: Top) -> str:
    """'same', 'tie' (equal scores; the old pass picked other rows among those tied at the k-th), or 'DIFFERENT'."""
    if new[0].tolist() == old[0].tolist() and new[1].tobytes() == old[1].tobytes() and new[2].tolist() == old[2].tolist():
        return "same"
    if new[1].tobytes() == old[1].tobytes() and len(new[1]):
        edge = new[1][-1]
        if set(new[0][new[1] > edge].tolist()) == set(old[0][old[1] > edge].tolist()):
            return "tie"
    return "DIFFERENT"


def timed(fns: dict[str, Callable[[Any], object]], queries: Sequence[Any], rounds: int = 3
          ) -> dict[str, tuple[list[float], list[float]]]:
    """Per function: wall ms and CPU ms per query, the functions alternating on each query; each the
    least of `rounds` runs (other processes share the cores: the least is the cost of the query)."""
    out: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in fns}
    for q in queries:
        best = {name: [float("inf"), float("inf")] for name in fns}
        for _ in range(rounds):
            for name, fn in fns.items():
                wall, cpu = time.perf_counter(), time.process_time()
                fn(q)
                cpu = (time.process_time() - cpu) * 1000
                wall = (time.perf_counter() - wall) * 1000
                best[name] = [min(best[name][0], wall), min(best[name][1], cpu)]
        for name in fns:
            out[name][0].append(best[name][0])
            out[name][1].append(best[name][1])
    return out


def pcts(times: list[float]) -> tuple[float, float]:
    times = sorted(times)
    return statistics.median(times), times[max(0, int(len(times) * 0.95) - 1)]


def bench_top(snaps: dict[str, dict[int, Snapshot]], queries: list[list[str]], ks: list[int]) -> list[str]:
    lines = ["| weights | chunks | k | old p50 ms (CPU) | old p95 | new p50 ms (CPU) | new p95 | old / new p50 | answers |",
             "|---|---|---|---|---|---|---|---|---|"]
    p50: dict[tuple[str, int, int], tuple[float, float]] = {}
    for name, by_size in snaps.items():
        for size, snap in by_size.items():
            for k in ks:
                verdicts = [agree(snap.top(q, k), dense_top(snap, q, k)) for q in queries]  # also warms the bounds
                t = timed({"old": lambda q, s=snap, k=k: dense_top(s, q, k),  # type: ignore[misc]
                           "new": lambda q, s=snap, k=k: s.top(q, k)}, queries)  # type: ignore[misc]
                (ow, oc), (nw, nc) = ((pcts(t[f][0]), pcts(t[f][1])) for f in ("old", "new"))
                p50[name, size, k] = ow[0], nw[0]
                counts = ", ".join(f"{v} {verdicts.count(v)}" for v in ("same", "tie", "DIFFERENT") if verdicts.count(v))
                lines.append(f"| {name} | {size:,} | {k} | {ow[0]:.2f} ({oc[0]:.2f}) | {ow[1]:.2f} ({oc[1]:.2f}) "
                             f"| {nw[0]:.2f} ({nc[0]:.2f}) | {nw[1]:.2f} ({nc[1]:.2f}) | {ow[0] / nw[0]:.1f}x | {counts} |")
    lines.append("\n| weights | k | old p50 1M / 100k | new p50 1M / 100k |\n|---|---|---|---|")
    for name, by_size in snaps.items():
        small, big = sorted(by_size)
        for k in ks:
            (os_, ns), (ob, nb) = p50[name, small, k], p50[name, big, k]
            lines.append(f"| {name} | {k} | {ob / os_:.1f}x | {nb / ns:.1f}x |")
    return lines


def bench_search(work: Path, chunks: list[AnalyzedChunk], total: int, copies: int, texts: list[str]) -> list[str]:
    """Searcher.search (limit 10) with the old and the new `top`, over the 100k store and a 1M tile of its snapshot."""
    store = fill_store(IndexStore(work / "search.sqlite3"), replicas(chunks, total))
    memory = MemoryIndex(store)
    snap = memory.build_now()
    assert snap is not None
    searcher = Searcher(store, memory=memory)
    new_top = Snapshot.top
    lines = ["| chunks | old search p50 ms (CPU) | old p95 | new search p50 ms (CPU) | new p95 |", "|---|---|---|---|---|"]
    try:
        for size, current in ((snap.n_rows, snap), (snap.n_rows * copies, tile(snap, copies, None, same_ids=True))):
            memory._snapshot = current
            searcher.search("warm up 预热")
            for text in texts:  # the bounds of every query term, once
                current.top(plan(text).parsed.terms, 1)

            def with_top(top: Callable[..., Top]) -> Callable[[str], object]:
                def run(query: str) -> object:
                    Snapshot.top = top  # type: ignore[method-assign]
                    return searcher.search(query, limit=10)
                return run
            t = timed({"old": with_top(dense_top), "new": with_top(new_top)}, texts)
            (ow, oc), (nw, nc) = ((pcts(t[f][0]), pcts(t[f][1])) for f in ("old", "new"))
            lines.append(f"| {size:,} | {ow[0]:.2f} ({oc[0]:.2f}) | {ow[1]:.2f} ({oc[1]:.2f}) "
                         f"| {nw[0]:.2f} ({nc[0]:.2f}) | {nw[1]:.2f} ({nc[1]:.2f}) |")
    finally:
        Snapshot.top = new_top  # type: ignore[method-assign]
        store.close()
    lines.append("(1M: the 100k snapshot tiled ten times over the same stored chunks, so texts can be read)")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--eval", type=Path, default=DEFAULT_EVAL)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--k", type=int, nargs="+", default=[50], help="top k (Searcher asks for 50; 200 in a path scope)")
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--copies", type=int, default=10, help="tiles of the first snapshot for the large one")
    parser.add_argument("--search", action="store_true", help="also time Searcher.search (builds a SQLite store)")
    args = parser.parse_args(argv)
    rng = random.Random(7)
    texts = [q["query"] for lang in ("zh", "en") for q in load_jsonl(args.eval / lang / "queries_dev.jsonl")]
    texts = rng.sample(texts, min(args.queries, len(texts)))
    queries = [plan(t).parsed.terms for t in texts]
    started = time.perf_counter()
    chunks = chunk_corpora(args.eval)
    base = snapshot_of(chunks, args.chunks)
    print(f"{len(chunks):,} chunks replicated to {base.n_rows:,} ({len(base.rows):,} postings) in "
          f"{time.perf_counter() - started:.0f} s", flush=True)
    gen = np.random.default_rng(11)
    snaps = {"copies": {base.n_rows: base, base.n_rows * args.copies: tile(base, args.copies, None)},
             "jitter": {base.n_rows: jittered(base, gen), base.n_rows * args.copies: tile(base, args.copies, gen)}}
    print("\n".join(bench_top(snaps, queries, args.k)), flush=True)
    if args.search:
        del snaps
        work = Path(tempfile.mkdtemp(prefix="bench-topk-"))
        try:
            print("\n" + "\n".join(bench_search(work, chunks, args.chunks, args.copies, texts)))
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
