#!/usr/bin/env bash
# Build the MCP Bundle for one-click install in Claude Desktop: dist/generalagent-mcp-<version>.mcpb.
# The manifest is generated from mcp_server/registry.py (python -m mcp_server.mcpb), validated and
# packed with the pinned `mcpb` tool (scripts/node.sh). Needs .venv (./scripts/venv.sh).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="${PYTHON:-$root/.venv/bin/python}"
stage="$root/dist/mcpb"
cd "$root"
"$py" -m mcp_server.mcpb stage "$stage" >/dev/null
"$root/scripts/node.sh" mcpb validate "$stage/manifest.json"
version="$("$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"])' "$stage/manifest.json")"
out="$root/dist/generalagent-mcp-$version.mcpb"
"$root/scripts/node.sh" mcpb pack "$stage" "$out" 1>&2
echo "$out"
