"""What differs between the index in SQLite and in PostgreSQL, as one strategy object that
`indexing.store.IndexStore` is given (`indexing.sqlite_store.SqliteDialect`, `indexing.pg_store.PgDialect`):
connections and transactions, how chunks are indexed for candidates (FTS5, or a tsvector with a GIN index),
term statistics, snapshots and upkeep. Every other statement is the store's, written once for both."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from foundation.storage import StoreDb

ChunkTerms = tuple[int, int, str, str]  # a chunk's (id, doc_id, head_terms, terms)
SNAPSHOT_BATCH = 20_000
PAGE_SQL = "SELECT id, doc_id, head_terms, terms FROM chunks WHERE id > ? ORDER BY id LIMIT ?"
CHUNK_TABLE_COLS = ('id, doc_id, idx, start, "end", heading, page, slide, sheet, row_first, row_last, text, '
                    'head_terms, terms')  # `end` is quoted: a reserved word in PostgreSQL
Snapshot = tuple[int, Iterator[list[ChunkTerms]]]
ReadAll = Callable[[str, Sequence[object]], list[Any]]


class IndexChanged(Exception):
    """The chunks changed while they were read in pages for a snapshot (`IndexStore.snapshot_batches`):
    the pages would mix two generations, so the read stops."""


def pages_of(generation: int, read_page: Callable[[int], tuple[int, list[ChunkTerms]]]) -> Iterator[list[ChunkTerms]]:
    """Every chunk by id, a page at a time: `read_page(after)` reads, in one read transaction, the
    generation and the chunks with ids above `after`. Each page (the last, empty one too) must be of
    `generation`: every change to the chunks moves it on in the change's own transaction, so pages
    that all saw it saw the same chunks, as one long transaction would (IndexChanged otherwise)."""
    after = -(2**62)
    while True:
        now, rows = read_page(after)
        if now != generation:
            raise IndexChanged(f"the index moved from generation {generation} to {now} while it was read")
        if not rows:
            return
        yield rows
        after = rows[-1][0]


class IndexDialect(Protocol):
    """One backend of the index. `conn` arguments are the connection of the caller's `write()`; a write's
    own reads see what it wrote (PostgreSQL's write applies what it gathered before a statement reads it)."""

    name: Literal["sqlite", "postgresql"]
    engine_name: str  # what finds candidates when the in-memory postings do not (index_status)

    @property
    def db(self) -> StoreDb:
        """The index's tables through the storage seam (`read()`: one consistent snapshot)."""

    # -- connections -------------------------------------------------------------------------------

    def conn(self) -> Any:
        """This thread's write connection inside `write()`; else pooled autocommit reads."""

    def write(self) -> AbstractContextManager[Any]:
        """One write transaction, the only index writer while it runs: all of it or nothing."""

    def stream(self, sql: str, params: Sequence[object]) -> Iterator[tuple[Any, ...]]:
        """Rows of a query that may be large, read as they are consumed."""

    def connections(self) -> int:
        """Connections this index holds open now."""

    def close(self) -> None: ...

    def reopened(self) -> IndexDialect:
        """Another handle on the same database, as another process opens it."""

    # -- search data: how chunks are indexed for candidates ------------------------------------------

    def add_chunk_rows(self, conn: Any, rows: list[tuple[object, ...]]) -> None: ...

    def remove_chunks(self, conn: Any, doc_id: int) -> list[tuple[int, str, str]]:
        """Delete a document's chunks, rows and candidate index; returns them (id, head terms, terms)."""

    def reindex_all(self, conn: Any) -> None:
        """Index every stored chunk for candidates again (after their terms changed)."""

    def take_ids(self, conn: Any, table: str, n: int) -> int:
        """The first of `n` new ids of `table` (documents or chunks), under the caller's write."""

    def change_totals(self, conn: Any, chunks: int, terms: int) -> None:
        """Add to (or, negative, take from) the corpus totals, and move the generation on."""

    def log_change(self, conn: Any, doc_id: int) -> None:
        """Record that the generation the write makes changed this document's chunks (`indexing.changelog`)."""

    def doc_freqs(self, terms: list[str]) -> dict[str, int]:
        """How many chunks contain each of these (distinct) terms."""

    def chunks_with_all(self, terms: list[str]) -> tuple[str, str, str, str]:
        """(FROM, WHERE, ORDER BY, its one argument): the chunks `c` that contain every term, best first."""

    # -- upkeep ----------------------------------------------------------------------------------------

    def db_bytes(self) -> int: ...

    def where(self) -> str:
        """Where the index is, for people (status lines)."""

    def worth_vacuum(self) -> bool: ...

    def vacuum(self) -> None:
        """Give back the space of large removals."""
