#!/usr/bin/env bash
# Run the whole test suite: lint (ruff, lint-imports), types (mypy, beside the first pytest pass), then
# pytest (which includes the stdio/HTTP subprocess tests, the MCP conformance suite and the Inspector CLI)
# on SQLite, then the storage-facing tests (marked `storage`) again on PostgreSQL (a throwaway server
# the tests start; scripts/postgres.sh installs its binaries when missing).
# Creates/updates .venv first, and meanwhile the pinned Node tooling in .cache/node (scripts/node.sh).
# Extra arguments go to pytest. Safe for CI: no stdin needed, exit 0 only when all passed.
# Both pytest passes run on GA_TEST_WORKERS processes (pytest-xdist, default 2; 0 = in this process):
# many tests wait on subprocesses, sockets or timed load phases, so two workers use two cores well.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
exec </dev/null  # nothing here may wait for input
started=$SECONDS

# Two steps run beside others, their output printed when they end (and kept in .cache/test-logs/):
# the Node tooling installs while pip does (30 s on a fresh clone), and mypy (one core, 35 s without its
# cache) checks while the SQLite pass runs, which leaves about a sixth of two cores idle.
logs="$root/.cache/test-logs"
rm -rf "$logs"
mkdir -p "$logs"
background=()
trap 'for pid in ${background[@]+"${background[@]}"}; do kill "$pid" 2>/dev/null; done' EXIT
"$root/scripts/node.sh" >/dev/null 2>"$logs/node.txt" &
node_pid=$!
background+=("$node_pid")

"$root/scripts/venv.sh" || { echo "test.sh: could not create/update .venv" >&2; exit 1; }
py="$root/.venv/bin/python"

"$root/scripts/postgres.sh" || true  # initdb/pg_ctl for the PostgreSQL pass

echo "== node tooling (scripts/node.sh)"
node_ok=0
wait "$node_pid" || node_ok=$?
cat "$logs/node.txt" >&2
if [[ $node_ok -ne 0 ]]; then
  echo "test.sh: the pinned Node tooling is missing; the conformance and Inspector tests will fail" >&2
fi

# Every stage runs even when an earlier one fails, so one run shows everything that is broken.
failed=()
echo "== ruff"
"$py" -m ruff check foundation policy mcp_server tools indexing context tests bench || failed+=(ruff)
echo "== import contracts (lint-imports)"
"$root/.venv/bin/lint-imports" --no-cache || failed+=(lint-imports)
"$py" -m mypy >"$logs/mypy.txt" 2>&1 &
mypy_pid=$!
background+=("$mypy_pid")

echo "== pytest"
# A fresh temp root per run, removed by rm (pytest's own cleanup of old runs can hit Python's
# recursion limit on very deep test trees).
basetemp="$root/.cache/pytest-tmp"
rm -rf "$basetemp"
mkdir -p "$root/.cache"
# -n first: a -n among the extra arguments wins. --dist loadgroup: a module marked
# xdist_group (its module-scoped server) stays on one worker; every other test goes where there is room.
workers=(-n "${GA_TEST_WORKERS:-2}" --dist loadgroup)
args=("${workers[@]}" "$@")
if [[ " ${args[*]-} " != *" --basetemp"* ]]; then
  args=(--basetemp "$basetemp" "${args[@]}")
fi
"$py" -m pytest "${args[@]}"
rc=$?
if [[ $rc -eq 5 ]]; then echo "test.sh: pytest collected no tests: failing" >&2; fi
[[ $rc -ne 0 ]] && failed+=("pytest (exit $rc)")

echo "== pytest: storage tests on PostgreSQL (-m storage --backend postgresql)"
rm -rf "$basetemp-pg"
args=("${workers[@]}" "$@")
if [[ " ${args[*]-} " != *" --basetemp"* ]]; then
  args=(--basetemp "$basetemp-pg" "${args[@]}")
fi
"$py" -m pytest -m storage --backend postgresql "${args[@]}"
rc=$?
if [[ $rc -eq 5 ]]; then echo "test.sh: no storage tests were collected for PostgreSQL" >&2; fi
[[ $rc -ne 0 ]] && failed+=("pytest on PostgreSQL (exit $rc)")
echo "== mypy (ran beside the SQLite pass)"
mypy_ok=0
wait "$mypy_pid" || mypy_ok=$?
cat "$logs/mypy.txt"
[[ $mypy_ok -ne 0 ]] && failed+=(mypy)
background=()
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "test.sh: FAILED: ${failed[*]} ($((SECONDS - started)) s)" >&2
  exit 1
fi
echo "test.sh: all passed ($((SECONDS - started)) s)"
