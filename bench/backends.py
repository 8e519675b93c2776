"""The index on SQLite (FTS5) and on PostgreSQL (tsvector + GIN), like for like.

    .venv/bin/python -m bench.backends [--quick] [--sizes 5000,100000] [--queries N] [--eval DIR]

1. Retrieval quality on the DEV queries (passage view of bench.retrieval, both languages): the
   served configuration (the in-memory postings rank; identical on both backends by construction)
   and the database engine alone (`memory=False`: FTS5's bm25 top 50 vs PgEngine's top 50 by
   idf-weighted ts_rank, then the one scorer). The engine-only R@1 difference is the number to
   watch (target: PostgreSQL within 0.01 of SQLite).
2. Cost at each size (the eval documents cut by our chunker, repeated with a distinct marker term
   per copy, 50 chunks a document, as bench.index_speed builds its latency index): index speed of
   the indexer's writes (`insert_document` + `link_file`, terms already analysed) all in one
   `write()` and with a `write()` per document (as the indexer writes each file); database size
   (SQLite: the file after a WAL checkpoint; PostgreSQL: pg_total_relation_size of the index
   tables); query p50/p95 in this process (DEV questions, top 10) with the engine alone and in the
   served configuration (in-memory postings built first); and how often the engine alone finds the
   best chunk that scoring every match (served) finds: what its top-50 candidate cut loses.
3. The indexer end to end (read, extract, chunk, analyse, a write per file) on the eval documents
   as Markdown files, on each backend.

PostgreSQL is a throwaway local server (tests/pg_server.py: initdb + pg_ctl of the installed
binaries, fsync and synchronous_commit off, 32 MB shared_buffers); without the binaries this prints how to install them and exits 0.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.index_speed import Replicas, chunk_corpora, fill_store, replicas
from bench.retrieval import (
    DEFAULT_EVAL,
    Scores,
    fill_passage_index,
    load_jsonl,
    passage_rank_of,
    score_ranks,
    served_searcher,
)
from indexing.postings import MemoryIndex
from indexing.search import ChunkHit, Searcher
from indexing.store import IndexStore
from tests.pg_server import INSTALL_HINT, PgServer, find_bindir

BACKENDS = ("SQLite", "PostgreSQL")


class Stores:
    """Fresh, empty indexes on either backend (SQLite files in `work`, PostgreSQL schemas on `server`)."""

    def __init__(self, work: Path, server: PgServer) -> None:
        self.work, self.server = work, server
        self._databases: list[Any] = []
        self._made = 0

    def new(self, backend: str) -> IndexStore:
        self._made += 1
        if backend == "SQLite":
            return IndexStore(self.work / f"index-{self._made}.sqlite3")
        from foundation.storage import open_database
        from indexing.pg_store import pg_index

        url, _ = self.server.fresh_schema()
        database = open_database(self.work, url)
        self._databases.append(database)
        return pg_index(database)  # type: ignore[arg-type]

    def close(self) -> None:
        for database in self._databases:
            database.close()


@contextmanager
def postgres_server() -> Iterator[PgServer | None]:
    """A throwaway PostgreSQL server, or None when its binaries are not installed."""
    bindir = find_bindir()
    if bindir is None:
        yield None
        return
    server = PgServer(bindir)
    try:
        server.start()
        yield server
    finally:
        server.stop()


def db_bytes(store: IndexStore) -> int:
    if store.backend == "sqlite":
        store.conn().execute("PRAGMA wal_checkpoint(TRUNCATE)")  # count each page once
    return store.db_bytes()


# -- 1. retrieval quality --------------------------------------------------------------------------


@dataclass
class Quality:
    """One configuration's first-hit ranks per language (None: a miss)."""

    ranks: dict[str, list[int | None]]

    def scores(self, lang: str) -> Scores:
        return score_ranks(self.ranks[lang])


CONFIGS = (("served (in-memory postings)", True), ("engine only", False))


def bench_quality(stores: Stores, eval_dir: Path, langs: list[str], n_queries: int | None) -> dict[str, Quality]:
    """Ranks of every (backend, configuration) on the DEV queries of each language."""
    out: dict[str, Quality] = {}
    for lang in langs:
        corpus = load_jsonl(eval_dir / lang / "corpus.jsonl")
        queries = load_jsonl(eval_dir / lang / "queries_dev.jsonl")[:n_queries]
        for backend in BACKENDS:
            store = fill_passage_index(stores.new(backend), corpus)
            for config, memory in CONFIGS:
                rank_of = passage_rank_of(served_searcher(store, memory=memory))
                out.setdefault(f"{backend}, {config}", Quality({})).ranks[lang] = [rank_of(q) for q in queries]
            store.close()
    return out


