"""`generalagent-mcp import FILE`: load a file written by `export` into this deployment's database,
which must hold no data yet (a new PostgreSQL database or schema, or an empty data dir)."""

from __future__ import annotations

import argparse
from pathlib import Path

from foundation.errors import NotFound
from foundation.settings import Settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="A file written by `generalagent-mcp export`.")


def run(args: argparse.Namespace, settings: Settings) -> int:
    from foundation.storage import open_database
    from foundation.storage.transfer import import_
    from mcp_server.stores import store_kinds

    if not args.file.strip():
        raise NotFound("Give the export file to load, e.g. `import state.jsonl.gz` (an empty name is no file).")
    path = Path(args.file).expanduser().absolute()
    if not path.is_file():
        from foundation.command import run_hint

        raise NotFound(f"No export file {path}. Write one with {run_hint(settings, 'export', str(path))}.")
    database = open_database(settings.data_dir, settings.database_url)
    try:
        stores = [kind.portable(database, settings.data_dir) for kind in store_kinds()]
        summary = import_(stores, path)
        print(f"Imported {path} into {database.describe()}: {summary.text()}")
        return 0
    finally:
        database.close()
