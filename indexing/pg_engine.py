"""Candidates from PostgreSQL: the query as a tsquery over the chunks' GIN-indexed tsvector.

Which chunks may be scored follows the FTS5 engine exactly (the same candidate terms: in natural
mode the rarest share of the loose terms, OR'ed; phrases required; `all`/`phrase` modes AND). The
top `k` of them are chosen in SQL by a BM25-shaped order: each candidate term's idf times
`ts_rank` of that term alone (its frequency, heading occurrences weighted, damped by the chunk's
length). They go on to the one scorer with their stored terms, as the FTS5 engine's do.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

import psycopg

from indexing.engine import TermRows
from indexing.fts_engine import candidate_query
from indexing.pg_store import lexeme, searchable
from indexing.query import Mode, ParsedQuery, Query, fts_error
from indexing.scope import PathFilter, active
from indexing.scoring import RankParams, idf

if TYPE_CHECKING:
    from indexing.store import IndexStore

MAX_RANKED_TERMS = 16  # terms in the SQL order (the rarest); every query term still scores
_FTS5_TOKEN = re.compile(r'"(?:[^"]|"")*"\*?|\(|\)|,|[^\s()",]+')


class PgEngine:
    def __init__(self, store: IndexStore, params: RankParams) -> None:
        self.store = store
        self.params = params

    def candidates(self, query: Query, k: int, scope: PathFilter | None) -> TermRows:
        dfs = self.store.doc_freqs(query.parsed.all_terms())
        tsquery: str | None
        if query.mode == "fts":
            tsquery = fts5_to_tsquery(query.match or "", query.text)
            ranked = query.parsed.all_terms()
        else:
            parsed = candidate_query(query.parsed, query.mode, dfs, self.params)
            tsquery, ranked = to_tsquery(parsed, query.mode), parsed.all_terms()
        if not tsquery:
            return TermRows([])
        n_docs, avgdl = self.store.corpus_stats()
        ids = self._top(tsquery, self._order(ranked, dfs, n_docs), k, scope, query)
        rows = self._terms(ids)
        return TermRows(rows, n_docs, avgdl, dfs) if rows else TermRows([])

    def _order(self, terms: list[str], dfs: dict[str, int], n_docs: int) -> tuple[str, list[object]]:
        """The SQL expression that orders candidates, and its arguments."""
        known = sorted({t for t in terms if dfs.get(t, 0) > 0 and searchable(t)}, key=lambda t: dfs[t])[:MAX_RANKED_TERMS]
        if not known:
            return "", []
        head = max(1.0, self.params.fts_head_weight)
        weights = f"'{{{1.0 / head:.4f}, 0, 0, 1.0}}'::float4[]"  # D (body), C, B, A (heading)
        parts = [f"{idf(n_docs, dfs[t], math.log):.6f} * ts_rank({weights}, c.tsv, ?::tsquery, 1)" for t in known]
        return " + ".join(parts), [lexeme(t) for t in known]

    def _top(self, tsquery: str, order: tuple[str, list[object]], k: int, scope: PathFilter | None,
             query: Query) -> list[int]:
        where, args = "c.tsv @@ ?::tsquery", [tsquery]
        if (active_scope := active(scope)) is not None:
            docs, extra = active_scope.documents_sql(self.store.backend)
            where, args = f"{where} AND c.doc_id IN {docs}", [*args, *extra]
        ranking = f"{order[0]} DESC, " if order[0] else ""
        sql = f"SELECT c.id FROM chunks c WHERE {where} ORDER BY {ranking}c.id LIMIT {int(k)}"
        try:
            return [int(i) for (i,) in self.store.conn().execute(sql, [*args, *order[1]]).fetchall()]
        except psycopg.errors.SyntaxError as exc:
            if query.mode == "fts":
                raise fts_error(query.text, str(exc).splitlines()[0]) from None
            raise

    def _terms(self, ids: list[int]) -> list[tuple[int, list[str], list[str]]]:
        if not ids:
            return []
        rows = self.store.conn().execute("SELECT id, head_terms, terms FROM chunks WHERE id = ANY(?)", (ids,)).fetchall()
        by_id = {int(r[0]): r for r in rows}
        return [(i, head.split() if head else [], body.split())
                for i, head, body in (by_id[i] for i in ids if i in by_id)]


def to_tsquery(parsed: ParsedQuery, mode: Mode = "natural") -> str | None:
    """The tsquery of a parsed query, with the FTS5 expression's meaning (`query.to_match`). A term
    too long to be a lexeme is in no tsvector: it is left out (a phrase with one matches nothing)."""
    if any(not searchable(t) for p in parsed.phrases for t in p):
        return None  # a required phrase no chunk can hold
    parsed = ParsedQuery(terms=[t for t in parsed.terms if searchable(t)], phrases=parsed.phrases)
    if parsed.empty:
        return None
    loose = [lexeme(t) for t in dict.fromkeys(parsed.terms)]
    phrases = [_phrase(p) for p in parsed.phrases]
    if mode in ("all", "phrase"):
        return " & ".join([*phrases, *loose])
    ored = " | ".join(loose)
    if not phrases:
        return ored
    required = " & ".join(phrases)
    return f"{required} & ({ored} | {' | '.join(phrases)})" if ored else required


def _phrase(terms: list[str]) -> str:
    return "(" + " <-> ".join(lexeme(t) for t in terms) + ")"


def fts5_to_tsquery(match: str, raw: str) -> str:
    """The translated FTS5 expression (`query.translate_fts`) as a tsquery: AND/OR/NOT, parentheses,
    "phrases" and prefix* carry over; NEAR(a b, N) becomes "a within N+1 positions of b, either
    order" for each neighbouring pair; `^` and column filters have no PostgreSQL form."""
    tokens = _FTS5_TOKEN.findall(match)
    out: list[str] = []
    at = 0
    while at < len(tokens):
        token = tokens[at]
        if (token.startswith('"') or token in ("(", "NEAR")) and out and out[-1] not in ("&", "|", "& !", "("):
            out.append("&")  # FTS5's implicit AND
        if token == "NEAR":
            near, at = _near(tokens, at + 1, raw)
            out.append(near)
            continue
        if token.startswith('"'):
            out.append(_fts5_string(token, raw))
        elif token in ("AND", "OR", "NOT", "(", ")"):
            out.append({"AND": "&", "OR": "|", "NOT": "& !"}.get(token, token))
        else:
            raise fts_error(raw, f"{token!r} has no PostgreSQL form (this server keeps its index in PostgreSQL)")
        at += 1
    return " ".join(out)


