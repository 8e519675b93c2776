"""Indexing throughput, query latency and first-search time.

    .venv/bin/python -m bench.index_speed [--eval DIR] [--files N] [--big N] [--skip-index] [--skip-query]

1. Office corpus: PDF/DOCX/XLSX/PPTX files in Chinese and English generated from the eval passages
   with `tests/docgen.py`. Per format: our indexing (`Indexer.index_tree`: hash, extract in the
   worker process, chunk, analyse, write SQLite/FTS5) against the floor measured in the same run:
   the raw library extraction (PyMuPDF get_text, python-docx paragraphs, openpyxl read-only rows,
   python-pptx shapes) plus jieba segmentation of the extracted text, both in this process.
2. Query latency p50/p95 (DEV questions, top 10) at about 5k chunks (the eval corpora cut by our
   chunker) and about 100k (the same replicated with a distinct marker), with tantivy on the
   same analysed terms as the yardstick (BM25, OR of the query terms, top 10).
3. First search after start: a fresh process builds the server (jieba warm-up in the background)
   and calls search_documents on an existing index; wall time from process start.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.retrieval import DEFAULT_EVAL, load_jsonl
from indexing.analyzer import analyze, jieba_tokenizer
from indexing.indexer import Indexer, analyze_chunks
from indexing.model import Chunk, ChunkingOptions, Extracted, SecretFilter, Unit
from indexing.postings import MemoryIndex
from indexing.search import Searcher
from indexing.store import AnalyzedChunk, IndexStore

FORMATS = ("pdf", "docx", "xlsx", "pptx")


# -- 1. the office corpus ----------------------------------------------------------------------


def make_corpus(folder: Path, passages: list[dict], files_per_format: int) -> dict[str, Path]:  # type: ignore[type-arg]
    """`files_per_format` files per format, each holding 8 consecutive passages."""
    from tests.docgen import Heading, Slide, make_docx, make_pdf, make_pptx, make_xlsx

    dirs = {fmt: folder / fmt for fmt in FORMATS}
    for d in dirs.values():
        d.mkdir(parents=True)
    for i in range(files_per_format):
        group = passages[i * 8 : i * 8 + 8]
        titles = [p.get("title", "").replace("_", " ") or f"Part {k}" for k, p in enumerate(group)]
        texts = [p["text"] for p in group]
        make_pdf(dirs["pdf"] / f"f{i:03d}.pdf", [[Heading(t), x] for t, x in zip(titles, texts, strict=True)])
        blocks: list[object] = []
        for t, x in zip(titles, texts, strict=True):
            blocks += [Heading(t), *x.split("。" if _cjk(x) else ". ")]
        make_docx(dirs["docx"] / f"f{i:03d}.docx", blocks)  # type: ignore[arg-type]
        rows = [["#", "title", "sentence"]] + [
            [str(n), t, s] for n, (t, x) in enumerate(zip(titles, texts, strict=True)) for s in _sentences(x)
        ]
        make_xlsx(dirs["xlsx"] / f"f{i:03d}.xlsx", {"Data": rows})
        slides = [Slide(t, _sentences(x)[:6], notes=" ".join(_sentences(x)[6:])) for t, x in zip(titles, texts, strict=True)]
        make_pptx(dirs["pptx"] / f"f{i:03d}.pptx", slides)
    return dirs


def _cjk(text: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" for ch in text[:50])


def _sentences(text: str) -> list[str]:
    sep = "。" if _cjk(text) else ". "
    return [s for s in text.split(sep) if s.strip()]


def raw_extract(fmt: str, path: Path) -> str:
    """The libraries' own extraction, no hardening, no offsets: the floor."""
    if fmt == "pdf":
        import pymupdf

        with pymupdf.open(path) as doc:
            return "\n".join(page.get_text() for page in doc)
    if fmt == "docx":
        import docx

        return "\n".join(p.text for p in docx.Document(str(path)).paragraphs)
    if fmt == "xlsx":
        import openpyxl

        wb = openpyxl.load_workbook(path, read_only=True, data_only=True)
        out = [" | ".join(str(c) for c in row if c is not None) for ws in wb.worksheets for row in ws.iter_rows(values_only=True)]
        wb.close()
        return "\n".join(out)
    import pptx

    parts = []
    for slide in pptx.Presentation(str(path)).slides:
        parts += [shape.text_frame.text for shape in slide.shapes if shape.has_text_frame]
        if slide.has_notes_slide:
            parts.append(slide.notes_slide.notes_text_frame.text)
    return "\n".join(parts)


