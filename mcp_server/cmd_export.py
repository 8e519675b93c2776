"""`generalagent-mcp export FILE`: every store's rows (todos, memory, context, sub-agent threads,
approvals, the audit log) from this deployment's database into one portable file (.gz: compressed).
Move a SQLite data dir into PostgreSQL with `--data-dir DIR export F` then `--database-url URL import F`."""

from __future__ import annotations

import argparse
from pathlib import Path

from foundation.settings import Settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="The file to write (JSON lines; gzip-compressed when it ends in .gz).")


def run(args: argparse.Namespace, settings: Settings) -> int:
    from foundation.errors import InvalidInput
    from foundation.storage import open_database
    from foundation.storage.transfer import EmptyPortable, Portable, export, export_target
    from mcp_server.stores import store_kinds

    if not args.file.strip():
        raise InvalidInput("Give the file to write, e.g. `export state.jsonl.gz` (an empty name is no file).")
    path = Path(args.file).expanduser().absolute()
    export_target(path)  # before the database is opened (a data dir is not created for nothing)
    database = open_database(settings.data_dir, settings.database_url)
    try:
        stores: list[Portable] = []
        for kind in store_kinds():
            status = database.status(kind.schema)
            never_created = status.known > 0 and status.applied == 0
            stores.append(EmptyPortable(kind.name, kind.schema.tables) if never_created
                          else kind.portable(database, settings.data_dir))
        summary = export(stores, path, database.describe())
        print(f"Exported {database.describe()} to {path}: {summary.text()}")
        return 0
    finally:
        database.close()
