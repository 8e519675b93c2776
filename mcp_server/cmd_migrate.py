"""`generalagent-mcp migrate`: apply every store's pending schema migrations and say what was done
(`--check`: only say what is pending; exit 1 when something is)."""

from __future__ import annotations

import argparse

from foundation.settings import Settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--check", action="store_true", help="Only list pending migrations (exit 1 if any).")


def run(args: argparse.Namespace, settings: Settings) -> int:
    from foundation.storage import open_database
    from mcp_server.stores import store_kinds

    database = open_database(settings.data_dir, settings.database_url)
    try:
        print(f"{database.describe()} ({database.server_version()})")
        pending = 0
        for kind in store_kinds():
            status = database.status(kind.schema)
            if not status.known:
                continue  # no tables on this backend (the audit log is a file with SQLite)
            if args.check or not status.pending:
                pending += status.pending
                state = f"{status.pending} pending" if status.pending else "up to date"
                print(f"  {kind.name}: version {status.applied} of {status.known}, {state}")
                continue
            before, after = database.migrate(kind.schema)
            print(f"  {kind.name}: applied {after.applied - before.applied} migration(s), "
                  f"version {before.applied} -> {after.applied}")
        if args.check and pending:
            from foundation.command import run_hint

            print(f"{pending} migration(s) pending: run {run_hint(settings, 'migrate')} (the server also "
                  "applies them when it first opens each store).")
            return 1
        return 0
    finally:
        database.close()
