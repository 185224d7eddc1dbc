"""The session summary scales: one task x agent matrix for several tasks (agents as columns, per-agent totals, one
winner line), per-task tables up to 3 tasks or when verbose, and every table and line within a given width."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers.report import outcome

from pytest_agentrace.record.model import CheckResult
from pytest_agentrace.report.fit import fit, fit_lines, line_width, shorten
from pytest_agentrace.report.matrix import matrix_lines
from pytest_agentrace.report.stats_text import report_lines
from pytest_agentrace.report.terminal import summary_lines
from pytest_agentrace.report.trials import trial_tables
from pytest_agentrace.stats.report import build_report
from pytest_agentrace.stats.score import score_outcomes

TASKS = ["alpha", "bravo", "charlie", "delta", "echo"]


def scored(*outcomes):
    """The outcomes as the session's controller scores them (one race per task and rep)."""
    return score_outcomes(outcomes, per_session=False)


def five_by_two():
    """claude passes every task in 20 s; codex passes four in 40 s and fails delta. Costs 0.01 per run."""
    runs = []
    for t in TASKS:
        runs.append(outcome(case=t, agent="claude", seconds=20.0, source=f"/s/{t}.yaml", lines_changed=4))
        status = "failed" if t == "delta" else "passed"
        runs.append(
            outcome(
                case=t,
                agent="codex",
                seconds=40.0,
                status=status,
                source=f"/s/{t}.yaml",
                lines_changed=4,
                reason="tests failed (exit 1)" if status == "failed" else None,
            )
        )
    return scored(*runs)


def table_rows(lines: list[str]) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in lines if line.startswith("| ")]


def test_five_tasks_two_agents_print_one_matrix_with_agents_as_columns() -> None:
    lines = summary_lines(five_by_two())
    headers = [line for line in lines if line.startswith("| Task")]
    assert len(headers) == 1 and table_rows(headers) == [["Task", "claude", "codex"]]  # best total first
    assert not any(line.startswith("task ") for line in lines)  # no per-task tables without verbose
    rows = {r[0]: r[1:] for r in table_rows(lines)}
    # alone passing claude is fastest: 100; codex passing but slower loses the time part (15): 85; failing: 35
    assert rows["alpha"] == ["100.0 (20s)", "85.0 (40s)"]
    assert rows["delta"] == ["100.0 (20s)", "35.0 (40s) failed"]
    assert rows["Total score"] == ["500.0", "375.0"]
    assert rows["Win rate"] == ["100% (5/5)", "0% (0/5)"]
    assert rows["Mean time (s)"] == ["20.0", "40.0"]
    assert rows["Total cost (USD)"] == ["0.0500", "0.0500"]
    assert [line for line in lines if line.startswith("winner")] == [
        "winner: claude (total score 500.0 of 500, 5/5 tasks won; runner-up codex 375.0)"
    ]
    assert "  delta[codex-r1]: failed: tests failed (exit 1)" in lines  # the reasons, as the per-task tables give them


def test_per_task_tables_up_to_three_tasks_or_when_verbose() -> None:
    five = five_by_two()
    assert sum(line.startswith("task ") for line in summary_lines(five, verbose=1)) == 5
    three = [o for o in five if o.case in TASKS[:3]]
    lines = summary_lines(three)
    assert (
        sum(line.startswith("task ") for line in lines) == 3 and sum(line.startswith("| Task") for line in lines) == 1
    )
    one = [o for o in five if o.case == "alpha"]
    lines = summary_lines(one)
    assert sum(line.startswith("task ") for line in lines) == 1 and not any(line.startswith("| Task") for line in lines)


def test_cells_with_reps_errors_and_missing_agents() -> None:
    runs = scored(
        outcome(case="a", agent="x", rep=1, seconds=10, source="/s/a.yaml"),
        outcome(case="a", agent="x", rep=2, seconds=30, status="failed", source="/s/a.yaml"),
        outcome(case="a", agent="y", rep=1, status="error", source="/s/a.yaml", reason="clone failed"),
        outcome(case="a", agent="y", rep=2, status="error", source="/s/a.yaml", reason="clone failed"),
        outcome(case="b", agent="x", rep=1, seconds=5, source="/s/b.yaml", cost=None),
        outcome(case="b", agent="x", rep=2, seconds=5, source="/s/b.yaml", cost=None),
    )
    rows = {r[0]: r[1:] for r in table_rows(matrix_lines(runs))}
    # x on a: one pass (alone: 100) and one fail (35): mean 67.5 over 20 s, 1 of 2 passed
    assert rows["a"] == ["67.5 (20s) 1/2", "error"]
    assert rows["b"] == ["100.0 (5.0s) 2/2", "-"]  # y never ran b
    assert rows["Total score"] == ["167.5", "0.0 (0/2 tasks)"]
    assert rows["Win rate"] == ["-", "-"]  # no task had two scored agents
    assert rows["Total cost (USD)"] == ["0.0200 (2 of 4 runs)", "0.0200"]


