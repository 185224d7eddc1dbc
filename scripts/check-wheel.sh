#!/usr/bin/env bash
# A newcomer's first contact with a built wheel, outside the checkout: a fresh venv (no system site packages), a
# plain `pip install WHEEL` (no extras), then a built-in task raced by the offline agents and a task written by
# `agentrace init` validated (oracle passes every check, noop fails the hidden ones). Exit status non-zero on any
# error.   bash scripts/check-wheel.sh dist/pytest_agentrace-*.whl
set -euo pipefail
wheel="$(realpath "$1")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
python3 -m venv venv
venv/bin/python -m pip install -q "$wheel"
export PATH="$work/venv/bin:$PATH"
pytest --agentrace --agentrace-builtin fibonacci -p no:cacheprovider --agentrace-no-save -q
agentrace init my-task
pytest --agentrace --agentrace-validate my-task.yaml -p no:cacheprovider --agentrace-no-save -q
echo "check-wheel: $(basename "$wheel"): a built-in task ran and an init task validated from a plain install"