REPEATS = 5


def bench_indexing(work: Path, dirs: dict[str, Path]) -> list[str]:
    from indexing.extract import warm_up

    jb = jieba_tokenizer()
    warm_up()  # the extraction worker process is started by the server at start-up too
    lines = ["| format | files | floor: extract s | floor: jieba s | ours: index s | ours / floor speed | chunks |",
             "|---|---|---|---|---|---|---|"]
    total_chars = 0
    total_seg = 0.0
    for fmt, folder in dirs.items():
        files = sorted(folder.iterdir())
        texts: list[str] = []
        extract_runs, seg_runs, ours_runs = [], [], []
        for run in range(REPEATS):  # the median of a few runs: one run of ~0.5 s is noisy
            started = time.perf_counter()
            texts = [raw_extract(fmt, f) for f in files]
            extract_runs.append(time.perf_counter() - started)
            started = time.perf_counter()
            for text in texts:
                jb.lcut(text, HMM=False)
            seg_runs.append(time.perf_counter() - started)
            store = IndexStore(work / f"speed-{fmt}-{run}.sqlite3")
            started = time.perf_counter()
            report = Indexer(store, secrets=server_secrets(folder, work)).index_tree(folder)
            ours_runs.append(time.perf_counter() - started)
            assert not report.failed, report.failed[:3]
            store.close()
        t_extract, t_seg, t_ours = (statistics.median(r) for r in (extract_runs, seg_runs, ours_runs))
        total_chars += sum(map(len, texts))
        total_seg += t_seg
        floor = t_extract + t_seg
        lines.append(
            f"| {fmt} | {len(files)} | {t_extract:.2f} | {t_seg:.2f} | {t_ours:.2f} | {floor / t_ours:.2f}x | "
            f"{report.chunks_added} |"
        )
    lines.append(f"(median of {REPEATS} runs each)")
    lines.append(f"\njieba segmentation (HMM off): {total_chars / max(total_seg, 1e-9):,.0f} chars/s")
    return lines


# -- 2. query latency ----------------------------------------------------------------------------


def chunk_corpora(eval_dir: Path) -> list[AnalyzedChunk]:
    from indexing.chunking import chunk_document

    out: list[AnalyzedChunk] = []
    for lang in ("zh", "en"):
        for doc in load_jsonl(eval_dir / lang / "docs.jsonl"):
            text = doc["text"]
            extracted = Extracted(text=text, units=[Unit(0, len(text), "text")], kind="text")
            out += analyze_chunks(chunk_document(extracted, ChunkingOptions()))
    return out


def build_store(path: Path, chunks: list[AnalyzedChunk], copies: int) -> IndexStore:
    return fill_store(IndexStore(path), replicas(chunks, copies * len(chunks)))


Replicas = list[tuple[str, list[AnalyzedChunk]]]  # (document key, its chunks)
PER_DOC = 50