def test_a_cell_a_race_stopped_reads_stopped_not_error() -> None:
    """A race's loser stopped in the grace window ran the task (no infrastructure error): ``stopped``."""
    runs = scored(
        outcome(case="a", agent="x", rep=1, seconds=10, source="/s/a.yaml"),
        outcome(case="a", agent="y", rep=1, status="stopped", source="/s/a.yaml", reason="stopped: x passed first"),
        outcome(case="b", agent="x", rep=1, seconds=5, source="/s/b.yaml"),
        outcome(case="b", agent="y", rep=1, status="error", source="/s/b.yaml", reason="clone failed"),
    )
    rows = {r[0]: r[1:] for r in table_rows(matrix_lines(runs))}
    assert rows["a"] == ["100.0 (10s)", "stopped"] and rows["b"] == ["100.0 (5.0s)", "error"]


def test_a_tie_names_no_winner() -> None:
    runs = scored(
        *(outcome(case=t, agent=a, seconds=10, source=f"/s/{t}.yaml") for t in ("a", "b") for a in ("p", "q"))
    )
    assert "no overall winner: p, q tie on total score (200.0 of 200; within 1 point)" in matrix_lines(runs)


def test_a_total_is_out_of_the_tasks_the_agent_has_a_score_on() -> None:
    """p ran three tasks, q two of them: each total is out of its own tasks, and says so when they are fewer."""
    runs = scored(
        *(outcome(case=t, agent="p", seconds=10, source=f"/s/{t}.yaml") for t in ("a", "b", "c")),
        *(outcome(case=t, agent="q", seconds=10, status="failed", source=f"/s/{t}.yaml") for t in ("a", "b")),
    )
    (line,) = [x for x in matrix_lines(runs) if x.startswith("winner:")]
    # totals over 3 and 2 tasks are not compared: the winner line ranks by the mean score a task
    assert line.startswith("winner: p (mean score 100.0 a task over 3 of 3 tasks, 2/2 tasks won; runner-up q "), line
    assert line.endswith(" over 2)"), line


def test_a_baseline_is_never_winner_or_runner_up_and_fewer_tasks_do_not_lose() -> None:
    """noop ran three tasks (a low score each, 105 in all), fixer one (100, won): the total favoured noop as
    runner-up. A baseline is never winner or runner-up, and uneven coverage is ranked by the mean a task."""
    runs = scored(
        *(outcome(case=t, agent="oracle", seconds=1, source=f"/s/{t}.yaml") for t in ("a", "b")),
        *(outcome(case=t, agent="noop", seconds=1, status="failed", source=f"/s/{t}.yaml") for t in ("a", "b", "c")),
        outcome(case="c", agent="fixer", seconds=1, source="/s/c.yaml"),
    )
    (line,) = [x for x in matrix_lines(runs) if x.startswith(("winner:", "no overall winner"))]
    assert "noop" not in line and line.startswith("no overall winner: fixer, oracle tie on mean score a task (100.0"), line
    runs = scored(outcome(case="a", agent="p", seconds=1, source="/s/a.yaml"),
                  *(outcome(case=t, agent="noop", seconds=1, status="failed", source=f"/s/{t}.yaml") for t in ("a", "b")))
    (line,) = [x for x in matrix_lines(runs) if x.startswith("winner:")]  # one agent beside the baseline
    assert line == "winner: p (mean score 100.0 a task over 1 of 2 tasks, 1/1 tasks won; baseline noop 35.0 over 2)"


def test_race_table_names_its_score_interval_wilson() -> None:
    runs = scored(*(outcome(case="t", agent=a, rep=r, seconds=10, source="/s/t.yaml") for a in ("p", "q") for r in (1, 2)))
    report = build_report(runs, None, 0, 200)
    for fmt in ("text", "markdown"):
        lines = report_lines(report, fmt=fmt)
        start = next(i for i, line in enumerate(lines) if line.endswith("races on task files (coderace statistics)"))
        rows = table_rows(lines[start + 1:start + 5])
        assert rows[0][:5] == ["Agent", "Tasks", "Runs", "Score mean ± sd", "95% CI (Wilson)"]
        # two runs at 100: Wilson's interval of 2/2 is 2 / (2 + 1.96^2) = 34.2% to 100%, not a t interval's 100-100
        assert [r[:5] for r in rows[1:]] == [["p", "1", "2", "100.0 ± 0.0", "34.2-100.0"],
                                           ["q", "1", "2", "100.0 ± 0.0", "34.2-100.0"]]


