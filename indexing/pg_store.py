"""The index in PostgreSQL (`database_url`): the tables of `indexing.store`, searched without FTS5, as
the strategy object `indexing.store.IndexStore` is given (`PgDialect`, an `indexing.dialect.IndexDialect`).

- The same analysis as SQLite (porter stems, jieba words, stop words: `indexing.analyzer`) is
  stored as a `tsvector` built here from the analysed terms, not by a text-search configuration:
  body terms at their positions, heading terms after them with weight A. A GIN index on it finds
  candidates (OR of terms, AND, phrases with `<->`); no server extension is needed.
- How many chunks hold each term (`term_stats`) and the corpus totals (`stats`) are kept in tables,
  changed in the transaction that adds or drops chunks, for the one BM25F scorer. A write gathers
  its term counts and applies them once, just before it commits: an upsert costs per term, and a
  write of many documents shares most of their terms.
- One index writer at a time across every process (a transaction-level advisory lock), as
  SQLite's BEGIN IMMEDIATE gives for one file; readers never wait.
- Reads outside a write take a pooled connection per statement (autocommit), so a thread holds no
  connection between statements; inside `write()` this thread's reads see the transaction.
"""

from __future__ import annotations

import functools
import re
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal

from foundation.storage.pooled_reads import Result
from foundation.storage.postgres import PgConn, rollback
from indexing.changelog import log_change
from indexing.dialect import CHUNK_TABLE_COLS

if TYPE_CHECKING:
    from foundation.storage.postgres import PostgresDatabase
    from indexing.store import IndexStore

MAX_QUEUED_CHUNKS = 2000  # chunk rows a write holds before it copies them
MAX_POSITION = 16383  # PostgreSQL's largest tsvector position
MAX_LEXEME_BYTES = 2046  # longer lexemes cannot be stored (they stay in `terms` for ranking)
WRITER_LOCK = "index-writer"


class _PooledReads:
    """`PgDialect.conn()` outside a write: each statement on a pooled connection."""

    def __init__(self, database: PostgresDatabase) -> None:
        self.database = database

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Result:
        return Result(*self.database.read_rows(sql, params))


class _IndexWrite(PgConn):
    """The connection of one index write. What costs a round trip per document is gathered and done
    once before the commit (`settle`): the new chunks' COPY, the term counts (`term_stats`) and the
    totals (`stats`); ids are taken from the tables once. A statement that reads or writes chunks or
    the statistics settles first, so the write always sees its own changes."""

    def __init__(self, raw: Any, database: PostgresDatabase) -> None:
        super().__init__(raw, database)
        self.chunk_rows: list[list[object]] = []
        self.queued_docs: set[object] = set()  # the documents of `chunk_rows`
        self.dfs: Counter[str] = Counter()
        self.next_ids: dict[str, int] = {}
        self.totals = [0, 0, 0]  # chunks, terms, changed
        self.changed_docs: list[int] = []  # logged with the generation the next settle makes

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        if _SETTLE_BEFORE.search(sql):
            self.settle()
        return super().execute(sql, params)

    def executemany(self, sql: str, rows: Any) -> None:
        if _SETTLE_BEFORE.search(sql):
            self.settle()
        super().executemany(sql, rows)

    def queue_chunks(self, rows: list[tuple[object, ...]]) -> None:
        self.chunk_rows += [[*row, self.counted_tsvector(str(row[12]), str(row[13]))] for row in rows]
        self.queued_docs.update(row[1] for row in rows)
        if len(self.chunk_rows) >= MAX_QUEUED_CHUNKS:  # a large write (an import) never holds them all
            self.settle()

    def counted_tsvector(self, head_terms: str, terms: str) -> str:
        """A new chunk's tsvector literal; its terms count once each in `term_stats` at `settle`."""
        positions = term_positions(head_terms, terms)
        self.dfs.update(t for t in positions if _entry(t))  # a term too long for a lexeme is not searchable
        return tsvector_of(positions)

    def count_dfs(self, chunks: list[tuple[str, str]], sign: int) -> None:
        for head, body in chunks:
            for term in set(head.split()) | set(body.split()):
                if _entry(term):
                    self.dfs[term] += sign

    def settle(self) -> None:
        rows, self.chunk_rows = self.chunk_rows, []
        self.queued_docs.clear()
        if rows:
            super().copy_rows("chunks", _CHUNK_COPY_COLUMNS, rows)
        self._apply_dfs()
        chunks, terms, changed = self.totals
        self.totals = [0, 0, 0]
        if changed:
            super().execute("UPDATE stats SET chunks = chunks + ?, terms = terms + ?, generation = generation + 1",
                            (chunks, terms))
            docs, self.changed_docs = self.changed_docs, []
            log_change(_Plain(self), docs, postgres=True)

    def _apply_dfs(self) -> None:
        """The gathered term counts into `term_stats` (terms no chunk holds any more are removed)."""
        counts = {t: n for t, n in self.dfs.items() if n}
        self.dfs.clear()
        if not counts:
            return
        changed = sorted(counts)
        # the arrays go as one space-separated string each: terms hold no whitespace, and a text
        # parameter is far cheaper to send than a text[] of thousands of elements
        super().execute(
            "INSERT INTO term_stats(term, df) SELECT * FROM unnest(string_to_array(?, ' '), "
            "string_to_array(?, ' ')::bigint[]) ON CONFLICT(term) DO UPDATE SET df = term_stats.df + excluded.df",
            (" ".join(changed), " ".join(str(counts[t]) for t in changed)),
        )
        if fewer := [t for t in changed if counts[t] < 0]:
            super().execute("DELETE FROM term_stats WHERE term = ANY(string_to_array(?, ' ')) AND df <= 0",
                            (" ".join(fewer),))


