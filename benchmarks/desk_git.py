"""The harness's git work per run, in-process: fresh clone of a cached template, the agent's edit of one file, the
"after" snapshot and the diff (what ``run.pipeline`` does around the agent; no pytest, agent or checks, so the
figure is steadier than ``overhead.py``'s on a busy machine). Prints figures; asserts nothing.

Usage: python benchmarks/desk_git.py [--files 1000] [--runs 15]
"""

from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from overhead import make_repo  # noqa: E402

from pytest_agentrace.run import snapshot, workspace  # noqa: E402


def cpu() -> float:
    """CPU seconds (user + system) of this process and its finished children: steadier than wall time on a
    shared machine."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def one_run(repo: Path, root: Path, cache: Path, i: int) -> tuple[float, float]:
    t, c = time.perf_counter(), cpu()
    ws = root / f"run{i}" / "ws"
    ws.parent.mkdir()
    made = workspace.clone(str(repo), ws, cache)
    (ws / "pkg0" / "mod0.py").write_text("VALUE_0 = 1\n")
    after = snapshot.snapshot_tree(ws)
    workspace.change(ws, made.tree, after)
    return time.perf_counter() - t, cpu() - c


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        repo = make_repo(root, args.files)
        cache = root / "cache"
        one_run(repo, root, cache, -1)  # builds the template once, as the first run of a session does
        runs = [one_run(repo, root, cache, i) for i in range(args.runs)]
    times, cpus = [w for w, _ in runs], [c for _, c in runs]
    print(f"repository: {args.files} files; runs: {args.runs}; module: {workspace.__file__}")
    print(f"clone + after snapshot + diff per run: median {statistics.median(times):.3f} s "
          f"(min {min(times):.3f}, max {max(times):.3f}); CPU median {statistics.median(cpus):.3f} s")


if __name__ == "__main__":
    main()
