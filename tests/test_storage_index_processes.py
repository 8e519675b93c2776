"""The index in PostgreSQL shared by several processes: a run killed with SIGKILL mid-folder leaves a
consistent, searchable index (term statistics and totals agree with the chunks), its path is free
again at once and its run shows as interrupted; while a run is alive in one process, another
process cannot start a second run of that path and sees the first as running; documents indexed in
one process are found by the next search in another, whose in-memory postings are then stale."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from foundation.errors import Conflict

ROOT = Path(__file__).resolve().parent.parent

INDEX_RUN = r"""
import sys
sys.path.insert(0, sys.argv[1])
from pathlib import Path
from foundation.storage import open_database
from indexing.indexer import Indexer
from indexing.jobs import JobRegistry
from tools.index_services import open_index
db = open_database(Path(sys.argv[3]), sys.argv[2])
store = open_index(db)
jobs = JobRegistry(store, db)
job, _ = jobs.claim(sys.argv[4], background=False)
def work(should_cancel, progress, report):
    Indexer(store, should_cancel=should_cancel).index_tree(Path(sys.argv[4]), progress=progress, report=report)
held = int(sys.argv[5])
def progress(done, total, message):
    print(done, flush=True)
    if held and done >= held:  # held here, mid-folder, until the test kills it (or closes its stdin)
        sys.stdin.readline()
jobs.run(job, work, lambda: False, progress)
print("finished", flush=True)
"""


def corpus(folder: Path, files: int, tag: str = "") -> Path:
    folder.mkdir()
    words = ["营收", "客户", "revenue", "growth", "baseline", "analysis", "quarterly", "report", "lighthouse"]
    for i in range(files):
        body = " ".join(words[(i + k) % len(words)] for k in range(300)) + f" marker{i} {tag}"
        (folder / f"f{i:03d}.md").write_text(body, encoding="utf-8")
    return folder


def start_run(url: str, data_dir: Path, folder: Path, hold_at: int = 0) -> subprocess.Popen[str]:
    """An index run of `folder` in another process; `hold_at`: it stops once that many files are indexed, until
    killed (a fast machine indexed the whole folder before the test looked)."""
    return subprocess.Popen([sys.executable, "-c", INDEX_RUN, str(ROOT), url, str(data_dir), str(folder), str(hold_at)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_progress(proc: subprocess.Popen[str], files: int) -> None:
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.strip().isdigit() and int(line) >= files:
            return
    raise AssertionError(f"the run ended early: {proc.stderr.read() if proc.stderr else ''}")


def open_here(url: str, data_dir: Path) -> tuple[Any, Any]:
    from foundation.storage import open_database
    from tools.index_services import open_index

    db = open_database(data_dir, url)
    return db, open_index(db)


def assert_consistent(store: Any) -> None:
    conn = store.conn()
    dfs: dict[str, int] = {}
    terms = 0
    for head, body in conn.execute("SELECT head_terms, terms FROM chunks").fetchall():
        terms += len(body.split())
        for term in set(head.split()) | set(body.split()):
            dfs[term] = dfs.get(term, 0) + 1
    assert dict(conn.execute("SELECT term, df FROM term_stats").fetchall()) == dfs
    chunks, stored_terms = conn.execute("SELECT chunks, terms FROM stats").fetchone()
    assert (chunks, stored_terms) == (sum(1 for _ in conn.execute("SELECT id FROM chunks").fetchall()), terms)
    bad = conn.execute("SELECT d.id FROM documents d LEFT JOIN chunks c ON c.doc_id = d.id GROUP BY d.id "
                       "HAVING count(c.id) <> d.n_chunks").fetchall()
    assert bad == []


def test_a_run_killed_mid_folder_leaves_a_consistent_index_and_frees_its_path(pg_url: str, tmp_path: Path) -> None:
    from indexing.jobs import JobRegistry
    from indexing.search import Searcher

    folder = corpus(tmp_path / "many", 300)
    proc = start_run(pg_url, tmp_path / "a", folder, hold_at=20)
    wait_for_progress(proc, 20)
    db, store = open_here(pg_url, tmp_path / "b")
    jobs = JobRegistry(store, db)
    try:
        with pytest.raises(Conflict, match="being indexed by another server process"):
            jobs.claim(str(folder), background=False)
        assert jobs.covering(str(folder) + "/f001.md").state == "running"  # alive elsewhere
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert_consistent(store)
        indexed = store.totals()["files"]
        assert 20 <= indexed < 300
        assert Searcher(store).search("marker3", limit=1)[0].path.endswith("f003.md")
        assert jobs.covering(str(folder)).state == "interrupted"  # its process is gone; so is its lock
        job, running = jobs.claim(str(folder), background=False)
        assert not running  # the path is free at once, not after a timeout
        jobs.run(job, lambda cancel, progress, report: None, lambda: False, lambda *a: None)
    finally:
        db.close()


def test_what_one_process_indexes_the_next_search_in_another_finds(pg_url: str, tmp_path: Path) -> None:
    from indexing.postings import MemoryIndex
    from indexing.search import Searcher

    db, store = open_here(pg_url, tmp_path / "b")
    try:
        first = corpus(tmp_path / "first", 5)
        assert start_run(pg_url, tmp_path / "a", first).wait(timeout=120) == 0
        from indexing.postings_child import ChildBuild

        (tmp_path / "postings").mkdir()  # built by a child process, which reaches PostgreSQL by the URL too
        memory = MemoryIndex(store, directory=tmp_path / "postings", child=ChildBuild.of(db))
        assert memory.build_now() is not None and memory.builds == 1
        searcher = Searcher(store, memory=memory)
        assert len({h.path for h in searcher.search("lighthouse", limit=50)}) == 5
        second = corpus(tmp_path / "second", 3, tag="zebra")
        assert start_run(pg_url, tmp_path / "a", second).wait(timeout=120) == 0
        found = {Path(h.path).name for h in searcher.search("zebra", limit=50)}
        assert found == {"f000.md", "f001.md", "f002.md"}  # at once: stale postings are not used
        merged = memory.build_now()
        assert merged is not None and "zebra" in merged.terms and memory.builds == 2
        assert_consistent(store)
    finally:
        db.close()
