"""Ranked search over the index: FTS5 finds candidates, a BM25F + proximity rerank orders them.

Stage 1: the MATCH expression from `indexing.query` (in natural mode an OR of the rarest 80% of
the analysed terms: common words only make FTS5 score more rows), ordered by FTS5's bm25() with a
heading weight, keeps the top `candidates` chunks.
Stage 2: each candidate is scored in Python from its stored terms: BM25 with our own k1/b
(FTS5's are fixed), the heading as a weighted field, and a bonus for query terms that are
adjacent in the chunk as in the query (bigrams). Scores are higher-better.
`group_by_document` groups the ranked chunks by document (two-stage search).
"""

from __future__ import annotations

import heapq
import math
import sqlite3
from collections import Counter
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from indexing.query import Mode, ParsedQuery, fts_error, parse, to_match, translate_fts
from indexing.store import IndexStore, folder_range

T = TypeVar("T", bound=Hashable)

if TYPE_CHECKING:
    import numpy as np

    from indexing.postings import MemoryIndex, Snapshot


@dataclass(frozen=True)
class RankParams:
    candidates: int = 50
    k1: float = 1.2
    b: float = 0.75
    head_weight: float = 2.0
    bigram_weight: float = 0.5
    window: int = 10
    window_weight: float = 0.5
    fts_head_weight: float = 2.0
    match_keep: float = 0.8  # share of the distinct loose terms (rarest first) used to find candidates
    match_min: int = 3


DEFAULT_RANK = RankParams()


@dataclass
class ChunkHit:
    chunk_id: int
    doc_id: int
    index: int
    start: int
    end: int
    heading: str
    page: int | None
    slide: int | None
    sheet: str | None
    rows: tuple[int, int] | None
    text: str
    score: float
    path: str = ""
    doc_hash: str = ""
    before: str = ""
    after: str = ""


@dataclass
class DocumentHit:
    doc_id: int
    path: str
    doc_hash: str
    score: float
    matched: list[ChunkHit] = field(default_factory=list)
    context: list[ChunkHit] = field(default_factory=list)


@dataclass(frozen=True)
class PathFilter:
    """Restrict results to documents reachable from these files/folders (absolute) or GLOBs."""

    files: tuple[str, ...] = ()
    folders: tuple[str, ...] = ()
    globs: tuple[str, ...] = ()

    @property
    def active(self) -> bool:
        return bool(self.files or self.folders or self.globs)

    def sql(self) -> tuple[str, list[str]]:
        parts: list[str] = []
        args: list[str] = []
        for f in self.files:
            parts.append("path = ?")
            args.append(f)
        for d in self.folders:
            parts.append("(path >= ? AND path < ?)")
            args += folder_range(d)
        for g in self.globs:
            parts.append("path GLOB ?")
            args.append(g)
        return "(" + " OR ".join(parts) + ")", args

    def documents_sql(self) -> tuple[str, list[str]]:
        """A subquery of the ids of the documents the filter reaches, and its arguments."""
        cond, args = self.sql()
        return f"(SELECT doc_id FROM files WHERE {cond})", args


_CHUNK_COLS = "c.id, c.doc_id, c.idx, c.start, c.end, c.heading, c.page, c.slide, c.sheet, c.row_first, c.row_last, c.text"


def _hit(row: tuple, score: float = 0.0) -> ChunkHit:  # type: ignore[type-arg]
    """A hit from _CHUNK_COLS, optionally followed by the document's hash and first path."""
    rows = (row[9], row[10]) if row[9] is not None else None
    hit = ChunkHit(row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7], row[8], rows, row[11], score)
    if len(row) > 12:
        hit.doc_hash, hit.path = row[12], row[13] or ""
    return hit


