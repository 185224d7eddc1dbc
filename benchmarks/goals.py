"""Every speed goal beside its floor, in one run. Prints figures; asserts nothing.

Usage: python benchmarks/goals.py [--files 1000] [--runs 5] [--agg-runs 100000] [--agg-cases 1000] [--sleep 2]
       [--sandbox auto|off] [--only start|run|report|xdist]

- start: a one-run session (``noop`` agent, ``test_command: 'true'``) against pytest's bare start
  (``pytest --collect-only -q`` in an empty folder, this plugin disabled); goal <= 1.5x; and beside it the same
  bare command with the plugin installed but no ``--agentrace`` (what every other pytest run pays for it);
- per run: the harness overhead of a ``noop`` run (``total_seconds`` minus agent and checks) against a bare
  ``git clone --shared`` of the same ``--files``-file repository; goal <= 1.5x; also the marginal wall and CPU
  seconds per run (a session of ``--runs`` + 2 runs minus one of 2 runs, divided by ``--runs``: both have
  statistics; its check, ``true`` in the box, included), the CPU against the clone's CPU;
- aggregation: ``agentrace report`` over ``--agg-runs`` run records (``benchmarks/aggregate.py``), from the index
  (wall and CPU seconds; again with ``OMP_NUM_THREADS=1``: the statistics on one thread), and its peak RSS; the
  floor is reading every ``run.json`` without parsing; goal <= 10 s and <= 300 MiB at 100,000 runs;
- xdist: a session of 8 runs whose agent sleeps ``--sleep`` seconds, serial and with ``-n 2``; goal >= 1.85x; its floor
  pytest-xdist's own ratio on 8 plain tests that sleep as long (this plugin off): the start of its workers is in every
  ``-n 2`` session, so that ratio, not 2.00x, is the most a plugin can reach.

Each figure is a median of ``--runs`` repetitions where it is cheap; the load average is printed with it, since the
machine may be shared. CPU seconds (user + system of the command and every process it waited for) are printed
beside the wall figures of the start and per-run goals: on a busy machine they move far less than wall time. The child processes may write bytecode (``PYTHONDONTWRITEBYTECODE`` is dropped) and each
timed command runs once untimed first: an installed package has its ``.pyc`` files, and a start that compiles
every module measures the compiler, not the plugin.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))

from aggregate import make_folder, read_floor, timed_report
from overhead import make_repo, timed

PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
OFF = ["-p", "no:agentrace", "-p", "no:agentrace_model_double"]


def timed_any(argv: list[str], cwd: Path) -> float:
    """Wall seconds of ``argv`` whatever its exit status (pytest exits 5 when it collects nothing)."""
    t = time.perf_counter()
    subprocess.run(argv, cwd=cwd, check=False, capture_output=True)
    return time.perf_counter() - t


def children_cpu() -> float:
    """CPU seconds (user + system) of every finished child process and the descendants they waited for: a
    command's CPU is the difference around it. Steadier than wall time on a shared machine, whose load stretches
    every wall figure (the harness's git and bwrap processes are all waited for, so they count)."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def cpu_of(step) -> tuple[float, float]:
    """``(wall, CPU)`` seconds of ``step()`` (which runs child processes)."""
    c, t = children_cpu(), time.perf_counter()
    step()
    return time.perf_counter() - t, children_cpu() - c


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"


def start(root: Path, runs: int) -> None:
    empty = root / "empty"
    empty.mkdir()
    (root / "one").mkdir()
    make_repo(root / "one", 10)
    (root / "one" / "task.yaml").write_text("name: one\ndescription: nothing\nrepo: repo\ntest_command: 'true'\n"
                                            "agents: [{name: noop, expect: pass}]\ntimeout: 60\n")
    one = [*PYTEST, "--agentrace", "task.yaml", "--agentrace-no-save"]
    timed_any([*PYTEST, "--collect-only", *OFF], empty)  # warm-up: bytecode written
    timed(one, root / "one")
    bares, sessions, plains = [], [], []
    for _ in range(runs):  # taken in turn, so a change of the machine's load falls on each alike
        bares.append(cpu_of(lambda: timed_any([*PYTEST, "--collect-only", *OFF], empty)))
        sessions.append(cpu_of(lambda: timed(one, root / "one")))
        plains.append(cpu_of(lambda: timed_any([*PYTEST, "--collect-only"], empty)))
    bare, session = (statistics.median(w for w, _ in bares), statistics.median(c for _, c in bares)), \
        (statistics.median(w for w, _ in sessions), statistics.median(c for _, c in sessions))
    print(f"start:  1-run session {session[0]:.2f} s (CPU {session[1]:.2f} s) | floor: bare pytest start "
          f"{bare[0]:.2f} s (CPU {bare[1]:.2f} s) | {session[0] / bare[0]:.2f}x, CPU {session[1] / bare[1]:.2f}x "
          f"(goal <= 1.5x) | {load()}")
    plain = statistics.median(w for w, _ in plains), statistics.median(c for _, c in plains)
    print(f"start:  the same bare start with the plugin on, no --agentrace: {plain[0]:.2f} s (CPU {plain[1]:.2f} s) | "
          f"{plain[0] / bare[0]:.2f}x, CPU {plain[1] / bare[1]:.2f}x the plugin off | {load()}")


def per_run(root: Path, files: int, runs: int, sandbox: str = "auto") -> None:
    repo = make_repo(root, files)
    clones = [cpu_of(lambda i=i: timed(["git", "clone", "-q", "--shared", str(repo), str(root / f"c{i}")], root))
              for i in range(runs)]
    (root / "task.yaml").write_text("name: bench\ndescription: nothing\nrepo: repo\ntest_command: 'true'\n"
                                    "agents: [{name: noop, expect: pass}]\ntimeout: 60\n")
    out = root / "out"
    session = [*PYTEST, "--agentrace", "task.yaml", "--agentrace-no-save", f"--basetemp={root / 'bt'}",
               f"--agentrace-sandbox={sandbox}"]
    # the base is a session of 2 runs, not 1: a cell of one run has no statistics (no numpy, scipy or bootstrap),
    # and a 1-run base charged their fixed cost to the runs
    pairs = [cpu_of(lambda n=n: timed([*session, "--agentrace-reps=2", f"--agentrace-out={root / f'o{n}'}"], root))
             for n in range(2)]
    pair = (statistics.median(w for w, _ in pairs), statistics.median(c for _, c in pairs))
    wall, used = cpu_of(lambda: subprocess.run([*session, f"--agentrace-reps={runs + 2}", f"--agentrace-out={out}"],
                                               cwd=root, check=True, capture_output=True))
    marginal = (wall - pair[0]) / runs  # wall of runs + 2 runs minus that of 2 runs, per run
    marginal_cpu = (used - pair[1]) / runs  # the same in CPU seconds (the session and every process it waited for)
    # the floor again after the sessions, so a change of the machine's load falls on both alike
    clones += [cpu_of(lambda i=i: timed(["git", "clone", "-q", "--shared", str(repo), str(root / f"d{i}")], root))
               for i in range(runs)]
    records = [json.loads(p.read_text()) for p in out.glob("runs/**/run.json")]
    over = [r["total_seconds"] - sum(c["seconds"] for c in r["checks"].values()) - r["seconds"] for r in records]
    clone, clone_cpu = statistics.median(w for w, _ in clones), statistics.median(c for _, c in clones)
    print(f"run:    (sandbox {sandbox}) harness overhead per run {statistics.median(over):.3f} s (run.json: total minus agent and checks), "
          f"marginal wall per run {marginal:.3f} s, marginal CPU per run {marginal_cpu:.3f} s | floor: git clone --shared "
          f"of {files} files {clone:.3f} s (CPU {clone_cpu:.3f} s) | {statistics.median(over) / clone:.2f}x, marginal "
          f"{marginal / clone:.2f}x, marginal CPU {marginal_cpu / clone_cpu:.2f}x (goal <= 1.5x) | {load()}")


def aggregation(root: Path, runs: int, cases: int) -> None:
    out = root / "agg"
    t = time.perf_counter()
    make_folder(out, runs, cases)
    made = time.perf_counter() - t
    floor = read_floor(out)
    first = timed_report(out)
    second = timed_report(out)
    single = timed_report(out, {"OMP_NUM_THREADS": "1"})
    print(f"report: {runs:,} runs ({cases:,} cases; folder made in {made:.0f} s): index rebuilt {first[0]:.1f} s, "
          f"from the index {second[0]:.1f} s ({second[3]:.1f} s CPU; one thread: {single[0]:.1f} s, {single[3]:.1f} s CPU), "
          f"peak RSS {second[1]:.0f} MiB | "
          f"floor: read every run.json {floor:.1f} s | "
          f"goal <= 10 s, <= 300 MiB | same output: {first[2] == second[2]} | {load()}")


def xdist(root: Path, sleep: float) -> None:
    make_repo(root, 10)
    (root / "task.yaml").write_text(f"name: x\ndescription: wait\nrepo: repo\ntest_command: 'true'\ntimeout: 60\n"
                                    f"agents: [{{name: sleeper, command: 'sleep {sleep:g}'}}]\n")
    base = [*PYTEST, "--agentrace", "task.yaml", "--agentrace-reps=8", "--agentrace-no-save"]
    serial = timed(base, root)
    two = timed([*base, "-p", "xdist", "-n", "2"], root)
    # pytest-xdist's own ratio on the same work: 8 plain tests that sleep as long, this plugin off. Its workers'
    # start (about 0.7 s more than a serial start here) is paid by any -n 2 session, so this is the ratio reachable
    (root / "test_sleeps.py").write_text(f"import time, pytest\n\n@pytest.mark.parametrize('i', range(8))\n"
                                         f"def test_sleep(i):\n    time.sleep({sleep!r})\n")
    bare = [*PYTEST, *OFF, "test_sleeps.py"]
    bare_serial = timed(bare, root)
    bare_two = timed([*bare, "-p", "xdist", "-n", "2"], root)
    print(f"xdist:  8 runs of a {sleep:g} s agent: serial {serial:.1f} s, -n 2 {two:.1f} s | {serial / two:.2f}x "
          f"(goal >= 1.85x) | floor: pytest-xdist's own, 8 plain tests sleeping {sleep:g} s: serial {bare_serial:.1f} s, "
          f"-n 2 {bare_two:.1f} s, {bare_serial / bare_two:.2f}x (ideal 2.00x) | {load()}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--agg-runs", type=int, default=100_000)
    ap.add_argument("--agg-cases", type=int, default=1000)
    ap.add_argument("--sleep", type=float, default=2.0)
    ap.add_argument("--sandbox", choices=["auto", "off"], default="auto", help="the per-run figure's sandbox")
    ap.add_argument("--only", choices=["start", "run", "report", "xdist"], action="append")
    args = ap.parse_args()
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    only = set(args.only or ["start", "run", "report", "xdist"])
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name, step in (("start", lambda d: start(d, args.runs)),
                           ("run", lambda d: per_run(d, args.files, args.runs, args.sandbox)),
                           ("report", lambda d: aggregation(d, args.agg_runs, args.agg_cases)),
                           ("xdist", lambda d: xdist(d, args.sleep))):
            if name in only:
                (root / name).mkdir()
                step(root / name)


if __name__ == "__main__":
    main()
