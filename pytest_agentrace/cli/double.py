"""``agentrace model-double SCRIPT [--host 127.0.0.1] [--port N] [--log FILE]``: serve a model script (YAML) or a
cassette (JSON, ``docs/cassettes.md``) on its own, so any CLI can be pointed at it by hand.

The first line on stdout is ``listening on http://HOST:PORT`` (flushed at once; ``--port 0``, the default, picks
a free port). Ctrl-C (SIGINT) or SIGTERM stops the server and the command exits 0. A bad script or cassette
exits 2 with a message naming the file and key.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from pytest_agentrace.errors import SpecError
from pytest_agentrace.model_double.cassette import MATCH_MODES, STRICT, Cassette, CassetteError, Replayer
from pytest_agentrace.model_double.script import load_script
from pytest_agentrace.model_double.server import ModelDouble


def register(sub: Any) -> None:
    p = sub.add_parser("model-double", help="serve a model script or a cassette on 127.0.0.1 (Ctrl-C stops it)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("script", metavar="SCRIPT", help="a model script (YAML) or a cassette (.json)")
    p.add_argument("--host", default="127.0.0.1", choices=("127.0.0.1", "localhost", "::1"),
                   help="loopback address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=0, help="port (default 0: a free one)")
    p.add_argument("--log", metavar="FILE", help="append every request (JSONL, auth headers redacted) to FILE")
    p.add_argument("--match", default=STRICT, choices=MATCH_MODES, help="for a cassette: strict (default) or loose")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    path = Path(args.script)
    try:
        if path.suffix == ".json":
            double = ModelDouble(log=args.log, host=args.host, port=args.port,
                                 replayer=Replayer(Cassette.load(path), args.match))
        else:
            double = ModelDouble(load_script(path), args.log, host=args.host, port=args.port)
        double.start()
    except (SpecError, CassetteError) as exc:
        print(f"agentrace model-double: {exc}", file=sys.stderr)
        return 2
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    host = f"[{args.host}]" if ":" in args.host else args.host
    try:
        print(f"listening on http://{host}:{double.port}", flush=True)
        while not stop.wait(0.5):
            pass
    finally:
        double.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    print("stopped", flush=True)
    return 0
