#!/usr/bin/env bash
# Make render_page able to draw .pptx/.odp slides: LibreOffice Impress without its GUI (Debian:
# libreoffice-impress-nogui, ~54 packages, ~80 MB download) and a Chinese font (fonts-wqy-microhei,
# 1.6 MB; without one Chinese text is drawn as empty boxes), which tools/slides.py runs headless in
# the OS sandbox to convert a deck to PDF. Installs it when missing and this runs as root with apt-get (quietly, no
# stdin); otherwise says why and how, and exits 0: the server still runs (render_page on a deck then
# names the install command), and the slide tests skip (they fail under CI=true, so a missing install
# step is caught). GENERALAGENT_NO_OFFICE=1 skips it (a machine that never draws slides).
# All output goes to stderr (serve.sh uses stdout for the MCP protocol).
set -uo pipefail
exec </dev/null 1>&2

[[ "$(uname -s)" == "Linux" ]] || exit 0
[[ "${GENERALAGENT_NO_OFFICE:-}" == "1" ]] && exit 0
have_all() {
  command -v soffice >/dev/null 2>&1 || return 1
  [[ -n "$(fc-list :lang=zh family 2>/dev/null | head -1)" ]]
}
have_all && exit 0
packages=(libreoffice-impress-nogui fonts-wqy-microhei)
hint="install it with: sudo apt-get install --no-install-recommends ${packages[*]} (Fedora: sudo dnf install libreoffice-impress)"
if [[ "$(id -u)" != "0" ]]; then
  echo "[office] LibreOffice or a Chinese font (for render_page on slides) is missing and this is not root; $hint" ; exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "[office] LibreOffice or a Chinese font (for render_page on slides) is missing and apt-get is not available; $hint" ; exit 0
fi
echo "[office] installing ${packages[*]} (apt-get, ~80 MB download)"
export DEBIAN_FRONTEND=noninteractive
log=/tmp/generalagent-apt-office.log
if ! apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${packages[@]}" >$log 2>&1; then
  apt-get -o DPkg::Lock::Timeout=600 update -qq >>$log 2>&1 || true
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${packages[@]}" >>$log 2>&1 || true
fi
if have_all; then
  echo "[office] LibreOffice installed: $(soffice --version 2>/dev/null | head -1)"
else
  echo "[office] could not install LibreOffice (see $log); $hint"
fi
exit 0
