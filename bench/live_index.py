"""The live index's costs: `python -m bench.live_index [--files 5000] [--rounds 10] [--burst N] [--checkout N]`.

1. save -> searchable: a watched folder (the server's watcher and queue, in this process); a file of each
   format is saved with a new word, and the time until the index holds the new version and a search finds
   the word is taken (p50/p95 per format). The search-time check is not what finds it: the index is
   polled through `indexing.freshness`, which re-indexes nothing.
2. the search-time check: one stat per distinct file of a page + one query, per search (10 files).
3. the watcher at rest: RSS and CPU of watching `--files` files (in folders of 100) for 20 s with nothing
   changing (the queue discards the start-up stat pass: only the watch is measured), with a serving
   process's postings following the index (`MemoryIndex.follow`: a read of the generation every 0.5 s).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import tempfile
import threading
import time
from pathlib import Path

from foundation.settings import load_settings
from tests.docgen import make_docx, make_pdf
from tools.live_index import live_index
from tools.runtime import CallContext, Runtime


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _save(path: Path, word: str) -> None:
    text = f"A line with the word {word} in it, and more ordinary words after it."
    if path.suffix == ".pdf":
        make_pdf(path, [[text]])
    elif path.suffix == ".docx":
        make_docx(path, [text])
    else:
        path.write_text(f"# Title\n\n{text}\n")


def save_to_searchable(rounds: int) -> None:
    from indexing.freshness import changed_files
    from tools.documents import search_documents
    from tools.index_services import index_store
    from tools.index_tools import index_path

    base = Path(tempfile.mkdtemp(prefix="live-bench-"))
    folder = base / "ws" / "docs"
    folder.mkdir(parents=True)
    files = [folder / name for name in ("note.txt", "page.md", "report.docx", "paper.pdf")]
    for f in files:
        _save(f, "start")
    rt = Runtime(load_settings({"data_dir": base / "data", "roots": [base / "ws"]}, environ={}))
    live_index(rt).serving = True  # as the server's warm-up: its watcher runs
    call = CallContext(tool="bench")
    index_path("docs", rt=rt, call=call)
    time.sleep(2.0)  # the watch is in place
    store = index_store(rt)
    print("format   p50 ms   p95 ms   (save -> indexed and found, watched folder)")
    for f in files:
        took = []
        for n in range(rounds):
            word = f"w{f.stem}{n}x"
            time.sleep(0.3)
            start = time.monotonic()
            _save(f, word)
            while changed_files(store, [str(f)]) or store.file_row(str(f)) is None:
                time.sleep(0.005)
            hits = search_documents(word, rt=rt, call=call).hits
            took.append(time.monotonic() - start)
            assert [h.path for h in hits] == [f"docs/{f.name}"], (word, hits)
        took.sort()
        p95 = took[min(len(took) - 1, int(0.95 * len(took)))]
        print(f"{f.suffix:8} {1000 * statistics.median(took):7.0f} {1000 * p95:8.0f}")
    paths = [str(f) for f in files] * 3
    for _ in range(100):
        changed_files(store, paths)
    runs = 2000
    start = time.perf_counter()
    for _ in range(runs):
        changed_files(store, paths[:10])
    print(f"search-time check (10 hits, 4 distinct files): {1e6 * (time.perf_counter() - start) / runs:.0f} us")
    rt.close()


def _latencies(rt: Runtime, call: CallContext, seconds: float, until: object = None) -> list[float]:
    from tools.documents import search_documents

    took: list[float] = []
    end = time.monotonic() + seconds
    words = ["harbour", "cargo", "manifest", "ledger", "pilot"]
    while time.monotonic() < end and not (callable(until) and until()):
        start = time.perf_counter()
        search_documents(words[len(took) % len(words)], rt=rt, call=call)
        took.append(time.perf_counter() - start)
        time.sleep(0.02)
    return sorted(took)


def _p(values: list[float], q: float) -> float:
    return 1000 * values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def _watching(base: Path) -> tuple[Runtime, CallContext, list[float]]:
    """A server's runtime watching `base`/ws/repo once indexed, and search latencies while it rests."""
    from tools.index_tools import index_path

    rt = Runtime(load_settings({"data_dir": base / "data", "roots": [base / "ws"]}, environ={}))
    live_index(rt).serving = True
    call = CallContext(tool="bench")
    index_path("repo", rt=rt, call=call)
    time.sleep(2.0)
    return rt, call, _latencies(rt, call, 5.0)


def burst(count: int) -> None:
    """`count` files of a watched folder rewritten at once (a `git checkout`): search latency meanwhile."""

    base = Path(tempfile.mkdtemp(prefix="live-burst-"))
    folder = base / "ws" / "repo"
    folder.mkdir(parents=True)
    line = "The harbour pilot checks the cargo manifest against the ledger before noon."
    for i in range(count):
        (folder / f"f{i}.md").write_text(f"# File {i}\n\n{line} Version one of {i}.\n")
    rt, call, quiet = _watching(base)
    queue = live_index(rt).queue
    start = time.monotonic()
    for i in range(count):
        (folder / f"f{i}.md").write_text(f"# File {i}\n\n{line} Version two of {i}, rewritten.\n")
    time.sleep(0.5)
    busy = _latencies(rt, call, 120.0, until=lambda: queue.queued() == 0 and time.monotonic() - start > 3)
    print(f"burst of {count} rewritten files: re-indexed in {time.monotonic() - start:.1f} s; search p50/p95 "
          f"quiet {_p(quiet, 0.5):.1f}/{_p(quiet, 0.95):.1f} ms, during {_p(busy, 0.5):.1f}/{_p(busy, 0.95):.1f} ms "
          f"({len(busy)} searches)")
    rt.close()


