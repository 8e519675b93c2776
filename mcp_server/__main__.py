"""`python -m mcp_server ...` runs the console script (for environments without its bin/ script)."""

from mcp_server.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
