"""Index files and folders into an `IndexStore`.

Per file: a path whose size and mtime are unchanged is skipped without reading it; otherwise
the bytes are hashed, and a document with the same hash is reused (dedupe); only new content is
extracted, chunked and analysed. Documents chunked by other rules or options than this indexer's
are expired first (`IndexStore.ensure_chunking`), so their files are read and chunked again.
Each file is written in one transaction, so an interrupted run leaves every file fully indexed
or absent. The document a path pointed at before is deleted when
no other path uses it (orphan cleanup). Bad files are recorded with their reason and skipped.
Secrets (`SecretFilter`: the approval policy's secret paths) are never read nor written; paths that
became secrets (indexed by an older version, or before the rules said so) are forgotten once per
rules (`drop_secrets`), and a file to be read is checked first.
For folders, the next file is extracted in the background while the current one is analysed and
written, and indexed paths under the folder whose files are gone are removed.
"""

from __future__ import annotations

import hashlib
import logging
import os
import stat
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from foundation.errors import Cancelled, GeneralAgentError, LimitExceeded
from foundation.safe_open import opened
from indexing.analyzer import analyze
from indexing.model import Chunk, ChunkingOptions, Extracted, ExtractionLimits, SecretFilter, is_secret_store
from indexing.store import AnalyzedChunk, IndexStore, put_meta

_log = logging.getLogger("generalagent.index")  # per-file failures reach the client's MCP log
Progress = Callable[[int, int, str], None]
ShouldCancel = Callable[[], bool]
_HASH_BLOCK = 1 << 20
_UNEXPECTED = "could not be indexed"  # an unexpected failure: retried on the next run
SECRETS_CHECKED = "secrets_checked"  # meta: the SecretFilter.key the whole index was last checked with


@dataclass
class FileOutcome:
    path: str
    status: str  # "indexed" | "deduplicated" | "unchanged" | "failed" | "secret" (reason: the rule's id)
    chunks: int = 0
    reason: str = ""


@dataclass
class IndexReport:
    indexed: int = 0
    unchanged: int = 0
    removed: int = 0
    failed: list[FileOutcome] = field(default_factory=list)
    skipped: int = 0  # unsupported file types
    secrets: int = 0  # files the approval policy treats as secrets: not indexed
    secrets_denied: int = 0  # of which read_file refuses outright (a `*.secret_denied` rule), not asks for
    chunks_added: int = 0
    truncated: bool = False  # the folder walk stopped at its entry limit
    walk_note: str | None = None  # what the folder walk skipped (unreadable folders, names not UTF-8)

    def add(self, outcome: FileOutcome) -> None:
        if outcome.status == "unchanged":
            self.unchanged += 1
        elif outcome.status == "secret":
            self.secrets += 1
            self.secrets_denied += is_secret_store(outcome.reason)
        elif outcome.status == "failed":
            self.failed.append(outcome)
            _log.warning("not indexed: %s (%s)", outcome.path, outcome.reason[:200])
        else:
            self.indexed += 1
            self.chunks_added += outcome.chunks


@dataclass
class _Prepared:
    """A file read and analysed, ready to be written (or the reason it cannot be)."""

    path: Path
    size: int
    mtime_ns: int
    digest: str = ""
    doc_id: int | None = None
    extracted: Extracted | None = None
    chunks: list[Chunk] = field(default_factory=list)
    analyzed: list[AnalyzedChunk] | None = None  # the chunks' terms, made in the read-ahead thread
    error: str = ""
    unchanged: bool = False
    secret: str = ""  # the id of the rule that makes it a secret: not read, not indexed


def file_digest(path: Path, max_bytes: int, fd: int) -> str:
    """sha256 of the open file `fd`'s content, read with pread from the start (LimitExceeded past
    `max_bytes`: it grew while we read it; `path` names it in that message)."""
    digest, total = hashlib.sha256(), 0
    while block := os.pread(fd, _HASH_BLOCK, total):
        total += len(block)
        if total > max_bytes:
            raise LimitExceeded(f"{path.name} is larger than the {max_bytes:,} byte limit (max_file_bytes).")
        digest.update(block)
    return digest.hexdigest()


