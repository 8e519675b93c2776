"""The seam between the searcher and where candidates come from.

A query is parsed once (`indexing.query.plan`); an engine picks up to `k` candidate chunks for it;
`indexing.scoring` scores them, the same way whichever engine found them. Engines now: the
in-memory postings (`indexing.memory_engine`) and SQLite FTS5 (`indexing.fts_engine`).

A new engine (e.g. PostgreSQL) implements `CandidateEngine.candidates` and returns one of:
- `TermRows`: each candidate chunk's analysed heading and body terms, in order, plus the collection
  statistics BM25 needs (chunks in the index, average body length in terms, and how many chunks
  contain each query term). The scorer derives term frequencies, lengths and positions from the
  terms. This is what a database engine returns.
- `WeightedRows`: pre-weighted postings: each candidate's BM25F sum (its postings' weights,
  computed at build time with `scoring.idf`, `scoring.length_norm` and `scoring.saturate`), which
  query terms it contains, each query term's key and idf, and on demand where the query terms occur.

An engine only chooses which chunks may be scored; it never orders the result. It returns None
when it cannot answer this query now (not built, stale, unsupported mode): the searcher then asks
the next engine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, NamedTuple, Protocol, TypeVar

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from indexing.query import Query
    from indexing.scope import PathFilter

K = TypeVar("K", covariant=True)  # how an engine names a term: the term itself, or a term id


class Fields(NamedTuple, Generic[K]):
    """Where the query terms occur in one candidate: body positions and terms, heading positions and terms."""

    pos: Sequence[int]
    terms: Sequence[K]
    head_pos: Sequence[int]
    head_terms: Sequence[K]


@dataclass(frozen=True)
class TermRows:
    """Candidates as their analysed terms: rows of (chunk id, heading terms, body terms)."""

    rows: Sequence[tuple[int, Sequence[str], Sequence[str]]]
    n_docs: int = 0  # chunks in the index
    avgdl: float = 1.0  # average body length in terms
    dfs: dict[str, int] | None = None  # chunks containing each query term, in query order


class FieldsBatch(Protocol[K]):
    """The Fields of a batch of candidates, by position in the batch."""

    def __getitem__(self, n: int, /) -> Fields[K]: ...


class WeightedRows(Protocol[K]):
    """Candidates from pre-weighted postings. Bit j of `present` is set when the candidate contains
    the j-th distinct query term that `term` knows, in query order (up to 63 terms)."""

    @property
    def ids(self) -> npt.NDArray[np.int64]: ...  # chunk ids

    @property
    def base(self) -> npt.NDArray[np.float32]: ...  # each candidate's BM25F sum

    @property
    def present(self) -> npt.NDArray[np.int64]: ...

    def term(self, term: str) -> tuple[K, float] | None:
        """The key and idf of a query term; None when no chunk has it."""
        ...

    def fields(self, picks: npt.NDArray[np.intp], terms: list[str], heads: bool) -> FieldsBatch[K]:
        """Where `terms` occur in the candidates at positions `picks` (headings only when `heads`)."""
        ...


Candidates = TermRows | WeightedRows[int]


class CandidateEngine(Protocol):
    """Finds candidate chunks for a parsed query inside `scope` (None or inactive: everywhere)."""

    def candidates(self, query: Query, k: int, scope: PathFilter | None) -> Candidates | None: ...
