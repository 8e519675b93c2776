"""`generalagent-mcp index PATH`: index a file or folder for search (the index_path tool for people).

Without configured roots (--root / GENERALAGENT_ROOTS) any path on this machine may be indexed:
the person at the terminal is the one asking.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from foundation.settings import Settings
from mcp_server.cli_common import cli_path, cli_root, cli_runtime, for_people, shown_path

if TYPE_CHECKING:
    from tools.runtime import Runtime


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", nargs="?", help="File or folder to index (relative to the current directory).")
    parser.add_argument("--no-recursive", action="store_true", help="Do not descend into sub-folders.")
    parser.add_argument("--no-watch", action="store_true",
                        help="Do not watch the folder (by default the server re-indexes its changes as they happen).")
    parser.add_argument(
        "--rebuild", action="store_true", help="Regenerate the full-text index from the stored chunk text."
    )


def run(args: argparse.Namespace, settings: Settings) -> int:
    from tools.index_tools import index_path
    from tools.runtime import CallContext

    if args.rebuild:
        return _rebuild(settings)
    if not args.path:
        print("generalagent-mcp index: give a PATH to index (or --rebuild).", file=sys.stderr)
        return 2
    rt = cli_runtime(settings)
    call = CallContext(tool="index_path")
    call.sink, call.portal = _progress, _call_sync
    try:
        root = cli_root(rt)
        result = index_path(cli_path(args.path), recursive=not args.no_recursive, watch=not args.no_watch, rt=rt,
                            call=call)
        postings = _build_postings(rt)
    finally:
        rt.close()
    print(file=sys.stderr)
    print(
        f"{shown_path(result.path, root)}: {result.indexed} indexed, {result.unchanged} unchanged, {result.removed} removed, "
        f"{len(result.failed)} failed, {result.skipped} skipped (unsupported), {result.secrets} skipped as secrets; "
        f"{result.chunks_added} chunks added in {result.seconds:.1f} s"
    )
    for failed in result.failed:
        print(f"  failed: {shown_path(failed.path, root)}: {for_people(failed.reason)}")
    if result.note:
        print(for_people(result.note))
    if result.watched:
        print("Watched: a running server re-indexes its changes as they happen (--no-watch: not).")
    if postings:
        print(postings)
    return 1 if result.failed and not result.indexed and not result.unchanged else 0


def _build_postings(rt: Runtime) -> str | None:
    """Build and save the in-memory postings of the index as it is now, so that the next server start
    opens them at once instead of building them while searches take the slower database path."""
    import time

    from tools.index_services import memory_index

    start = time.monotonic()
    snap = memory_index(rt).build_now()
    if snap is None:
        return None  # outside search_memory_min_chunks / search_memory_max_chunks: the database answers
    return f"Search postings saved ({snap.n_rows} chunks, {time.monotonic() - start:.1f} s): a server starts at full speed."


def _rebuild(settings: Settings) -> int:
    from indexing.analyzer import analyze
    from tools.index_services import index_store

    rt = cli_runtime(settings)
    try:
        count = index_store(rt).rebuild(analyze)
    finally:
        rt.close()
    print(f"Rebuilt the full-text index from {count} stored chunks.")
    return 0


async def _progress(done: float, total: float | None, message: str | None) -> None:
    print(f"\r[{int(done)}/{int(total or 0)}] {(message or '')[:60]:<60}", end="", file=sys.stderr, flush=True)


def _call_sync(fn, *args):  # type: ignore[no-untyped-def]
    import anyio

    return anyio.run(fn, *args)
