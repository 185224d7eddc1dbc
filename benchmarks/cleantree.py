"""The harness's git work per run, in-process and step by step, beside a bare ``git clone --shared`` of the same
repository taken in turn with it: the workspace's clone (``run.workspace.clone``), ``cleantree.prepare`` (before the
agent), the agent's edit (five files and a ``conftest.py`` hook) and the "after" snapshot, then ``cleantree.build``
and one ``fresh`` clean tree per check, and the deletion of the run's folders. Wall and CPU (this process and its
children) milliseconds, medians. Prints figures; asserts nothing.

``--form checkout``: a checkout of the clean tree per check (the form without a box that mounts overlayfs);
``--form overlay`` (the default when the sandbox is on and bwrap mounts overlayfs): its layers
(``run.cleanlayers``: the template's base layer made by the warm-up run and shared, a changes layer per run, an empty
upper folder per check). The overlay's mount by the check's box is part of the box's start, not measured here.

Usage: python benchmarks/cleantree.py [--files 1000] [--runs 9] [--checks 1] [--form checkout|overlay]
"""

from __future__ import annotations

import argparse
import itertools
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from overhead import make_repo  # noqa: E402

from pytest_agentrace.run import cleantree, machinery, snapshot, workspace  # noqa: E402

STEPS = ("floor: git clone --shared", "workspace clone", "prepare + edit + after snapshot", "build + fresh trees",
         "delete the run's folders")


def cpu() -> float:
    """CPU seconds (user + system) of this process and its finished children."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def one_run(root: Path, repo: Path, cache: Path, n: int, checks: int, form: str) -> list[tuple[float, float]]:
    marks = [(time.perf_counter(), cpu())]
    subprocess.run(["git", "clone", "-q", "--shared", str(repo), str(root / f"floor{n}")], check=True)
    marks.append((time.perf_counter(), cpu()))
    ws = root / f"run{n}" / "ws"
    ws.parent.mkdir()
    made = workspace.clone(str(repo), ws, cache)
    marks.append((time.perf_counter(), cpu()))
    desk = workspace.desk_dir(ws)  # the harness's git folder of the workspace (run.pipeline uses it too)
    base = cleantree.prepare(ws.parent / "check.git", ws, made.tree, workspace.borrowed_objects(ws))
    for i in range(5):  # the agent: five files changed, one conftest hook
        (ws / f"pkg{i}" / f"mod{i}.py").write_text("changed\n")
    (ws / "conftest.py").write_text("hook\n")
    after = snapshot.snapshot_tree(ws, desk)
    marks.append((time.perf_counter(), cpu()))
    layers = ws.parent / "clean.layers" if form == "overlay" else None
    tree = cleantree.build(base, desk / "objects", made.tree, after, machinery.DEFAULT_MACHINERY, ws.parent / "clean",
                           layers=layers, shared=root)
    for _ in range(checks):
        tree.fresh()
    marks.append((time.perf_counter(), cpu()))
    shutil.rmtree(ws.parent)
    marks.append((time.perf_counter(), cpu()))
    return [(b[0] - a[0], b[1] - a[1]) for a, b in itertools.pairwise(marks)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--checks", type=int, default=1)
    ap.add_argument("--form", choices=["checkout", "overlay"], default="overlay")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        repo = make_repo(root, args.files)
        cache = root / "cache"
        # builds the template (and the overlay form's shared base layer) once, as the first run of a session does
        one_run(root, repo, cache, -1, args.checks, args.form)
        rows = [one_run(root, repo, cache, n, args.checks, args.form) for n in range(args.runs)]
    print(f"{args.files} files, {args.checks} check(s), clean tree form {args.form}, median of {args.runs} runs "
          f"(load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; {workspace.__file__}):")
    floor = statistics.median(r[0][0] for r in rows)
    floor_cpu = statistics.median(r[0][1] for r in rows)
    for i, step in enumerate(STEPS):
        wall, used = statistics.median(r[i][0] for r in rows), statistics.median(r[i][1] for r in rows)
        print(f"  {step:34s} wall {wall * 1000:7.1f} ms  CPU {used * 1000:7.1f} ms  {wall / floor:5.2f}x floor "
              f"(CPU {used / floor_cpu:5.2f}x)")
    total = statistics.median(sum(w for w, _ in r[1:]) for r in rows)
    total_cpu = statistics.median(sum(c for _, c in r[1:]) for r in rows)
    print(f"  {'harness total':34s} wall {total * 1000:7.1f} ms  CPU {total_cpu * 1000:7.1f} ms  "
          f"{total / floor:5.2f}x floor (CPU {total_cpu / floor_cpu:5.2f}x)")


if __name__ == "__main__":
    main()