class Searcher:
    """Ranked search over one index. With a `memory` index that is up to date, natural-language
    queries are scored in memory (the same scores, over every matching chunk); otherwise FTS5
    finds the candidates."""

    def __init__(self, store: IndexStore, params: RankParams = DEFAULT_RANK, memory: MemoryIndex | None = None) -> None:
        self.store = store
        self.params = params
        self.memory = memory

    # -- public ------------------------------------------------------------------------------

    def search(
        self, text: str, *, mode: Mode = "natural", limit: int = 10, offset: int = 0,
        paths: PathFilter | None = None, context_chars: int = 0,
    ) -> list[ChunkHit]:
        """Ranked chunks for `text` (best first), `offset` of them skipped."""
        ranked = self.rank(text, mode=mode, want=offset + limit, paths=paths)
        hits = ranked[offset : offset + limit]
        self.attach(hits, paths, context_chars)
        return hits

    def search_documents(
        self, text: str, *, mode: Mode = "natural", limit: int = 10, offset: int = 0,
        paths: PathFilter | None = None, per_document: int = 3, context_chars: int = 0,
    ) -> list[DocumentHit]:
        """Documents ranked by their best chunk, each with its top chunks and the best one's neighbours."""
        ranked = self.rank(text, mode=mode, want=max(self.params.candidates, 5 * (offset + limit)), paths=paths)
        groups: dict[int, DocumentHit] = {}
        for hit in ranked:
            group = groups.setdefault(hit.doc_id, DocumentHit(hit.doc_id, "", "", hit.score))
            if len(group.matched) < per_document:
                group.matched.append(hit)
        docs = list(groups.values())[offset : offset + limit]
        for doc in docs:
            self.attach(doc.matched, paths, context_chars)
            doc.path, doc.doc_hash = doc.matched[0].path, doc.matched[0].doc_hash
            doc.context = self.neighbours(doc.matched[0], {h.index for h in doc.matched})
        return docs

    def rank(self, text: str, *, mode: Mode = "natural", want: int = 10, paths: PathFilter | None = None) -> list[ChunkHit]:
        if mode == "natural" and self.memory is not None:
            ranked = self._rank_in_memory(text, want, paths)
            if ranked is not None:
                return ranked
        match: str | None
        dfs: dict[str, int] | None = None
        if mode == "fts":
            match = translate_fts(text)
            parsed = ParsedQuery(terms=[t for t in match.replace('"', " ").split() if t not in ("AND", "OR", "NOT")])
        else:
            parsed = parse(text, mode)
            dfs = self.store.doc_freqs(parsed.all_terms())
            match = to_match(self._candidate_query(parsed, mode, dfs), mode)
        if not match:
            return []
        ids = self._candidates(match, max(want, self.params.candidates), paths, raw=text if mode == "fts" else None)
        scores = dict((i, score) for score, i in self._rerank(self._terms(ids), parsed, dfs)[: max(want, 1)])
        return [_hit(row, scores[row[0]]) for row in self._rows(list(scores), paths)]

    # -- in memory ---------------------------------------------------------------------------

    def _rank_in_memory(self, text: str, want: int, paths: PathFilter | None) -> list[ChunkHit] | None:
        """The same ranking as FTS5 + rerank, from the in-memory postings; None when they are not
        usable (not built yet, stale, phrases in the query, or too few hits inside `paths`)."""
        parsed = parse(text, "natural")
        snap = self._snapshot()
        if snap is None or parsed.phrases:
            return None
        k = max(want, self.params.candidates)
        scope = paths if paths is not None and paths.active else None
        rows, bm25, present = snap.top(parsed.terms, k if scope is None else 4 * k)
        if scope is not None:
            keep = self._allowed(snap.doc_ids[rows].tolist(), scope)
            if len(keep) < k and len(rows) == 4 * k:
                return None
            rows, bm25, present = rows[keep[:k]], bm25[keep[:k]], present[keep[:k]]
        scored = self._add_proximity(snap, rows, bm25, present, parsed, max(want, 1))
        scores = {i: score for score, i in scored}
        return [_hit(row, scores[row[0]]) for row in self._rows(list(scores), paths)]

    def _snapshot(self) -> Snapshot | None:
        from indexing.postings import Weighting

        assert self.memory is not None
        snap = self.memory.current(*self.store.generation())
        p = self.params
        return snap if snap is not None and snap.weighting == Weighting(p.k1, p.b, p.head_weight) else None

    def _allowed(self, doc_ids: list[int], paths: PathFilter) -> list[int]:
        """Positions in `doc_ids` whose document is reachable from `paths`."""
        cond, extra = paths.sql()
        unique = sorted(set(doc_ids))
        allowed = {
            d for (d,) in self.store.conn().execute(
                f"SELECT DISTINCT doc_id FROM files WHERE {cond} AND doc_id IN ({','.join(map(str, unique))})", extra
            )
        } if unique else set()
        return [i for i, d in enumerate(doc_ids) if d in allowed]

    def _add_proximity(
        self, snap: Snapshot, rows: np.ndarray, bm25: np.ndarray, present: np.ndarray, parsed: ParsedQuery,
        want: int,
    ) -> list[tuple[float, int]]:
        """The best `want` (score, chunk id) once the proximity bonus is added, best first.

        Each row's bonus is bounded by the query terms it contains (`present`, see Snapshot.top),
        so rows are taken in order of that bound and the rest skipped once none can reach the top."""
        import numpy as np

        known = [t for t in dict.fromkeys(parsed.all_terms()) if t in snap.terms]
        idf = {snap.terms[t].tid: snap.terms[t].idf for t in known}
        pairs = [(snap.terms[a].tid, snap.terms[b].tid) for a, b in _query_pairs(parsed) if a in snap.terms and b in snap.terms]
        ceiling = self._ceiling(bm25, present, idf, pairs)
        order = np.argsort(-ceiling, kind="stable")
        rows, bounds, base = rows[order], ceiling[order].tolist(), bm25[order].tolist()
        ids = snap.chunk_ids[rows].tolist()
        top: list[tuple[float, int]] = []  # min-heap of the best `want` (score, -id)
        first, step = 0, want + 8  # positions are looked up for a batch of rows at a time
        while first < len(ids):
            batch = rows[first : first + step]
            body = snap.found(batch, known)
            head = snap.found(batch, known if pairs else [], "head")  # headings count for bigrams only
            for n in range(len(batch)):
                if len(top) == want and bounds[first + n] < top[0][0]:
                    return [(score, -neg) for score, neg in sorted(top, reverse=True)]
                item = (base[first + n] + self._bonus(*body.of(n), *head.of(n), pairs, idf), -ids[first + n])
                if len(top) < want:
                    heapq.heappush(top, item)
                elif item > top[0]:
                    heapq.heapreplace(top, item)
            first, step = first + len(batch), len(ids)
        return [(score, -neg) for score, neg in sorted(top, reverse=True)]

    def _ceiling(
        self, bm25: np.ndarray, present: np.ndarray, idf: dict[int, float], pairs: list[tuple[int, int]]
    ) -> np.ndarray:
        """Each row's highest possible score: BM25F plus the largest bonus its query terms allow
        (bit j of `present`: the row contains the j-th term of `idf`)."""
        import numpy as np

        p = self.params
        ceiling = bm25.astype(np.float64)
        if len(idf) > 63:
            return ceiling + math.inf  # too many terms to bound: every row gets its bonus
        has = (present[:, None] >> np.arange(len(idf))) & 1
        ceiling += has @ (p.window_weight * np.array(list(idf.values())))
        if pairs:
            col = {tid: j for j, tid in enumerate(idf)}
            both = has[:, [col[a] for a, _ in pairs]] & has[:, [col[b] for _, b in pairs]]
            ceiling += both @ np.array([p.bigram_weight * min(idf[a], idf[b]) for a, b in pairs])
        return ceiling

    def _bonus(
        self, pos: Sequence[int], terms: Sequence[T], head_pos: Sequence[int], head_terms: Sequence[T],
        pairs: Sequence[tuple[T, T]], idf: Mapping[T, float],
    ) -> float:
        """The bigram and window bonus of one chunk, from where the query terms occur in it."""
        p = self.params
        bonus = 0.0
        if pairs and p.bigram_weight:
            present = _adjacent(pos, terms) | _adjacent(head_pos, head_terms) if head_pos else _adjacent(pos, terms)
            bonus += p.bigram_weight * sum(min(idf[a], idf[b]) for a, b in pairs if (a, b) in present)
        if p.window_weight:
            bonus += p.window_weight * _best_window(pos, terms, idf, p.window)
        return bonus

    # -- stage 1 -----------------------------------------------------------------------------

    def _candidate_query(self, parsed: ParsedQuery, mode: Mode, dfs: dict[str, int]) -> ParsedQuery:
        """In natural mode, only the rarest loose terms find candidates (all of them rank).
        `dfs`: the chunk frequency of every query term."""
        loose = list(dict.fromkeys(parsed.terms))
        keep = max(self.params.match_min, math.ceil(len(loose) * self.params.match_keep))
        if mode != "natural" or len(loose) <= keep:
            return parsed
        rare = rarest_known(loose, dfs, keep)
        return ParsedQuery(terms=[t for t in parsed.terms if t in rare], phrases=parsed.phrases)

    def _candidates(self, match: str, n: int, paths: PathFilter | None, raw: str | None) -> list[int]:
        """The ids of the top `n` chunks by FTS5 bm25. A path filter is applied to a wider unfiltered top
        list first (cheap when most documents qualify) and inside the FTS query only when needed."""
        conn = self.store.conn()
        order = f"ORDER BY bm25(chunks_fts, {self.params.fts_head_weight}, 1.0)"
        try:
            if paths is None or not paths.active:
                ids = conn.execute(
                    f"SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ? {order} LIMIT {int(n)}", (match,)
                ).fetchall()
                return [i for (i,) in ids]
            wide = 4 * n
            ranked = conn.execute(
                f"SELECT c.id, c.doc_id FROM (SELECT rowid AS id FROM chunks_fts WHERE chunks_fts MATCH ? {order} "
                f"LIMIT {wide}) AS top JOIN chunks c ON c.id = top.id",
                (match,),
            ).fetchall()
            kept = [ranked[at][0] for at in self._allowed([d for _, d in ranked], paths)]
            if len(kept) < n and len(ranked) == wide:
                docs, extra = paths.documents_sql()
                ids = conn.execute(
                    f"SELECT rowid FROM chunks_fts WHERE chunks_fts MATCH ? AND rowid IN (SELECT id FROM chunks "
                    f"WHERE doc_id IN {docs}) {order} LIMIT {int(n)}",
                    [match, *extra],
                ).fetchall()
                kept = [i for (i,) in ids]
            return kept[:n]
        except sqlite3.OperationalError as exc:
            if raw is not None:
                raise fts_error(raw, str(exc)) from None
            raise

    def _rows(self, ids: list[int], paths: PathFilter | None = None) -> list[tuple]:  # type: ignore[type-arg]
        """Chunk rows for `ids`, in the order given, each with its document's hash and first path
        (the first one inside `paths`)."""
        if not ids:
            return []
        cond, extra = paths.sql() if paths is not None and paths.active else ("1", [])
        rows = self.store.conn().execute(
            f"SELECT {_CHUNK_COLS}, d.hash, (SELECT min(path) FROM files f WHERE f.doc_id = c.doc_id AND {cond}) "
            f"FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE c.id IN ({','.join('?' * len(ids))})",
            [*extra, *ids],
        ).fetchall()
        by_id = {r[0]: r for r in rows}
        return [by_id[i] for i in ids if i in by_id]

    def _terms(self, ids: list[int]) -> list[tuple[int, str, str]]:
        """(id, head terms, terms) of the chunks `ids`, in the order given."""
        if not ids:
            return []
        rows = self.store.conn().execute(
            f"SELECT id, head_terms, terms FROM chunks WHERE id IN ({','.join(map(str, ids))})"
        ).fetchall()
        by_id = {r[0]: r for r in rows}
        return [by_id[i] for i in ids if i in by_id]

    # -- stage 2 -----------------------------------------------------------------------------

    def _rerank(
        self, rows: list[tuple[int, str, str]], parsed: ParsedQuery, dfs: dict[str, int] | None = None
    ) -> list[tuple[float, int]]:
        """(score, chunk id) of each (id, head terms, terms) row, best first."""
        if not rows:
            return []
        p = self.params
        n_docs, avgdl = self.store.corpus_stats()
        if dfs is None:
            dfs = self.store.doc_freqs(parsed.all_terms())
        idf = {t: math.log(1 + (n_docs - df + 0.5) / (df + 0.5)) for t, df in dfs.items()}
        pairs = _query_pairs(parsed)
        scored = []
        tf_none: Counter[str] = Counter()
        for chunk_id, head_terms, terms in rows:
            body = terms.split()
            pos = [i for i, t in enumerate(body) if t in idf]  # where query terms occur
            found = [body[i] for i in pos]
            head = head_terms.split() if head_terms else []
            head_pos = [i for i, t in enumerate(head) if t in idf]
            in_head = [head[i] for i in head_pos]
            tf_body = Counter(found)
            tf_head = Counter(in_head) if in_head else tf_none
            norm = p.k1 * (1 - p.b + p.b * len(body) / avgdl)
            score = 0.0
            for t, w in idf.items():
                tf = tf_body[t] + p.head_weight * tf_head[t]
                if tf:
                    score += w * tf * (p.k1 + 1) / (tf + norm)
            scored.append((score + self._bonus(pos, found, head_pos, in_head, pairs, idf), chunk_id))
        scored.sort(key=lambda h: (-h[0], h[1]))
        return scored

    # -- details ------------------------------------------------------------------------------

    def attach(self, hits: list[ChunkHit], paths: PathFilter | None, context_chars: int) -> None:
        """Fill in path and content hash where missing (ranked hits come with them) and, when asked,
        the text around each hit."""
        if missing := [h for h in hits if not h.path]:
            self._fill_paths(missing, paths)
        if context_chars > 0:
            for h in hits:
                self._context(h, context_chars)

    def _fill_paths(self, hits: list[ChunkHit], paths: PathFilter | None) -> None:
        """Each hit's first path (inside `paths`) and its document's content hash."""
        doc_ids = sorted({h.doc_id for h in hits})
        marks = ",".join("?" * len(doc_ids))
        conn = self.store.conn()
        sql = (f"SELECT f.doc_id, f.path, d.hash FROM files f JOIN documents d ON d.id = f.doc_id "
               f"WHERE f.doc_id IN ({marks})")
        args: list[object] = list(doc_ids)
        if paths is not None and paths.active:
            cond, extra = paths.sql()
            sql += f" AND {cond}"
            args += extra
        first: dict[int, str] = {}
        hashes: dict[int, str] = {}
        for doc_id, path, digest in conn.execute(sql + " ORDER BY f.path", args):
            first.setdefault(doc_id, path)
            hashes[doc_id] = digest
        for h in hits:
            h.path, h.doc_hash = first.get(h.doc_id, ""), hashes.get(h.doc_id, "")

    def _context(self, hit: ChunkHit, chars: int) -> None:
        conn = self.store.conn()
        for row in conn.execute(
            "SELECT idx, start, end, text FROM chunks WHERE doc_id=? AND idx IN (?, ?)",
            (hit.doc_id, hit.index - 1, hit.index + 1),
        ):
            idx, start, _end, text = row
            if idx < hit.index:
                hit.before = text[: max(0, hit.start - start)][-chars:]
            else:
                hit.after = text[max(0, hit.end - start) :][:chars]

    def neighbours(self, hit: ChunkHit, skip: set[int]) -> list[ChunkHit]:
        rows = self.store.conn().execute(
            f"SELECT {_CHUNK_COLS} FROM chunks c WHERE c.doc_id=? AND c.idx IN (?, ?) ORDER BY c.idx",
            (hit.doc_id, hit.index - 1, hit.index + 1),
        )
        out = [_hit(r) for r in rows if r[2] not in skip]
        for h in out:
            h.path, h.doc_hash = hit.path, hit.doc_hash
        return out


