"""``--agentrace-offline``: run an agent in a network namespace that has only loopback (Linux ``unshare -n``).

Nothing the agent starts can then reach another host, even when a CLI update adds new traffic
(``model-double.md``, "How offline was enforced"). A new namespace has its own, downed ``lo``, so the model
double cannot stay outside it: ``wrap`` returns an argv that runs this module inside the namespace, which
brings ``lo`` up, starts the double there on the port the run's config already names (every port is free in
a new namespace), runs the agent as its child in the same process group (so the runner's timeout kill reaches
both), sends the double's account of the run (``server.report_of``) on the run's report pipe (``run.launch``: the
agent never holds it; the request log it writes lies in the agent's outbox and is for people only), and exits with
the agent's exit code.

``unshare -n`` needs CAP_SYS_ADMIN (root); other users get ``unshare -rn`` (a user namespace mapping them to
root inside) where the kernel allows it. ``probe`` finds out once per process which works.

Usage inside the namespace (built by ``wrap``)::

    python -m pytest_agentrace.model_double.netns [--script S.yaml --log L.jsonl --port P] -- AGENT ARGV...
    python -m pytest_agentrace.model_double.netns --cassette C.json --match strict --workspace W --home H \
        --log L.jsonl --port P -- AGENT ARGV...        # the double replays a cassette instead
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from pytest_agentrace.model_double.cassette import Cassette, Replayer, Scrubber
from pytest_agentrace.model_double.script import load_script
from pytest_agentrace.model_double.server import ModelDouble
from pytest_agentrace.record.redact import secret_values
from pytest_agentrace.run.launch import helper_fault, send_report, take_report, undumpable
from pytest_agentrace.run.netbridge import loopback_up, run_child

FAULT_EXIT = 125  # its exit code (as env(1) and timeout(1) use 125); the runner learns of it by run.launch's channel
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
    ``unshare=False``: the caller makes the namespace (the sandbox's ``--unshare-net``); only this module's helper
    is put in front of ``argv``. ``replay``: ``(cassette, match, workspace, home[, basetemp, results])``: the double
    inside plays that cassette (``cassette.Replayer``) instead of a script, with those paths as placeholders.

    Raises ``RuntimeError`` (with ``probe``'s reason) when namespaces are not permitted."""
    prefix: tuple[str, ...] | None = ()
    if unshare:
        prefix, why = probe()
        if prefix is None:
            raise RuntimeError(why)
    # the package's own folder first on sys.path: inside the sandbox the session's PYTHONPATH is not passed on
    boot = f"import sys; sys.path.insert(0, {str(_PACKAGE_ROOT)!r}); from pytest_agentrace.model_double.netns import main; " \
           "sys.exit(main(sys.argv[1:]))"
    inner = [sys.executable, "-c", boot]
    if script:
        inner += ["--script", script, "--log", str(log or os.devnull), "--port", str(port)]
    elif replay:
        cassette, match, workspace, home, basetemp, results = (*replay, "", "")[:6]
        inner += ["--cassette", cassette, "--match", match, "--workspace", workspace, "--home", home,
                  "--basetemp", basetemp, "--results", results, "--log", str(log or os.devnull), "--port", str(port)]
    return [*prefix, *inner, "--", *argv]


def main(args: list[str] | None = None) -> int:
    """Inside the namespace: loopback up, the double started (when asked), the agent run; its exit code."""
    parser = argparse.ArgumentParser(prog="python -m pytest_agentrace.model_double.netns")
    parser.add_argument("--script")
    parser.add_argument("--log")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--cassette")
    parser.add_argument("--match", default="strict")
    parser.add_argument("--workspace")
    parser.add_argument("--home")
    parser.add_argument("--basetemp")
    parser.add_argument("--results")
    parser.add_argument("argv", nargs=argparse.REMAINDER)
    ns = parser.parse_args(args)
    argv = ns.argv[1:] if ns.argv[:1] == ["--"] else ns.argv
    if not argv:
        parser.error("no agent command after --")
    double = None
    key = os.environ.pop("AGENTRACE_MODEL_DOUBLE_KEY", None)  # the run's key: the double answers only it
    rejected = str(Path(ns.log).with_name("model-double-rejected.jsonl")) if ns.log and ns.log != os.devnull else None
    log = None if ns.log == os.devnull else ns.log
    undumpable()  # the agent, its child, cannot open this process's start channel or report pipe through /proc
    report = take_report()  # kept from the agent: not in its environment, not inherited
    try:
        loopback_up()
        if ns.script:
            double = ModelDouble(load_script(ns.script), log, port=ns.port, key=key, rejected_log=rejected).start()
        elif ns.cassette:  # the agent's environment holds its keys: scrubbed from live requests as when recorded
            scrub = Scrubber.make(secret_values(), ns.workspace, ns.home, basetemp=ns.basetemp or None,
                                  results=ns.results or None)
            replayer = Replayer(Cassette.load(ns.cassette), ns.match, scrub)
            double = ModelDouble(log=log, port=ns.port, replayer=replayer, key=key, rejected_log=rejected).start()
    except Exception as exc:  # noqa: BLE001 - the harness's fault, never the agent's: the runner makes it an error run
        helper_fault(f"model double: {type(exc).__name__}: {exc}")
        return FAULT_EXIT
    code = run_child(argv, "netns")
    if double is not None:
        double.stop()
        send_report(report, json.dumps(double.report()).encode("utf-8"))
    return code


if __name__ == "__main__":
    sys.exit(main())
