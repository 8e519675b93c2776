"""`generalagent-mcp serve`: run the server over stdio (default) or Streamable HTTP."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import sys
from functools import partial
from typing import Any

from foundation.settings import Settings
from mcp_server.cli_common import int_in

MAX_WORKERS = 64
"""More processes than this only add memory and database connections (each holds a pool of its own)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    parser.add_argument("--host", default="127.0.0.1", help="HTTP bind address (default loopback).")
    parser.add_argument("--port", type=int_in(0, 65535, "a TCP port"), default=8765,
                        help="HTTP port, 0-65535 (default 8765; 0: any free port).")
    parser.add_argument("--allow-host", dest="set_http_allowed_hosts", action="append", metavar="HOST",
                        help="Allow this Host name over HTTP (required to bind a non-loopback address).")
    parser.add_argument("--workers", type=int_in(1, MAX_WORKERS, "a number of processes"), default=1, metavar="N",
                        help=f"HTTP server processes sharing the port, 1-{MAX_WORKERS} (default 1); N>1 needs "
                             "GENERALAGENT_DATABASE_URL=postgresql://...")
    parser.add_argument("--enable-bash", dest="set_bash_enabled", action="store_const", const=True,
                        help="Enable run_bash_command (env GENERALAGENT_BASH_ENABLED).")


def log_sandbox() -> None:
    """Say at start-up whether shell commands run in an OS sandbox (without one, every command asks)."""
    import logging

    from tools.sandbox import describe, sandbox_status

    status = sandbox_status()
    logging.getLogger("generalagent.sandbox").log(logging.INFO if status.available else logging.WARNING,
                                                  describe(status))


def startup_notices(settings: Settings) -> list[str]:
    """Problems worth a line on stderr before serving (the server still starts)."""
    notices = [f"the configured root {root} does not exist or is not a folder; fix GENERALAGENT_ROOTS or --root "
               "(tools refuse paths under it)" for root in settings.roots if not root.is_dir()]
    if not settings.llm_configured:
        from mcp_server.cmd_doctor import llm_tools_notice

        notices.append(llm_tools_notice())
    return notices


def run(args: argparse.Namespace, settings: Settings) -> int:
    from mcp_server.transports import configure_logging, run_http, run_stdio, transport_security
    from mcp_server.workers import check_workers

    check_workers(args.workers, args.transport, settings)  # before anything is built or bound
    configure_logging(settings.log_level, with_pid=args.workers > 1)
    if settings.bash_enabled:
        log_sandbox()
    for notice in startup_notices(settings):
        print(f"generalagent-mcp: warning: {notice}", file=sys.stderr)
    if args.transport == "http":
        transport_security(settings, args.host)  # fail fast on an unsafe bind before building anything
    with contextlib.redirect_stdout(sys.stderr):  # stray prints while importing must not reach the wire
        importlib.import_module("mcp_server.server")  # imported once, before HTTP workers fork
    if args.transport == "http":
        run_http(partial(build, settings), settings, args.host, args.port, workers=args.workers)
    else:
        server = build(settings)
        if _is_terminal(sys.stdin):
            print(WAITING, file=sys.stderr, flush=True)
        run_stdio(server)
    return 0


WAITING = ("generalagent-mcp is running over stdio, waiting for an MCP client to talk to it on stdin/stdout.\n"
           "A client (Claude Desktop, Claude Code, VS Code, Cursor, Gemini CLI) starts this command itself: "
           "see \"Connect a client\" in README.md. Ctrl-C stops it.")


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def build(settings: Settings) -> Any:
    """The server, built in the process that serves it (each HTTP worker builds its own)."""
    with contextlib.redirect_stdout(sys.stderr):  # stray prints while building must not reach the wire
        from mcp_server.server import build_server

        server, _ = build_server(settings)
    return server