def rarest_known(terms: Sequence[str], dfs: Mapping[str, int], keep: int) -> set[str]:
    """The `keep` rarest of `terms` by chunk frequency `dfs`, terms found nowhere (df 0) last: an
    unknown word can never push a word of the corpus out of the candidate query."""
    return set(sorted(terms, key=lambda t: (dfs.get(t, 0) == 0, dfs.get(t, 0)))[:keep])


def _query_pairs(parsed: ParsedQuery) -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    for seq in [parsed.terms, *parsed.phrases]:
        pairs += [(a, b) for a, b in zip(seq, seq[1:], strict=False) if a != b]
    return list(dict.fromkeys(pairs))


def _adjacent(pos: Sequence[int], terms: Sequence[T]) -> set[tuple[T, T]]:
    """Pairs of query terms that stand next to each other (`pos`: where each of `terms` occurs, in order)."""
    return {(terms[i], terms[i + 1]) for i in range(len(pos) - 1) if pos[i + 1] == pos[i] + 1}


def _best_window(pos: Sequence[int], terms: Sequence[T], idf: Mapping[T, float], width: int) -> float:
    """The largest IDF mass of distinct query terms inside any `width` consecutive terms."""
    if len(pos) < 2:
        return 0.0
    best = mass = 0.0
    counts: dict[T, int] = {}
    left = 0
    for right, term in enumerate(terms):
        seen = counts.get(term, 0)
        counts[term] = seen + 1
        if not seen:
            mass += idf[term]
        while pos[right] - pos[left] >= width:
            old = terms[left]
            counts[old] -= 1
            if not counts[old]:
                mass -= idf[old]
            left += 1
        if mass > best:
            best = mass
    return best


