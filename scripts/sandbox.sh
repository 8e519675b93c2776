#!/usr/bin/env bash
# Make the OS sandbox for shell commands available: on Linux that is bubblewrap (`bwrap`), plus slirp4netns
# and iproute2 (`ip`) for `bash_network` (outbound only: the command's own network namespace, connected by
# slirp4netns with the host's loopback and addresses out of reach; tools/sandbox_net.py).
# Installs what is missing when this runs as root with apt-get (quietly, no stdin); otherwise
# says why and how, and exits 0: the server still runs (every shell command then asks; without slirp4netns
# a command with `bash_network` on is refused), and the tests that need them skip (they fail under CI=true,
# so a missing install step is caught).
# All output goes to stderr (serve.sh uses stdout for the MCP protocol).
set -uo pipefail
exec </dev/null 1>&2

[[ "$(uname -s)" == "Linux" ]] || exit 0
missing=()
command -v bwrap >/dev/null 2>&1 || missing+=(bubblewrap)
command -v slirp4netns >/dev/null 2>&1 || missing+=(slirp4netns)
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
command -v nsenter >/dev/null 2>&1 || missing+=(util-linux)
[[ ${#missing[@]} -eq 0 ]] && exit 0
hint="install them with: sudo apt-get install ${missing[*]} (Fedora: sudo dnf install ${missing[*]})"
if [[ "$(id -u)" != "0" ]]; then
  echo "[sandbox] ${missing[*]} missing and this is not root; $hint" ; exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "[sandbox] ${missing[*]} missing and apt-get is not available; $hint" ; exit 0
fi
echo "[sandbox] installing ${missing[*]} (apt-get)"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y -qq "${missing[@]}" >/tmp/generalagent-apt.log 2>&1; then
  apt-get update -qq >>/tmp/generalagent-apt.log 2>&1 || true
  apt-get install -y -qq "${missing[@]}" >>/tmp/generalagent-apt.log 2>&1 || true
fi
for tool in bwrap slirp4netns ip nsenter; do
  command -v "$tool" >/dev/null 2>&1 || echo "[sandbox] could not install $tool (see /tmp/generalagent-apt.log); $hint"
done
command -v bwrap >/dev/null 2>&1 && echo "[sandbox] bubblewrap: $(bwrap --version 2>&1)"
exit 0
