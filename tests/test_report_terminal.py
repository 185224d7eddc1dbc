"""The terminal section from the session result (``report.terminal``), without a pytest session: what each
verbosity shows, the markup of warnings and gate failures, the session's own lines, and the ``terminal`` entry of
the format table, which renders the same section at the default verbosity from a results folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.report import outcome

from pytest_agentrace import cli
from pytest_agentrace.record.runfile import write_run
from pytest_agentrace.report import formats
from pytest_agentrace.report.result import Context, build_result
from pytest_agentrace.report.terminal import FAIL, WARN, Shown, count_line, section, validation_lines
from pytest_agentrace.stats.score import score_outcomes

RUNS = [outcome(agent="a", rep=1), outcome(agent="b", rep=1, status="failed", reason="tests failed (exit 1)"),
        outcome(agent="a", rep=2), outcome(agent="b", rep=2, status="error", reason="harness fault")]


def result(**fields):
    return build_result(score_outcomes(RUNS, per_session=False), Context(resamples=200), **fields)


def test_each_verbosity_shows_what_it_should() -> None:
    r = result(notes=(("agentrace: saved 4 runs", False), ("agentrace: runs were not sandboxed", True)),
               failures=("gate: a is worse",))
    shown = Shown(skips=("agentrace: 1 run skipped: claude not installed",), overrides=("agent override line",),
                  written=(("agentrace: wrote md report r.md", False),))
    full = section(r, shown)
    text = [line for line, _ in full]
    assert text[0].startswith("task fix-add") and "agentrace: 1 run skipped: claude not installed" in text
    assert text.index("agentrace: 1 run skipped: claude not installed") + 1 == text.index("agent override line")
    assert text[-4:] == ["agentrace: saved 4 runs", "agentrace: runs were not sandboxed",
                         "agentrace: wrote md report r.md", "agentrace: FAILED gate: a is worse"]
    assert [m for _, m in full[-4:]] == [{}, WARN, {}, FAIL]
    quiet = section(r, Shown(verbosity=-2, skips=shown.skips, written=shown.written))
    assert quiet == [("agentrace: 4 runs: 2 passed, 1 failed, 1 error", {}),
                     ("agentrace: 1 run skipped: claude not installed", {}),
                     ("agentrace: runs were not sandboxed", WARN), ("agentrace: FAILED gate: a is worse", FAIL)]
    assert count_line(()) == "agentrace: 0 runs"
    # a noop baseline's failed runs are pytest's xfailed: counted apart, as every format counts them
    runs = [outcome(agent="a", rep=1), outcome(agent="noop", rep=1, status="failed"), outcome(agent="noop", rep=2, status="failed"),
            outcome(agent="a", rep=2, status="failed")]
    assert count_line(runs) == "agentrace: 4 runs: 1 passed, 2 expected failures, 1 failed"
    assert count_line(runs[:2]) == "agentrace: 2 runs: 1 passed, 1 expected failure"


def test_an_empty_session_has_no_section_and_a_width_is_kept() -> None:
    assert section(build_result([], Context())) == []
    assert section(build_result([], Context()), Shown(skips=("agentrace: 2 runs skipped",))) == [("agentrace: 2 runs skipped", {})]
    assert all(len(line) <= 60 for line, _ in section(result(), Shown(width=60)))


def test_the_validation_table() -> None:
    rows = (("fix-add", "passed", "failed", "valid"), ("fix-mul", "passed", "passed", "invalid: noop passed"),
            ("fix-sub", "error", "-", "cannot validate here: no cargo"))
    lines = validation_lines(rows, 1)
    assert lines[0].split("|")[1:5] == [" Task    ", " Oracle   ", " Noop   ", " Verdict                        "]
    assert lines[-1] == "1 of 3 task(s) valid, 1 invalid, 1 cannot be validated here (a tool is missing)"
    r = result(validation=(rows, 1))
    text = [line for line, _ in section(r)]
    assert text[text.index("--- agentrace validate ---") + 1:][:len(lines)] == lines


def test_the_table_renders_the_section_of_a_results_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fmt = formats.by_name("terminal")
    assert fmt.to == "terminal" and fmt.env is None
    out = tmp_path / "out"
    for o in RUNS:
        write_run(out / "runs" / o.case / o.arm / o.agent / str(o.rep), o)
    assert cli.main(["render", str(out), "--format", "terminal", "--resamples", "200", "--db", str(tmp_path / "none.db")]) == 0
    printed = capsys.readouterr().out
    folder = build_result(score_outcomes(RUNS, per_session=False), Context(out=out, resamples=200))
    assert printed == "".join(line + "\n" for line, _ in section(folder))
    assert printed.startswith("task fix-add") and "not passed:" in printed


def test_the_hint_under_a_task_matrix_names_a_way_its_context_has(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Four tasks print one matrix and a line saying how to see the per-task tables: pytest's -v in a session;
    ``agentrace report`` and ``render`` have no -v, so theirs names ``report --case``, which does show them."""
    runs = [outcome(case=t, agent=a, source=f"/s/{t}.yaml") for t in ("t1", "t2", "t3", "t4") for a in ("a", "b")]
    session_hint = "(one table per task with -v; shown without it up to 3 tasks)"
    cli_hint = "(one table per task for up to 3 tasks: choose them with `agentrace report OUT --case ID`)"
    text = [line for line, _ in section(build_result(score_outcomes(runs, per_session=False), Context(resamples=200)))]
    assert session_hint in text and cli_hint not in text
    out = tmp_path / "out"
    for o in runs:
        write_run(out / "runs" / o.case / o.arm / o.agent / str(o.rep), o)
    for argv in (["report", str(out)], ["render", str(out), "--format", "terminal", "--db", str(tmp_path / "none.db")]):
        assert cli.main([*argv, "--resamples", "200"]) == 0
        printed = capsys.readouterr().out.splitlines()
        assert cli_hint in printed and session_hint not in printed, argv
        assert not any(line.startswith("task t1") for line in printed), argv  # the matrix stands for the tables
    assert cli.main(["report", str(out), "--case", "t1,t2", "--resamples", "200"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert [line.split(" ")[:2] for line in printed if line.startswith("task t")] == [["task", "t1"], ["task", "t2"]]
    assert cli_hint not in printed
