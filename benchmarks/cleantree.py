"""Cost of the checks' clean tree per run (``run.cleantree``): ``prepare`` (before the agent), ``build`` (after it)
and one ``fresh`` checkout per check, against a bare ``git clone --shared`` of the same repository. Prints figures;
asserts nothing.

Usage: python benchmarks/cleantree.py [--files 1000] [--runs 5] [--checks 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pytest_agentrace.run import cleantree, workspace  # noqa: E402


def make_source(root: Path, files: int) -> Path:
    src = root / "src"
    for i in range(files):
        p = src / f"pkg{i % 20}" / f"mod{i}.py"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(f"def f{i}(x):\n    return x + {i}\n" * 20)
    (src / "conftest.py").write_text("import pytest\n")
    return src


def one_run(root: Path, src: Path, cache: Path, n: int, checks: int) -> tuple[float, float, float]:
    ws = root / f"ws{n}"
    t0 = time.perf_counter()
    made = workspace.clone(str(src), ws, cache)
    clone = time.perf_counter() - t0
    git_folder = workspace.git_dir(ws)
    t0 = time.perf_counter()
    base = cleantree.prepare(root / f"git{n}", ws, made.tree, workspace.borrowed_objects(ws))
    for i in range(5):  # the agent: five files changed, one conftest hook
        (ws / f"pkg{i}" / f"mod{i}.py").write_text("changed\n")
    (ws / "conftest.py").write_text("hook\n")
    after = workspace.snapshot_tree(ws, git_folder)
    t1 = time.perf_counter()
    tree = cleantree.build(base, git_folder / "objects", made.tree, after, cleantree.DEFAULT_MACHINERY, root / f"clean{n}")
    for _ in range(checks):
        tree.fresh()
    t2 = time.perf_counter()
    return clone, (t1 - t0) - 0.0, t2 - t1


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--checks", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        src = make_source(root, args.files)
        cache = root / "cache"
        one_run(root, src, cache, -1, args.checks)  # warm the template cache
        rows = [one_run(root, src, cache, n, args.checks) for n in range(args.runs)]
    clone, prep, build = (statistics.median(col) for col in zip(*rows, strict=True))
    print(f"{args.files} files, median of {args.runs} runs:")
    print(f"  workspace clone --shared          {clone * 1000:8.1f} ms")
    print(f"  prepare + agent edits + snapshot  {prep * 1000:8.1f} ms")
    print(f"  build + {args.checks} fresh checkouts         {build * 1000:8.1f} ms")


if __name__ == "__main__":
    main()