class _Plain:
    """A write's statements without settling first (for `settle` itself)."""

    def __init__(self, write: _IndexWrite) -> None:
        self.write = write

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return PgConn.execute(self.write, sql, params)


_SETTLE_BEFORE = re.compile(r"\b(chunks|chunk_vectors|term_stats|stats)\b")
_CHUNK_COPY_COLUMNS = [*CHUNK_TABLE_COLS.replace('"', "").split(", "), "tsv"]


class PgDialect:
    """The index's tables in PostgreSQL (see the module docstring)."""

    name: Literal["sqlite", "postgresql"] = "postgresql"
    engine_name = "PostgreSQL"

    def __init__(self, database: PostgresDatabase) -> None:
        from indexing.pg_schema import SCHEMA

        self.database = database
        self.db = database.open(SCHEMA)  # migrated; its read() is one consistent snapshot
        self._local = threading.local()
        self._pg_reads = _PooledReads(database)

    # -- connections ---------------------------------------------------------------------------

    def _current(self) -> _IndexWrite | None:
        current: _IndexWrite | None = getattr(self._local, "write", None)
        return current

    def conn(self) -> Any:
        """This thread's write transaction when it is in one, else pooled autocommit reads."""
        current = self._current()
        return current if current is not None else self._pg_reads

    @contextmanager
    def write(self) -> Iterator[Any]:
        """One write transaction, the only index writer in the database while it runs."""
        if self._current() is not None:
            raise RuntimeError("nested index write")
        with self.database.connection() as raw:
            raw.execute("BEGIN")
            try:
                conn = _IndexWrite(raw, self.database)
                conn.execute("SELECT pg_advisory_xact_lock(?)", (self.database.lock_number(WRITER_LOCK),))
                self._local.write = conn
                yield conn
                conn.settle()
                raw.execute("COMMIT")
            except BaseException:
                rollback(raw)
                raise
            finally:
                self._local.write = None

    def connections(self) -> int:
        """None of its own: the connections belong to the Database's pool."""
        return 0

    def close(self) -> None:
        self._local = threading.local()  # the connections belong to the Database's pool

    def reopened(self) -> PgDialect:
        return PgDialect(self.database)

    def stream(self, sql: str, params: Sequence[object] = ()) -> Iterator[tuple[Any, ...]]:
        current = self._current()
        if current is not None:
            yield from current.execute(sql, params)
            return
        with self.db.read() as conn:
            yield from conn.stream(sql, params)

    # -- search data ---------------------------------------------------------------------------

    def add_chunk_rows(self, conn: Any, rows: list[tuple[object, ...]]) -> None:
        """Queued in the write and copied in one COPY (`_IndexWrite.settle`)."""
        conn.queue_chunks(rows)

    def remove_chunks(self, conn: Any, doc_id: int) -> list[tuple[int, str, str]]:
        """Without settling the write's queued chunks first, unless this document's are among them: an edited
        file's old document goes in every file's write, and a settle each time made a generation per file."""
        if doc_id in conn.queued_docs:
            conn.settle()
        plain = _Plain(conn)
        gone = [tuple(r) for r in plain.execute("SELECT id, head_terms, terms FROM chunks WHERE doc_id=?", (doc_id,))]
        conn.count_dfs([(head, body) for _, head, body in gone], -1)
        plain.execute("DELETE FROM chunks WHERE doc_id=?", (doc_id,))
        return gone

    def reindex_all(self, conn: Any) -> None:
        conn.dfs.clear()  # every chunk is counted again below
        conn.execute("DELETE FROM term_stats")
        rows = conn.all("SELECT id, head_terms, terms FROM chunks")
        conn.executemany("UPDATE chunks SET tsv = ?::tsvector WHERE id = ?",
                         [(conn.counted_tsvector(h, t), i) for i, h, t in rows])

    def take_ids(self, conn: Any, table: str, n: int) -> int:
        """Ids come from the table once per write, then from memory (the write holds the writer lock)."""
        if table not in conn.next_ids:
            conn.next_ids[table] = int(conn.execute(f"SELECT coalesce(max(id), 0) + 1 FROM {table}").fetchone()[0])
        first = int(conn.next_ids[table])
        conn.next_ids[table] = first + n
        return first

    def log_change(self, conn: Any, doc_id: int) -> None:
        conn.changed_docs.append(doc_id)  # logged at `settle`, with the generation it makes

    def change_totals(self, conn: Any, chunks: int, terms: int) -> None:
        conn.totals[0] += chunks
        conn.totals[1] += terms
        conn.totals[2] = 1  # changed: the generation moves on at commit

    def doc_freqs(self, terms: list[str]) -> dict[str, int]:
        found = dict(self.conn().execute("SELECT term, df FROM term_stats WHERE term = ANY(?)", (terms,)).fetchall())
        return {t: int(found.get(t, 0)) for t in terms}

    def chunks_with_all(self, terms: list[str]) -> tuple[str, str, str, str]:
        return "chunks c", "c.tsv @@ ?::tsquery", "c.id", " & ".join(lexeme(t) for t in terms)

    # -- upkeep --------------------------------------------------------------------------------

    def db_bytes(self) -> int:
        tables = ("documents", "files", "chunks", "term_stats", "chunk_vectors", "index_jobs", "meta", "stats",
                  "index_changes")
        total = self.conn().execute(
            "SELECT coalesce(sum(pg_total_relation_size(to_regclass(t))), 0) FROM unnest(?::text[]) AS t", (list(tables),)
        ).fetchone()
        return int(total[0]) if total else 0

    def where(self) -> str:
        return self.database.describe()

    def worth_vacuum(self) -> bool:
        return False  # PostgreSQL's autovacuum gives space back

    def vacuum(self) -> None:
        """Nothing to do by hand: autovacuum reclaims space and keeps statistics."""


