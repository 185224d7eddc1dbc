"""Harness overhead per run, collection time for 1,000 items, peak memory. Prints figures; asserts nothing.

Usage: python benchmarks/overhead.py [--files 1000] [--runs 5]

- overhead per run: median wall time of a ``noop`` run (pytest item, fresh clone, checks) minus the time of its
  own check command, compared with a bare ``git clone --shared`` of the same generated repository;
- collection: ``pytest --agentrace --collect-only`` over a task with 1,000 items (agent x reps), and the same
  pytest process with nothing to collect (interpreter, pytest and its plugins starting);
- peak memory: max RSS of the collecting pytest process (``resource.getrusage`` of children).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def make_repo(root: Path, files: int) -> Path:
    repo = root / "repo"
    for i in range(files):
        p = repo / f"pkg{i % 20}" / f"mod{i}.py"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"VALUE_{i} = {i}\n" * 20)
    env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@l", "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@l"}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "bench"]):
        subprocess.run(["git", *args], cwd=repo, check=True, env=env)
    return repo


def timed(argv: list[str], cwd: Path) -> float:
    t = time.perf_counter()
    subprocess.run(argv, cwd=cwd, check=True, capture_output=True)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        repo = make_repo(root, args.files)
        clones = [timed(["git", "clone", "-q", "--shared", str(repo), str(root / f"c{i}")], root) for i in range(args.runs)]
        (root / "task.yaml").write_text("name: bench\ndescription: nothing\nrepo: repo\ntest_command: 'true'\nagents: [{name: noop, expect: pass}]\ntimeout: 60\n")
        out = root / "out"
        run = subprocess.run(
            [sys.executable, "-m", "pytest", "--agentrace", "task.yaml", "-q", "-p", "no:cacheprovider", f"--agentrace-reps={args.runs}",
             f"--agentrace-out={out}", "--junitxml=j.xml"],
            cwd=root, capture_output=True, text=True,
        )
        if run.returncode != 0:
            print(run.stdout[-3000:], run.stderr[-3000:])
            raise SystemExit("benchmark session failed")
        records = [json.loads(p.read_text()) for p in out.glob("runs/**/run.json")]
        overhead = [r["total_seconds"] - sum(c["seconds"] for c in r["checks"].values()) - r["seconds"] for r in records]
        (root / "many.yaml").write_text("name: many\ndescription: x\nrepo: repo\ntest_command: 'true'\nagents: [noop]\n")
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "pytest", "--agentrace", "many.yaml", "--collect-only", "-q", "-p", "no:cacheprovider",
                        "--agentrace-reps=1000"], cwd=root, check=True, capture_output=True)
        collect = time.perf_counter() - t
        t = time.perf_counter()  # the same pytest process with nothing to collect: what the plugin adds is the rest
        subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "repo/nothing"],
                       cwd=root, check=False, capture_output=True)
        start_only = time.perf_counter() - t
        peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"repository: {args.files} files; runs: {args.runs}")
    print(f"bare git clone --shared:        median {statistics.median(clones):.3f} s")
    print(f"harness overhead per noop run:  median {statistics.median(overhead):.3f} s "
          f"(clone + snapshots + change accounting + run.json; agent and checks excluded)")
    print(f"overhead / bare clone:          {statistics.median(overhead) / statistics.median(clones):.1f}x")
    print(f"collect 1,000 items:            {collect:.2f} s (whole pytest process)")
    print(f"pytest start, nothing to collect: {start_only:.2f} s (so the plugin's collection share is about {collect - start_only:.2f} s)")
    print(f"peak RSS of child processes:    {peak_mb:.0f} MiB")


if __name__ == "__main__":
    main()
