#!/usr/bin/env bash
# The real programs behind the shell allow-list that Debian does not install by default (tree, ripgrep):
# tests/test_policy_real_programs.py checks the policy's reading of their options against them (a program
# that is missing is not checked). Installed when missing and this runs as root with apt-get (quietly, no
# stdin); otherwise says how, and exits 0. All output goes to stderr.
set -uo pipefail
exec </dev/null 1>&2

[[ "$(uname -s)" == "Linux" ]] || exit 0
missing=()
command -v tree >/dev/null 2>&1 || missing+=(tree)
command -v rg >/dev/null 2>&1 || missing+=(ripgrep)
[[ ${#missing[@]} -eq 0 ]] && exit 0
hint="install them with: sudo apt-get install ${missing[*]}"
if [[ "$(id -u)" != "0" ]] || ! command -v apt-get >/dev/null 2>&1; then
  echo "[programs] missing ${missing[*]} (their option tests skip); $hint"; exit 0
fi
echo "[programs] installing ${missing[*]} (apt-get)"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y -qq "${missing[@]}" >/tmp/generalagent-apt-programs.log 2>&1; then
  apt-get update -qq >>/tmp/generalagent-apt-programs.log 2>&1 || true
  apt-get install -y -qq "${missing[@]}" >>/tmp/generalagent-apt-programs.log 2>&1 || true
fi
exit 0
