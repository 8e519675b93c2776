"""`generalagent-mcp search "query" [--path P]`: search the index and print readable hits."""

from __future__ import annotations

import argparse
import textwrap

from foundation.settings import Settings
from mcp_server.cli_common import cli_glob, cli_path, cli_root, cli_runtime, for_people, int_in, shown_path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("query", help="Words to look for (English or Chinese); a regex with --regex.")
    parser.add_argument("--path", action="append",
                        help="Only this file, folder or glob (repeatable; relative to the current directory).")
    parser.add_argument("-n", "--max-results", type=int_in(1, 50, "the number of hits"), default=10,
                        help="Number of hits (1-50).")
    parser.add_argument("--mode", choices=["natural", "all", "phrase", "fts"], default="natural")
    parser.add_argument("--regex", action="store_true", help="Treat the query as a regular expression.")
    parser.add_argument("--documents", action="store_true", help="Group hits by document.")


def run(args: argparse.Namespace, settings: Settings) -> int:
    from tools.documents import Hit, search_documents
    from tools.runtime import CallContext

    rt = cli_runtime(settings)
    try:
        root = cli_root(rt)
        paths = [cli_glob(p, root) if any(ch in p for ch in "*?[{") else cli_path(p) for p in args.path or []]
        result = search_documents(
            args.query, paths=paths or None, max_results=args.max_results, use_regex=args.regex,
            mode=args.mode, group_by_document=args.documents, rt=rt, call=CallContext(tool="search_documents"),
        )
    finally:
        rt.close()

    def show(rank: str, hit: Hit, indent: str = "") -> None:
        where = ", ".join(
            part for part in (
                f"page {hit.page}" if hit.page else "", f"slide {hit.slide}" if hit.slide else "",
                f"sheet {hit.sheet}" if hit.sheet else "", hit.heading or "",
            ) if part
        )
        print(f"{indent}{rank} {shown_path(hit.path, root)}{' (' + where + ')' if where else ''}  score {hit.score:.2f}")
        body = " ".join(hit.text.split())
        print(textwrap.indent(textwrap.fill(body[:400], width=100), indent + "    "))

    for i, doc in enumerate(result.documents or [], start=1):
        print(f"{i}. {shown_path(doc.path, root)}  score {doc.score:.2f}")
        for hit in doc.matched_chunks:
            show("-", hit, "   ")
    for i, hit in enumerate(result.hits, start=1):
        show(f"{i}.", hit)
    if result.note:
        print(for_people(result.note))
    return 0 if result.hits or result.documents else 1