@pytest.mark.parametrize("width", [60, 80, 100, 120])
def test_every_summary_line_fits_the_width(width: int) -> None:
    long_reason = "tests failed (exit 1): " + "assertion error in a very long message " * 6
    runs = []
    for i, t in enumerate(TASKS):
        for a in ("claude:claude-sonnet-4-5-20250929", "codex:gpt-5.3-codex", "gemini", "opencode"):
            runs.append(
                outcome(
                    case=f"{t}-with-a-long-task-name",
                    agent=a,
                    seconds=10 + i,
                    source=f"/suites/deep/folder/{t}/task.yaml",
                    status="failed" if a == "gemini" else "passed",
                    reason=long_reason if a == "gemini" else None,
                    checks={
                        "tests": CheckResult("tests", "pytest", 0, 1.0),
                        "verify": CheckResult("verify", "pytest", 0, 1.0),
                    },
                )
            )
    runs = scored(*runs)
    for verbose in (0, 1):
        lines = summary_lines(runs, verbose=verbose, width=width)
        assert line_width(lines) <= width, "\n".join(x for x in lines if len(x) > width)
    wide = summary_lines(runs, verbose=1)
    assert line_width(wide) > 120  # without a width the same tables are wider than any of these terminals


def test_matrix_splits_its_agent_columns_when_they_cannot_fit() -> None:
    agents = [f"agent-number-{i}" for i in range(6)]
    runs = scored(*(outcome(case=t, agent=a, seconds=12, source=f"/s/{t}.yaml") for t in TASKS for a in agents))
    lines = matrix_lines(runs, width=60)
    assert line_width(lines) <= 60
    parts = [line for line in lines if line.startswith("agents ")]
    assert len(parts) >= 2 and parts[0].startswith(f"agents 1 of {len(parts)}: ")
    shown = [c for line in lines if line.startswith("| Task") for c in table_rows([line])[0][1:]]
    assert sorted(shown) == sorted(agents)  # every agent in exactly one of the tables


def test_fit_wraps_then_drops_optional_columns_and_says_so() -> None:
    rows = [["claude", "no clear difference (interval excludes 1.00)", "-", "3.2"], ["codex", "cheaper", "-", "1.0"]]
    headers = ["Agent", "Verdict", "Turns", "Seconds (mean)"]
    assert fit(rows, headers).lines == fit(rows, headers, width=200).lines  # fits: unchanged
    narrow = fit(rows, headers, width=40, optional=["Turns", "Seconds (mean)"])
    assert narrow.fits and line_width(narrow.lines) <= 40
    assert narrow.dropped == ("Turns",)  # the empty column goes first; the others are wrapped
    assert "no clear " in narrow.lines[3] and "difference" in narrow.lines[4]  # one cell over lines of one row
    assert fit_lines(["  " + "word " * 30], 30)[1].startswith("    word")  # continuation indented
    assert shorten("/a/very/long/path/to/task.yaml", 15) == "/a/very…sk.yaml"


def test_statistics_tables_fit_the_width(tmp_path: Path) -> None:
    """A two-arm trial over two cases: the arm table alone used to be far wider than a terminal."""
    from test_stats_cells import arms

    report = build_report(arms(8, 0.6, cases=("q1", "q2")), None, 0, 2000)
    assert line_width(report_lines(report)) > 200
    for width in (80, 120):
        lines = report_lines(report, width=width)
        assert line_width(lines) <= width
        assert any(line.startswith("| Arm") for line in lines) and any("cheaper" in line for line in lines)
    assert report_lines(report, fmt="markdown", width=80) == report_lines(report, fmt="markdown")  # never narrowed


def test_trial_tables_fit_the_width() -> None:
    runs = [
        outcome(
            kind="trial",
            case=f"question-{i}",
            arm=arm,
            agent="claude:claude-sonnet-4-5",
            source="/t/trial.toml",
            extra={"trial": "docs-ab"},
        )
        for i in range(3)
        for arm in ("baseline", "with-docs")
    ]
    assert line_width(trial_tables(runs)) > 80
    assert line_width(trial_tables(runs, width=80)) <= 80


