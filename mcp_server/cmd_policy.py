"""`generalagent-mcp policy` (placeholder until its feature lands)."""

from __future__ import annotations

import argparse
import sys

from mcp_server.settings import Settings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("rest", nargs=argparse.REMAINDER)


def run(args: argparse.Namespace, settings: Settings) -> int:
    print("generalagent-mcp policy: not available in this version yet.", file=sys.stderr)
    return 2
