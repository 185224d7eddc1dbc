#!/usr/bin/env bash
# Install what the HTML report's browser test needs: Debian's Chromium (/usr/bin/chromium) and the Playwright
# Python driver, which drives that system browser through executable_path (no `playwright install`
# download: only PyPI and apt are reachable). Idempotent; safe to run on every CI start.
# The driver goes into the interpreter that runs the tests: $PYTHON when set, else the active venv's
# ($VIRTUAL_ENV/bin/python), else the first python3 on PATH.
#   . .venv/bin/activate && bash scripts/install-browser.sh      (or PYTHON=.venv/bin/python bash ...)
set -euo pipefail

if [ -z "${PYTHON:-}" ]; then
    if [ -n "${VIRTUAL_ENV:-}" ] && [ -x "$VIRTUAL_ENV/bin/python" ]; then PYTHON="$VIRTUAL_ENV/bin/python"; else PYTHON=python3; fi
fi
echo "install-browser: Playwright into $("$PYTHON" -c 'import sys; print(sys.executable)')"

PLAYWRIGHT_VERSION="${PLAYWRIGHT_VERSION:-1.65.2}"

if ! command -v chromium >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    SUDO=""
    if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
    $SUDO apt-get update -qq
    # fonts: without any font the screenshot shows boxes instead of text
    $SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
fi

"$PYTHON" -m pip install -q "playwright==${PLAYWRIGHT_VERSION}"

chromium --version
"$PYTHON" -c "import playwright, importlib.metadata as m; print('playwright', m.version('playwright'))"