# -- live search in one text file (no index) ----------------------------------------------------


@dataclass
class LineHit:
    line: int  # 1-based
    start: int  # character offsets into the file's text
    end: int
    text: str
    score: float
    match: str = ""


def rank_lines(text: str, query: str, mode: Mode = "natural", limit: int = 5) -> list[LineHit]:
    """The lines of `text` that best match `query` (BM25 over lines, adjacent-term bonus), best first."""
    parsed = parse(text=query, mode="natural" if mode == "fts" else mode)
    qterms = list(dict.fromkeys(parsed.all_terms()))
    if not qterms:
        return []
    from indexing.analyzer import analyze

    lines, offsets, pos = text.split("\n"), [], 0
    for line in lines:
        offsets.append(pos)
        pos += len(line) + 1
    wanted = set(qterms)
    analysed = {i: terms for i, line in enumerate(lines) if line.strip() and wanted & set(terms := analyze(line))}
    df = Counter(t for terms in analysed.values() for t in set(terms) & wanted)
    n = max(1, len(lines))
    idf = {t: math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5)) for t in qterms}
    pairs = set(_query_pairs(parsed))
    required = set(qterms) if mode in ("all", "phrase") else set()
    hits = []
    for i, terms in analysed.items():
        present = set(terms)
        if not required <= present or any(not _contains_seq(terms, p) for p in parsed.phrases):
            continue
        score = sum(idf[t] for t in wanted & present)
        score += 0.5 * sum(min(idf[a], idf[b]) for a, b in zip(terms, terms[1:], strict=False) if (a, b) in pairs)
        hits.append(LineHit(i + 1, offsets[i], offsets[i] + len(lines[i]), lines[i], round(score, 4)))
    hits.sort(key=lambda h: (-h.score, h.line))
    return hits[:limit]


def _contains_seq(terms: list[str], seq: list[str]) -> bool:
    k = len(seq)
    return any(terms[i : i + k] == seq for i in range(len(terms) - k + 1))