def quality_table(results: dict[str, Quality], langs: list[str]) -> list[str]:
    head = " | ".join(f"{lang} R@1 | {lang} MRR@10" for lang in langs)
    lines = [f"| index (DEV, passage view) | {head} |", "|---|" + "---|" * (2 * len(langs))]
    for name, quality in results.items():
        cells = " | ".join(f"{s.r1:.3f} | {s.mrr:.3f}" for s in map(quality.scores, langs))
        lines.append(f"| {name} | {cells} |")
    for config, _ in CONFIGS:
        sqlite, pg = results[f"SQLite, {config}"], results[f"PostgreSQL, {config}"]
        diffs = []
        for lang in langs:
            a, b = sqlite.scores(lang), pg.scores(lang)
            same = sum((x == 1) == (y == 1) for x, y in zip(sqlite.ranks[lang], pg.ranks[lang], strict=True))
            diffs.append(f"{lang} R@1 {b.r1 - a.r1:+.4f}, MRR@10 {b.mrr - a.mrr:+.4f} "
                         f"(top-1 hit/miss agrees on {same / max(1, len(pg.ranks[lang])):.1%} of {len(pg.ranks[lang])})")
        lines.append(f"PostgreSQL - SQLite, {config}: " + "; ".join(diffs))
    return lines


# -- 2. cost -------------------------------------------------------------------------------------


@dataclass
class Cost:
    chunks: int
    index_s: float  # one write of every document
    per_doc_s: float  # a write per document, as the indexer writes a file
    bytes: int
    engine: Timed  # memory off
    served: Timed  # with the in-memory postings
    memory_build_s: float


@dataclass
class Timed:
    p50: float
    p95: float
    top: list[str]  # each query's best chunk text ("" when nothing matched)


def timed(search: Callable[[str], list[ChunkHit]], queries: list[str]) -> Timed:
    """Milliseconds per query (p50, p95) and each query's best chunk."""
    times, top = [], []
    for q in queries:
        started = time.perf_counter()
        hits = search(q)
        times.append((time.perf_counter() - started) * 1000)
        top.append(hits[0].text if hits else "")
    times.sort()
    return Timed(statistics.median(times), times[max(0, int(len(times) * 0.95) - 1)], top)


def measure_cost(stores: Stores, backend: str, docs: Replicas, queries: list[str]) -> Cost:
    store = stores.new(backend)
    started = time.perf_counter()
    fill_store(store, docs)
    index_s = time.perf_counter() - started
    size = db_bytes(store)
    engine_only = Searcher(store)
    engine_only.search("warm up 预热")
    engine = timed(lambda q: engine_only.search(q, limit=10), queries)
    memory = MemoryIndex(store)
    started = time.perf_counter()
    memory.build_now()
    built = time.perf_counter() - started
    with_memory = Searcher(store, memory=memory)
    with_memory.search("warm up 预热")
    served = timed(lambda q: with_memory.search(q, limit=10), queries)
    chunks = store.totals()["chunks"]
    store.close()
    per_doc = stores.new(backend)
    started = time.perf_counter()
    fill_store(per_doc, docs, per_write=1)
    per_doc_s = time.perf_counter() - started
    per_doc.close()
    return Cost(chunks, index_s, per_doc_s, size, engine, served, built)


def bench_cost(stores: Stores, eval_dir: Path, sizes: list[int], n_queries: int,
               say: Callable[[str], None]) -> dict[tuple[int, str], Cost]:
    chunks = chunk_corpora(eval_dir)
    rng = random.Random(7)
    queries = [q["query"] for lang in ("zh", "en") for q in load_jsonl(eval_dir / lang / "queries_dev.jsonl")]
    queries = rng.sample(queries, min(n_queries, len(queries)))
    out: dict[tuple[int, str], Cost] = {}
    for size in sizes:
        docs = replicas(chunks, size)
        for backend in BACKENDS:
            out[size, backend] = cost = measure_cost(stores, backend, docs, queries)
            say(f"  {backend}, {cost.chunks:,} chunks: indexed in {cost.index_s:.1f} s (one write), "
                f"{cost.per_doc_s:.1f} s (a write per document)")
    return out


