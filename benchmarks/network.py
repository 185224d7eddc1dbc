"""Per-run cost of the ``provider`` network mode (a gate on the session proxy and the bridge in the run's namespace)
against ``host`` and ``none``. Prints figures; asserts nothing.

Usage: python benchmarks/network.py [--reps 10] [--rounds 3]

One session per mode and round: a task whose agent is a custom command that exits at once (``true``, kind
``plain``) with ``--agentrace-reps N`` in the default sandbox; the figure is the median over rounds of the session's
wall time divided by N, and the difference to ``host`` is the mode's overhead per run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TASK = """name: bench
description: nothing
repo: repo
test_command: "true"
agents: [{name: quick, command: "true"}]
"""


def session(root: Path, mode: str, reps: int) -> float:
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--agentrace", "--agentrace-no-save",
            "--agentrace-out", str(root / f"out-{mode}"), "--agentrace-reps", str(reps), "--agentrace-network", mode,
            str(root / "task.yaml")]
    start = time.perf_counter()
    subprocess.run(argv, cwd=root, check=False, capture_output=True)
    return (time.perf_counter() - start) / reps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "repo").mkdir()
        (root / "repo" / "a.txt").write_text("a\n")
        env = {**os.environ, "GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@l", "GIT_COMMITTER_NAME": "b",
               "GIT_COMMITTER_EMAIL": "b@l"}
        for git in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "bench"]):
            subprocess.run(["git", *git], cwd=root / "repo", check=True, env=env)
        (root / "task.yaml").write_text(TASK)
        figures: dict[str, list[float]] = {"host": [], "none": [], "provider": []}
        for _ in range(args.rounds):
            for mode in figures:
                figures[mode].append(session(root, mode, args.reps))
    host = statistics.median(figures["host"])
    print(f"load average {os.getloadavg()[0]:.2f}; {args.reps} runs per session, median of {args.rounds} rounds")
    for mode, values in figures.items():
        med = statistics.median(values)
        print(f"{mode:>9}: {med * 1000:7.1f} ms per run ({(med - host) * 1000:+6.1f} ms vs host)")


if __name__ == "__main__":
    main()
