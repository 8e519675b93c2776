"""Ranked search over the index, one way down:

    query.plan (parse once) -> engine.candidates (the first engine that answers) -> scoring.score
    (BM25F + proximity) -> rerank stages (none by default) -> hits (rows, paths, context: the store)

Engines: the in-memory postings when they are fresh (`indexing.memory_engine`, natural mode), else
the database: SQLite FTS5 (`indexing.fts_engine`) or PostgreSQL's tsvector (`indexing.pg_engine`).
They give the same scores to the same candidates: the scorer is the same.
`search_documents` groups the ranked chunks by document (two-stage search). Callers import the
result types, PathFilter, RankParams and rank_lines from here (re-exported from their modules).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple, Protocol

from foundation.waiting import about_to_wait
from indexing.engine import CandidateEngine
from indexing.fts_engine import FtsEngine
from indexing.hits import ChunkHit as ChunkHit
from indexing.hits import DocumentHit as DocumentHit
from indexing.hits import attach, neighbours, ranked_hits
from indexing.lines import LineHit as LineHit
from indexing.lines import rank_lines as rank_lines
from indexing.memory_engine import MemoryEngine
from indexing.query import Mode, Query, plan
from indexing.scope import PathFilter as PathFilter
from indexing.scope import active
from indexing.scoring import DEFAULT_RANK as DEFAULT_RANK
from indexing.scoring import RankParams as RankParams
from indexing.scoring import Scored, score
from indexing.store import IndexStore

if TYPE_CHECKING:
    from indexing.postings import MemoryIndex

MAX_DOCUMENT_POOL = 8192  # chunks ranked at most for one page of documents (group_by_document)


class RerankStage(Protocol):
    """A stage after scoring (e.g. dense/hybrid fusion): gets the scorer's best (score, chunk id),
    at least `RankParams.candidates` of them, and the search's `paths` filter (None: none; Searcher drops
    what falls outside it afterwards), and returns them re-ordered (or re-scored), best first.
    A stage may also have `wants(query) -> bool`: False for the queries it leaves as they are, which are
    then scored only as deep as they are asked (see `acting`)."""

    def __call__(self, query: Query, scored: list[Scored], paths: PathFilter | None) -> list[Scored]: ...


def acting(stages: Sequence[RerankStage], query: Query) -> list[RerankStage]:
    """The stages that may re-order this query's candidates (a stage without `wants`: every query).
    Scoring `candidates` deep instead of one page costs ~1 ms at 100k chunks (bench.hybrid_cost)."""
    return [stage for stage in stages if (wants := getattr(stage, "wants", None)) is None or wants(query)]


class Searcher:
    """Ranked search over one index. With a `memory` index that is up to date, natural-language
    queries take their candidates from it (every matching chunk); otherwise FTS5 finds them.
    `rerank`: stages applied in order after scoring (empty: the scorer's order is final)."""

    def __init__(
        self, store: IndexStore, params: RankParams = DEFAULT_RANK, memory: MemoryIndex | None = None,
        rerank: Sequence[RerankStage] = (),
    ) -> None:
        self.store = store
        self.params = params
        self.engines: list[CandidateEngine] = [_database_engine(store, params)]
        if memory is not None:
            self.engines.insert(0, MemoryEngine(memory, store, params))
        self.rerank = tuple(rerank)

    def search(
        self, text: str, *, mode: Mode = "natural", limit: int = 10, offset: int = 0,
        paths: PathFilter | None = None, context_chars: int = 0,
    ) -> list[ChunkHit]:
        """Ranked chunks for `text` (best first), `offset` of them skipped."""
        ranked = self.rank(text, mode=mode, want=offset + limit, paths=paths)
        found = ranked[offset : offset + limit]
        self.attach(found, paths, context_chars)
        return found

    def search_documents(
        self, text: str, *, mode: Mode = "natural", limit: int = 10, offset: int = 0,
        paths: PathFilter | None = None, per_document: int = 3, context_chars: int = 0,
    ) -> DocumentPage:
        """Documents ranked by their best chunk, each with its top chunks and the best one's neighbours.
        The documents come from a pool of the best chunks; when it is full but holds fewer than
        `offset + limit` documents (one long file can fill it), it doubles, up to `MAX_DOCUMENT_POOL`
        chunks. A query whose first pool holds enough documents is ranked from that pool alone."""
        groups, pool_cap = self._documents(text, mode, offset + limit, paths, per_document)
        docs = groups[offset : offset + limit]
        for doc in docs:
            self.attach(doc.matched, paths, context_chars)
            doc.path, doc.doc_hash = doc.matched[0].path, doc.matched[0].doc_hash
            doc.context = neighbours(self.store, doc.matched[0], {h.index for h in doc.matched})
        return DocumentPage(docs, pool_cap, len(groups))

    def _documents(
        self, text: str, mode: Mode, need: int, paths: PathFilter | None, per_document: int
    ) -> tuple[list[DocumentHit], int | None]:
        """The documents of the best chunks, at least `need` of them when that many match; and the
        chunks grouped when the pool stopped at `MAX_DOCUMENT_POOL` short of `need` (else None)."""
        want = max(self.params.candidates, 5 * need)
        while True:
            ranked = self.rank(text, mode=mode, want=want, paths=paths)
            groups = _by_document(ranked, per_document)
            if len(groups) >= need or len(ranked) < want:
                return groups, None
            if 2 * want > MAX_DOCUMENT_POOL:
                return groups, len(ranked)
            want *= 2

    def rank(self, text: str, *, mode: Mode = "natural", want: int = 10, paths: PathFilter | None = None) -> list[ChunkHit]:
        """The best `want` chunks (at least one when any matches), best first, with path and hash."""
        query = plan(text, mode)
        for at, engine in enumerate(self.engines):
            if at:
                about_to_wait()  # the database's engine (a call on the event loop moves to a worker thread)
            ranked = self.rank_by(engine, query, want, paths)
            if ranked is not None:
                return ranked
        return []

    def rank_by(self, engine: CandidateEngine, query: Query, want: int, paths: PathFilter | None) -> list[ChunkHit] | None:
        """`rank` with one engine; None when it cannot answer this query now."""
        found = engine.candidates(query, max(want, self.params.candidates), paths)
        if found is None:
            return None
        keep = max(want, 1)
        stages = acting(self.rerank, query)
        scored = score(found, query.parsed, max(keep, self.params.candidates) if stages else keep, self.params)
        lexical = {chunk_id for _, chunk_id in scored}
        for stage in stages:  # e.g. the hybrid mode's dense candidates (indexing.hybrid)
            scored = stage(query, scored, paths)
        hits = ranked_hits(self.store, in_scope(self.store, scored, lexical, paths)[:keep], paths)
        for hit in hits:
            hit.by_meaning = hit.chunk_id not in lexical
        return hits

    def attach(self, found: list[ChunkHit], paths: PathFilter | None, context_chars: int) -> None:
        """Fill in missing paths and hashes and, when asked, the text around each hit."""
        attach(self.store, found, paths, context_chars)


def in_scope(store: IndexStore, scored: list[Scored], known: set[int], paths: PathFilter | None) -> list[Scored]:
    """`scored` without the chunks a stage added (not in `known`: the engine's, already in scope) that lie
    outside `paths`."""
    added = [chunk_id for _, chunk_id in scored if chunk_id not in known]
    if not added or (scope := active(paths)) is None:
        return scored
    cond, args = scope.documents_sql(store.backend)
    inside = {int(r[0]) for r in store.conn().execute(
        f"SELECT id FROM chunks WHERE id IN ({','.join(map(str, added))}) AND doc_id IN {cond}", args)}
    return [(s, chunk_id) for s, chunk_id in scored if chunk_id in known or chunk_id in inside]


class DocumentPage(NamedTuple):
    """One page of `Searcher.search_documents`. `pool_cap`: set (to the chunks grouped) when the best
    `MAX_DOCUMENT_POOL` chunks held too few documents for the page: more documents may match.
    `pooled`: the documents those chunks came from."""

    documents: list[DocumentHit]
    pool_cap: int | None
    pooled: int


def _by_document(ranked: list[ChunkHit], per_document: int) -> list[DocumentHit]:
    """Ranked chunks grouped by document, documents in the order of their best chunk."""
    groups: dict[int, DocumentHit] = {}
    for hit in ranked:
        group = groups.setdefault(hit.doc_id, DocumentHit(hit.doc_id, "", "", hit.score))
        if len(group.matched) < per_document:
            group.matched.append(hit)
    return list(groups.values())


def _database_engine(store: IndexStore, params: RankParams) -> CandidateEngine:
    """What finds candidates in the database itself: FTS5 on SQLite, the tsvector on PostgreSQL."""
    if store.backend == "postgresql":
        from indexing.pg_engine import PgEngine

        return PgEngine(store, params)
    return FtsEngine(store, params)
