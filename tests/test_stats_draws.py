"""Draws owned by cells and cases (``stats.draws``) and the report's one pass over them (``stats.figures``).

- The one pass gives, to the bit, the figures ``cells.summarize`` and ``compare.compare_arms`` give one by one (same
  estimator and method; only where the random numbers come from is shared), for both inference targets, with unknown
  tokens, one-run cells, three arms, exact and Monte Carlo tests; on one thread as on two.
- Each cell is drawn once and each case relabelled once in the one pass.
- Sharing draws between figures leaves each figure's error rates where they were: seeded A/A simulations of the
  report path (``build_report``, where every figure now shares its cells' draws) count false cost verdicts, per case
  and over cases, and the coverage of the shared cell and relative-cost intervals. Each bound states its Monte
  Carlo error: ``2 * sqrt(p (1 - p) / T)`` (two standard errors) over ``T`` simulated trials.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers.report import outcome

from pytest_agentrace.stats import draws
from pytest_agentrace.stats.cells import summarize
from pytest_agentrace.stats.compare import compare_arms
from pytest_agentrace.stats.figures import report_figures
from pytest_agentrace.stats.report import build_report


def runs(cases: int, reps: int, seed: int = 1, arms: tuple[str, ...] = ("base", "docs"), ratio: float = 1.0,
         unknown: int = 0, odd: bool = False) -> list:
    """Trial runs with log-normal tokens (CV about 0.3), ``ratio`` times more in every arm but ``base``;
    ``unknown`` runs of each cell without tokens; ``odd``: one case whose ``docs`` cell has a single run."""
    rng = np.random.default_rng(seed)
    out = []
    for c in range(cases):
        for arm in arms:
            n = 1 if odd and c == 0 and arm == "docs" else reps
            for rep in range(1, n + 1):
                tokens = int(round(2000 * (ratio if arm != "base" else 1.0) * math.exp(rng.normal(0, 0.3))))
                out.append(outcome(case=f"q{c}", arm=arm, agent="a", rep=rep, kind="trial", source="/s/t.toml",
                                   status="passed" if rng.random() < 0.7 else "failed", baseline_arm="base",
                                   tokens=None if rep <= unknown else tokens))
    return out


def one_by_one(outs, target: str, resamples: int):
    return (summarize(outs, 3, resamples), compare_arms(outs, None, 3, resamples, target=target),
            compare_arms(outs, None, 3, resamples, target=target, by_case=True))


def dicts(figures) -> list[list[dict]]:
    return [[x.to_dict() for x in part] for part in figures]


@pytest.mark.parametrize("target", ["fixed", "cases"])
@pytest.mark.parametrize("shape", [
    {"cases": 3, "reps": 12},  # Monte Carlo tests per case (C(24, 12) > 20,000), bootstrap-t per case
    {"cases": 4, "reps": 4, "unknown": 1, "arms": ("base", "docs", "tools")},  # exact per case, BCa; tokens subset
    {"cases": 2, "reps": 6, "odd": True},  # a one-run cell
    {"cases": 1, "reps": 9},  # one case: the arm comparison is the case's
])
def test_one_pass_gives_the_figures_one_by_one(shape: dict, target: str) -> None:
    outs = runs(**shape)
    assert dicts(report_figures(outs, None, 3, 400, target=target)) == dicts(one_by_one(outs, target, 400))


def test_threads_do_not_change_the_figures(monkeypatch: pytest.MonkeyPatch) -> None:
    outs = runs(20, 6, seed=5)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    one = dicts(report_figures(outs, None, 0, 300))
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert dicts(report_figures(outs, None, 0, 300)) == one


def test_each_cell_is_drawn_once_and_each_case_relabelled_once(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[tuple] = []
    boot, labels = draws.bootstrap_draws, draws.relabelling
    monkeypatch.setattr(draws, "bootstrap_draws", lambda seed, cell, n, r: made.append(("runs", cell, n)) or boot(seed, cell, n, r))
    monkeypatch.setattr(draws, "relabelling", lambda seed, case, na, nb, r: made.append(("labels", case)) or labels(seed, case, na, nb, r))
    report_figures(runs(5, 12), None, 0, 200)
    assert len(made) == len(set(made))  # nothing drawn twice
    assert sum(m[0] == "runs" for m in made) == 10 and sum(m[0] == "labels" for m in made) == 5  # 5 cases x 2 arms


def test_shared_draws_keep_false_cost_verdicts_at_alpha() -> None:
    """A/A (both arms the same distribution), 3 cases x 12 runs, 200 seeded trials of ``build_report`` with 400
    resamples: the arm's cost verdict over the cases and any per-case verdict (Holm) are false positives; each
    rate stays at or below 0.05 + 2 * sqrt(0.05 * 0.95 / 200) = 0.081 (two Monte Carlo standard errors)."""
    trials, bound = 200, 0.05 + 2 * math.sqrt(0.05 * 0.95 / 200)
    arm = per_case = 0
    for t in range(trials):
        report = build_report(runs(3, 12, seed=1000 + t), seed=t, resamples=400)
        arm += report.comparisons[0].cost_verdict != "no clear difference"
        per_case += any(c.cost_verdict != "no clear difference" for c in report.case_comparisons)
    assert arm / trials <= bound and per_case / trials <= bound


def test_shared_draws_keep_interval_coverage() -> None:
    """True relative cost 0.8 in every case, 3 cases x 12 runs, 200 seeded trials with 400 resamples: the arm's
    relative-cost interval (bootstrap-t over the cases, drawn from the cells' draws) and each case's cell token
    interval of the base arm (true mean 2000 exp(0.045), log-normal) cover their true values in at least 0.95 - 2
    * sqrt(0.05 * 0.95 / 200) = 0.919 of trials (cells: 600 intervals, bound 0.95 - 2 * sqrt(0.05 * 0.95 / 600) =
    0.932, less the bootstrap's known shortfall at 12 runs, 1-2 points: ``tests/test_sim_coverage.py``)."""
    trials = 200
    arm_hits = cell_hits = cells = 0
    true_mean = 2000 * math.exp(0.3**2 / 2)
    for t in range(trials):
        report = build_report(runs(3, 12, seed=5000 + t, ratio=0.8), seed=t, resamples=400)
        ci = report.comparisons[0].relative_cost_ci
        arm_hits += ci.lo <= 0.8 <= ci.hi
        for c in report.cells:
            if c.arm == "base":
                cells += 1
                cell_hits += c.tokens_ci.lo <= true_mean <= c.tokens_ci.hi
    assert arm_hits / trials >= 0.95 - 2 * math.sqrt(0.05 * 0.95 / trials)
    assert cell_hits / cells >= 0.95 - 2 * math.sqrt(0.05 * 0.95 / cells) - 0.02


def test_relabellings_are_uniform_choices_of_the_arm_runs() -> None:
    """3 arm and 4 baseline runs: each of the C(7, 3) = 35 choices should come up in 1/35 of 35,000 relabellings
    (1,000 each); Pearson's chi-square over them (34 df) stays below 65.2, its 0.999 quantile (a seeded draw: this
    fails for a uniform generator once in a thousand seeds)."""
    from scipy.stats import chi2

    marks = draws.relabelling(0, ("trial", "/s/t.toml", "q0", "a", "docs", "base"), 3, 4, 35_000)
    assert (marks.sum(axis=1) == 3).all()
    _, counts = np.unique(marks @ (2 ** np.arange(7)), return_counts=True)
    assert counts.size == 35
    assert ((counts - 1000) ** 2 / 1000).sum() < chi2.ppf(0.999, 34)
