"""History store and report speed. Prints figures; asserts nothing.

Usage: python benchmarks/reports.py [--runs 1000] [--writers 8] [--per-writer 200]

- store: one session of ``--runs`` runs saved in one transaction; ``--writers`` processes each adding
  ``--per-writer`` runs one transaction at a time (runs per second, lock retries, rows lost);
- leaderboard over the store; JSON export, Markdown, HTML and JUnit XML of ``--runs`` runs (seconds, file sizes).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from helpers.report import outcome

from pytest_agentrace.record.store import SessionInfo, Store
from pytest_agentrace.report import html, json_export, junit, markdown
from pytest_agentrace.report.leaderboard import leaderboard
from pytest_agentrace.report.result import Context, build_result
from pytest_agentrace.stats.score import score_outcomes

WRITER = textwrap.dedent("""\
    import sys
    sys.path.insert(0, {tests!r})
    from helpers.report import outcome
    from pytest_agentrace.record.store import SessionInfo, Store
    db, me, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with Store(db) as s:
        s.save_session(SessionInfo(me), [])
        for j in range(n):
            s.add_runs(me, [outcome(case=f"c{{j}}", agent=me, score=float(j % 100), session_id=me)])
        print(s.lock_retries)
""")


def sample(runs: int) -> list:
    agents, cases = ["alpha", "beta", "gamma", "delta"], [f"task-{i}" for i in range(max(1, runs // 40))]
    out = []
    for i in range(runs):
        agent, case, rep = agents[i % 4], cases[(i // 4) % len(cases)], 1 + i // (4 * len(cases))
        out.append(outcome(case=case, agent=agent, rep=rep, score=float((i * 37) % 100), tokens=1000 + (i * 53) % 900,
                           status="passed" if i % 3 else "failed", session_id="bench"))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--writers", type=int, default=8)
    ap.add_argument("--per-writer", type=int, default=200)
    args = ap.parse_args()
    runs = sample(args.runs)
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "history.db"
        t = time.perf_counter()
        with Store(db) as s:
            s.save_session(SessionInfo("bench"), runs)
        print(f"store: one session of {len(runs)} runs saved in {time.perf_counter() - t:.2f} s")

        script = Path(tmp) / "writer.py"
        script.write_text(WRITER.format(tests=str(Path(__file__).resolve().parents[1] / "tests")))
        t = time.perf_counter()
        procs = [subprocess.Popen([sys.executable, str(script), str(db), f"w{i}", str(args.per_writer)], stdout=subprocess.PIPE, text=True)
                 for i in range(args.writers)]
        retries = sum(int(p.communicate()[0].strip() or 0) for p in procs)
        seconds = time.perf_counter() - t
        with Store(db) as s:
            stored = s.count_runs() - len(runs)
            t = time.perf_counter()
            board = leaderboard(score_outcomes(s.outcomes(kind="task")))  # stored runs keep their score
            lb = time.perf_counter() - t
        expected = args.writers * args.per_writer
        print(f"store: {args.writers} writers x {args.per_writer} runs (one transaction each): {seconds:.2f} s, "
              f"{expected / seconds:.0f} runs/s incl. process start, {retries} lock retries, {expected - stored} rows lost")
        print(f"leaderboard over {stored + len(runs)} stored runs: {lb:.2f} s ({len(board)} agents)")

        t = time.perf_counter()
        result = build_result(score_outcomes(runs, per_session=False), Context(out=Path(tmp), seed=0))
        print(f"session result of {len(runs)} runs: {time.perf_counter() - t:.2f} s (cells, comparisons, Elo)")
        for name, render in (("json", lambda: json_export.render(result)), ("markdown", lambda: markdown.render_result(result)),
                             ("html", lambda: html.render_report(result)), ("junit", lambda: junit.render(result))):
            t = time.perf_counter()
            text = render()
            print(f"{name}: {time.perf_counter() - t:.2f} s, {len(text.encode()) / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
