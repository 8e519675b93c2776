"""Retrieval quality on the shared eval DEV queries (CMRC 2018 zh, SQuAD v1.1 en).

    .venv/bin/python -m bench.retrieval [--eval DIR] [--lang zh,en] [--no-docs] [--no-baselines]

Passage view: every passage of corpus.jsonl becomes one document (title as its heading) in a
real index, searched through `indexing.search.Searcher` (the code path of search_documents).
Document view: every article of docs.jsonl is written as a Markdown file (`# title`, blank
line, text), indexed by `indexing.indexer` (our extractor + chunker) and searched the same way;
scored by the overlap rule and the contains-answer rule of the eval README.
Baselines in the same run: the design's dual-column FTS5 with implicit AND, the same with OR,
and bm25s. Tune on DEV only; holdout sets are checked separately with the same code.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from indexing.analyzer import EN_STOP, ZH_STOP, analyze, jieba_tokenizer, normalize
from indexing.model import Chunk, ChunkingOptions
from indexing.postings import MemoryIndex
from indexing.scoring import Weighting
from indexing.search import ChunkHit, RankParams, Searcher
from indexing.store import AnalyzedChunk, IndexStore

DEFAULT_EVAL = Path(__file__).resolve().parents[2] / "shared" / "eval"
if not DEFAULT_EVAL.exists():
    DEFAULT_EVAL = Path("/work/shared/eval")
K = 10


def load_jsonl(path: Path) -> list[dict]:  # type: ignore[type-arg]
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


@dataclass
class Scores:
    r1: float
    r5: float
    r10: float
    mrr: float
    n: int
    ms: float = 0.0


def score_ranks(ranks: Iterable[int | None], ms: float = 0.0) -> Scores:
    """Ranks are 1-based positions of the first hit within the top K, None for a miss."""
    ranks = list(ranks)
    n = len(ranks) or 1
    hit = [r for r in ranks if r is not None and r <= K]
    return Scores(
        sum(r <= 1 for r in hit) / n, sum(r <= 5 for r in hit) / n, len(hit) / n,
        sum(1 / r for r in hit) / n, len(ranks), ms,
    )


def first_rank(ids: list[str], gold: str) -> int | None:
    return ids.index(gold) + 1 if gold in ids[:K] else None


# -- ours, passage view ------------------------------------------------------------------------


def build_passage_index(corpus: list[dict], db: Path) -> IndexStore:  # type: ignore[type-arg]
    return fill_passage_index(IndexStore(db), corpus)


def fill_passage_index(store: IndexStore, corpus: list[dict]) -> IndexStore:  # type: ignore[type-arg]
    """Every passage as one document (title as its heading) in `store`, an empty index on any backend."""
    with store.write() as conn:
        for p in corpus:
            title = p.get("title", "").replace("_", " ")
            chunk = Chunk(index=0, start=0, end=len(p["text"]), text=p["text"], heading=title)
            analyzed = AnalyzedChunk(chunk, " ".join(analyze(title)), " ".join(analyze(p["text"])))
            doc_id = store.insert_document(conn, "passage:" + p["id"], "text", len(p["text"]), [analyzed])
            store.link_file(conn, "/eval/" + p["id"], doc_id, 0, 0)
    return store


def served_searcher(store: IndexStore, params: RankParams | None = None, memory: bool = True) -> Searcher:
    """The searcher search_documents uses: with the in-memory postings built (or, `memory=False`,
    the FTS5 path that answers until they are), weighted as `params` say."""
    p = params or RankParams()
    index = MemoryIndex(store, Weighting(p.k1, p.b, p.head_weight)) if memory else None
    if index is not None:
        index.build_now()
    return Searcher(store, p, memory=index)


def timed_ranks(rank_of: Callable[[dict], int | None], queries: list[dict]) -> tuple[list[int | None], float]:  # type: ignore[type-arg]
    """Each query's first-hit rank (None: a miss) and the mean milliseconds per query."""
    started = time.perf_counter()
    ranks = [rank_of(q) for q in queries]
    return ranks, (time.perf_counter() - started) * 1000 / max(1, len(queries))


class HitSource(Protocol):
    """Anything that ranks chunks like Searcher.search (a Searcher, or a variant wrapping one)."""

    def search(self, text: str, *, limit: int = 10) -> list[ChunkHit]: ...