def _near(tokens: list[str], at: int, raw: str) -> tuple[str, int]:
    """NEAR( "a" "b" ... [, N] ) from `tokens[at]` (its "("): the tsquery and the position after ")"."""
    close = tokens.index(")", at) if ")" in tokens[at:] else -1
    if at >= len(tokens) or tokens[at] != "(" or close < 0:
        raise fts_error(raw, "NEAR needs parentheses")
    inside = tokens[at + 1 : close]
    distance = 10
    if len(inside) >= 2 and inside[-2] == "," and inside[-1].isdigit():
        distance, inside = int(inside[-1]), inside[:-2]
    if len(inside) < 2 or not all(t.startswith('"') and not t.endswith("*") for t in inside):
        raise fts_error(raw, "NEAR takes two or more quoted terms")
    groups = [_fts5_string(t, raw) for t in inside]
    pairs = []
    for left, right in zip(groups, groups[1:], strict=False):
        ways = [f"{a} <{gap}> {b}" for gap in range(1, min(distance, 50) + 2) for a, b in ((left, right), (right, left))]
        pairs.append("(" + " | ".join(ways) + ")")
    return "(" + " & ".join(pairs) + ")", close + 1


def _fts5_string(token: str, raw: str) -> str:
    prefix = token.endswith("*")
    words = token.rstrip("*")[1:-1].replace('""', '"').split()
    if not words:
        raise fts_error(raw, "a quoted string has no searchable word")
    if not all(map(searchable, words)):
        raise fts_error(raw, "a word is longer than PostgreSQL's 2,046-byte limit")
    if prefix:
        return "(" + " <-> ".join([*map(lexeme, words[:-1]), lexeme(words[-1]) + ":*"]) + ")"
    return _phrase(words) if len(words) > 1 else lexeme(words[0])