def open_plain(path: Path) -> int:
    """The default opener: read-only, never following a symlink as the last component."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    os.set_blocking(fd, True)
    return fd


def analyze_chunks(chunks: Iterable[Chunk]) -> list[AnalyzedChunk]:
    return [AnalyzedChunk(c, " ".join(analyze(c.heading)), " ".join(analyze(c.text))) for c in chunks]


BATCH_FILES = 64  # files written in one transaction at most (a commit costs more than a small file)
BATCH_SECONDS = 0.25  # and for at most this long, so other writers wait little
READY_POLL_S = 0.01  # a transaction waiting for the next file's read looks this often whether others wait


class _ReadAhead:
    """The files of a run, each read (hashed, extracted, chunked) in a helper thread one file ahead."""

    def __init__(self, pool: ThreadPoolExecutor, indexer: Indexer, paths: list[Path]) -> None:
        self.pool, self.indexer, self.paths = pool, indexer, paths
        self.done = 0
        self._pending: Future[_Prepared] | None = self._submit(0)

    def _submit(self, at: int) -> Future[_Prepared] | None:
        if at >= len(self.paths):
            return None
        return self.pool.submit(self.indexer._read_path, self.paths[at])

    def wait(self) -> None:
        """Wait until the next file is read (outside any transaction); its read errors are raised here."""
        if self._pending is not None:
            self._pending.result()

    def ready(self, within: float = 0.0, busy: Callable[[], bool] = lambda: False) -> bool:
        """True when the next file is read, waiting up to `within` seconds for it, and not once `busy()`."""
        if self._pending is None:
            return False
        end = time.monotonic() + max(0.0, within)
        while True:
            try:
                self._pending.result(timeout=min(READY_POLL_S, max(0.0, end - time.monotonic())))
            except FutureTimeout:
                if busy() or time.monotonic() >= end:
                    return False
                continue
            except Exception:  # raised again by wait(), outside the transaction
                return False
            return True

    def next(self) -> _Prepared:
        assert self._pending is not None
        current = self._pending.result()
        self.done += 1
        self._pending = self._submit(self.done)  # the next read runs while this file is written
        return current


class Indexer:
    def __init__(
        self, store: IndexStore, limits: ExtractionLimits | None = None, chunking: ChunkingOptions | None = None,
        should_cancel: ShouldCancel | None = None, opener: Callable[[Path], int] | None = None,
        secrets: SecretFilter | None = None, busy: Callable[[], bool] | None = None,
        pause: Callable[[Callable[[], bool]], None] | None = None,
    ) -> None:
        """`opener(path) -> fd` opens each file once (default: no symlink as the last component;
        tools pass a race-free opener confined to the workspace roots); everything read from a
        file (size, hash, text) comes from that one descriptor. `secrets`: paths never indexed
        (indexed ones are forgotten here, once per `secrets.key`). Inside a write transaction `busy()`
        is asked instead of `should_cancel` (default: it is `should_cancel`): when the latter may wait
        (the live index's yields to searches), `busy` must not, so that nobody waits on the write lock
        while its holder waits; True ends the transaction early. `pause(until)` is called before each file is
        read (in the helper thread, outside any transaction) and before each file but the first is written
        (inside one, `until` then says when to stop waiting: another thread waits to write, or the
        transaction's time is up): the live index's waits while searches run, so the extraction, analysis
        and writes of a burst of changes take neither the GIL nor the database's CPU from them."""
        self.opener = opener or open_plain
        self.store = store
        self.limits = limits or ExtractionLimits()
        self.chunking = chunking or ChunkingOptions()
        from indexing.chunking import chunking_key

        store.ensure_chunking(chunking_key(self.chunking))  # documents chunked otherwise are read again
        from indexing.extract.ocr import ocr_available

        languages = self.limits.ocr_languages  # OCR newly on: documents with unread scanned pages are read again
        store.ensure_ocr(languages if ocr_available(languages) else "")
        self.should_cancel = should_cancel or (lambda: False)
        self.busy = busy or self.should_cancel
        self.pause = pause or (lambda until: None)
        self.secrets = secrets
        self._checked = False  # the whole index was checked for secrets by this indexer
        self.drop_secrets()

    # -- secrets -------------------------------------------------------------------------------

    def secret_rule(self, path: Path | str) -> str | None:
        """The id of the rule that makes `path` a secret (a symlink: its own path or its target's), or None."""
        return self.secrets.rule(path) if self.secrets is not None else None

    def drop_secrets(self, again: bool = False) -> int:
        """Forget every indexed path that is a secret by the current rules: once per rules (`secrets.key`, kept
        in the index), as files are checked before they are read, or `again` (a search met one: written by
        an older version meanwhile). Returns how many were forgotten."""
        if self.secrets is None or self._checked:
            return 0
        if not again and self.store.get_meta(SECRETS_CHECKED) == self.secrets.key:
            return 0
        self._checked = True
        found = [row.path for row in self.store.all_files() if self.secret_rule(row.path)]  # outside the write
        with self.store.write() as conn:
            for path in found:
                self.store.drop_if_orphan(conn, self.store.unlink_file(conn, path))
            put_meta(conn, SECRETS_CHECKED, self.secrets.key)
        if found:
            _log.warning("forgot %d indexed secret files (the approval policy's secret paths)", len(found))
        return len(found)

    # -- one file ------------------------------------------------------------------------------

    def index_file(self, path: Path) -> FileOutcome:
        """Index one file (skipped when unchanged). Never raises for a bad file, only for Cancelled."""
        prep = self._read(self._stat(path))
        with self.store.write() as conn:
            return self._write(conn, prep)

    def _stat(self, path: Path) -> _Prepared:
        try:
            info = os.stat(path)
        except OSError as exc:
            return _Prepared(path, 0, 0, error=f"cannot be read ({exc.strerror or exc})")
        if not stat.S_ISREG(info.st_mode):
            return _Prepared(path, 0, 0, error="not a regular file")
        return _Prepared(path, info.st_size, info.st_mtime_ns)

    def _read(self, prep: _Prepared) -> _Prepared:
        """Hash, and extract + chunk when the content is new (runs in a helper thread for folders)."""
        if prep.error:
            return prep
        row = self.store.file_row(str(prep.path))
        same = row is not None and row.size == prep.size and row.mtime_ns == prep.mtime_ns
        if row is not None and same and not (row.error or "").startswith(_UNEXPECTED):
            prep.unchanged, prep.error = True, row.error or ""  # known-bad files are not re-read until changed
            return prep
        if rule := self.secret_rule(prep.path):
            prep.secret = rule
            return prep
        try:
            with opened(self.opener(prep.path)) as fd:
                self._read_fd(prep, fd)
        except Cancelled:
            raise
        except GeneralAgentError as exc:
            prep.error = str(exc)
        except OSError as exc:
            prep.error = f"cannot be read ({exc.strerror or exc})"
        except Exception as exc:  # a parser bug must not stop a folder
            prep.error = f"{_UNEXPECTED} ({type(exc).__name__}: {str(exc)[:300]})"
        return prep

    def _read_fd(self, prep: _Prepared, fd: int) -> None:
        info = os.fstat(fd)  # what is recorded is what was read, even if the file changed since _stat
        if not stat.S_ISREG(info.st_mode):
            raise LimitExceeded(f"{prep.path.name} is not a regular file")
        prep.size, prep.mtime_ns = info.st_size, info.st_mtime_ns
        if prep.size > self.limits.max_file_bytes:
            raise LimitExceeded(
                f"{prep.path.name} is {prep.size:,} bytes, over the {self.limits.max_file_bytes:,} byte "
                "limit (max_file_bytes); raise the limit to index it."
            )
        prep.digest = file_digest(prep.path, self.limits.max_file_bytes, fd)
        prep.doc_id = self.store.doc_id_for_hash(prep.digest)
        if prep.doc_id is None:
            from indexing.chunking import chunk_document
            from indexing.extract import extract_file

            prep.extracted = extract_file(prep.path, self.limits, should_cancel=self.should_cancel, fd=fd)
            prep.chunks = chunk_document(prep.extracted, self.chunking)
            prep.analyzed = analyze_chunks(prep.chunks)  # outside the write transaction

    def _write(self, conn: Any, prep: _Prepared) -> FileOutcome:
        """Record one read file inside the caller's write transaction `conn`."""
        key = str(prep.path)
        if prep.secret:  # never written; an entry from before goes
            self.store.drop_if_orphan(conn, self.store.unlink_file(conn, key))
            return FileOutcome(key, "secret", reason=prep.secret)
        if prep.unchanged:
            if prep.error:
                return FileOutcome(key, "failed", reason=prep.error + " (file unchanged since)")
            return FileOutcome(key, "unchanged")
        if prep.error:
            self._record_failure(conn, prep)
            return FileOutcome(key, "failed", reason=prep.error)
        doc_id = self.store.doc_id_for_hash(prep.digest)  # may be new in this transaction
        if doc_id is None and prep.extracted is None:
            # its document was there when the file was read and is gone now (an earlier file of this
            # write replaced it): read the file again, inside this write, which sees that
            return self._write(conn, self._read(self._stat(prep.path)))
        analyzed = prep.analyzed if prep.analyzed is not None else analyze_chunks(prep.chunks)
        status = "deduplicated" if doc_id is not None else "indexed"
        if doc_id is None:
            assert prep.extracted is not None
            doc_id = self.store.insert_document(
                conn, prep.digest, prep.extracted.kind, len(prep.extracted.text), analyzed,
                prep.extracted.warnings,
            )
        old = self.store.link_file(conn, key, doc_id, prep.size, prep.mtime_ns)
        if old != doc_id:
            self.store.drop_if_orphan(conn, old)
        return FileOutcome(key, status, chunks=len(analyzed) if status == "indexed" else 0)

    def _record_failure(self, conn: Any, prep: _Prepared) -> None:
        if not prep.size and not prep.mtime_ns:  # could not even stat it: forget the path
            self.store.drop_if_orphan(conn, self.store.unlink_file(conn, str(prep.path)))
            return
        old = self.store.link_file(conn, str(prep.path), None, prep.size, prep.mtime_ns, prep.error)
        self.store.drop_if_orphan(conn, old)

    # -- folders -------------------------------------------------------------------------------

    def index_files(
        self, paths: list[Path], progress: Progress | None = None, report: IndexReport | None = None
    ) -> IndexReport:
        """Index `paths` in order; the next file is read in a helper thread while one is written.

        Counts go into `report` as each file is written, so a caller that passed it in still has
        them when the run is cancelled (Cancelled is raised between files)."""
        report = report if report is not None else IndexReport()
        total = len(paths)
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="index-read") as pool:
            reads = _ReadAhead(pool, self, paths)
            while reads.done < total:
                if self.should_cancel():
                    raise Cancelled(
                        f"Indexing was cancelled after {reads.done} of {total} files; those are kept. "
                        "Run index_path again to continue (indexed files are skipped)."
                    )
                first = reads.done
                reads.wait()
                self._let_writers_in()
                with self.store.write() as conn:
                    outcomes = self._write_batch(conn, reads)
                for n, outcome in enumerate(outcomes, start=first + 1):  # reported once committed
                    report.add(outcome)
                    if progress:
                        progress(n, total, f"{outcome.status}: {paths[n - 1].name}")
        return report

    def _write_batch(self, conn: Any, reads: _ReadAhead) -> list[FileOutcome]:
        """Write read files in one transaction: at least one, then more while the next one is read within
        what is left of BATCH_SECONDS (a transaction never waits longer for extraction), up to BATCH_FILES,
        until `busy()` (never `should_cancel`, which may wait: it is asked between transactions) or another
        thread waits to write."""
        deadline = time.monotonic() + BATCH_SECONDS

        def ends() -> bool:
            return time.monotonic() >= deadline or self._yields()

        outcomes = [self._write(conn, reads.next())]
        while (len(outcomes) < BATCH_FILES and not ends()
               and reads.ready(within=deadline - time.monotonic(), busy=self._yields)):
            self.pause(ends)
            if ends():
                break
            outcomes.append(self._write(conn, reads.next()))
        return outcomes

    def _read_path(self, path: Path) -> _Prepared:
        self.pause(lambda: False)
        return self._read(self._stat(path))

    def _let_writers_in(self) -> None:
        """Before a transaction: the threads that ended the last one by waiting to write go first (a lock is
        not handed over in order: this thread could take it again before they wake). Bounded by BATCH_SECONDS."""
        deadline = time.monotonic() + BATCH_SECONDS
        while self.store.writers_waiting() and time.monotonic() < deadline:
            time.sleep(READY_POLL_S / 10)

    def _yields(self) -> bool:
        return self.busy() or self.store.writers_waiting()

    def index_tree(
        self, root: Path, recursive: bool = True, progress: Progress | None = None, max_files: int = 200_000,
        report: IndexReport | None = None,
    ) -> IndexReport:
        """Index every supported file under `root` and drop index entries of files gone from it
        (`report`: filled in place, see index_files)."""
        from foundation.filewalk import FileWalk
        from indexing.extract import is_supported

        walk = FileWalk(root, max_depth=64 if recursive else 0, max_entries=max_files)
        report = report if report is not None else IndexReport()
        found = []
        for entry in walk:
            if is_supported(entry.path):
                found.append(entry.path)
            else:
                report.skipped += 1
        report.truncated = walk.truncated
        report.walk_note = walk.skipped_note()
        self.index_files(found, progress, report)
        if not walk.truncated:
            report.removed = self.remove_missing(root, {str(p) for p in found}, recursive)
        return report

    def remove_missing(self, root: Path, present: set[str], recursive: bool = True) -> int:
        """Remove indexed paths under `root` that are not in `present` and no longer exist."""
        removed = 0
        for row in self.store.files_under(str(root)):
            nested = "/" in row.path[len(str(root)) + 1 :]
            if row.path in present or (nested and not recursive) or os.path.isfile(row.path):
                continue
            removed += self.remove_path(row.path)
        return removed

    def remove_path(self, path: str) -> int:
        """Forget one indexed path (and its document when orphaned); returns 1 if it was indexed."""
        return self.store.forget_path(path)
