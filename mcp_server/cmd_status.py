"""`generalagent-mcp status [PATH]`: the index's totals, or one file's or folder's state."""

from __future__ import annotations

import argparse

from foundation.settings import Settings
from mcp_server.cli_common import cli_path, cli_root, cli_runtime, for_people, shown_path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", nargs="?", help="A file or folder to report on (relative to the current directory).")


def run(args: argparse.Namespace, settings: Settings) -> int:
    from tools.index_tools import index_status
    from tools.runtime import CallContext

    rt = cli_runtime(settings)
    try:
        root = cli_root(rt)
        path = cli_path(args.path) if args.path is not None else None
        st = index_status(path, rt=rt, call=CallContext(tool="index_status"))
    finally:
        rt.close()
    print(f"index: {st.database} ({st.database_bytes / 2**20:.1f} MiB)")
    print(f"files: {st.files} ({st.failed_files} failed), documents: {st.documents}, chunks: {st.chunks}, "
          f"characters: {st.characters:,}")
    ps = st.path_status
    if ps is not None:
        state = "indexed" if ps.indexed else "not indexed"
        fresh = "" if ps.fresh is None else (", up to date" if ps.fresh else ", changed since")
        print(f"{shown_path(ps.path, root)}: {state}{fresh}" + (f", {ps.chunks} chunks" if ps.chunks is not None else "")
              + (f", {ps.files} files ({ps.stale} stale, {ps.failed} failed)" if ps.files is not None else "")
              + (f", {ps.secrets} skipped as secrets" if ps.secrets else "")
              + (f", at {ps.indexed_at}" if ps.indexed_at else ""))
        if ps.error:
            print(f"  error: {for_people(ps.error)}")
    return 0
