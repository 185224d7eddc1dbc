"""``--agentrace-offline``: run an agent in a network namespace that has only loopback (Linux ``unshare -n``), the
host side: ``probe`` (may this process make one) and ``wrap`` (the argv that does).

Nothing the agent starts can then reach another host, even when a CLI update adds new traffic
(``model-double.md``, "How offline was enforced"). A new namespace has its own, downed ``lo``, so the model
double cannot stay outside it: ``wrap`` returns an argv that runs ``model_double.inside`` in the namespace, which
brings ``lo`` up, starts the double there on the port the run's config already names (every port is free in
a new namespace), runs the agent as its child in the same process group (so the runner's timeout kill reaches
both), sends the double's account of the run on the run's report pipe, and exits with the agent's exit code. This
module imports neither the double nor its wire formats: a session that runs no offline agent does not load them.

``unshare -n`` needs CAP_SYS_ADMIN (root); other users get ``unshare -rn`` (a user namespace mapping them to
root inside) where the kernel allows it. ``probe`` finds out once per process which works.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
from pathlib import Path

HELPER = "pytest_agentrace.model_double.inside"  # the process wrap puts in front of the agent, in the namespace
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the folder that holds pytest_agentrace/


@functools.cache
def probe() -> tuple[tuple[str, ...] | None, str]:
    """``(unshare argv prefix, "")`` when this process may create a network namespace, else ``(None, why)``.
    Tries ``unshare -n`` as root, then ``unshare -rn``. Cached for the process."""
    if not sys.platform.startswith("linux"):
        return None, f"network namespaces need Linux (this is {sys.platform})"
    exe = shutil.which("unshare")
    if exe is None:
        return None, "the unshare command (util-linux) is not installed"
    candidates = ([(exe, "-n")] if os.geteuid() == 0 else []) + [(exe, "-rn")]
    why = ""
    for prefix in candidates:
        try:
            proc = subprocess.run([*prefix, sys.executable, "-c", "pass"], check=False, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired) as exc:
            why = str(exc)
            continue
        if proc.returncode == 0:
            return tuple(prefix), ""
        why = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
    return None, f"cannot create a network namespace here ({why})"


def wrap(argv: list[str], script: str | None = None, log: str | None = None, port: int | None = None,
         unshare: bool = True, replay: tuple[str, ...] | None = None) -> list[str]:
    """``argv`` run inside a new loopback-only network namespace, with the model double inside it when
    ``script`` is given (``log``: its JSONL request log, ``port``: the port the run's config names).
    ``unshare=False``: the caller makes the namespace (the sandbox's ``--unshare-net``); only the helper
    (``HELPER``) is put in front of ``argv``. ``replay``: ``(cassette, match, workspace, home[, basetemp, results])``: the double
    inside plays that cassette (``cassette.Replayer``) instead of a script, with those paths as placeholders.

    Raises ``RuntimeError`` (with ``probe``'s reason) when namespaces are not permitted."""
    prefix: tuple[str, ...] | None = ()
    if unshare:
        prefix, why = probe()
        if prefix is None:
            raise RuntimeError(why)
    # the package's own folder first on sys.path: inside the sandbox the session's PYTHONPATH is not passed on
    boot = f"import sys; sys.path.insert(0, {str(_PACKAGE_ROOT)!r}); from {HELPER} import main; " \
           "sys.exit(main(sys.argv[1:]))"
    inner = [sys.executable, "-c", boot]
    if script:
        inner += ["--script", script, "--log", str(log or os.devnull), "--port", str(port)]
    elif replay:
        cassette, match, workspace, home, basetemp, results = (*replay, "", "")[:6]
        inner += ["--cassette", cassette, "--match", match, "--workspace", workspace, "--home", home,
                  "--basetemp", basetemp, "--results", results, "--log", str(log or os.devnull), "--port", str(port)]
    return [*prefix, *inner, "--", *argv]
