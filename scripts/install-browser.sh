#!/usr/bin/env bash
# Install what the HTML report's browser test needs: Debian's Chromium (/usr/bin/chromium) and the Playwright
# Python driver, which drives that system browser through executable_path (no `playwright install`
# download: only PyPI and apt are reachable). Idempotent; safe to run on every CI start.
#   bash scripts/install-browser.sh
set -euo pipefail

PLAYWRIGHT_VERSION="${PLAYWRIGHT_VERSION:-1.65.2}"

if ! command -v chromium >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    SUDO=""
    if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    # fonts: without any font the screenshot shows boxes instead of text
    $SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
fi

"${PYTHON:-python3}" -m pip install -q "playwright==${PLAYWRIGHT_VERSION}"

chromium --version
"${PYTHON:-python3}" -c "import playwright, importlib.metadata as m; print('playwright', m.version('playwright'))"
