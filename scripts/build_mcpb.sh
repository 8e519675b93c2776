#!/usr/bin/env bash
# Build the MCP Bundles for one-click install in Claude Desktop:
#   dist/generalagent-mcp-<version>.mcpb         server type uv (manifest 0.4): the app provides Python
#   dist/generalagent-mcp-<version>-python.mcpb  server type python (0.3), for apps without the uv type:
#                                                needs Python >= 3.11 on the computer
# Each manifest is generated from mcp_server/registry.py (python -m mcp_server.mcpb), validated and
# packed with the pinned `mcpb` tool (scripts/node.sh). Needs .venv (./scripts/venv.sh).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="${PYTHON:-$root/.venv/bin/python}"
cd "$root"
version="$("$py" -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')"
for kind in uv python; do
  stage="$root/dist/mcpb-$kind"
  "$py" -m mcp_server.mcpb stage "$stage" "$kind" >/dev/null
  "$root/scripts/node.sh" mcpb validate "$stage/manifest.json" 1>&2
  out="$root/dist/generalagent-mcp-$version$([[ $kind == uv ]] || echo "-$kind").mcpb"
  "$root/scripts/node.sh" mcpb pack "$stage" "$out" 1>&2
  echo "$out"
done