def pg_index(database: PostgresDatabase) -> IndexStore:
    """The index in `database`."""
    from indexing.store import IndexStore

    return IndexStore(PgDialect(database))


# -- the analysed terms as PostgreSQL text-search values -----------------------------------------


def lexeme(term: str) -> str:
    """A term as a quoted tsquery/tsvector lexeme (no text-search configuration touches it)."""
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"


def term_positions(head_terms: str, terms: str) -> dict[str, list[str]]:
    """Every term of a chunk with its tsvector positions: body terms at 1.., heading terms (weight A)
    after a gap, so that a phrase never spans the two."""
    positions: dict[str, list[str]] = {}
    body = terms.split()
    for at, term in enumerate(body, start=1):
        positions.setdefault(term, []).append(str(min(at, MAX_POSITION)))
    for at, term in enumerate(head_terms.split(), start=len(body) + 2):
        positions.setdefault(term, []).append(f"{min(at, MAX_POSITION)}A")
    return positions


def tsvector_of(positions: dict[str, list[str]]) -> str:
    """The tsvector literal of `term_positions` (a lexeme keeps at most 256 positions, as PostgreSQL does)."""
    return " ".join(f"{entry}{','.join(p[:256])}" for t, p in positions.items() if (entry := _entry(t)))


def searchable(term: str) -> bool:
    """True when `term` fits in a tsvector lexeme (a longer one is in no chunk's tsvector)."""
    return bool(_entry(term))


@functools.lru_cache(maxsize=1 << 16)  # terms repeat from chunk to chunk
def _entry(term: str) -> str:
    """`'term':`, the start of a term's tsvector entry; empty for a term too long for a lexeme."""
    return lexeme(term) + ":" if len(term.encode()) <= MAX_LEXEME_BYTES else ""
