"""The live index on a large index: search latency while watched files change, beside a base of N chunks.

    .venv/bin/python -m bench.live_scale --base-chunks 1000000 [--backend sqlite|postgresql] [--burst 100]
        [--repeats 3] [--checkout 2000] [--work DIR] [--seconds 20]

The index first gets `--base-chunks` replicated eval chunks (`bench.scale.fill_replicas`: the eval corpora
cut by our chunker, 50 chunks a document, each document linked to an empty file of a base folder in the
workspace, so the search-time check finds them current), then the in-memory postings are built. Then:
1. quiet: DEV questions (zh and en, natural mode, top 10 documents' passages as `search_documents` gives
   them) for `--seconds`, one every 20 ms: p50/p95.
2. burst: `--burst` files of a watched folder (each a few eval passages) rewritten at once; the same
   searches until the index holds every new version (time to re-index), then on until the postings'
   delta is merged into a new base (SQLite) or for 3 x `--seconds` more (PostgreSQL): "after".
3. checkout: a real `git checkout` in a watched repository of `--checkout` files whose branches differ in
   all of them (a tenth added, a tenth deleted, the rest rewritten); the same measures.

SQLite: the server's runtime in this process (its watcher and re-index queue), searches through the tool
function. PostgreSQL (a throwaway server unless GENERALAGENT_DATABASE_URL is set): the base is written by
this process, then `serve --transport http --workers 2` runs on it and every search is a real MCP call
over HTTP on one of two keep-alive connections (one per worker when the kernel spreads them so).
`--work DIR` keeps the SQLite base (data dir and base folder) for the next run of the same size.
Run it with `nice` on a shared machine and say what else ran: load is printed with each row.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from bench.retrieval import DEFAULT_EVAL
from bench.scale import PER_DOC, base_chunks, fill_replicas, prepare

BASE_MTIME_NS = 1_600_000_000 * 10**9  # the base folder's empty files' mtime (stored as indexed)
Search = Callable[[str], None]
RUN = time.strftime("%Y%m%d%H%M%S")


# -- the base -------------------------------------------------------------------------------------


def base_files(ws: Path, total: int) -> Callable[[str], tuple[str, int, int]]:
    """Empty files `ws/base/dNNN/<key>.txt`, one per base document, and (path, size, mtime) of a key."""
    folder = ws / "base"
    for n in range((total + PER_DOC - 1) // PER_DOC):
        sub = folder / f"d{n // 1000:03d}"
        sub.mkdir(parents=True, exist_ok=True)
        path = sub / f"{n}.txt"
        path.touch()
        os.utime(path, ns=(BASE_MTIME_NS, BASE_MTIME_NS))
    return lambda key: (str(folder / f"d{int(key) // 1000:03d}" / f"{key}.txt"), 0, BASE_MTIME_NS)


def fill_base(settings: dict[str, Any], work: Path, total: int) -> tuple[float, float]:
    """The base written through a runtime of `settings` (analyzer, chunking and OCR marks set on the empty
    index first, as the indexer would) and its postings built: (seconds to write, seconds to build)."""
    from foundation.settings import load_settings
    from tools.index_services import index_store, indexer_for, memory_index
    from tools.runtime import Runtime

    rt = Runtime(load_settings(settings, environ={}))
    try:
        store = index_store(rt)
        indexer_for(rt)
        assert store.generation()[1] == 0, "the base goes into an empty index"
        written = fill_replicas(store, work, total, base_files(Path(settings["roots"][0]), total))
        started = time.perf_counter()
        assert memory_index(rt).build_now() is not None
        return written, time.perf_counter() - started
    finally:
        rt.close()


# -- the watched files ------------------------------------------------------------------------------


def passages(work: Path) -> list[str]:
    texts = [c[2] for c in base_chunks(work)]
    random.Random(3).shuffle(texts)
    return texts


def file_text(texts: list[str], i: int, version: str) -> str:
    """A watched file: a heading and three eval passages (about three chunks), plus a version line (with the
    run's start: no document of an earlier run is reused by its hash)."""
    body = "\n\n".join(texts[(3 * i + k) % len(texts)] for k in range(3))
    return f"# File {i}\n\n{body}\n\nVersion {version} of file {i}, run {RUN}.\n"


def make_repo(folder: Path, texts: list[str], count: int) -> list[str]:
    """A git repository whose branches `main` (checked out) and `other` differ in `count` files; the git
    command line."""
    folder.mkdir(parents=True)
    git = ["git", "-C", str(folder), "-c", "user.name=bench", "-c", "user.email=bench@localhost"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    for i in range(count - count // 10):
        (folder / f"f{i}.md").write_text(file_text(texts, i, "main"))
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "main"], check=True)
    subprocess.run([*git, "checkout", "-qb", "other"], check=True)
    for i in range(count // 10, count):
        (folder / f"f{i}.md").write_text(file_text(texts, i + 7, "other"))
    for i in range(count // 10):
        (folder / f"f{i}.md").unlink()
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "other"], check=True)
    subprocess.run([*git, "checkout", "-q", "main"], check=True)
    return git


# -- measuring -------------------------------------------------------------------------------------


def sample(search: Search, questions: list[str], until: Callable[[], bool], limit: float) -> list[float]:
    """Search latencies (seconds, sorted), a question every 20 ms, until `until()` or `limit` seconds."""
    took: list[float] = []
    end = time.monotonic() + limit
    while time.monotonic() < end and not until():
        q = questions[len(took) % len(questions)]
        start = time.perf_counter()
        search(q)
        took.append(time.perf_counter() - start)
        time.sleep(0.02)
    return sorted(took)


def every(seconds: float, check: Callable[[], bool]) -> Callable[[], bool]:
    """`check`, asked at most once per `seconds` (False in between): the searches' loop stays light."""
    last = [time.monotonic()]

    def throttled() -> bool:
        if time.monotonic() - last[0] < seconds:
            return False
        last[0] = time.monotonic()
        return check()

    return throttled


def cell(values: list[float]) -> str:
    if not values:
        return "-"
    p95 = values[min(len(values) - 1, int(0.95 * len(values)))]
    return f"{1000 * statistics.median(values):.1f} / {1000 * p95:.1f} ({len(values)})"


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


class Run:
    """What one backend's run needs: search, whether the index holds the files on disk, whether the
    postings are merged."""

    search: Search
    store: Any  # the index's store, read by this process
    merged: Callable[[], bool]
    after: float  # seconds the "after" window lasts at most
    index_folder: Callable[[str], None]


def changed(store: Any, folder: Path) -> bool:
    """True while the index does not hold `folder`'s files as they are on disk (new, changed or gone)."""
    from indexing.freshness import changed_files

    on_disk = {str(p) for p in folder.glob("*.md")}
    prefix = str(folder) + os.sep
    stored = {str(r[0]) for r in store.conn().execute(
        "SELECT path FROM files WHERE path LIKE ? AND doc_id IS NOT NULL", (prefix + "%",)).fetchall()}
    return stored != on_disk or bool(changed_files(store, sorted(on_disk)))


def phase(run: Run, questions: list[str], folder: Path, change: Callable[[], object], after_limit: float,
          repeats: int = 1) -> str:
    """`change()` applied, searches until the index holds `folder` as on disk, then until merged; `repeats`
    times (each `change()` must change the files again), the samples pooled and the times of the last."""
    before = load()
    during: list[float] = []
    after: list[float] = []
    for _ in range(repeats):
        start = time.monotonic()
        change()
        changed_at = time.monotonic() - start
        during += sample(run.search, questions, every(0.5, lambda at=start: time.monotonic() - at > 1 and not changed(
            run.store, folder)), 600)
        took = time.monotonic() - start
        after += sample(run.search, questions, every(0.5, run.merged), after_limit)
        merged = time.monotonic() - start
    return (f"{cell(sorted(during))} | {took:.1f} s (the change itself {changed_at:.1f} s) | {cell(sorted(after))} | "
            f"{merged:.0f} s | {before} -> {load()}")


def scenario(run: Run, work: Path, ws: Path, questions: list[str], burst: int, checkout: int,
             seconds: float, repeats: int = 1) -> list[str]:
    texts = passages(work)
    stamp = time.strftime("%H%M%S")
    rows = Rows()
    sample(run.search, questions, lambda: False, 3.0)  # (first searches: imports, caches)
    quiet = sample(run.search, questions, lambda: False, seconds)
    rows.append(f"quiet | {cell(quiet)} | load {load()}")
    if burst:
        folder = ws / f"burst-{stamp}"
        folder.mkdir()
        for i in range(burst):
            (folder / f"f{i}.md").write_text(file_text(texts, i, "one"))
        run.index_folder(folder.name)
        wait(lambda: not changed(run.store, folder) and run.merged(), 900)

        turn = iter(range(1, 10**6))

        def rewrite() -> None:
            n = next(turn)
            for i in range(burst):
                (folder / f"f{i}.md").write_text(file_text(texts, i + n, f"two-{n}"))

        rows.append(f"burst of {burst}{f' x {repeats}' if repeats > 1 else ''} | "
                    f"{phase(run, questions, folder, rewrite, run.after, repeats)}")
    if checkout:
        folder = ws / f"repo-{stamp}"
        git = make_repo(folder, texts, checkout)
        run.index_folder(folder.name)
        wait(lambda: not changed(run.store, folder) and run.merged(), 900)
        quiet = sample(run.search, questions, lambda: False, seconds)
        rows.append(f"quiet before the checkout | {cell(quiet)} | load {load()}")
        rows.append(f"git checkout of {checkout} | " + phase(
            run, questions, folder, lambda: subprocess.run([*git, "checkout", "-q", "other"], check=True), run.after))
    return rows


class Rows(list[str]):
    """The table's rows, each also printed (to stderr) as soon as it is measured."""

    def append(self, row: str) -> None:
        print("| " + row + " |", file=sys.stderr, flush=True)
        super().append(row)


def wait(done: Callable[[], bool], limit: float) -> None:
    end = time.monotonic() + limit
    while not done():
        if time.monotonic() > end:
            raise SystemExit("timed out waiting for the index")
        time.sleep(0.5)


# -- the backends ------------------------------------------------------------------------------------


def sqlite_run(data: Path, ws: Path) -> Iterator[Run]:
    from foundation.settings import load_settings
    from tools.documents import search_documents
    from tools.index_services import index_store, memory_index, warm_up_search
    from tools.index_tools import index_path
    from tools.live_index import live_index, prefer_searches
    from tools.runtime import CallContext, Runtime

    # (lexical, as the PostgreSQL run: with the semantic extra installed the default hybrid mode would embed
    # the 1M chunks in the background for hours, a core busy throughout)
    rt = Runtime(load_settings({"data_dir": data, "roots": [ws], "embedding_provider": "off"}, environ={}))
    live_index(rt).serving = True  # as the server's warm-up: its watcher runs
    prefer_searches()
    call = CallContext(tool="bench")
    store, memory = index_store(rt), memory_index(rt)
    warm_up_search(rt)  # as the server's warm-up: the postings, jieba's dictionary
    assert memory.build_now() is not None
    run = Run()
    run.search = lambda q: _ignore(search_documents(q, rt=rt, call=call))
    run.store = store
    run.merged = lambda: _merged(memory, store)
    run.after = 300.0
    run.index_folder = lambda name: _ignore(index_path(name, rt=rt, call=call))
    try:
        yield run
    finally:
        rt.close()


def _merged(memory: Any, store: Any) -> bool:
    """True when the postings' base is of the index's generation (no delta); else asks for the postings
    as a search does (which starts the merge once the delta is quiet)."""
    generation, chunks = store.generation()
    memory.current(generation, chunks)
    snap = memory._snapshot  # (the base, not a delta)
    return snap is not None and int(snap.generation) == generation


def _ignore(_: object) -> None:
    return None


def pg_run(url: str, data: Path, ws: Path, workers: int, after: float) -> Iterator[Run]:
    from bench.workers import serve, wait_idle
    from foundation.storage import open_database
    from tools.index_services import open_index

    # the lexical live index alone: with the default hybrid mode the workers embed the 1M chunks in the
    # background for hours (a core busy, and "idle" never comes)
    env = {"GENERALAGENT_DATA_DIR": str(data), "GENERALAGENT_ROOTS": str(ws), "GENERALAGENT_EMBEDDING_PROVIDER": "off"}
    database = open_database(data, url)
    store = open_index(database)
    with serve(url, workers, data.parent, env) as (port, pid):
        wait_idle(pid, 300)
        idle_at_start = [time.monotonic()]
        wait(lambda: _idle(pid, idle_at_start), 900)  # (a merge of changes from before the start: 2 s later)
        conns = _connections(port, workers)
        turn = iter(range(10**9))

        def search(q: str) -> None:
            _retried(conns, next(turn) % len(conns), port, "search_documents", {"query": q})

        def index_folder(name: str) -> None:
            _retried(conns, 0, port, "index_path", {"path": name, "wait": False})  # (the bench waits for it)

        idle_since = [time.monotonic()]
        run = Run()
        run.search = search
        run.store = store
        run.merged = lambda: _idle(pid, idle_since)
        run.after = after
        run.index_folder = index_folder
        try:
            yield run
        finally:
            for conn in conns:
                conn.close()
            database.close()


def _call(conn: http.client.HTTPConnection, tool: str, arguments: dict[str, Any]) -> None:
    """A tool call over HTTP (as `bench.workers.call`); SystemExit with the answer when it fails."""
    from bench.workers import post_call

    status, body = post_call(conn, tool, arguments)
    answer = json.loads(body) if status == 200 else {}
    if "result" not in answer or answer["result"].get("isError"):
        raise SystemExit(f"{tool} failed: {status} {body[:2000]!r}")


def _retried(conns: list[http.client.HTTPConnection], at: int, port: int, tool: str, arguments: dict[str, Any]) -> None:
    """`_call` on `conns[at]`, on a new connection when the server closed that one (idle keep-alive)."""
    try:
        _call(conns[at], tool, arguments)
    except (OSError, http.client.HTTPException):
        conns[at].close()
        conns[at] = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        _call(conns[at], tool, arguments)


def _idle(pid: int, since: list[float]) -> bool:
    """True once the server's processes used under 15% of a core over the last 3 s (searches included):
    its workers are done re-indexing and merging (a merge starts 2 s after the last change: MERGE_QUIET_S)."""
    from bench.workers import cpu_seconds

    now, used = time.monotonic(), cpu_seconds(pid) or 0.0
    if len(since) == 1:
        since.append(used)
        return False
    if now - since[0] < 3.0:
        return False
    busy = (used - since[1]) / (now - since[0])
    since[0], since[1] = now, used
    return busy < 0.15


def _connections(port: int, workers: int) -> list[http.client.HTTPConnection]:
    """Keep-alive connections, one per worker when the kernel spreads them so (20 tries)."""
    by_pid: dict[int, http.client.HTTPConnection] = {}
    for _ in range(20):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        conn.request("GET", "/health")
        pid = int(json.loads(conn.getresponse().read())["pid"])
        if pid in by_pid:
            conn.close()
        else:
            by_pid[pid] = conn
        if len(by_pid) == workers:
            break
    return list(by_pid.values())


# -- main ------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-chunks", type=int, default=100_000)
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--workers", type=int, default=2, help="PostgreSQL: server processes.")
    parser.add_argument("--burst", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3, help="Bursts, their samples pooled (a burst is ~1 s).")
    parser.add_argument("--checkout", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=20.0, help="Quiet sampling (and PostgreSQL's after).")
    parser.add_argument("--work", type=Path, help="Keep the SQLite base here (reused by a run of the same size).")
    parser.add_argument("--eval", type=Path, default=DEFAULT_EVAL)
    args = parser.parse_args()
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", "")
    work = (args.work or Path(tempfile.mkdtemp(prefix="live-scale-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    if not (work / "queries.json").exists():
        prepare(work, args.eval, 2000)
    questions = [q for q in json.loads((work / "queries.json").read_text(encoding="utf-8"))["texts"] if q.strip()]
    try:
        rows = measure(args, work, questions)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    print(f"{args.backend}, base {args.base_chunks:,} chunks"
          f"{f', {args.workers} workers over HTTP' if args.backend == 'postgresql' else ', in process'}; "
          f"{os.cpu_count()} CPUs, load 1/5/15 min")
    print("| phase | search p50 / p95 ms (n) | re-indexed in | after: p50 / p95 ms (n) | merged/idle at | load |")
    for row in rows:
        print("| " + row + " |")


def measure(args: argparse.Namespace, work: Path, questions: list[str]) -> list[str]:
    if args.backend == "sqlite":
        home = work / f"sqlite-{args.base_chunks}"
        data, ws = home / "data", home / "ws"
        if not (home / "built").exists():
            shutil.rmtree(home, ignore_errors=True)
            ws.mkdir(parents=True)
            written, built = fill_base({"data_dir": data, "roots": [ws]}, work, args.base_chunks)
            (home / "built").write_text(f"{written:.0f} s written, postings {built:.0f} s")
        note = f"base: {(home / 'built').read_text()}"
        return [note, *_with(_context(sqlite_run(data, ws)), work, ws, questions, args)]
    from bench.workers import database

    with database(os.environ.get("GENERALAGENT_DATABASE_URL")) as url:
        home = Path(tempfile.mkdtemp(prefix="live-scale-pg-", dir=work))
        data, ws = home / "data", home / "ws"
        ws.mkdir(parents=True)
        written, built = fill_base({"data_dir": data, "roots": [ws], "database_url": url}, work, args.base_chunks)
        note = f"base: {written:.0f} s written, postings {built:.0f} s"
        return [note, *_with(_context(pg_run(url, data, ws, args.workers, 3 * args.seconds)), work, ws, questions, args)]


def _with(ctx: AbstractContextManager[Run], work: Path, ws: Path, questions: list[str],
          args: argparse.Namespace) -> list[str]:
    with ctx as run:
        return scenario(run, work, ws, questions, args.burst, args.checkout, args.seconds, args.repeats)


def _context(gen: Iterator[Run]) -> AbstractContextManager[Run]:
    return contextmanager(lambda: gen)()


if __name__ == "__main__":
    main()
