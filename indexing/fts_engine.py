"""Candidates from SQLite FTS5: the MATCH expression of the query, ordered by FTS5's bm25() with a
heading weight, keeps the top `k` chunks; they go on to the scorer with their stored terms.

In natural mode only the rarest share of the distinct loose terms (`match_keep`, at least
`match_min`) find candidates: common words only make FTS5 score more rows. All terms still rank.
Terms the corpus lacks (df 0) come last, so they never push a known term out.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Mapping, Sequence

from indexing.engine import TermRows
from indexing.query import Mode, ParsedQuery, Query, fts_error, to_match
from indexing.scope import PathFilter, active, allowed
from indexing.scoring import RankParams
from indexing.store import IndexStore


class FtsEngine:
    def __init__(self, store: IndexStore, params: RankParams) -> None:
        self.store = store
        self.params = params

    def candidates(self, query: Query, k: int, scope: PathFilter | None) -> TermRows:
        """The top `k` chunks by FTS5 bm25 inside `scope`, with their terms and the collection stats."""
        dfs: dict[str, int] | None = None
        if query.mode == "fts":
            match = query.match
        else:
            dfs = self.store.doc_freqs(query.parsed.all_terms())
            match = to_match(candidate_query(query.parsed, query.mode, dfs, self.params), query.mode)
        if not match:
            return TermRows([])
        rows = self._terms(self._match(match, k, scope, raw=query.text if query.mode == "fts" else None))
        if not rows:
            return TermRows([])
        if dfs is None:
            dfs = self.store.doc_freqs(query.parsed.all_terms())
        n_docs, avgdl = self.store.corpus_stats()
        return TermRows(rows, n_docs, avgdl, dfs)

    def _match(self, match: str, n: int, scope: PathFilter | None, raw: str | None) -> list[int]:
        """The ids of the top `n` chunks by FTS5 bm25 (`raw`: the user's FTS5 text, for syntax errors)."""
        try:
            return self._top(match, n) if (scope := active(scope)) is None else self._top_in(match, n, scope)
        except sqlite3.OperationalError as exc:
            if raw is not None:
                raise fts_error(raw, str(exc)) from None
            raise

    def _order(self) -> str:
        return f"ORDER BY bm25(chunks_fts, {self.params.fts_head_weight}, 1.0)"

    def _top(self, match: str, n: int) -> list[int]:
        ids = self.store.conn().execute(
            f"SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ? {self._order()} LIMIT {int(n)}", (match,)
        ).fetchall()
        return [int(i) for (i,) in ids]

    def _top_in(self, match: str, n: int, scope: PathFilter) -> list[int]:
        """The path filter is applied to a wider unfiltered top list first (cheap when most documents
        qualify) and inside the FTS query only when needed."""
        conn, wide = self.store.conn(), 4 * n
        ranked = conn.execute(
            f"SELECT c.id, c.doc_id FROM (SELECT rowid AS id FROM chunks_fts WHERE chunks_fts MATCH ? "
            f"{self._order()} LIMIT {wide}) AS top JOIN chunks c ON c.id = top.id",
            (match,),
        ).fetchall()
        kept = [int(ranked[at][0]) for at in allowed(self.store, [d for _, d in ranked], scope)]
        if len(kept) < n and len(ranked) == wide:
            # `+rowid`: the scope is a filter on the match's rows, not a rowid lookup (FTS5 would run the
            # MATCH once per chunk in scope, each a scan of the terms' postings: minutes for a large file)
            docs, extra = scope.documents_sql()
            ids = conn.execute(
                f"SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ? AND +rowid IN (SELECT id FROM chunks "
                f"WHERE doc_id IN {docs}) {self._order()} LIMIT {int(n)}",
                [match, *extra],
            ).fetchall()
            kept = [int(i) for (i,) in ids]
        return kept[:n]

    def _terms(self, ids: list[int]) -> list[tuple[int, list[str], list[str]]]:
        """(id, heading terms, body terms) of the chunks `ids`, in the order given."""
        if not ids:
            return []
        rows = self.store.conn().execute(
            f"SELECT id, head_terms, terms FROM chunks WHERE id IN ({','.join(map(str, ids))})"
        ).fetchall()
        by_id = {r[0]: r for r in rows}
        return [
            (i, head.split() if head else [], body.split())
            for i, head, body in (by_id[i] for i in ids if i in by_id)
        ]


def candidate_query(parsed: ParsedQuery, mode: Mode, dfs: dict[str, int], params: RankParams) -> ParsedQuery:
    """In natural mode, only the rarest loose terms find candidates (all of them rank).
    `dfs`: the chunk frequency of every query term."""
    loose = list(dict.fromkeys(parsed.terms))
    keep = max(params.match_min, math.ceil(len(loose) * params.match_keep))
    if mode != "natural" or len(loose) <= keep:
        return parsed
    rare = rarest_known(loose, dfs, keep)
    return ParsedQuery(terms=[t for t in parsed.terms if t in rare], phrases=parsed.phrases)


def rarest_known(terms: Sequence[str], dfs: Mapping[str, int], keep: int) -> set[str]:
    """The `keep` rarest of `terms` by chunk frequency `dfs`, terms found nowhere (df 0) last: an
    unknown word can never push a word of the corpus out of the candidate query."""
    return set(sorted(terms, key=lambda t: (dfs.get(t, 0) == 0, dfs.get(t, 0)))[:keep])
