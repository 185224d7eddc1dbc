"""Trial harness overhead and resume speed. Prints figures; asserts nothing.

Usage: python benchmarks/trial_overhead.py [--files 1000] [--runs 8] [-n 2]

- overhead per run: median ``total_seconds - seconds`` (clone, overlay, setup under the session lock, snapshot,
  answer key, verify) of a trial whose agent is ``sh -c 'cat ANSWER.txt'``, next to a bare ``git clone --shared`` of the
  same generated repository;
- session wall time for ``--runs`` runs, then the same session again with ``--agentrace-resume`` (every run
  reused: the cost of reading the records back);
- with ``-n 2``, the same under pytest-xdist (setup still one at a time).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TRIAL = """\
name = "bench"
[defaults]
reps = {runs}
timeout = 60
[[repos]]
name = "app"
source = "repo"
[[arms]]
name = "docs"
overlay = "overlay"
setup = ["true"]
[[agents]]
name = "cat"
command = ["sh", "-c", "cat ANSWER.txt", "{{prompt}}"]
[[questions]]
id = "q"
prompt = "x"
expect = ["8123"]
verify = "test -f ANSWER.txt"
"""


def make_repo(root: Path, files: int) -> None:
    """The same generated repository as ``overhead.py`` (``root/repo``), plus an overlay folder."""
    from overhead import (
        make_repo as make_git_repo,  # benchmarks/ is on sys.path when run as a script
    )

    make_git_repo(root, files)
    (root / "overlay").mkdir()
    (root / "overlay" / "ANSWER.txt").write_text("8123\n")


def session(root: Path, *extra: str) -> float:
    t = time.perf_counter()
    res = subprocess.run(
        [sys.executable, "-m", "pytest", "--agentrace", "trial.toml", "-q", "-p", "no:cacheprovider", "--agentrace-out=out", *extra],
        cwd=root, capture_output=True, text=True, check=False,
    )
    if res.returncode != 0:
        print(res.stdout[-2000:], res.stderr[-2000:])
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("-n", type=int, default=0, help="pytest-xdist workers (0: serial)")
    args = ap.parse_args()
    xdist = ["-p", "xdist", "-n", str(args.n)] if args.n else []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_repo(root, args.files)
        clones = []
        for i in range(args.runs):
            t = time.perf_counter()
            subprocess.run(["git", "clone", "-q", "--shared", "repo", f"c{i}"], cwd=root, check=True)
            clones.append(time.perf_counter() - t)
        (root / "trial.toml").write_text(TRIAL.format(runs=args.runs))
        wall = session(root, *xdist)
        records = [json.loads(p.read_text()) for p in (root / "out" / "runs").glob("**/run.json")]
        overhead = [r["total_seconds"] - r["seconds"] for r in records]
        resumed = session(root, "--agentrace-resume", *xdist)
        print(f"repository: {args.files} files; runs: {len(records)}; workers: {args.n or 'serial'}")
        print(f"bare git clone --shared: median {statistics.median(clones):.3f} s")
        print(f"trial run overhead (total - agent seconds): median {statistics.median(overhead):.3f} s, max {max(overhead):.3f} s")
        print(f"session wall time: {wall:.2f} s; again with --agentrace-resume (all reused): {resumed:.2f} s")


if __name__ == "__main__":
    main()
