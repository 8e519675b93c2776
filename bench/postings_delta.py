"""Search latency while documents change: `python -m bench.postings_delta [--docs 10000] [--burst 100]`.

An index of `--docs` synthetic documents (3 chunks each, Zipf-distributed words) is searched through
the in-memory postings; then `--burst` documents are replaced one write at a time (as a watcher's
re-index does) while searches run. Prints search p50/p95 quiet and during the burst, how many
searches the in-memory engine answered (the rest fell back to the database), and how many whole
postings builds ran meanwhile.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import threading
import time
from pathlib import Path

from indexing.model import Chunk
from indexing.postings import MemoryIndex
from indexing.query import plan
from indexing.search import Searcher
from indexing.store import AnalyzedChunk, IndexStore

WORDS = [f"w{i}" for i in range(20_000)]
WEIGHTS = [1 / (i + 1) for i in range(len(WORDS))]


def _chunks(rng: random.Random, version: int) -> list[AnalyzedChunk]:
    out = []
    for i in range(3):
        terms = " ".join(rng.choices(WORDS, WEIGHTS, k=rng.randint(40, 120)))
        head = " ".join(rng.choices(WORDS, WEIGHTS, k=3))
        text = f"{terms} v{version}"
        out.append(AnalyzedChunk(Chunk(i, 0, len(text), text, head), head, terms))
    return out


def _put(store: IndexStore, path: str, chunks: list[AnalyzedChunk], version: int) -> None:
    with store.write() as conn:
        old = IndexStore.unlink_file(conn, path)
        store.drop_if_orphan(conn, old)
        doc = store.insert_document(conn, f"{path}:{version}", "md", 100, chunks)
        store.link_file(conn, path, doc, 100, version)


def _p(values: list[float], q: float) -> float:
    values = sorted(values)
    return 1000 * values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=10_000)
    parser.add_argument("--burst", type=int, default=100)
    parser.add_argument("--searches", type=int, default=300)
    args = parser.parse_args()
    rng = random.Random(7)
    base = Path(tempfile.mkdtemp(prefix="delta-bench-"))
    store = IndexStore(base / "index.sqlite3")
    for start in range(0, args.docs, 500):
        with store.write() as conn:
            for n in range(start, min(args.docs, start + 500)):
                doc = store.insert_document(conn, f"/d/{n}:0", "md", 100, _chunks(rng, 0))
                store.link_file(conn, f"/d/{n}", doc, 100, 0)
    memory = MemoryIndex(store, directory=base / "postings")
    (base / "postings").mkdir(exist_ok=True)
    t0 = time.perf_counter()
    memory.build_now()
    print(f"{store.generation()[1]:,} chunks; whole build {time.perf_counter() - t0:.1f} s")
    searcher = Searcher(store, memory=memory)
    queries = [" ".join(rng.choices(WORDS[:3000], k=rng.randint(2, 4))) for _ in range(50)]

    def run(count: int, until: threading.Event | None = None) -> tuple[list[float], int]:
        took, fast = [], 0
        for n in range(count):
            if until is not None and until.is_set() and n >= 20:
                break
            q = queries[n % len(queries)]
            start = time.perf_counter()
            got = searcher.rank_by(searcher.engines[0], plan(q), 10, None)
            if got is None:
                searcher.search(q)
            else:
                fast += 1
            took.append(time.perf_counter() - start)
        return took, fast

    run(50)
    quiet, _ = run(args.searches)
    builds = memory.builds
    done = threading.Event()

    edits = [(n, _chunks(random.Random(n), 1)) for n in rng.sample(range(args.docs), args.burst)]  # made beforehand

    def burst() -> None:
        for n, chunks in edits:
            _put(store, f"/d/{n}", chunks, 1)
            time.sleep(0.005)
        done.set()

    writer = threading.Thread(target=burst)
    writer.start()
    busy, fast = run(10**9, until=done)
    writer.join()
    print(f"quiet search p50/p95 {_p(quiet, 0.5):.2f}/{_p(quiet, 0.95):.2f} ms; during a burst of {args.burst} "
          f"replaced documents {_p(busy, 0.5):.2f}/{_p(busy, 0.95):.2f} ms ({len(busy)} searches, {fast} in memory, "
          f"{memory.builds - builds} whole builds)")
    store.close()


if __name__ == "__main__":
    main()
