"""A small MCP server for tests of sub-agents that use other MCP servers (the SDK's MCPServer).

    python tests/external_mcp_server.py                  # stdio
    python tests/external_mcp_server.py --http PORT      # Streamable HTTP on 127.0.0.1:PORT (/mcp)
    python tests/external_mcp_server.py --fail-start     # writes an error and exits before serving
    python tests/external_mcp_server.py --hang-start     # never answers (does not read its input)

Tools: `lookup(key)` answers from a tiny table, `shout(text)` upper-cases, `crash()` ends the process
mid-call, `hang()` never answers, `pid()` gives its process id, `big()` returns 200,000 characters, `broken()` reports a tool error.
Each call is appended to the file named by EXTERNAL_CALLS_FILE (when set), so a test sees what ran.
"""

from __future__ import annotations

import os
import sys
import time

FACTS = {"capital-of-france": "Paris", "answer": "42"}


def _record(line: str) -> None:
    path = os.environ.get("EXTERNAL_CALLS_FILE")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(line + "\n")


def build() -> object:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("external-test", log_level="CRITICAL")

    @server.tool()
    def lookup(key: str) -> str:
        """Look a fact up by its key."""
        _record(f"lookup {key}")
        return FACTS.get(key, f"no fact {key!r}")

    @server.tool()
    def shout(text: str) -> str:
        """Upper-case a text."""
        _record(f"shout {text}")
        return text.upper()

    @server.tool()
    def crash() -> str:
        """End the server process in the middle of the call."""
        _record("crash")
        os._exit(3)

    @server.tool()
    def hang() -> str:
        """Never answer."""
        _record("hang")
        while True:
            time.sleep(1)

    @server.tool()
    def pid() -> str:
        """This server's process id."""
        return str(os.getpid())

    @server.tool()
    def big() -> str:
        """A very long answer."""
        return "word " * 40_000

    @server.tool()
    def broken() -> str:
        """A tool that fails."""
        raise ValueError("the broken tool always fails")

    return server


def main(argv: list[str]) -> None:
    if "--fail-start" in argv:
        print("external-test: cannot open its database (simulated)", file=sys.stderr, flush=True)
        sys.exit(2)
    if "--hang-start" in argv:
        while True:
            time.sleep(1)
    server = build()
    if "--http" in argv:
        port = int(argv[argv.index("--http") + 1])
        server.run("streamable-http", host="127.0.0.1", port=port)  # type: ignore[attr-defined]
    else:
        server.run()  # type: ignore[attr-defined]


if __name__ == "__main__":
    main(sys.argv[1:])
