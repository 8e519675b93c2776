#!/usr/bin/env bash
# Make PostgreSQL's server binaries (initdb, pg_ctl) available for the tests that run the storage
# suite on PostgreSQL (tests/pg_server.py starts a throwaway server with them; the product itself
# needs no local server). Installs Debian's postgresql-15 when missing and this runs as root with
# apt-get (quietly, no stdin); otherwise says how, and exits 0: those tests then skip, and under
# CI=true they fail, so a missing install step is caught.
# All output goes to stderr.
set -uo pipefail
exec </dev/null 1>&2

[[ "$(uname -s)" == "Linux" ]] || exit 0
have() { compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || command -v initdb >/dev/null 2>&1; }
have && exit 0
hint="install it with: sudo apt-get install postgresql-15 (macOS: brew install postgresql@15)"
if [[ "$(id -u)" != "0" ]]; then
  echo "[postgres] PostgreSQL server binaries are missing and this is not root; $hint" ; exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "[postgres] PostgreSQL server binaries are missing and apt-get is not available; $hint" ; exit 0
fi
echo "[postgres] installing postgresql-15 (apt-get)"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y -qq postgresql-15 >/tmp/generalagent-apt-postgres.log 2>&1; then
  apt-get update -qq >>/tmp/generalagent-apt-postgres.log 2>&1 || true
  apt-get install -y -qq postgresql-15 >>/tmp/generalagent-apt-postgres.log 2>&1 || true
fi
if have; then
  echo "[postgres] installed: $(ls -d /usr/lib/postgresql/*/bin | tail -1)"
else
  echo "[postgres] could not install postgresql-15 (see /tmp/generalagent-apt-postgres.log); $hint"
fi
exit 0