def checkout(count: int) -> None:
    """A real `git checkout` in a watched repository whose branches differ in `count` files (a tenth of
    them added, a tenth deleted, the rest rewritten): time until the index holds the other branch, and
    search latency meanwhile."""
    import subprocess


    base = Path(tempfile.mkdtemp(prefix="live-checkout-"))
    folder = base / "ws" / "repo"
    folder.mkdir(parents=True)
    git = ["git", "-C", str(folder), "-c", "user.name=bench", "-c", "user.email=bench@localhost"]
    line = "The harbour pilot checks the cargo manifest against the ledger before noon."
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    for i in range(count - count // 10):
        (folder / f"f{i}.md").write_text(f"# File {i}\n\n{line} Branch main, file {i}.\n")
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "main"], check=True)
    subprocess.run([*git, "checkout", "-qb", "other"], check=True)
    for i in range(count // 10, count):
        (folder / f"f{i}.md").write_text(f"# File {i}\n\n{line} Branch other, file {i}, zeppelin.\n")
    for i in range(count // 10):
        (folder / f"f{i}.md").unlink()
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "other"], check=True)
    subprocess.run([*git, "checkout", "-q", "main"], check=True)
    rt, call, quiet = _watching(base)
    queue = live_index(rt).queue
    start = time.monotonic()
    subprocess.run([*git, "checkout", "-q", "other"], check=True)
    switched = time.monotonic() - start
    time.sleep(0.5)
    busy = _latencies(rt, call, 300.0, until=lambda: queue.queued() == 0 and time.monotonic() - start > 3)
    from tools.documents import search_documents

    found = search_documents("zeppelin", max_results=50, rt=rt, call=call)
    print(f"git checkout of a branch differing in {count} files (git took {switched:.1f} s): re-indexed in "
          f"{time.monotonic() - start:.1f} s; search p50/p95 quiet {_p(quiet, 0.5):.1f}/{_p(quiet, 0.95):.1f} ms, "
          f"during {_p(busy, 0.5):.1f}/{_p(busy, 0.95):.1f} ms ({len(busy)} searches); "
          f"{len(found.hits)} hits of the other branch's word afterwards")
    rt.close()


def watcher_at_rest(count: int, seconds: float) -> None:
    from indexing.store import IndexStore
    from tools.index_queue import ReindexQueue, SearchGauge
    from tools.index_watch import FolderWatcher, set_watched

    base = Path(tempfile.mkdtemp(prefix="live-rest-"))
    folder = base / "tree"
    for i in range(count):
        sub = folder / f"d{i // 100:04d}"
        if i % 100 == 0:
            sub.mkdir(parents=True)
        (sub / f"f{i}.md").write_text(f"file {i}")
    store = IndexStore(base / "index.sqlite3")
    set_watched(store, add=[str(folder)])
    queue = ReindexQueue(lambda batch, stop, stats: None, SearchGauge())
    import watchfiles  # noqa: F401  (loaded before the baseline)

    before = _rss_mib()
    lock = threading.Lock()

    class _Held:
        def __enter__(self) -> bool:
            return lock.acquire(blocking=False)

        def __exit__(self, *exc: object) -> None:
            lock.release()

    from indexing.postings import MemoryIndex

    follower = MemoryIndex(store)
    follower.follow()
    watcher = FolderWatcher(store, _Held, queue)
    watcher.start()
    while watcher.status.state != "watching":
        time.sleep(0.05)
    time.sleep(3.0)
    cpu0, wall0 = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
    time.sleep(seconds)
    cpu1, wall = resource.getrusage(resource.RUSAGE_SELF), time.monotonic() - wall0
    used = (cpu1.ru_utime - cpu0.ru_utime) + (cpu1.ru_stime - cpu0.ru_stime)
    print(f"watcher at rest, {count} files in {count // 100} folders: +{_rss_mib() - before:.1f} MiB RSS, "
          f"{100 * used / wall:.2f}% of one core over {wall:.0f} s")
    watcher.close()
    queue.close()
    follower.stop_following()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, nargs="*", default=[5000])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--rest-seconds", type=float, default=20.0)
    parser.add_argument("--burst", type=int, default=0, help="Also rewrite this many watched files at once.")
    parser.add_argument("--checkout", type=int, default=0, help="Also switch a watched git repository to a "
                        "branch that differs in this many files.")
    parser.add_argument("--only-burst", action="store_true", help="Only the --burst and --checkout runs.")
    args = parser.parse_args()
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", "")
    if args.burst:
        burst(args.burst)
    if args.checkout:
        checkout(args.checkout)
    if args.only_burst:
        return
    save_to_searchable(args.rounds)
    for count in args.files:
        watcher_at_rest(count, args.rest_seconds)


if __name__ == "__main__":
    main()
