#!/usr/bin/env bash
# Make OCR for scanned PDF pages available: Tesseract with its English and Simplified Chinese
# language data (Debian: tesseract-ocr, tesseract-ocr-eng, tesseract-ocr-chi-sim), which PyMuPDF
# drives offline (page.get_textpage_ocr). Installs them when missing and this runs as root with
# apt-get (quietly, no stdin); otherwise says why and how, and exits 0: the server still runs
# (pages without a text layer are then skipped and counted by index_status), and the OCR tests
# skip (they fail under CI=true, so a missing install step is caught).
# All output goes to stderr (serve.sh uses stdout for the MCP protocol).
set -uo pipefail
exec </dev/null 1>&2

[[ "$(uname -s)" == "Linux" ]] || exit 0
have_all() {
  command -v tesseract >/dev/null 2>&1 || return 1
  local langs; langs="$(tesseract --list-langs 2>/dev/null)"
  [[ "$langs" == *eng* && "$langs" == *chi_sim* ]]
}
have_all && exit 0
packages=(tesseract-ocr tesseract-ocr-eng tesseract-ocr-chi-sim)
hint="install them with: sudo apt-get install ${packages[*]} (Fedora: sudo dnf install tesseract tesseract-langpack-chi_sim)"
if [[ "$(id -u)" != "0" ]]; then
  echo "[ocr] Tesseract with eng+chi_sim is missing and this is not root; $hint" ; exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "[ocr] Tesseract with eng+chi_sim is missing and apt-get is not available; $hint" ; exit 0
fi
echo "[ocr] installing ${packages[*]} (apt-get)"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${packages[@]}" >/tmp/generalagent-apt-ocr.log 2>&1; then
  apt-get -o DPkg::Lock::Timeout=600 update -qq >>/tmp/generalagent-apt-ocr.log 2>&1 || true
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${packages[@]}" >>/tmp/generalagent-apt-ocr.log 2>&1 || true
fi
if have_all; then
  echo "[ocr] Tesseract installed: $(tesseract --version 2>&1 | head -1)"
else
  echo "[ocr] could not install Tesseract (see /tmp/generalagent-apt-ocr.log); $hint"
fi
exit 0
