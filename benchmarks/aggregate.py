"""Aggregation speed: ``agentrace report`` over a results folder of ``--runs`` run records. Prints figures;
asserts nothing.

Usage: python benchmarks/aggregate.py [--runs 100000] [--cases 1000] [--keep DIR]

The folder holds trial runs: ``--cases`` questions x 2 arms (baseline ``plain``, treatment ``docs``) x 1 agent x
reps, each record as a session writes it (``run.json`` with usage, tool calls, a verify check). Measured, each in
a fresh ``agentrace report`` process: the first report (index missing: every ``run.json`` parsed, index written)
and the second (from the index), wall time and peak RSS (``resource.getrusage`` of the child). The floor beside
them: reading every ``run.json`` (open, read) without parsing.
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from helpers.report import outcome

from pytest_agentrace.record.model import CheckResult


def make_folder(out: Path, runs: int, cases: int) -> None:
    """``runs`` run.json files under ``out/runs/<case>/<arm>/<agent>/r<rep>/``."""
    reps = max(1, runs // (2 * cases))
    i = 0
    for c in range(cases):
        for arm in ("plain", "docs"):
            for rep in range(1, reps + 1):
                if i >= runs:
                    return
                tokens = (2000 if arm == "plain" else 1400) + (i * 7919) % 600 + c % 50
                o = outcome(case=f"q{c:04d}", arm=arm, agent="claude", rep=rep, kind="trial",
                            source="/suite/trial.toml",
                            status="passed" if (i * 31) % 10 < 7 else "failed", tokens=tokens, cost=tokens * 1e-5,
                            session_id=f"s{rep % 5}", baseline_arm="plain", has_verify=True,
                            checks={"verify": CheckResult("verify", "python check.py", 0, 0.2, "verify.log")},
                            answer_score={"correct": True, "recall": 1.0, "missing": [], "forbidden": []},
                            extra={"trial": "docs", "repo": "app", "edits": False, "uses": [], "output_bytes": 4000})
                d = out / "runs" / o.case / arm / "claude" / f"r{rep}"
                d.mkdir(parents=True, exist_ok=True)
                (d / "run.json").write_text(json.dumps(o.to_dict(), indent=2, sort_keys=True) + "\n")
                i += 1


def timed_report(out: Path, env: dict[str, str] | None = None) -> tuple[float, float, str, float]:
    """(wall seconds, peak RSS MiB, stdout, CPU seconds) of ``agentrace report OUT`` in a fresh process (``env``:
    extra environment variables, e.g. ``OMP_NUM_THREADS=1``). CPU seconds (user + system, every thread) move less
    than wall time when other jobs share the machine."""
    code = ("import resource, sys; from pytest_agentrace.cli import main\n"
            "rc = main(['report', sys.argv[1]])\n"
            "u = resource.getrusage(resource.RUSAGE_SELF)\n"
            "print('PEAK', u.ru_maxrss, u.ru_utime + u.ru_stime, file=sys.stderr); sys.exit(rc)")
    t = time.perf_counter()
    res = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True,
                         env={**os.environ, **(env or {})})
    seconds = time.perf_counter() - t
    if res.returncode != 0:
        raise SystemExit(f"agentrace report failed: {res.stderr[-2000:]}")
    peak, cpu = next(line.split()[1:] for line in res.stderr.splitlines() if line.startswith("PEAK"))
    return seconds, int(peak) / 1024, res.stdout, float(cpu)


def read_floor(out: Path) -> float:
    t = time.perf_counter()
    for dirpath, _dirs, files in os.walk(out / "runs"):
        if "run.json" in files:
            with open(os.path.join(dirpath, "run.json"), "rb") as fh:
                fh.read()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=100_000)
    ap.add_argument("--cases", type=int, default=1000)
    ap.add_argument("--keep", default=None, help="build (or reuse) the results folder here instead of a temp dir")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.keep or tmp) / f"agg-{args.runs}-{args.cases}"
        t = time.perf_counter()
        if not (out / "runs").is_dir():
            make_folder(out, args.runs, args.cases)
        made = time.perf_counter() - t
        for index in out.glob("index.*"):
            index.unlink()
        floor = read_floor(out)
        first = timed_report(out)
        second = timed_report(out)
        print(f"runs: {args.runs:,} in {args.cases:,} cases x 2 arms (folder made in {made:.1f} s); "
              f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
        print(f"floor: read every run.json (no parsing):   {floor:6.2f} s")
        print(f"agentrace report, index missing (rebuilt):  {first[0]:6.2f} s, {first[3]:6.2f} s CPU, peak RSS {first[1]:6.0f} MiB")
        print(f"agentrace report, from the index:           {second[0]:6.2f} s, {second[3]:6.2f} s CPU, peak RSS {second[1]:6.0f} MiB "
              f"(goal: <= 10 s, <= 300 MiB at 100,000 runs)")
        print(f"same output both times: {first[2] == second[2]}")


if __name__ == "__main__":
    main()