def passage_rank_of(searcher: HitSource) -> Callable[[dict], int | None]:  # type: ignore[type-arg]
    """A query's gold-passage rank in `searcher` over a passage index (build_passage_index)."""
    return lambda q: first_rank([h.path[len("/eval/") :] for h in searcher.search(q["query"], limit=K)], q["passage_id"])


def run_ours(store: IndexStore, queries: list[dict], params: RankParams | None = None, memory: bool = True) -> Scores:  # type: ignore[type-arg]
    return score_ranks(*timed_ranks(passage_rank_of(served_searcher(store, params, memory)), queries))


# -- baselines ---------------------------------------------------------------------------------


def build_design_index(corpus: list[dict]) -> sqlite3.Connection:  # type: ignore[type-arg]
    """The design as written: porter/unicode61 text column + jieba-segmented column."""
    conn = sqlite3.connect(":memory:")
    conn.execute(
        "CREATE VIRTUAL TABLE t USING fts5(text, seg, tokenize='porter unicode61 remove_diacritics 2')"
    )
    jb = jieba_tokenizer()
    conn.executemany(
        "INSERT INTO t(rowid, text, seg) VALUES(?,?,?)",
        [(i, p["text"], " ".join(jb.lcut(p["text"]))) for i, p in enumerate(corpus)],
    )
    return conn


def design_query(conn: sqlite3.Connection, corpus: list[dict], text: str, op: str, stop: bool = False) -> list[str]:  # type: ignore[type-arg]
    """`op` " " = implicit AND over the jieba words (the design), " OR " = OR; `stop`: stop words dropped."""
    words = [w for w in jieba_tokenizer().lcut(text) if any(ch.isalnum() for ch in w)]
    if stop:
        words = [w for w in words if normalize(w) not in EN_STOP | ZH_STOP]
    if not words:
        return []
    match = op.join('"' + w.replace('"', "") + '"' for w in words)
    rows = conn.execute("SELECT rowid FROM t WHERE t MATCH ? ORDER BY rank LIMIT ?", (match, K)).fetchall()
    return [corpus[r[0]]["id"] for r in rows]


def design_rank_of(conn: sqlite3.Connection, corpus: list[dict], op: str, stop: bool = False) -> Callable[[dict], int | None]:  # type: ignore[type-arg]
    return lambda q: first_rank(design_query(conn, corpus, q["query"], op, stop), q["passage_id"])


def run_design(conn: sqlite3.Connection, corpus: list[dict], queries: list[dict], op: str, stop: bool = False) -> Scores:  # type: ignore[type-arg]
    return score_ranks(*timed_ranks(design_rank_of(conn, corpus, op, stop), queries))


def run_bm25s(corpus: list[dict], queries: list[dict]) -> Scores | None:  # type: ignore[type-arg]
    return _run_ranker(bm25s_ranker([p["text"] for p in corpus]), corpus, queries)


def run_tantivy(corpus: list[dict], queries: list[dict]) -> Scores | None:  # type: ignore[type-arg]
    return _run_ranker(tantivy_ranker([p["text"] for p in corpus]), corpus, queries)


def _run_ranker(
    rank: Callable[[str], list[int]] | None, corpus: list[dict], queries: list[dict]  # type: ignore[type-arg]
) -> Scores | None:
    """Passage-view scores of a baseline that returns positions in `corpus` (None: not installed)."""
    if rank is None:
        return None
    return score_ranks(*timed_ranks(ranker_rank_of(rank, corpus), queries))


def ranker_rank_of(rank: Callable[[str], list[int]], corpus: list[dict]) -> Callable[[dict], int | None]:  # type: ignore[type-arg]
    """A query's gold rank from a ranker that returns positions in `corpus`."""
    return lambda q: first_rank([corpus[i]["id"] for i in rank(q["query"])], q["passage_id"])


def bm25s_ranker(texts: list[str]) -> Callable[[str], list[int]] | None:
    """bm25s over `texts` with our analyzer: a query's top K as positions in `texts`."""
    try:
        import bm25s
    except ImportError:
        return None
    retriever = bm25s.BM25()
    retriever.index([analyze(text) for text in texts], show_progress=False)

    def rank(query: str) -> list[int]:
        terms = [t for t in analyze(query) if t in retriever.vocab_dict]
        if not terms:
            return []
        found, _ = retriever.retrieve([terms], k=K, show_progress=False, n_threads=1)
        return [int(i) for i in found[0]]

    return rank


