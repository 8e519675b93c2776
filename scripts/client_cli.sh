#!/usr/bin/env bash
# MCP clients' own CLIs, pinned, for the tests that follow README's first page with the real programs
# (tests/test_readme_first_page.py): Claude Code (`claude mcp add` as printed) and Gemini CLI (its
# settings.json as shown). Installed from the npm registry on first use into .cache/client-cli/<name>/
# (each one's dependencies pinned by its exact version); Gemini CLI runs on the pinned Node of
# scripts/node.sh. Idempotent; install logs go to stderr.
#
#   scripts/client_cli.sh claude ARGS...    run Claude Code's `claude ARGS...`
#   scripts/client_cli.sh gemini ARGS...    run Gemini CLI's `gemini ARGS...`
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
name="${1:-}"
[[ $# -gt 0 ]] && shift
case "$name" in
  claude) package="@anthropic-ai/claude-code@2.1.328" ;;
  gemini) package="@google/gemini-cli@0.61.0" ;;
  *) echo "scripts/client_cli.sh: unknown client '$name' (claude | gemini)" >&2; exit 2 ;;
esac
node_bin="$("$root/scripts/node.sh")"  # the pinned Node 22 (Gemini CLI needs Node >= 20)
export PATH="$(dirname "$node_bin"):$PATH"
prefix="${GENERALAGENT_CLIENT_CLI_CACHE:-$root/.cache/client-cli}/$name"
program="$prefix/node_modules/.bin/$name"
if [[ ! -x "$program" || "$(cat "$prefix/stamp" 2>/dev/null)" != "$package" ]]; then
  command -v npm >/dev/null 2>&1 || { echo "scripts/client_cli.sh: npm is not installed (apt-get install npm)" >&2; exit 1; }
  echo "[client-cli] installing $package into $prefix" >&2
  rm -rf "$prefix" && mkdir -p "$prefix"
  npm install --prefix "$prefix" --no-save --no-package-lock --no-audit --no-fund --loglevel=error \
      --fetch-retries=2 --fetch-retry-mintimeout=2000 --fetch-retry-maxtimeout=8000 "$package" 1>&2 \
    || { echo "scripts/client_cli.sh: cannot install $package from the npm registry" >&2; exit 1; }
  echo "$package" > "$prefix/stamp"
fi
exec "$program" "$@"