def cost_table(results: dict[tuple[int, str], Cost], n_queries: int) -> list[str]:
    lines = ["| chunks | backend | index chunks/s: one write | a write per document | DB MB "
             "| engine only p50 / p95 ms | served p50 / p95 ms | postings built s |", "|---|---|---|---|---|---|---|---|"]
    for (_, backend), c in results.items():
        lines.append(f"| {c.chunks:,} | {backend} | {c.chunks / c.index_s:,.0f} | {c.chunks / c.per_doc_s:,.0f} "
                     f"| {c.bytes / 1e6:.1f} | {c.engine.p50:.1f} / {c.engine.p95:.1f} "
                     f"| {c.served.p50:.2f} / {c.served.p95:.2f} | {c.memory_build_s:.1f} |")
    for size in dict.fromkeys(s for s, _ in results):
        sqlite, pg = results[size, "SQLite"], results[size, "PostgreSQL"]
        lines.append(
            f"{sqlite.chunks:,} chunks: PostgreSQL indexes at {sqlite.index_s / pg.index_s:.2f}x SQLite's speed "
            f"in one write, {sqlite.per_doc_s / pg.per_doc_s:.2f}x with a write per document (target >= 0.5x); "
            f"{pg.bytes / sqlite.bytes:.1f}x its size; engine-only p50 {pg.engine.p50 / sqlite.engine.p50:.1f}x. "
            f"Engine-only best chunk = the exhaustive best (served: every matching chunk scored): "
            f"SQLite {exact(sqlite):.1%}, PostgreSQL {exact(pg):.1%}")
    lines.append(f"({n_queries} DEV questions, zh and en mixed, top 10, in this process; engine only: FTS5 / "
                 "PgEngine candidates + the scorer; served: the in-memory postings. Writes: insert_document + "
                 "link_file, documents of 50 chunks, already analysed.)")
    return lines


def exact(cost: Cost) -> float:
    """Share of queries whose engine-only best chunk text is the served (exhaustive) one."""
    same = sum(a == b for a, b in zip(cost.engine.top, cost.served.top, strict=True))
    return same / max(1, len(cost.served.top))


def bench_indexer(stores: Stores, eval_dir: Path, work: Path) -> list[str]:
    """The indexer end to end (read, extract, chunk, analyse, write a file a transaction) on the
    eval documents written as Markdown files, on each backend."""
    from indexing.indexer import Indexer

    folder = work / "markdown"
    folder.mkdir()
    for lang in ("zh", "en"):
        for i, d in enumerate(load_jsonl(eval_dir / lang / "docs.jsonl")):
            (folder / f"{lang}{i:05d}.md").write_text(f"# {d['title'].replace('_', ' ')}\n\n{d['text']}", encoding="utf-8")
    cells = []
    for backend in BACKENDS:
        store = stores.new(backend)
        started = time.perf_counter()
        report = Indexer(store).index_tree(folder)
        took = time.perf_counter() - started
        assert not report.failed, report.failed[:3]
        cells.append(f"{backend} {took:.1f} s ({report.chunks_added / took:,.0f} chunks/s)")
        store.close()
    return [f"Indexer.index_tree end to end, the eval documents as {report.indexed:,} Markdown files "
            f"({report.chunks_added:,} chunks): " + ", ".join(cells)]


# -- main ----------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--eval", type=Path, default=DEFAULT_EVAL)
    parser.add_argument("--quick", action="store_true", help="300 queries a language, 5k chunks, 100 latency queries")
    parser.add_argument("--sizes", help="chunk counts of the cost rows (default 5000,100000; quick: 5000)")
    parser.add_argument("--queries", type=int, help="latency queries (default 300; quick: 100)")
    parser.add_argument("--lang", default="zh,en")
    parser.add_argument("--skip-quality", action="store_true")
    parser.add_argument("--skip-cost", action="store_true")
    parser.add_argument("--skip-indexer", action="store_true", help="skip the end-to-end indexer row")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in (args.sizes or ("5000" if args.quick else "5000,100000")).split(",")]
    n_latency = args.queries or (100 if args.quick else 300)
    n_quality = 300 if args.quick else None
    langs = args.lang.split(",")
    work = Path(tempfile.mkdtemp(prefix="bench-backends-"))
    started = time.perf_counter()
    try:
        with postgres_server() as server:
            if server is None:
                print(f"skipped: {INSTALL_HINT}")
                return 0
            stores = Stores(work, server)
            try:
                run(stores, args, langs, n_quality, sizes, n_latency)
            finally:
                stores.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n({time.perf_counter() - started:.0f} s; run: sizes {','.join(map(str, sizes))}, "
          f"{'all' if n_quality is None else n_quality} DEV queries a language for quality, {n_latency} for latency)")
    return 0


def run(stores: Stores, args: argparse.Namespace, langs: list[str], n_quality: int | None, sizes: list[int],
        n_latency: int) -> None:
    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    if not args.skip_quality:
        print("\n".join(quality_table(bench_quality(stores, args.eval, langs, n_quality), langs)), flush=True)
        print()
    if not args.skip_cost:
        print("\n".join(cost_table(bench_cost(stores, args.eval, sizes, n_latency, say), n_latency)), flush=True)
    if not args.skip_indexer:
        print("\n".join(bench_indexer(stores, args.eval, stores.work)), flush=True)


if __name__ == "__main__":
    raise SystemExit(main())
