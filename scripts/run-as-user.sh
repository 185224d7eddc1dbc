#!/usr/bin/env bash
# Run "python3 ARGS..." from this checkout as an unprivileged user (uid/gid $AGENTRACE_CI_UID, default 4242, no
# supplementary groups, a fresh HOME and TMPDIR of its own), with the interpreter this script's python3 is.
#
# That interpreter may live where other users cannot read it (pyenv under /root, mode 700): then, in a private mount
# namespace (unshare -m, as root), the closed folder is covered by an empty passable one that holds only the
# interpreter's prefix, read-only at its own path (its libpython RPATH still resolves), before privileges are
# dropped (setpriv). Nothing else of that folder is visible to the user.
# Needs root. Usage: scripts/run-as-user.sh -m pytest -q tests/test_box_attacks.py
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "run-as-user.sh: needs root (to drop to another user)"; exit 2; }
uid="${AGENTRACE_CI_UID:-4242}"
prefix="$(python3 -c 'import sys; print(sys.base_prefix)')"
exe_rel="$(python3 -c 'import os, sys; print(os.path.relpath(os.path.realpath(sys.executable), sys.base_prefix))')"
work="$(mktemp -d /tmp/agentrace-user.XXXXXX)"
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
mkdir -p "$work/home" "$work/tmp" "$work/python"
chown "$uid:$uid" "$work/home" "$work/tmp"
drop=(setpriv --reuid="$uid" --regid="$uid" --clear-groups --inh-caps=-all)
envs=(env -i "HOME=$work/home" "TMPDIR=$work/tmp" "USER=agentrace-ci" "LANG=${LANG:-C.UTF-8}"
      "PYTHONPATH=$PWD" "PYTHONDONTWRITEBYTECODE=1")
[ -n "${AGENTRACE_REQUIRE_REAL_CLIS:-}" ] && envs+=("AGENTRACE_REQUIRE_REAL_CLIS=$AGENTRACE_REQUIRE_REAL_CLIS")
if "${drop[@]}" test -r "$prefix/$exe_rel" -a -x "$prefix/$exe_rel"; then
  "${drop[@]}" "${envs[@]}" PATH="$prefix/bin:$PATH" "$prefix/$exe_rel" "$@"
  exit $?
fi
# the highest folder above the interpreter that the user cannot pass through (/root, mode 700)
closed="$prefix"
for dir in $(python3 -c 'import sys, pathlib; print(*reversed(pathlib.Path(sys.argv[1]).parents))' "$prefix"); do
  if ! "${drop[@]}" test -x "$dir"; then closed="$dir"; break; fi
done
echo "run-as-user.sh: $closed is closed to uid $uid: in a private mount namespace, an empty $closed holds only $prefix (read-only)"
# shellcheck disable=SC2016
unshare -m --propagation private bash -c '
  set -e
  mount --bind "$1" "$3"                       # keep the interpreter reachable
  mount -t tmpfs -o mode=755 agentrace "$2"     # hide the closed folder behind an empty, passable one
  mkdir -p "$1" && mount --bind "$3" "$1" && mount -o remount,bind,ro "$1"
  shift 3 && exec "$@"' _ "$prefix" "$closed" "$work/python" "${drop[@]}" "${envs[@]}" PATH="$prefix/bin:$PATH" "$prefix/$exe_rel" "$@"
