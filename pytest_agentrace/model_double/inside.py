"""The process ``netns.wrap`` puts in front of an offline agent, inside its loopback-only network namespace:
brings ``lo`` up, starts the model double there (a script, or a cassette replayed) on the port the run's config
names, runs the agent as its child in the same process group (so the runner's timeout kill reaches both), sends
the double's account of the run (``routes.report_of``) on the run's report pipe (``run.launch``: the agent never
holds it; the request log it writes lies in the agent's outbox and is for people only), and exits with the agent's
exit code (``FAULT_EXIT`` when the double cannot start: the harness's fault, never the agent's).

Usage inside the namespace (built by ``netns.wrap``)::

    python -m pytest_agentrace.model_double.inside [--script S.yaml --log L.jsonl --port P] -- AGENT ARGV...
    python -m pytest_agentrace.model_double.inside --cassette C.json --match strict --workspace W --home H \
        --log L.jsonl --port P -- AGENT ARGV...        # the double replays a cassette instead
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from pytest_agentrace.model_double.cassette import Cassette, Replayer, Scrubber
from pytest_agentrace.model_double.script import load_script
from pytest_agentrace.model_double.server import ModelDouble
from pytest_agentrace.record.redact import secret_values
from pytest_agentrace.run.launch import helper_fault, send_report, take_report, undumpable
from pytest_agentrace.run.netbridge import loopback_up, run_child

FAULT_EXIT = 125  # its exit code (as env(1) and timeout(1) use 125); the runner learns of it by run.launch's channel


def main(args: list[str] | None = None) -> int:
    """Inside the namespace: loopback up, the double started (when asked), the agent run; its exit code."""
    parser = argparse.ArgumentParser(prog="python -m pytest_agentrace.model_double.inside")
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
