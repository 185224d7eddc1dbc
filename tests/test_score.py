"""coderace's composite score and its edge cases (module docstring of pytest_agentrace.stats.score)."""

from __future__ import annotations

from pytest_agentrace.record.model import CheckResult, Outcome
from pytest_agentrace.stats.score import rank, score_group, weights


def run(agent: str, status: str, tests: bool, seconds: float = 1.0, lines: int = 10, exit_code: int = 0, lint: bool | None = True, verify: bool | None = None) -> Outcome:
    checks = {"tests": CheckResult("tests", "t", 0 if tests else 1, 0.1)}
    if lint is not None:
        checks["lint"] = CheckResult("lint", "l", 0 if lint else 1, 0.1)
    if verify is not None:
        checks["verify"] = CheckResult("verify", "v", 0 if verify else 1, 0.1)
    return Outcome(run_id=agent, kind="task", source="t.yaml", case="t", arm="default", agent=agent, rep=1,
                   status=status, seconds=seconds, lines_changed=lines, exit_code=exit_code, checks=checks)


def test_default_weights() -> None:
    assert weights(False) == {"tests": 0.4, "exit": 0.2, "lint": 0.15, "time": 0.15, "lines": 0.1}
    w = weights(True)
    assert round(w["verify"], 2) == 0.30 and round(w["time"], 2) == 0.05
    assert weights(False, {"tests": 1, "exit": 1}) == {"tests": 0.5, "exit": 0.5}


def test_min_max_time_and_lines() -> None:
    runs = [run("a", "passed", True, seconds=10, lines=10), run("b", "passed", True, seconds=20, lines=30)]
    s = score_group(runs, False, True)
    assert s == {"a": 100.0, "b": 75.0}  # b: worst time and lines -> loses 15 + 10


def test_noop_cannot_outrank_a_passing_agent() -> None:
    noop = run("noop", "failed", False, seconds=0.0, lines=0, exit_code=0, lint=True)
    bad_passer = run("p", "passed", True, seconds=500, lines=900, exit_code=1, lint=False)
    best_passer = run("q", "passed", True, seconds=1, lines=1)
    s = score_group([noop, bad_passer, best_passer], False, True)
    assert s["noop"] == 35.0 and s["p"] == 40.0 and s["q"] == 100.0
    assert rank(s) == {"q": 1, "p": 2, "noop": 3}
    noop_v = run("noop", "failed", False, seconds=0.0, lines=0, lint=True, verify=False)
    worst_v = run("p", "passed", True, seconds=500, lines=900, exit_code=1, lint=False, verify=True)
    other_v = run("q", "passed", True, seconds=1, lines=1, verify=True)
    s = score_group([noop_v, worst_v, other_v], True, True)
    assert s["noop"] == 35.0 and s["p"] == 55.0  # tests 25 + verify 30; worst time and lines


def test_single_agent_and_all_equal_get_full_credit() -> None:
    assert score_group([run("a", "passed", True, seconds=5, lines=0)], False, True) == {"a": 100.0}
    s = score_group([run("a", "passed", True, seconds=5, lines=0), run("b", "passed", True, seconds=5, lines=0)], False, True)
    assert s == {"a": 100.0, "b": 100.0}


def test_differences_below_five_percent_do_not_change_ranks() -> None:
    s = score_group([run("a", "passed", True, seconds=10.0, lines=100), run("b", "passed", True, seconds=10.4, lines=104)], False, True)
    assert s["a"] == s["b"] == 100.0
    assert rank(s) == {"a": 1, "b": 1}


def test_the_tie_band_is_transitive_with_three_agents() -> None:
    """100 s, 104 s, 106 s: b and c are under 2% apart, so they must not split (grouping from the group's
    smallest value would tie a with b but put c alone at the bottom, 15 points lower on time)."""
    s = score_group([run("a", "passed", True, seconds=100.0), run("b", "passed", True, seconds=104.0),
                     run("c", "passed", True, seconds=106.0)], False, True)
    assert s == {"a": 100.0, "b": 100.0, "c": 100.0}
    s = score_group([run("a", "passed", True, seconds=100.0), run("b", "passed", True, seconds=104.0),
                     run("c", "passed", True, seconds=120.0)], False, True)
    assert s == {"a": 100.0, "b": 100.0, "c": 85.0}  # c is more than 5% above b: worst time, loses 15


def test_error_runs_are_not_scored_or_ranked() -> None:
    s = score_group([run("a", "passed", True), run("e", "error", False)], False, True)
    assert s == {"a": 100.0, "e": None}
    assert rank(s) == {"a": 1, "e": None}


def test_no_lint_command_is_full_lint_credit_and_verify_weights() -> None:
    s = score_group([run("a", "passed", True, lint=None, verify=True)], True, False)
    assert s == {"a": 100.0}
    s = score_group([run("a", "failed", True, lint=True, verify=False)], True, True)
    assert s == {"a": 60.0}  # tests 25 + exit 20 + lint 15; no verify, no time/lines (did not pass)


def test_time_differences_up_to_two_seconds_are_ties() -> None:
    """The time component's resolution: 2.0 s vs 3.9 s is 95% apart but under 2 s (the harness's timing noise), so a
    tie; 2.0 s vs 4.1 s is not (above both 2 s and 5%): the slower run loses the 15 time points. Lines keep the 5%
    band alone (3 vs 4 lines differ)."""
    s = score_group([run("a", "passed", True, seconds=2.0, lines=10), run("b", "passed", True, seconds=3.9, lines=10)], False, True)
    assert s == {"a": 100.0, "b": 100.0}
    s = score_group([run("a", "passed", True, seconds=2.0, lines=10), run("b", "passed", True, seconds=4.1, lines=10)], False, True)
    assert s == {"a": 100.0, "b": 85.0}
    s = score_group([run("a", "passed", True, seconds=2.0, lines=3), run("b", "passed", True, seconds=2.0, lines=4)], False, True)
    assert s == {"a": 100.0, "b": 90.0}


def test_a_task_with_verify_and_no_test_command_counts_verify_for_the_tests_part() -> None:
    """A Harbor task's only check is its verifier: a perfect run scores 100 (it scored 75, the tests part lost), a
    failing one keeps below any passing one (exit + lint + nothing else)."""
    def harbor(agent: str, status: str, verify: bool, exit_code: int = 0) -> Outcome:
        o = run(agent, status, True, lint=None, verify=verify, exit_code=exit_code)
        return o.replace(checks={"verify": o.checks["verify"]})

    s = score_group([harbor("oracle", "passed", True)], True, False)
    assert s == {"oracle": 100.0}
    s = score_group([harbor("bad", "failed", False), harbor("crash", "failed", True, exit_code=1)], True, False)
    assert s == {"bad": 35.0, "crash": 70.0}  # exit 20 + lint 15; tests 25 + verify 30 + lint 15
    s = score_group([run("t", "failed", False, lint=None, verify=True)], True, False)
    assert s == {"t": 65.0}  # a tests check of its own stays its own: verify 30 + exit 20 + lint 15 + 0 tests