def tantivy_ranker(texts: list[str]) -> Callable[[str], list[int]] | None:
    """tantivy over `texts` with our analyzer: a query's top 10 as positions in `texts`."""
    try:
        from bench.index_speed import build_tantivy, tantivy_results
    except ImportError:
        return None
    chunks = [AnalyzedChunk(Chunk(0, 0, len(text), text), "", " ".join(analyze(text))) for text in texts]
    index, _ = build_tantivy(chunks, 1)
    return lambda query: [i for i, _ in tantivy_results(index, analyze(query))]


# -- ours, document view -----------------------------------------------------------------------


def run_document_view(
    docs: list[dict], queries: list[dict], work: Path, baselines: bool = True  # type: ignore[type-arg]
) -> dict[str, tuple[Scores, Scores]]:
    """Index the articles as Markdown files through our extractor and chunker, then score both
    rules for ours and (`baselines`) for bm25s and tantivy ranking the very same chunks."""
    store, rows, where = build_document_index(docs, work)
    rankers = document_rankers(rows, served_searcher(store), baselines)
    out = {name: document_scores(rank, queries, docs, where) for name, rank in rankers.items()}
    store.close()
    return out


Where = dict[int, tuple[str, int, int]]  # chunk id -> (document id, start, end) in the document's text


def build_document_index(
    docs: list[dict], work: Path, chunking: ChunkingOptions | None = None, plain: bool = False  # type: ignore[type-arg]
) -> tuple[IndexStore, list[tuple[int, str]], Where]:
    """The articles as Markdown files (`# title`; `plain`: text files without it) indexed by our indexer
    (chunked as `chunking` says, default: the server's defaults): the store, every chunk's (id, text), and
    where each chunk lies in its article's text."""
    from indexing.indexer import Indexer

    folder = work / "docs"
    folder.mkdir()
    prefix_len: dict[str, int] = {}
    by_path: dict[str, dict] = {}  # type: ignore[type-arg]
    for i, d in enumerate(docs):
        head = "" if plain else f"# {d['title'].replace('_', ' ')}\n\n"
        path = folder / f"{i:05d}.{'txt' if plain else 'md'}"
        path.write_text(head + d["text"], encoding="utf-8")
        prefix_len[d["id"]] = len(head)
        by_path[str(path)] = d
    store = IndexStore(work / "docs.sqlite3")
    Indexer(store, chunking=chunking).index_tree(folder)
    rows = store.conn().execute(
        "SELECT c.id, f.path, c.start, c.end, c.text FROM chunks c JOIN files f ON f.doc_id = c.doc_id ORDER BY c.id"
    ).fetchall()
    where = {cid: (by_path[path]["id"], start - prefix_len[by_path[path]["id"]], end - prefix_len[by_path[path]["id"]])
             for cid, path, start, end, _ in rows}
    return store, [(cid, text) for cid, *_, text in rows], where


def document_rankers(
    rows: list[tuple[int, str]], searcher: HitSource, baselines: bool
) -> dict[str, Callable[[str], list[int]]]:
    """Chunk-id rankers over the document index: ours (`searcher`) and (`baselines`) bm25s and tantivy."""
    rankers: dict[str, Callable[[str], list[int]]] = {
        "ours": lambda q: [h.chunk_id for h in searcher.search(q, limit=K)]
    }
    if baselines:
        texts, ids = [text for _, text in rows], [cid for cid, _ in rows]
        for name, ranker in (("bm25s", bm25s_ranker(texts)), ("tantivy", tantivy_ranker(texts))):
            if ranker is not None:
                rankers[name] = _positions_to(ids, ranker)
    return rankers


def _positions_to(ids: list[int], rank: Callable[[str], list[int]]) -> Callable[[str], list[int]]:
    return lambda query: [ids[i] for i in rank(query)]


def document_scores(
    rank: Callable[[str], list[int]], queries: list[dict], docs: list[dict], where: Where  # type: ignore[type-arg]
) -> tuple[Scores, Scores]:
    overlap, contains = document_ranks(rank, queries, docs, where)
    return score_ranks(overlap), score_ranks(contains)


