#!/usr/bin/env bash
# Install the six real agent CLIs that the offline end-to-end tests (marker `realcli`) drive against the
# model double, pinned and reproducible, into an ignored project folder:
#
#   .tools/npm/    Claude Code, Codex, Gemini CLI, OpenCode, Copilot CLI: the tree locked in scripts/clis/package-lock.json
#   .tools/aider/  Aider in its own venv: `pip install -r scripts/clis/aider-requirements.txt` (every dependency pinned)
#   .tools/bin/    one symlink per CLI (claude codex gemini opencode copilot aider): put it first on PATH
#
# Only the npm registry and PyPI are used; the native binaries ship inside npm optionalDependencies, so nothing
# is downloaded after install. Re-running is cheap: a part whose pin file did not change since its last good
# install is skipped (stamp files hold the pin files' sha256).
#
# Usage: scripts/install-clis.sh [--only npm|aider] [--force] [--check]
#   --check   print each installed CLI's version and exit 1 when one is missing or not runnable
#   env AGENTRACE_TOOLS (default <repo>/.tools), AIDER_PYTHON (default python3; aider 0.86.2 needs 3.10-3.12)
# Prints `elapsed <part> <seconds>` lines so CI logs show install time.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PINS="$ROOT/scripts/clis"
DEST=${AGENTRACE_TOOLS:-$ROOT/.tools}
AIDER_PYTHON=${AIDER_PYTHON:-python3}
ONLY=""
FORCE=0
CHECK=0
while [ $# -gt 0 ]; do
  case "$1" in
    --only) ONLY=$2; shift 2 ;;
    --force) FORCE=1; shift ;;
    --check) CHECK=1; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "install-clis.sh: unknown argument $1 (try --help)" >&2; exit 2 ;;
  esac
done

NPM_BINS=(claude codex gemini opencode copilot)

stamp_of() { cat "$@" | sha256sum | cut -d' ' -f1; }

link_bins() {
  mkdir -p "$DEST/bin"
  for b in "${NPM_BINS[@]}"; do
    [ -e "$DEST/npm/node_modules/.bin/$b" ] && ln -sfn "../npm/node_modules/.bin/$b" "$DEST/bin/$b"
  done
  [ -e "$DEST/aider/bin/aider" ] && ln -sfn "../aider/bin/aider" "$DEST/bin/aider"
  return 0
}

check() {
  local bad=0
  for b in "${NPM_BINS[@]}" aider; do
    if [ ! -x "$DEST/bin/$b" ]; then
      echo "missing  $b ($DEST/bin/$b)"; bad=1; continue
    fi
    # gemini takes ~6 s even for --version (see shared/design/model-double.md); HOME is a throwaway dir
    local home; home=$(mktemp -d)
    if v=$(HOME=$home timeout 60 "$DEST/bin/$b" --version </dev/null 2>/dev/null | head -n 1); then
      echo "ok       $b $v"
    else
      echo "broken   $b: $v"; bad=1
    fi
    rm -rf "$home"
  done
  return $bad
}

install_npm() {
  local t0=$SECONDS want
  want=$(stamp_of "$PINS/package.json" "$PINS/package-lock.json")
  if [ $FORCE = 0 ] && [ -f "$DEST/npm/.agentrace-stamp" ] && [ "$(cat "$DEST/npm/.agentrace-stamp")" = "$want" ]; then
    echo "npm CLIs: up to date ($DEST/npm)"; return 0
  fi
  mkdir -p "$DEST/npm"
  rm -f "$DEST/npm/.agentrace-stamp"
  cp "$PINS/package.json" "$PINS/package-lock.json" "$DEST/npm/"
  # `npm install` with the pinned lockfile copied in installs exactly the locked tree. (`npm ci` refuses this
  # lockfile: opencode-ai lists optional platform packages the registry does not serve, which npm leaves out of
  # the lock and then calls "out of sync".) Optional deps stay on: they carry the native binaries.
  (cd "$DEST/npm" && npm install --no-audit --no-fund --loglevel=error --include=optional)
  if ! cmp -s "$PINS/package-lock.json" "$DEST/npm/package-lock.json"; then
    echo "install-clis.sh: warning: npm changed the lockfile; diff $PINS/package-lock.json $DEST/npm/package-lock.json" >&2
  fi
  echo "$want" > "$DEST/npm/.agentrace-stamp"
  echo "elapsed npm $((SECONDS - t0))"
}

install_aider() {
  local t0=$SECONDS want
  want=$(stamp_of "$PINS/aider-requirements.txt"; "$AIDER_PYTHON" -c 'import sys; print(sys.version)')
  if [ $FORCE = 0 ] && [ -f "$DEST/aider/.agentrace-stamp" ] && [ "$(cat "$DEST/aider/.agentrace-stamp")" = "$want" ]; then
    echo "aider: up to date ($DEST/aider)"; return 0
  fi
  rm -rf "$DEST/aider"
  "$AIDER_PYTHON" -m venv "$DEST/aider"
  "$DEST/aider/bin/python" -m pip install --quiet --disable-pip-version-check --no-input \
    -r "$PINS/aider-requirements.txt"
  echo "$want" > "$DEST/aider/.agentrace-stamp"
  echo "elapsed aider $((SECONDS - t0))"
}

if [ $CHECK = 1 ]; then
  check; exit $?
fi

T0=$SECONDS
mkdir -p "$DEST"
case "$ONLY" in
  npm) install_npm ;;
  aider) install_aider ;;
  "")
    # the two parts are independent and mostly wait on the network: run them side by side
    install_aider > "$DEST/aider-install.log" 2>&1 &
    AIDER_PID=$!
    npm_rc=0; install_npm || npm_rc=$?
    aider_rc=0; wait $AIDER_PID || aider_rc=$?
    cat "$DEST/aider-install.log"
    if [ $npm_rc != 0 ] || [ $aider_rc != 0 ]; then
      echo "install-clis.sh: install failed (npm exit $npm_rc, aider exit $aider_rc)" >&2; exit 1
    fi
    ;;
  *) echo "install-clis.sh: --only takes npm or aider, not $ONLY" >&2; exit 2 ;;
esac
link_bins
echo "elapsed total $((SECONDS - T0))"
echo "CLIs in $DEST/bin (put it first on PATH)"
