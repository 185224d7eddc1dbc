"""Wall time of validating the built-in suite (20 tasks, 40 runs: oracle + noop each), serial and with
pytest-xdist. Prints figures; asserts nothing.

Usage: python benchmarks/validate_builtins.py [--workers 0 2] [--difficulty easy,medium]

Each configuration runs ``pytest --agentrace --agentrace-validate --agentrace-builtin all`` in a fresh results
folder and reports the session's wall time, the sum of the runs' own times (``run.json`` total_seconds) and the
slowest run, plus the 1-minute load average before it started (the machine may be shared).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def validate(workers: int, difficulty: str | None) -> dict:
    with tempfile.TemporaryDirectory(prefix="agentrace-bench-") as tmp:
        out = Path(tmp) / "out"
        args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--agentrace", "--agentrace-validate",
                "--agentrace-builtin", "all", "--agentrace-out", str(out), "--agentrace-no-save"]
        if difficulty:
            args += ["--agentrace-difficulty", difficulty]
        if workers:
            args += ["-p", "xdist", "-n", str(workers)]
        load = os.getloadavg()[0]
        start = time.monotonic()
        proc = subprocess.run(args, cwd=tmp, capture_output=True, text=True, check=False)
        wall = time.monotonic() - start
        runs = [json.loads(p.read_text()) for p in out.glob("runs/**/run.json")]
        slowest = max(runs, key=lambda r: r["total_seconds"]) if runs else None
        return {
            "workers": workers, "exit": proc.returncode, "runs": len(runs), "wall_s": round(wall, 1), "load_1m": round(load, 2),
            "sum_run_s": round(sum(r["total_seconds"] for r in runs), 1),
            "slowest": f"{slowest['case']}/{slowest['agent']} {slowest['total_seconds']:.1f}s" if slowest else "-",
            "last_line": proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr[-200:],
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 2], help="0 = serial (default: 0 2)")
    parser.add_argument("--difficulty", default=None, help="only these difficulties, e.g. easy,medium")
    args = parser.parse_args()
    for workers in args.workers:
        r = validate(workers, args.difficulty)
        mode = "serial" if not workers else f"-n {workers}"
        print(f"{mode:>7}: {r['wall_s']:7.1f} s wall, {r['runs']} runs (sum of run times {r['sum_run_s']} s, slowest {r['slowest']}), "
              f"exit {r['exit']}, load {r['load_1m']} before; {r['last_line']}")


if __name__ == "__main__":
    main()