def document_ranks(
    rank: Callable[[str], list[int]], queries: list[dict], docs: list[dict], where: Where  # type: ignore[type-arg]
) -> tuple[list[int | None], list[int | None]]:
    """Both rules of the eval README, as first-hit ranks: a hit overlaps the gold passage / contains a whole answer."""
    passages = {p["id"]: (d["id"], p["start"], p["end"]) for d in docs for p in d["passages"]}
    overlap: list[int | None] = []
    contains: list[int | None] = []
    for q in queries:
        doc_id, p_start, p_end = passages[q["passage_id"]]
        spans = [(a["start"] + p_start, a["start"] + p_start + len(a["text"])) for a in q["answers"]]
        r_overlap = r_contains = None
        for n, chunk_id in enumerate(rank(q["query"])[:K], start=1):
            chunk_doc, start, end = where[chunk_id]
            if chunk_doc != doc_id:
                continue
            if r_overlap is None and start < p_end and end > p_start:
                r_overlap = n
            if r_contains is None and any(start <= s and e <= end for s, e in spans):
                r_contains = n
        overlap.append(r_overlap)
        contains.append(r_contains)
    return overlap, contains


# -- the table ---------------------------------------------------------------------------------


def row(name: str, by_lang: dict[str, Scores | None], langs: list[str]) -> str:
    cells = []
    for lang in langs:
        s = by_lang.get(lang)
        cells += [f"{s.r1:.3f} | {s.r5:.3f} | {s.r10:.3f} | {s.mrr:.3f}" if s else "- | - | - | -"]
    return f"| {name} | " + " | ".join(cells) + " |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--eval", type=Path, default=DEFAULT_EVAL)
    parser.add_argument("--lang", default="zh,en")
    parser.add_argument("--no-docs", action="store_true", help="skip the document view")
    parser.add_argument("--no-baselines", action="store_true")
    args = parser.parse_args(argv)
    langs = args.lang.split(",")
    results: dict[str, dict[str, Scores | None]] = {}
    started = time.perf_counter()
    for lang in langs:
        corpus = load_jsonl(args.eval / lang / "corpus.jsonl")
        queries = load_jsonl(args.eval / lang / "queries_dev.jsonl")
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            if not args.no_baselines:
                conn = build_design_index(corpus)
                _put(results, "FTS5 dual column, AND (design as written)", lang, run_design(conn, corpus, queries, " "))
                _put(results, "FTS5 dual column, OR", lang, run_design(conn, corpus, queries, " OR "))
                _put(results, "FTS5 dual column, OR, stop words dropped", lang,
                     run_design(conn, corpus, queries, " OR ", stop=True))
                conn.close()
                _put(results, "bm25s (same analyzer)", lang, run_bm25s(corpus, queries))
                _put(results, "tantivy (same analyzer)", lang, run_tantivy(corpus, queries))
            store = build_passage_index(corpus, work / "passages.sqlite3")
            _put(results, "ours: passage view", lang, run_ours(store, queries))
            _put(results, "ours: passage view, FTS5 path (before the postings are in memory)", lang,
                 run_ours(store, queries, memory=False))
            store.close()
            if not args.no_docs:
                docs = load_jsonl(args.eval / lang / "docs.jsonl")
                views = run_document_view(docs, queries, work, baselines=not args.no_baselines)
                for rule, n in (("overlap rule", 0), ("contains-answer rule", 1)):
                    for name, label in (("bm25s", "bm25s (same chunks)"), ("tantivy", "tantivy (same chunks)"),
                                        ("ours", "ours")):
                        if name in views:
                            _put(results, f"document view, {rule}: {label}", lang, views[name][n])
    head = " | ".join(f"{lang} R@1 | {lang} R@5 | {lang} R@10 | {lang} MRR@10" for lang in langs)
    print(f"| system (DEV, top {K}) | {head} |")
    print("|---|" + "---|" * (4 * len(langs)))
    for name, by_lang in results.items():
        print(row(name, by_lang, langs))
    print(f"\n({time.perf_counter() - started:.0f} s)")
    return 0


def _put(results: dict[str, dict[str, Scores | None]], name: str, lang: str, s: Scores | None) -> None:
    results.setdefault(name, {})[lang] = s


Runner = Callable[..., Scores]

if __name__ == "__main__":
    raise SystemExit(main())
