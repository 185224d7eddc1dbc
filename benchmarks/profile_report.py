"""Where ``agentrace report`` spends its time: cProfile of one report over a generated results folder. Prints the
profile (by cumulative time, then by own time) and the wall and CPU seconds; asserts nothing.

Usage: python benchmarks/profile_report.py [--runs 20000] [--cases 1000] [--keep DIR] [--top 40] [--manifest]

The folder is ``benchmarks/aggregate.make_folder``'s (``--cases`` questions x 2 arms x reps); its index is built
before the profile starts, so the figures are those of a report from the index. ``--manifest``: a manifest of every
run folder is written first (``record.manifest.write_manifest``), as a session leaves it: the report then reads each
record from the bytes its manifest check hashed, not from the index. Run it with ``OMP_NUM_THREADS=1``
for a single-threaded profile (the statistics otherwise spread over threads, which cProfile does not follow).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from aggregate import make_folder

from pytest_agentrace.cli import main as cli_main
from pytest_agentrace.record.index import refresh
from pytest_agentrace.record.manifest import MANIFEST_DIR, digest_run, write_manifest
from pytest_agentrace.record.runfile import scan_runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=20_000)
    ap.add_argument("--cases", type=int, default=1000)
    ap.add_argument("--keep", default=None, help="build (or reuse) the results folder here instead of a temp dir")
    ap.add_argument("--top", type=int, default=40, help="rows of each listing")
    ap.add_argument("--manifest", action="store_true", help="write a manifest of every run folder first")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.keep or tmp) / f"agg-{args.runs}-{args.cases}"
        if not (out / "runs").is_dir():
            make_folder(out, args.runs, args.cases)
        if args.manifest and not (out / MANIFEST_DIR / "bench.json").is_file():
            write_manifest(out, "bench", {where: digest_run(out, out / where) for where in scan_runs(out).folders})
        refresh(out)
        profile, printed = cProfile.Profile(), io.StringIO()
        wall, cpu = time.perf_counter(), time.process_time()
        with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(io.StringIO()):
            profile.enable()
            rc = cli_main(["report", str(out)])
            profile.disable()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        print(f"agentrace report over {args.runs:,} runs ({args.cases:,} cases): exit {rc}, {wall:.1f} s wall, {cpu:.1f} s CPU "
              f"(under the profiler), load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        stats = pstats.Stats(profile, stream=sys.stdout)
        stats.sort_stats("cumulative").print_stats(args.top)
        stats.sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