def replicas(chunks: list[AnalyzedChunk], total: int) -> Replicas:
    """`total` chunks as documents of 50: `chunks` repeated, each copy's terms with a distinct marker."""
    out: Replicas = []
    for copy in range(-(-total // max(1, len(chunks)))):
        marker = f"replica{copy}"
        for start in range(0, min(len(chunks), total - copy * len(chunks)), PER_DOC):
            part = chunks[start : min(start + PER_DOC, total - copy * len(chunks))]
            group = [AnalyzedChunk(Chunk(i, a.chunk.start, a.chunk.end, a.chunk.text), a.head_terms, f"{a.terms} {marker}")
                     for i, a in enumerate(part)]
            out.append((f"{copy}:{start}", group))
    return out


def fill_store(store: IndexStore, docs: Replicas, per_write: int = 0) -> IndexStore:
    """Write `docs` into `store` (an empty index on any backend) with the indexer's writes, `per_write`
    documents a transaction (the indexer: 1, a file each; 0: all in one)."""
    step = per_write or max(1, len(docs))
    for at in range(0, len(docs), step):
        with store.write() as conn:
            for key, group in docs[at : at + step]:
                doc_id = store.insert_document(conn, key, "text", 0, group)
                store.link_file(conn, f"/bench/{key.replace(':', '/')}.txt", doc_id, 0, 0)
    return store


def build_tantivy(chunks: list[AnalyzedChunk], copies: int) -> tuple[object, object]:
    import tantivy

    builder = tantivy.SchemaBuilder()
    builder.add_text_field("body", stored=False, tokenizer_name="whitespace")  # terms are pre-analysed
    builder.add_integer_field("id", stored=True)
    builder.add_text_field("text", stored=True, index_option="basic")
    schema = builder.build()
    index = tantivy.Index(schema)
    writer = index.writer(heap_size=200_000_000, num_threads=1)
    n = 0
    for copy in range(copies):
        for a in chunks:
            writer.add_document(tantivy.Document(body=f"{a.terms} replica{copy}", id=n, text=a.chunk.text))
            n += 1
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    return index, schema


def tantivy_search(index: object, terms: list[str]) -> list[int]:
    """Top 10 by tantivy's BM25 for an OR of `terms`: segment-local doc numbers (its bare search)."""
    return [addr.doc for _, addr in _tantivy_hits(index, terms)[1]]


def tantivy_results(index: object, terms: list[str]) -> list[tuple[int, str]]:
    """The same top 10 as a search result needs them: our ids and texts, read from the stored documents."""
    searcher, hits = _tantivy_hits(index, terms)
    docs = [searcher.doc(addr) for _, addr in hits]
    return [(int(d["id"][0]), d["text"][0]) for d in docs]


def _tantivy_hits(index: Any, terms: list[str]) -> tuple[Any, list[tuple[float, Any]]]:
    import tantivy

    if not terms:
        return None, []
    subs = [(tantivy.Occur.Should, tantivy.Query.term_query(index.schema, "body", t)) for t in dict.fromkeys(terms)]  # type: ignore[attr-defined]
    searcher = index.searcher()  # type: ignore[attr-defined]
    return searcher, searcher.search(tantivy.Query.boolean_query(subs), 10).hits


def latency(fn: Callable[[Any], object], queries: list[Any]) -> tuple[float, float]:
    """(p50, p95) in milliseconds."""
    times = []
    for q in queries:
        started = time.perf_counter()
        fn(q)
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return statistics.median(times), times[max(0, int(len(times) * 0.95) - 1)]


def _memory_held(memory: MemoryIndex) -> int:
    """Bytes a built snapshot keeps allocated (numpy arrays and the term dictionary)."""
    import gc
    import tracemalloc

    gc.collect()
    tracemalloc.start()
    memory.build_now()
    gc.collect()
    held = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    return held


def bench_queries(work: Path, eval_dir: Path, big_copies: int, n_queries: int) -> list[str]:
    chunks = chunk_corpora(eval_dir)
    rng = random.Random(7)
    queries = [q["query"] for lang in ("zh", "en") for q in load_jsonl(eval_dir / lang / "queries_dev.jsonl")]
    queries = rng.sample(queries, min(n_queries, len(queries)))
    lines = ["| chunks | ours p50 ms | ours p95 ms | ours, FTS5 path p50 | tantivy p50 | tantivy p95 "
             "| tantivy end-to-end p50 | ours / tantivy | ours / tantivy end-to-end | postings in memory |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    analysed = {q: analyze(q) for q in queries}
    for copies in (1, big_copies):
        store = build_store(work / f"latency-{copies}.sqlite3", chunks, copies)
        held = _memory_held(MemoryIndex(store))
        memory = MemoryIndex(store)
        started = time.perf_counter()
        snap = memory.build_now()
        assert snap is not None
        built = time.perf_counter() - started
        searcher, fts_only = Searcher(store, memory=memory), Searcher(store)
        searcher.search("warm up 预热")
        ours = latency(lambda q, s=searcher: s.search(q, limit=10), queries)  # type: ignore[misc]
        fts = latency(lambda q, s=fts_only: s.search(q, limit=10), queries)  # type: ignore[misc]
        tindex, _ = build_tantivy(chunks, copies)
        tv = latency(lambda q, ix=tindex: tantivy_search(ix, analysed[q]), queries)  # type: ignore[misc]
        tv_e2e = latency(lambda q, ix=tindex: tantivy_results(ix, analyze(q)), queries)  # type: ignore[misc]
        n = store.totals()["chunks"]
        lines.append(
            f"| {n:,} | {ours[0]:.2f} | {ours[1]:.2f} | {fts[0]:.2f} | {tv[0]:.2f} | {tv[1]:.2f} | {tv_e2e[0]:.2f} "
            f"| {ours[0] / tv[0]:.1f}x | {ours[0] / tv_e2e[0]:.1f}x | {held / 1e6:.0f} MB, built in {built:.1f} s |"
        )
        store.close()
        del tindex
    lines.append("(ours: query text in, top 10 chunks with text, path and offsets out, natural mode, through the "
                 "in-memory postings; 'FTS5 path' is what answers before they are built. tantivy: already-analysed "
                 "terms in, doc addresses out; end-to-end: the same query analysis in, stored ids and texts out.)")
    return lines


# -- 3. first search after start -------------------------------------------------------------------

async def _first_search(data: Path, root: Path) -> tuple[float, float]:
    """Spawn the console script over stdio; seconds to the first search result, and to initialize."""
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    script = Path(sys.executable).with_name("generalagent-mcp")
    params = StdioServerParameters(
        command=str(script), args=["serve"],
        env={"GENERALAGENT_DATA_DIR": str(data), "GENERALAGENT_ROOTS": str(root), "PATH": os.environ["PATH"]},
        cwd=str(root),
    )
    started = time.perf_counter()
    with open(os.devnull, "w") as err:
        async with Client(stdio_client(params, errlog=err)) as client:
            ready = time.perf_counter() - started
            result = await client.call_tool("search_documents", {"query": "营收增长 revenue growth"})
            assert not result.is_error, result.content
            return time.perf_counter() - started, ready


def server_secrets(root: Path, work: Path) -> SecretFilter:
    """The secret filter the server gives its indexer (the shipped rules; `root` the workspace), so that
    the bench times the same work as `index_path`."""
    from foundation.settings import load_settings
    from mcp_server.secret_paths import loaded_on_first_use

    policy = loaded_on_first_use(load_settings({"data_dir": work / "bench-data"}, environ={}))
    return SecretFilter(named=lambda path: policy.rule(path, (root,)), key=policy.key())


def bench_first_search(work: Path, eval_dir: Path) -> list[str]:
    import anyio

    root = work / "first"
    root.mkdir()
    for i, p in enumerate(load_jsonl(eval_dir / "zh" / "corpus.jsonl")[:50]):
        (root / f"{i}.md").write_text(p["text"], encoding="utf-8")
    data = work / "first-data"
    store = IndexStore(data / "index.sqlite3")
    Indexer(store).index_tree(root)
    store.close()
    runs = [anyio.run(_first_search, data, root) for _ in range(3)]
    total = statistics.median(r[0] for r in runs)
    ready = statistics.median(r[1] for r in runs)
    return [
        f"first search after start (spawn `generalagent-mcp serve` over stdio → first search_documents result, "
        f"Chinese query, jieba warmed in the background): median {total:.2f} s of {len(runs)} "
        f"(server initialized after {ready:.2f} s; search {total - ready:.2f} s after that)"
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--eval", type=Path, default=DEFAULT_EVAL)
    parser.add_argument("--files", type=int, default=40, help="files per format (8 passages each)")
    parser.add_argument("--big", type=int, default=12, help="replicas for the large latency index")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--skip-index", action="store_true")
    parser.add_argument("--skip-query", action="store_true")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-speed-"))
    try:
        if not args.skip_index:
            zh = load_jsonl(args.eval / "zh" / "corpus.jsonl")
            en = load_jsonl(args.eval / "en" / "corpus.jsonl")
            mixed = [p for pair in zip(zh, en, strict=False) for p in pair]
            dirs = make_corpus(work / "office", mixed, args.files)
            print("\n".join(bench_indexing(work, dirs)), flush=True)
            print()
        if not args.skip_query:
            print("\n".join(bench_queries(work, args.eval, args.big, args.queries)), flush=True)
            print()
        print("\n".join(bench_first_search(work, args.eval)))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
