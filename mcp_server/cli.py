"""The `generalagent-mcp` console script.

Subcommands: `serve` (stdio or Streamable HTTP), `doctor`, human-facing mirrors of
the tools (`index`, `search`, `status`, `approve`, `policy`), and the state's operations
(`migrate`, `export`, `import`). Each subcommand lives in its
own module `mcp_server/cmd_<name>.py` exposing `add_arguments(parser)` and
`run(args, settings) -> int`; they are imported only when used, to keep start-up fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from foundation.errors import GeneralAgentError, SettingsError
from foundation.settings import load_settings
from mcp_server.cli_common import for_people

SUBCOMMANDS: dict[str, str] = {
    "serve": "Run the MCP server (stdio by default, or --transport http).",
    "doctor": "Check what works (data dir, database, jieba, tiktoken, PyMuPDF, LLM endpoint).",
    "index": "Index a file or folder for search.",
    "search": "Search indexed documents.",
    "status": "Show the index's state.",
    "approve": "Approve a pending tool call by its approval id.",
    "policy": "Inspect the approval rules (policy check --tool NAME --args JSON).",
    "migrate": "Apply the stores' pending schema migrations (SQLite files or PostgreSQL).",
    "export": "Write every store's data, the search index included, to one portable file.",
    "import": "Load a file written by export into an empty database or data dir.",
}


GLOBAL_OPTIONS = ("--data-dir", "--database-url", "--root", "--log-level", "--profile")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """argparse's usage error, plus where the global options go when one was given after the
        sub-command (argparse then calls it an unrecognized argument)."""
        if message.startswith("unrecognized arguments:") and any(
            word.split("=")[0] in GLOBAL_OPTIONS for word in message.split(":", 1)[1].split()
        ):
            message += (f" (the global options {', '.join(GLOBAL_OPTIONS)} go before the sub-command: "
                        "generalagent-mcp --data-dir D approve --list)")
        super().error(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="generalagent-mcp", description="An agent runtime as an MCP server.",
        epilog="Global options go before the sub-command (generalagent-mcp --data-dir D search revenue). "
        "A relative PATH is relative to the current directory; the commands print absolute paths.",
    )
    parser.add_argument("--data-dir", help="Data directory (env GENERALAGENT_DATA_DIR).")
    parser.add_argument("--database-url", help="Keep the state in PostgreSQL: postgresql://USER:PASSWORD@HOST:PORT/DB "
                        "(env GENERALAGENT_DATABASE_URL, which keeps the password out of the process list); "
                        "default: SQLite files in the data dir.")
    parser.add_argument("--root", action="append", help="Workspace root; repeat for several (env GENERALAGENT_ROOTS).")
    parser.add_argument("--log-level", choices=["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"])
    parser.add_argument("--profile", dest="tool_profile", choices=["minimal", "default", "full"],
                        help="Tool profile (env GENERALAGENT_TOOL_PROFILE).")
    sub = parser.add_subparsers(dest="command")
    for name, help_text in SUBCOMMANDS.items():
        module = _command_module(name)
        module.add_arguments(sub.add_parser(name, help=help_text, description=help_text))
    return parser


def _command_module(name: str) -> Any:
    return importlib.import_module(f"mcp_server.cmd_{name}")


def settings_overrides(args: argparse.Namespace) -> dict[str, Any]:
    overrides: dict[str, Any] = {
        "data_dir": args.data_dir,
        "database_url": args.database_url,
        "roots": args.root,
        "log_level": args.log_level,
        "tool_profile": args.tool_profile,
    }
    for key, value in vars(args).items():
        if key.startswith("set_") and value is not None:
            overrides[key[4:]] = value
    return overrides


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    command = args.command or "serve"
    if args.command is None:
        args = parser.parse_args([*(argv or sys.argv[1:]), "serve"])
    try:
        settings = load_settings(settings_overrides(args))
        return int(_command_module(command).run(args, settings) or 0)
    except SettingsError as exc:
        print(f"generalagent-mcp: {for_people(str(exc))}", file=sys.stderr)
        return 2
    except GeneralAgentError as exc:
        print(f"generalagent-mcp: {for_people(str(exc))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return _reader_went_away()
    except OSError as exc:  # the last resort: every known cause is refused earlier with its fix
        where = f": {exc.filename}" if exc.filename else ""
        print(f"generalagent-mcp: {exc.strerror or exc}{where} ({type(exc).__name__}).", file=sys.stderr)
        return 1


def _reader_went_away() -> int:
    """stdout's reader closed it (`doctor | head`): exit quietly, as the Python docs advise for SIGPIPE,
    pointing stdout at devnull so that the interpreter's final flush raises nothing more."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
