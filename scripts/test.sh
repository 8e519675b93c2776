#!/usr/bin/env bash
# Run the whole test suite: lint (ruff), types (mypy), then pytest (which includes the
# stdio/HTTP subprocess tests, the MCP conformance suite and the Inspector CLI).
# Creates/updates .venv first. Extra arguments go to pytest.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
"$root/scripts/venv.sh" || exit 1
py="$root/.venv/bin/python"
echo "== ruff"; "$py" -m ruff check mcp_server tools indexing context tests bench || exit 1
echo "== mypy"; "$py" -m mypy || exit 1
echo "== pytest"
"$py" -m pytest "$@"
rc=$?
if [[ $rc -eq 5 ]]; then echo "pytest collected no tests: failing" >&2; exit 1; fi
exit $rc
