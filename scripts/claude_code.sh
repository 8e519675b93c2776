#!/usr/bin/env bash
# Claude Code's CLI, pinned, for the test that runs README's `claude mcp add` command as printed
# (tests/test_readme_first_page.py). Installed from the npm registry on first use into
# .cache/claude-code/ (its dependencies are its platform binaries, pinned to the same version);
# idempotent. Install logs go to stderr.
#
#   scripts/claude_code.sh ARGS...    run `claude ARGS...` (e.g. mcp add ..., mcp get NAME)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSION="2.1.328"
prefix="${GENERALAGENT_CLAUDE_CODE_CACHE:-$root/.cache/claude-code}"
claude="$prefix/node_modules/.bin/claude"
if [[ ! -x "$claude" || "$(cat "$prefix/stamp" 2>/dev/null)" != "$VERSION" ]]; then
  command -v npm >/dev/null 2>&1 || { echo "scripts/claude_code.sh: npm is not installed (apt-get install npm)" >&2; exit 1; }
  echo "[claude-code] installing @anthropic-ai/claude-code@$VERSION into $prefix" >&2
  rm -rf "$prefix" && mkdir -p "$prefix"
  npm install --prefix "$prefix" --no-save --no-package-lock --no-audit --no-fund --loglevel=error \
      --fetch-retries=2 --fetch-retry-mintimeout=2000 --fetch-retry-maxtimeout=8000 \
      "@anthropic-ai/claude-code@$VERSION" 1>&2 \
    || { echo "scripts/claude_code.sh: cannot install @anthropic-ai/claude-code@$VERSION from the npm registry" >&2; exit 1; }
  echo "$VERSION" > "$prefix/stamp"
fi
exec "$claude" "$@"