def test_terminal_width_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from pytest_agentrace.report.fit import terminal_width

    tty = SimpleNamespace(isatty=True, _tw=SimpleNamespace(fullwidth=70))
    log = SimpleNamespace(isatty=False, _tw=SimpleNamespace(fullwidth=80))
    assert terminal_width(tty) == 70 and terminal_width(log) is None and terminal_width(None) is None
    monkeypatch.setenv("COLUMNS", "90")
    assert terminal_width(log) == 90 and terminal_width(tty) == 70


# --- a session of 5 tasks x 2 agents ------------------------------------------------------------------------------

TASK = """\
name: {name}
description: write done.txt
test_command: python -c "import pathlib, sys; sys.exit(0 if pathlib.Path('done.txt').exists() else 1)"
timeout: 60
agents:
  - {{name: writer, command: ['{python}', '-c', 'open("done.txt", "w").write("ok")']}}
  - {{name: idler, command: ['{python}', '-c', 'pass']}}
"""


def test_a_session_of_five_tasks_prints_one_matrix(pytester: pytest.Pytester, xdist: list[str]) -> None:
    for name in TASKS:
        (pytester.path / f"{name}.yaml").write_text(TASK.format(name=name, python=sys.executable))
    res = pytester.runpytest("--agentrace", "--agentrace-no-save", *xdist)
    res.assert_outcomes(passed=5, failed=5)
    out = res.stdout.lines
    start = out.index(next(line for line in out if line.startswith("tasks x agents")))
    headers = [line for line in out if line.startswith("| Task")]
    assert table_rows(headers) == [["Task", "writer", "idler"]]
    rows = table_rows(out[start:])
    assert [r[0] for r in rows[1:6]] == TASKS
    assert all(r[2].endswith(" failed") for r in rows[1:6])
    assert any(line.startswith("winner: writer (total score 500.0 of 500, 5/5 tasks won") for line in out)
    assert not any(line.startswith("task alpha") for line in out)  # per-task tables only with -v
    res = pytester.runpytest("--agentrace", "--agentrace-no-save", "-v", *xdist)
    assert sum(line.startswith("task ") for line in res.stdout.lines) == 5
    assert sum(line.startswith("| Task") for line in res.stdout.lines) == 1


def test_a_session_fits_the_terminal_width(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, xdist: list[str]
) -> None:
    """Output that is not a terminal fits ``$COLUMNS`` when it is set: the summary and the statistics (with reps,
    the per-task pass-rate table and the coderace race table, far wider than 70 characters unfitted)."""
    for name in TASKS[:2]:
        (pytester.path / f"{name}.yaml").write_text(TASK.format(name=name, python=sys.executable))
    monkeypatch.setenv("COLUMNS", "70")
    res = pytester.runpytest(
        "--agentrace", "--agentrace-no-save", "--agentrace-reps", "2", "--agentrace-resamples", "200", *xdist
    )
    res.assert_outcomes(passed=4, failed=4)
    out = res.stdout.lines
    start = out.index(next(x for x in out if "= agentrace =" in x))
    # the section ends at pytest's next heading (its short test summary, whose lines pytest leaves whole on CI)
    end = next((i for i in range(start + 1, len(out)) if out[i].startswith("=")), len(out))
    section = out[start:end]
    assert any(x.startswith("| Task") for x in section) and any(x.startswith("| Agent") for x in section)
    assert line_width(section) <= 70, "\n".join(x for x in section if len(x) > 70)
    monkeypatch.delenv("COLUMNS")
    res = pytester.runpytest(
        "--agentrace", "--agentrace-no-save", "--agentrace-reps", "2", "--agentrace-resamples", "200", *xdist
    )
    assert line_width(res.stdout.lines) > 120  # no terminal and no $COLUMNS: no limit (a CI log keeps every column)


def test_a_trial_of_one_arm_is_named_by_question_and_arm_not_as_tasks() -> None:
    """A trial session of one arm (``--agentrace-arm``, a session stopped before the second arm) gives single-arm
    cells: their table was headed ``tasks: ... per task and agent`` with the question id under ``Task``."""
    from pytest_agentrace.stats.report import build_report

    runs = [outcome(case="q1", arm="docs", agent="a", rep=r, kind="trial", status="passed", tokens=100 + r) for r in (1, 2, 3)]
    lines = report_lines(build_report(runs, None, 0, 200))
    assert lines[0] == "questions: pass rate and reliability per question, arm and agent"
    assert lines[1].split("|")[1].strip() == "Question" and lines[3].split("|")[1].strip() == "q1 [docs]"
    tasks = [outcome(case="t1", agent="a", rep=r, status="passed", tokens=100 + r, score=80.0) for r in (1, 2)]
    assert report_lines(build_report(tasks, None, 0, 200))[0] == "tasks: pass rate and reliability per task and agent"
