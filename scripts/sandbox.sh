#!/usr/bin/env bash
# Make the OS sandbox for shell commands available: on Linux that is bubblewrap (`bwrap`).
# Installs it when missing and this runs as root with apt-get (quietly, no stdin); otherwise
# says why and how, and exits 0: the server still runs (every shell command then asks), and the
# tests that need bwrap skip (they fail under CI=true, so a missing install step is caught).
# All output goes to stderr (serve.sh uses stdout for the MCP protocol).
set -uo pipefail
exec </dev/null 1>&2

[[ "$(uname -s)" == "Linux" ]] || exit 0
command -v bwrap >/dev/null 2>&1 && exit 0
hint="install it with: sudo apt-get install bubblewrap (Fedora: sudo dnf install bubblewrap)"
if [[ "$(id -u)" != "0" ]]; then
  echo "[sandbox] bubblewrap (bwrap) is missing and this is not root; $hint" ; exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "[sandbox] bubblewrap (bwrap) is missing and apt-get is not available; $hint" ; exit 0
fi
echo "[sandbox] installing bubblewrap (apt-get)"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y -qq bubblewrap >/tmp/generalagent-apt.log 2>&1; then
  apt-get update -qq >>/tmp/generalagent-apt.log 2>&1 || true
  apt-get install -y -qq bubblewrap >>/tmp/generalagent-apt.log 2>&1 || true
fi
if command -v bwrap >/dev/null 2>&1; then
  echo "[sandbox] bubblewrap installed: $(bwrap --version 2>&1)"
else
  echo "[sandbox] could not install bubblewrap (see /tmp/generalagent-apt.log); $hint"
fi
exit 0
