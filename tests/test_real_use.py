"""Sessions as users run them (serial and ``-n 2``): under ``-W error``, a tool call that met ``command not found``;
and the report formatting of small relative costs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import BUGGY_REPO, FIXER, make_repo, write_script

TASK = "name: {name}\ndescription: fix add\nrepo: repo\ntest_command: python -m pytest -q test_calc.py\n"


def test_runs_pass_under_warnings_as_errors(pytester: pytest.Pytester, bin_dir: Path, xdist: list[str]) -> None:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "fixer", FIXER)
    (pytester.path / "task.yaml").write_text(TASK.format(name="t") + "agents: [{name: fixer, command: [fixer]}, noop]\n")
    res = pytester.runpytest_subprocess("--agentrace", "--agentrace-out", "o", "-W", "error", "-p", "no:cacheprovider", "-p", "no:benchmark",
                                        "--agentrace-reps", "2", *xdist)
    res.assert_outcomes(passed=2, xfailed=2)
    assert "ResourceWarning" not in res.stdout.str() + res.stderr.str()


@pytest.mark.parametrize(("x", "text"), [(1.04, "1.04"), (0.5, "0.50"), (0.0024, "0.0024"), (0.000051, "0.000051"),
                                         (0.099, "0.099"), (0.0, "0.00"), (12.345, "12.35"), (None, "-")])
def test_relative_costs_keep_significant_digits(x: float | None, text: str) -> None:
    from pytest_agentrace.report.stats_text import ratio_text
    assert ratio_text(x) == text


def test_a_small_relative_cost_prints_its_digits_in_markdown() -> None:
    """The Markdown comparison table's cell for a relative cost of 0.0024 (0.0021-0.0027), as ``comparison_rows``
    writes it from a comparison's typed fields."""
    from pytest_agentrace.report.markdown import with_ci
    from pytest_agentrace.report.stats_text import ratio_text
    from pytest_agentrace.stats.numerics import Interval

    assert with_ci(0.0024, Interval(0.0021, 0.0027, "bca"), ratio_text) == "0.0024 (0.0021–0.0027)"


def test_a_tool_call_that_met_command_not_found_is_noted(pytester: pytest.Pytester, bin_dir: Path,
                                                         xdist: list[str]) -> None:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "lost", FIXER + "import subprocess\n"
                 "subprocess.run(['bash', '-c', 'no-such-tool-xyz --version'])\n")
    (pytester.path / "task.yaml").write_text(TASK.format(name="t") + "agents: [{name: lost, command: [lost]}]\n")
    res = pytester.runpytest("--agentrace", "--agentrace-out", "o", "--agentrace-sandbox", "off", *xdist)
    res.assert_outcomes(passed=1)
    record = json.loads((pytester.path / "o/runs/t/default/lost/1/run.json").read_text())
    note = "a tool call's output says command not found: no-such-tool-xyz"
    assert record["extra"]["notes"] == [note]
    res.stdout.fnmatch_lines([f"*lost*{note}*"])


def test_a_session_in_which_no_run_could_start_fails_in_one_line(pytester: pytest.Pytester, xdist: list[str]) -> None:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    (pytester.path / "task.yaml").write_text(TASK.format(name="t") + "agents: [{name: gone, command: [no-such-agent-xyz]}]\n")
    res = pytester.runpytest("task.yaml", "--agentrace", "--agentrace-out", "o", "--agentrace-reps", "2", *xdist)
    res.assert_outcomes(skipped=2)
    assert res.ret == 1
    res.stdout.fnmatch_lines(["*no run could start: all 2 run items were skipped (2: *no-such-agent-xyz*); "
                              "--agentrace-allow-empty accepts this*"])
    ok = pytester.runpytest("task.yaml", "--agentrace", "--agentrace-out", "o2", "--agentrace-reps", "2",
                            "--agentrace-allow-empty", *xdist)
    ok.assert_outcomes(skipped=2)
    assert ok.ret == 0 and "no run could start" not in ok.stdout.str()
    # the noop baseline alone ran (it always can): no agent under test did, and the session says so
    (pytester.path / "task.yaml").write_text(TASK.format(name="t") + "agents: [{name: gone, command: [no-such-agent-xyz]}, noop]\n")
    res = pytester.runpytest("task.yaml", "--agentrace", "--agentrace-out", "o3", *xdist)
    res.assert_outcomes(skipped=1, xfailed=1)
    assert res.ret == 1
    res.stdout.fnmatch_lines(["*no run of an agent under test could start, only 1 run(s) of baselines expected to fail: "
                              "the other 1 run items were skipped (1: *no-such-agent-xyz*); --agentrace-allow-empty accepts this*"])


def test_an_empty_session_line_names_each_reason() -> None:
    """Two agents missing are two reasons, both named (it said ``1: agent 'a' ...; 1 other reason(s)``); past three
    the rest are counted."""
    from pytest_agentrace.plugin.controller import empty_session_line

    line = empty_session_line({"t[a-r1]": "agent 'a' not found on PATH", "t[b-r1]": "agent 'b' not found on PATH",
                               "t[a-r2]": "agent 'a' not found on PATH"})
    assert line == ("no run could start: all 3 run items were skipped (2: agent 'a' not found on PATH; 1: agent 'b' "
                    "not found on PATH); --agentrace-allow-empty accepts this")
    many = empty_session_line({f"t[{i}]": f"reason {i}" for i in range(5)})
    assert many.endswith("1: reason 2; 2 other reason(s)); --agentrace-allow-empty accepts this")
