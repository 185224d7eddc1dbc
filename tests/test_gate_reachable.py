"""A snapshot gate's Holm family counts only the tests that could fail it at their run counts (``verdict.reachable_p``):
a cell at 0 passed cannot regress, a token test that could not run is no test, and a gate none of whose tests could
reach its level says so. Proven by cases with exact p-values and by a seeded simulation of unchanged sessions."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from pytest_agentrace.stats import verdict


def row(case: str, agent: str, old: tuple[int, int], new: tuple[int, int]) -> SimpleNamespace:
    """A snapshot row of one cell (pass counts only, no tokens), its verdicts and gate p-values as ``snapshot``
    makes them (``verdict.snapshot_tests``)."""
    (found, *also), detail, gate_p = verdict.snapshot_tests(old[0], old[1], new[0], new[1])
    return SimpleNamespace(kind="task", case=case, arm="default", agent=agent, old_passed=old[0], old_total=old[1],
                           new_passed=new[0], new_total=new[1], verdict=found, also=tuple(also), detail="; ".join(detail),
                           pooled=False, gate_p=gate_p)


def test_a_fall_from_3_of_3_to_0_of_3_fails_beside_a_baseline_that_cannot_fall() -> None:
    """The noop baseline at 0/3 cannot regress and no cell has token counts: the family is the one real test, whose
    one-sided Boschloo p (1/64 for 3/3 -> 0/3: the common rate at its extreme) fails the gate at 5%."""
    rows = [row("t", "mine", (3, 3), (0, 3)), row("t", "noop", (0, 3), (0, 3))]
    gates = verdict.parse_fail_on("regressed,dearer")
    fam = verdict.gate_family(gates, snapshot_rows=rows)
    assert [(t.index, t.metric) for t in fam.tests] == [(0, "regressed")]
    assert fam.tests[0].p == fam.tests[0].adjusted < 0.05
    assert fam.left_out == 1 and fam.cannot_fail == ()
    failures = verdict.gate_failures(gates, snapshot_rows=rows, family=fam)
    assert failures == ["regressed: mine t [default]: regressed (Holm p=0.0156, 1 test) - lower pass rate (one-sided "
                        "Boschloo p=0.0156 < 0.05)"]
    assert verdict.unanswered_gates(gates, (), rows, ["default"]) == [
        "dearer: nothing to compare: no cell of the snapshot could be tested (its token test needs at least 4 runs "
        "with token counts on each side); leave this gate out, or give it runs it can test"]


def test_a_gate_that_no_outcome_could_fail_says_so() -> None:
    """At 2 runs a side even 2/2 -> 0/2 has p >= 5%: the gate cannot fail whatever the runs do, and its summary says
    so (the session still passes: it is a gate with too few runs, not a failure)."""
    rows = [row("t", "mine", (2, 2), (0, 2)), row("u", "mine", (2, 2), (2, 2))]
    assert verdict.reachable_p(rows[0], "regressed") >= 0.05
    gates = verdict.parse_fail_on("regressed")
    fam = verdict.gate_family(gates, snapshot_rows=rows)
    assert fam.tests == () and fam.left_out == 2 and fam.cannot_fail == ("regressed",)
    assert verdict.gate_failures(gates, snapshot_rows=rows, family=fam) == []
    assert "regressed cannot fail at these run counts, whatever the runs do" in fam.summary(0)


def test_reachable_p_is_the_extreme_tables_exact_p() -> None:
    from pytest_agentrace.stats.numerics import boschloo_p

    r = row("t", "a", (5, 8), (5, 8))
    assert verdict.reachable_p(r, "regressed") == boschloo_p(0, 8, 5, 8, "less") < 0.01
    assert verdict.reachable_p(r, "improved") == boschloo_p(8, 8, 5, 8, "greater")
    assert verdict.reachable_p(row("t", "a", (0, 8), (0, 8)), "regressed") == 1.0
    assert verdict.reachable_p(row("t", "a", (8, 8), (8, 8)), "improved") == 1.0
    pooled = SimpleNamespace(old_passed=3, old_total=16, new_total=16, pooled=True, gate_p={"regressed": 1.0})
    assert verdict.reachable_p(pooled, "regressed") == 0.0  # not computed for a pooled test: it always counts


def test_sim_unchanged_sessions_fail_the_gate_at_most_at_its_rate() -> None:
    """Seeded simulation: 6 agent cells (true pass rates 0.3-0.9) and 4 noop cells (0) of 4 runs a side, the same in
    the snapshot and the session; ``--fail-on regressed,improved`` through ``gate_family`` and ``gate_failures``.
    With the cells that cannot move left out the share of failing sessions stays at most 5% plus two Monte Carlo
    standard errors (3,000 sessions: standard error 0.4 points)."""
    rng = np.random.default_rng(20261204)
    rates = np.array([0.3, 0.45, 0.6, 0.7, 0.8, 0.9, 0, 0, 0, 0])
    agents = ["a"] * 6 + ["noop"] * 4
    gates = verdict.parse_fail_on("regressed,improved")
    trials, runs, failed, left = 3000, 4, 0, 0
    for _ in range(trials):
        old = rng.binomial(runs, rates)
        new = rng.binomial(runs, rates)
        rows = [row(f"q{i}", agents[i], (int(o), runs), (int(n), runs)) for i, (o, n) in enumerate(zip(old, new, strict=True))]
        fam = verdict.gate_family(gates, snapshot_rows=rows)
        left += fam.left_out
        failed += bool(verdict.gate_failures(gates, snapshot_rows=rows, family=fam))
    assert left >= 4 * trials  # at least the noop cells' regressions are left out of every session
    bound = verdict.GATE_RATE + 2 * math.sqrt(verdict.GATE_RATE * (1 - verdict.GATE_RATE) / trials)
    assert failed / trials <= bound, (failed, trials, bound)
