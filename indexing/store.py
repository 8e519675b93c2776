"""The index: documents keyed by content hash, paths pointing at them, chunks, their search data.

`IndexStore` holds every statement SQLite and PostgreSQL share, written once with `?` placeholders;
what differs (connections and transactions, how chunks are indexed for candidates: FTS5 or a
tsvector with a GIN index, term statistics, snapshots, upkeep) is the strategy object it is given,
an `indexing.dialect.IndexDialect`: `indexing.sqlite_store.SqliteDialect` (the default, a file in
the data directory) or `indexing.pg_store.PgDialect` (`database_url`).

- `chunks.terms` / `chunks.head_terms` hold the analysed terms (see `indexing.analyzer`); the
  candidate index over them is derived data that `rebuild()` regenerates (re-analysing the stored
  chunk text when asked).
- Documents are shared by every path whose bytes hash the same; a document no path points at
  is an orphan and is deleted with its chunks. Documents chunked by other rules or options are
  expired (`ensure_chunking`): re-read on the next index run of their files.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from indexing.dialect import (
    CHUNK_TABLE_COLS,
    PAGE_SQL,
    SNAPSHOT_BATCH,
    ChunkTerms,
    IndexChanged,
    IndexDialect,
    ReadAll,
    Snapshot,
    pages_of,
)
from indexing.model import Chunk
from indexing.sqlite_store import READ_CONNECTIONS, SqliteDialect

__all__ = ["CHUNK_TABLE_COLS", "PAGE_SQL", "READ_CONNECTIONS", "SNAPSHOT_BATCH", "AnalyzedChunk", "ChunkTerms",
           "FileRow", "IndexChanged", "IndexStore", "JobRow", "folder_range", "pages_of", "put_meta"]

_UNREAD_LIKE = "%without a text layer were not read%"  # pages a PDF left unread (indexing/extract/ocr.py)
_UNREAD_PAGES = re.compile(r"^(\d+) page\(s\) without a text layer were not read", re.MULTILINE)
_FILE_COLS = "path, doc_id, size, mtime_ns, indexed_at, error"  # the fields of FileRow, in order


def folder_range(folder: str) -> tuple[str, str]:
    """(low, high): the paths inside `folder` are exactly those with low <= path < high."""
    prefix = folder.rstrip("/") + "/"
    return prefix, prefix[:-1] + "0"


@dataclass(frozen=True)
class FileRow:
    path: str
    doc_id: int | None
    size: int
    mtime_ns: int
    indexed_at: float
    error: str | None


@dataclass
class JobRow:
    """One index run of a path: state is running, done, cancelled, failed or interrupted."""

    id: str
    path: str
    state: str
    done: int = 0
    total: int = 0
    indexed: int = 0
    unchanged: int = 0
    failed: int = 0
    removed: int = 0
    chunks_added: int = 0
    error: str = ""
    started_at: float = 0.0
    finished_at: float | None = None


_JOB_COLS = ", ".join(JobRow.__dataclass_fields__)
_SAVE_JOB = (f"INSERT INTO index_jobs({_JOB_COLS}) VALUES({','.join('?' * len(JobRow.__dataclass_fields__))}) "
             "ON CONFLICT(id) DO UPDATE SET "
             + ", ".join(f"{name}=excluded.{name}" for name in JobRow.__dataclass_fields__ if name != "id"))
JOBS_KEPT = 50  # finished runs kept in the table (the newest)


@dataclass(frozen=True)
class AnalyzedChunk:
    chunk: Chunk
    head_terms: str
    terms: str


class IndexStore:
    """One index database. Thread-safe: reads share a small fixed pool of connections (`conn()`,
    `stream()`), writes one writer connection, one write at a time (`write()`). `IndexStore(path)`:
    the SQLite file at `path`; `IndexStore(dialect)`: the index on that backend."""

    def __init__(self, where: Path | IndexDialect) -> None:
        self.dialect: IndexDialect = SqliteDialect.at(where) if isinstance(where, Path) else where
        self.backend = self.dialect.name
        self.engine_name = self.dialect.engine_name  # what finds candidates when the postings do not
        self.path: Path | None = where if isinstance(where, Path) else None
        self._waiting = 0  # threads of this process waiting to begin a write
        self._waiting_lock = threading.Lock()

    # -- connections -----------------------------------------------------------------------

    def conn(self) -> Any:
        """This thread's write connection inside `write()`; else pooled reads (autocommit)."""
        return self.dialect.conn()

    @contextmanager
    def write(self) -> Iterator[Any]:
        """One write transaction, the only index writer while it runs: all of it or nothing."""
        with ExitStack() as stack:
            with self._waiting_lock:
                self._waiting += 1
            try:
                conn = stack.enter_context(self.dialect.write())
            finally:
                with self._waiting_lock:
                    self._waiting -= 1
            yield conn

    def writers_waiting(self) -> bool:
        """True while a thread of this process waits to begin a write (a long transaction ends early then)."""
        return self._waiting > 0

    def connections(self) -> int:
        """Connections open now (SQLite: the read pool's and the writer)."""
        return self.dialect.connections()

    def close(self) -> None:
        self.dialect.close()

    def reopened(self) -> IndexStore:
        """Another store object on the same database, as another process opens it."""
        return IndexStore(self.dialect.reopened())

    # -- reads -----------------------------------------------------------------------------

    def file_row(self, path: str) -> FileRow | None:
        row = self.conn().execute(
            f"SELECT {_FILE_COLS} FROM files WHERE path=?", (path,)
        ).fetchone()
        return FileRow(*row) if row else None

    def files_under(self, folder: str) -> list[FileRow]:
        rows = self.conn().execute(
            f"SELECT {_FILE_COLS} FROM files WHERE path >= ? AND path < ? ORDER BY path", folder_range(folder)
        )
        return [FileRow(*row) for row in rows]

    def failed_files(self, folders: Iterable[str], limit: int) -> list[FileRow]:
        """The files under `folders` whose last indexing failed, the latest first (at most `limit`)."""
        rows: list[FileRow] = []
        for folder in folders:
            rows += [FileRow(*row) for row in self.conn().execute(
                f"SELECT {_FILE_COLS} FROM files WHERE path >= ? AND path < ? AND error IS NOT NULL "
                "ORDER BY indexed_at DESC LIMIT ?", (*folder_range(folder), limit))]
        return sorted(rows, key=lambda r: r.indexed_at, reverse=True)[:limit]

    def all_files(self) -> list[FileRow]:
        rows = self.conn().execute(f"SELECT {_FILE_COLS} FROM files")
        return [FileRow(*row) for row in rows]

    def doc_id_for_hash(self, digest: str) -> int | None:
        row = self.conn().execute("SELECT id FROM documents WHERE hash=?", (digest,)).fetchone()
        return int(row[0]) if row else None

    def totals(self) -> dict[str, int]:
        conn = self.conn()
        files, failed = conn.execute("SELECT count(*), count(error) FROM files").fetchone()
        docs, chars, chunks = conn.execute(
            "SELECT count(*), coalesce(sum(chars), 0), coalesce(sum(n_chunks), 0) FROM documents"
        ).fetchone()
        counts = {"files": files, "failed": failed, "documents": docs, "chunks": chunks, "chars": chars}
        return {key: int(value) for key, value in counts.items()}

    def unread_scanned_pages(self) -> int:
        """PDF pages without a text layer that indexed documents left unread (no OCR, or out of time),
        as their extraction warnings count them (indexing/extract/pdf.py)."""
        rows = self.conn().execute("SELECT warnings FROM documents WHERE warnings LIKE ?", (_UNREAD_LIKE,)).fetchall()
        return sum(int(found) for (text,) in rows for found in _UNREAD_PAGES.findall(text))

    def files_outside(self, folders: Iterable[str]) -> int:
        """Indexed paths inside none of `folders`: the gaps between the folders' path ranges, counted
        on the path index (only the paths outside are visited, not every indexed path)."""
        merged: list[list[str]] = []
        for low, high in sorted(folder_range(folder) for folder in folders):
            if merged and low <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], high)
            else:
                merged.append([low, high])
        if not merged:
            return int(self.conn().execute("SELECT count(*) FROM files").fetchone()[0])
        parts, args = ["(SELECT count(*) FROM files WHERE path < ?)"], [merged[0][0]]
        for (_, high), (low, _) in zip(merged, merged[1:], strict=False):
            parts.append("(SELECT count(*) FROM files WHERE path >= ? AND path < ?)")
            args += [high, low]
        parts.append("(SELECT count(*) FROM files WHERE path >= ?)")
        args.append(merged[-1][1])
        return int(self.conn().execute("SELECT " + " + ".join(parts), args).fetchone()[0])

    def document_chunks(self, doc_id: int) -> int | None:
        """How many chunks the document has (None: no such document)."""
        row = self.conn().execute("SELECT n_chunks FROM documents WHERE id=?", (doc_id,)).fetchone()
        return int(row[0]) if row else None

    def has_files(self) -> bool:
        """True when any path (indexed or failed) is recorded."""
        return bool(self.conn().execute("SELECT EXISTS(SELECT 1 FROM files)").fetchone()[0])

    def corpus_stats(self) -> tuple[int, float]:
        """(number of chunks, average analysed terms per chunk) for BM25."""
        chunks, terms = self.conn().execute("SELECT chunks, terms FROM stats").fetchone()
        return int(chunks), (terms / chunks if chunks else 1.0)

    def generation(self) -> tuple[int, int]:
        """(generation, chunks): the generation changes with every change to the chunks."""
        generation, chunks = self.conn().execute("SELECT generation, chunks FROM stats").fetchone()
        return int(generation), int(chunks)

    def doc_freqs(self, terms: Iterable[str]) -> dict[str, int]:
        """How many chunks contain each term."""
        unique = list(dict.fromkeys(terms))
        if not unique:
            return {}
        return self.dialect.doc_freqs(unique)

    def get_meta(self, key: str) -> str | None:
        row = self.conn().execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return str(row[0]) if row else None

    def set_meta(self, key: str, value: str) -> None:
        with self.write() as conn:
            put_meta(conn, key, value)

    def meta_once(self, key: str, value: str) -> str:
        """`key`'s value, set to `value` first when it has none: callers racing to set it all get
        the one value stored (the first writer's)."""
        found = self.get_meta(key)
        if found is not None:
            return found
        with self.write() as conn:
            conn.execute("INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO NOTHING", (key, value))
            return str(conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()[0])

    def ensure_analysis(self, version: str, analyze_fn: Callable[[str], list[str]]) -> bool:
        """Re-analyse every chunk when the index was built with another analyzer version."""

        def reanalyse(conn: Any) -> bool:
            rebuilt = self.totals()["chunks"] > 0
            if rebuilt:
                self._rebuild(conn, analyze_fn)
            return rebuilt

        return self._change_once("analyzer", version, reanalyse)

    def ensure_chunking(self, key: str) -> bool:
        """When the documents were chunked otherwise than `key` (`indexing.chunking.chunking_key`),
        expire them: every file is read again on its next index run and no document is reused by
        its hash (the renamed one goes as an orphan); the old chunks answer until then."""

        def expire(conn: Any) -> bool:
            expired = self.totals()["documents"] > 0
            if expired:
                conn.execute("UPDATE documents SET hash = hash || ?", (f"~{time.time_ns()}",))
                conn.execute("UPDATE files SET mtime_ns = -1")
            return expired

        return self._change_once("chunking", key, expire)

    def ensure_ocr(self, key: str) -> bool:
        """When OCR is on with other languages than last time (`key`: its languages, '' when off), expire the
        documents that left scanned pages unread: their files are read again on their next index run."""

        def expire(conn: Any) -> bool:
            rows = conn.execute("SELECT id FROM documents WHERE warnings LIKE ?", (_UNREAD_LIKE,)).fetchall()
            for (doc_id,) in rows:
                conn.execute("UPDATE documents SET hash = hash || ? WHERE id = ?", (f"~{time.time_ns()}", doc_id))
                conn.execute("UPDATE files SET mtime_ns = -1 WHERE doc_id = ?", (doc_id,))
            return bool(rows)

        return self._change_once("ocr", key, expire) if key else False

    def _change_once(self, key: str, value: str, change: Callable[[Any], bool]) -> bool:
        """`change(conn)` and meta `key` set to `value`, in one write, when `key` is not `value` yet;
        returns what `change` returned (False when nothing was due). Checked again inside the write: of
        two processes starting at once, only the first changes anything."""
        if self.get_meta(key) == value:
            return False
        with self.write() as conn:
            if self.get_meta(key) == value:
                return False
            changed = change(conn)
            put_meta(conn, key, value)
        return changed

    # -- index runs ----------------------------------------------------------------------------

    def save_job(self, job: JobRow) -> None:
        """Insert or update one run (and forget all but the newest JOBS_KEPT runs)."""
        values = tuple(getattr(job, name) for name in JobRow.__dataclass_fields__)
        with self.write() as conn:
            conn.execute(_SAVE_JOB, values)
            conn.execute(
                "DELETE FROM index_jobs WHERE id NOT IN (SELECT id FROM index_jobs ORDER BY started_at DESC LIMIT ?)",
                (JOBS_KEPT,),
            )

    def recent_jobs(self, limit: int = 10) -> list[JobRow]:
        rows = self.conn().execute(f"SELECT {_JOB_COLS} FROM index_jobs ORDER BY started_at DESC LIMIT ?", (limit,))
        return [JobRow(*row) for row in rows]

    def last_job_covering(self, path: str) -> JobRow | None:
        """The newest run of `path` or of a folder that contains it."""
        rows = self.conn().execute(f"SELECT {_JOB_COLS} FROM index_jobs ORDER BY started_at DESC")
        for row in rows:
            job = JobRow(*row)
            if job.path == path or path.startswith(job.path.rstrip("/") + "/"):
                return job
        return None

    def db_bytes(self) -> int:
        return self.dialect.db_bytes()

    def stream(self, sql: str, params: Sequence[object] = ()) -> Iterator[tuple[Any, ...]]:
        """Rows of a query that may be large, read as they are consumed (on a read connection held
        until the last row is read or the iterator is dropped)."""
        return self.dialect.stream(sql, params)

    def chunks_with_all(self, terms: list[str]) -> tuple[str, str, str, str]:
        """(FROM, WHERE, ORDER BY, its one argument): the chunks `c` that contain every term, best first."""
        return self.dialect.chunks_with_all(terms)

    def where(self) -> str:
        """Where the index is, for people (status lines)."""
        return self.dialect.where()

    @contextmanager
    def snapshot_batches(self, wanted: Callable[[int], bool], size: int = SNAPSHOT_BATCH) -> Iterator[Snapshot | None]:
        """(generation, every chunk's (id, doc_id, head_terms, terms) by id, `size` rows a batch), all
        of that generation (`pages_of`: IndexChanged when the chunks change meanwhile); None when
        `wanted(chunks)` says the rows are not needed. The batches are read while the context is
        open, each in a short read transaction of its own: one held for the whole build would keep
        every write since it began in SQLite's WAL (no checkpoint can pass a reader), and hold back
        PostgreSQL's vacuum for every table of the database."""
        db = self.dialect.db

        def read_page(after: int) -> tuple[int, list[ChunkTerms]]:
            with db.read() as conn:
                row = conn.one("SELECT generation FROM stats")
                rows = conn.all(PAGE_SQL, (after, size))
            return int(row[0]) if row else 0, [(int(a), int(b), str(c), str(d)) for a, b, c, d in rows]

        with db.read() as conn:
            row = conn.one("SELECT generation, chunks FROM stats")
        generation, chunks = (int(row[0]), int(row[1])) if row else (0, 0)
        if not wanted(chunks):
            yield None
            return
        yield generation, pages_of(generation, read_page)

    @contextmanager
    def consistent_read(self) -> Iterator[ReadAll]:
        """Reads that all see one state of the index (one snapshot: `indexing.changelog`)."""
        with self.dialect.db.read() as conn:
            yield lambda sql, params: conn.all(sql, params)

    def worth_vacuum(self) -> bool:
        """True when compacting would give space back (SQLite: a quarter of the file is free)."""
        return self.dialect.worth_vacuum()

    # -- writes (callers hold `write()`) ------------------------------------------------------

    def insert_document(
        self, conn: Any, digest: str, kind: str, chars: int, chunks: Sequence[AnalyzedChunk],
        warnings: Sequence[str] = (),
    ) -> int:
        """Store a document with its chunks and index them; returns the document id."""
        dialect = self.dialect
        doc_id = dialect.take_ids(conn, "documents", 1)
        conn.execute(
            "INSERT INTO documents(id, hash, kind, chars, n_chunks, warnings, created_at) VALUES(?,?,?,?,?,?,?)",
            (doc_id, digest, kind, chars, len(chunks), "\n".join(warnings), time.time()),
        )
        first = dialect.take_ids(conn, "chunks", len(chunks))
        rows = [_chunk_row(first + i, doc_id, a) for i, a in enumerate(chunks)]
        dialect.add_chunk_rows(conn, rows)
        dialect.change_totals(conn, len(chunks), sum(_count_terms(a.terms) for a in chunks))
        dialect.log_change(conn, doc_id)
        return doc_id

    def add_chunk_rows(self, conn: Any, rows: list[tuple[object, ...]]) -> None:
        """Insert chunk rows (see `_chunk_row`) and index them for candidates (an import's batches)."""
        self.dialect.add_chunk_rows(conn, rows)

    @staticmethod
    def link_file(
        conn: Any, path: str, doc_id: int | None, size: int, mtime_ns: int, error: str | None = None
    ) -> int | None:
        """Point `path` at `doc_id` (or record its error); returns the document it pointed at before."""
        old = conn.execute("SELECT doc_id FROM files WHERE path=?", (path,)).fetchone()
        conn.execute(
            "INSERT INTO files(path, doc_id, size, mtime_ns, indexed_at, error) VALUES(?,?,?,?,?,?) "
            "ON CONFLICT(path) DO UPDATE SET doc_id=excluded.doc_id, size=excluded.size, "
            "mtime_ns=excluded.mtime_ns, indexed_at=excluded.indexed_at, error=excluded.error",
            (path, doc_id, size, mtime_ns, time.time(), error),
        )
        return old[0] if old else None

    @staticmethod
    def unlink_file(conn: Any, path: str) -> int | None:
        old = conn.execute("SELECT doc_id FROM files WHERE path=?", (path,)).fetchone()
        conn.execute("DELETE FROM files WHERE path=?", (path,))
        return old[0] if old else None

    def drop_if_orphan(self, conn: Any, doc_id: int | None) -> bool:
        """Delete the document and its chunks when no path points at it any more."""
        if doc_id is None:
            return False
        if conn.execute("SELECT 1 FROM files WHERE doc_id=? LIMIT 1", (doc_id,)).fetchone():
            return False
        gone = self.dialect.remove_chunks(conn, doc_id)
        self.dialect.change_totals(conn, -len(gone), -sum(_count_terms(terms) for _, _, terms in gone))
        self.dialect.log_change(conn, doc_id)
        conn.execute("DELETE FROM documents WHERE id=?", (doc_id,))
        return True

    def forget_path(self, path: str) -> int:
        """Forget one indexed path (and its document when orphaned); returns 1 if it was indexed."""
        with self.write() as conn:
            existed = conn.execute("SELECT 1 FROM files WHERE path=?", (path,)).fetchone() is not None
            self.drop_if_orphan(conn, self.unlink_file(conn, path))
        return int(existed)

    def drop_orphans(self) -> None:
        """Delete every document no path points at, with its chunks, in one write."""
        with self.write() as conn:
            for doc_id in self.orphan_documents():
                self.drop_if_orphan(conn, doc_id)

    def orphan_documents(self) -> list[int]:
        rows = self.conn().execute(
            "SELECT id FROM documents WHERE id NOT IN (SELECT doc_id FROM files WHERE doc_id IS NOT NULL)"
        )
        return [int(r[0]) for r in rows]

    def rebuild(self, analyze_fn: Callable[[str], list[str]] | None = None) -> int:
        """Regenerate the search data from stored chunks (re-analysing their text when given `analyze_fn`)."""
        with self.write() as conn:
            return self._rebuild(conn, analyze_fn)

    def _rebuild(self, conn: Any, analyze_fn: Callable[[str], list[str]] | None) -> int:
        if analyze_fn is not None:
            rows = conn.execute("SELECT id, heading, text FROM chunks").fetchall()
            conn.executemany(
                "UPDATE chunks SET head_terms=?, terms=? WHERE id=?",
                [(" ".join(analyze_fn(h)), " ".join(analyze_fn(t)), i) for i, h, t in rows],
            )
        self.dialect.reindex_all(conn)
        return self.recount_totals(conn)

    @staticmethod
    def recount_totals(conn: Any) -> int:
        """Set the corpus totals from the stored chunks (after a rebuild or an import); returns the chunks."""
        terms = [r[0] for r in conn.execute("SELECT terms FROM chunks")]
        conn.execute(
            "UPDATE stats SET chunks = ?, terms = ?, generation = generation + 1",
            (len(terms), sum(map(_count_terms, terms))),
        )
        return len(terms)

    def vacuum(self) -> None:
        """Give back the space of large removals (SQLite: VACUUM; PostgreSQL's autovacuum does it)."""
        self.dialect.vacuum()


def put_meta(conn: Any, key: str, value: str) -> None:
    conn.execute("INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                 (key, value))


def _count_terms(terms: str) -> int:
    return terms.count(" ") + 1 if terms else 0


def _chunk_row(chunk_id: int, doc_id: int, a: AnalyzedChunk) -> tuple[object, ...]:
    c = a.chunk
    rows = c.rows or (None, None)
    return (
        chunk_id, doc_id, c.index, c.start, c.end, c.heading, c.page, c.slide, c.sheet, rows[0], rows[1],
        c.text, a.head_terms, a.terms,
    )

