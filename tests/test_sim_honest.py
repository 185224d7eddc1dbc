"""Simulation proof (issue 26): statistics that stay honest at scale.

- Fixed-case relative cost (the geometric mean of the per-case ratios, stratified bootstrap-t on the mean log ratio):
  coverage 93-97% at 1-10 cases x 4-12 runs, log-sd 0.3 and 0.8, case cost scales 10x apart, with the misses
  balanced (false `cheaper` and false `dearer` within a factor of 2 of each other).
- New-cases relative cost (clustered-t over the per-case log ratios, K - 1 df): coverage 93-97% with random case
  effects at 3-10 cases.
- The plan (``power.power``, one formula for any number of cases): at one case, CV 0.8, within 5 points of the
  simulated share of `cheaper` verdicts at the runs it asks for.
- Per-case verdicts on Holm adjusted p: when some cases truly differ, the cases without an effect get a false verdict
  in at most 5% of trials (family-wise).
- Scores: identical agents (the same command; only the harness's timing noise differs) get a false race winner in
  at most 5% of races; the race score interval covers mostly-passing scores (93% or more).

Every figure runs through the functions the reports use, vectorised over simulated trials, from fixed seeds. A rate's
Monte Carlo bound is ``0.05 + 2 sqrt(0.05 * 0.95 / T)`` (two standard errors); a coverage's standard error is
``sqrt(0.95 * 0.05 / T)`` (0.77 points at T = 800, 0.49 at T = 2,000), stated per test. Measured figures are in the
docstrings (``pytest -s`` prints them); bootstrap resamples are 300 per interval (the product default is 10,000; the
rates do not depend on it).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_agentrace.record.model import CheckResult, Outcome, Usage
from pytest_agentrace.report.leaderboard import winner
from pytest_agentrace.stats import compare, power, resample, score
from pytest_agentrace.stats import numerics as stats
from pytest_agentrace.stats.ratings import races, score_interval

ALPHA = 0.05
CASES = [1, 3, 5, 10]
RUNS = [4, 8, 12]


def mc_bound(trials: int, alpha: float = ALPHA) -> float:
    return alpha + 2 * math.sqrt(alpha * (1 - alpha) / trials)


def draw(rng, trials: int, cases: int, n: int, sd: float, log_ratios) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per case ``(arm, baseline)`` costs (trials, n): log-normal with log-sd ``sd`` and mean 1 times a case scale
    (1,000 .. 10,000), the arm's mean ``exp(log_ratios[c])`` times the baseline's (``log_ratios`` (cases,) or
    (trials, cases): per-trial case effects)."""
    scales = 1000 * np.exp(np.linspace(0, math.log(10), cases)) if cases > 1 else np.array([1000.0])
    lr = np.broadcast_to(np.asarray(log_ratios, dtype=float), (trials, cases))
    return [(scales[c] * np.exp(lr[:, c:c + 1]) * np.exp(rng.normal(-sd * sd / 2, sd, (trials, n))),
             scales[c] * np.exp(rng.normal(-sd * sd / 2, sd, (trials, n)))) for c in range(cases)]


@pytest.mark.parametrize("sd", [0.3, 0.8])
def test_fixed_cases_coverage_and_balanced_misses(sd: float) -> None:
    """True case ratios 0.5 .. 1.0 (one case: 0.7), T = 800 per cell (standard error 0.77 points), 300 resamples.
    Measured coverage (several cases, or 8 and 12 runs), log-sd 0.3: 93.5-96.6%; log-sd 0.8: 94.0-96.0%. One case x
    4 runs (BCa: a bootstrap-t quantile on 6 degrees of freedom is too unstable; it covers 96-97% there, with a third
    less power) covers 91.8% / 93.5% here (92-93% at T = 3,000) and is held to 91%: such verdicts are provisional and
    also need the exact test. Misses over the grid: above the truth (false dearer) 2.82% vs below (false cheaper)
    2.35% at log-sd 0.3, 2.50% vs 2.50% at 0.8 - the arithmetic mean of ratios, used before, missed above the truth
    5-28 times as often as below at 10 cases and log-sd 0.8."""
    rng = np.random.default_rng(2620 + int(10 * sd))
    trials, above, below = 800, [], []
    for cases in CASES:
        log_ratios = np.log(np.linspace(0.5, 1.0, cases) if cases > 1 else np.array([0.7]))
        true = math.exp(log_ratios.mean())
        for n in RUNS:
            _, lo, hi, _, _ = resample.stratified_contrast(draw(rng, trials, cases, n, sd, log_ratios), "ratio", 0.95, 300, rng)
            up, down = float(np.mean(lo > true)), float(np.mean(hi < true))
            above.append(up)
            below.append(down)
            print(f"fixed cases, log-sd {sd}, {cases} cases x {n} runs: coverage {1 - up - down:.1%} (above {up:.1%}, below {down:.1%})")
            assert (0.91 if (cases, n) == (1, 4) else 0.93) <= 1 - up - down <= 0.97
    up, down = float(np.mean(above)), float(np.mean(below))
    print(f"fixed cases, log-sd {sd}: misses above {up:.2%}, below {down:.2%}")
    assert 0.5 <= up / down <= 2.0


def test_fixed_cases_ten_cases_four_runs_noisy_costs() -> None:
    """The acceptance cell: 10 cases x 4 runs, log-sd 0.8, A/A and true ratios 0.5 .. 1.0, T = 2,000 each (standard
    error 0.49 points). Measured: A/A 94.8% (false dearer 2.55%, false cheaper 2.70%); ratios 95.1% (2.85% / 2.05%)."""
    rng = np.random.default_rng(2610)
    for log_ratios in (np.zeros(10), np.log(np.linspace(0.5, 1.0, 10))):
        true = math.exp(log_ratios.mean())
        _, lo, hi, _, _ = resample.stratified_contrast(draw(rng, 2000, 10, 4, 0.8, log_ratios), "ratio", 0.95, 300, rng)
        dearer, cheaper = float(np.mean(lo > true)), float(np.mean(hi < true))
        print(f"10 cases x 4 runs, log-sd 0.8, truth {true:.2f}: coverage {1 - dearer - cheaper:.1%}, false dearer {dearer:.2%}, "
              f"false cheaper {cheaper:.2%}")
        assert 0.93 <= 1 - dearer - cheaper <= 0.97 and 0.5 <= dearer / cheaper <= 2.0


@pytest.mark.parametrize("sd", [0.3, 0.8])
def test_new_cases_coverage_with_random_case_effects(sd: float) -> None:
    """Per-case true log ratios ``ln 0.8 + 0.3 z`` drawn afresh in every trial (cases are a sample), T = 2,000 per cell
    (standard error 0.49 points); the target is the population's geometric mean ratio, 0.8. Measured: 94.9-95.7%
    (log-sd 0.3), 94.6-96.0% (0.8). The two-stage bootstrap it replaces covered 97.4-99.8% (the issue's study)."""
    rng = np.random.default_rng(2640 + int(10 * sd))
    trials, mu = 2000, math.log(0.8)
    for cases in (3, 5, 10):
        for n in (4, 12):
            log_ratios = mu + 0.3 * rng.normal(size=(trials, cases))
            _, lo, hi, method, _ = resample.cluster_contrast(draw(rng, trials, cases, n, sd, log_ratios), "ratio", 0.95)
            cov = float(np.mean((lo <= 0.8) & (0.8 <= hi)))
            print(f"new cases, log-sd {sd}, {cases} cases x {n} runs: coverage {cov:.1%}")
            assert 0.93 <= cov <= 0.97 and np.all(method == resample.CLUSTERED)


def test_one_case_plan_keeps_its_promise() -> None:
    """One case, CV 0.8, a 45% drop: the plan asks for 30 runs per arm and promises 81.2%; the verdict comes out in
    80.4% of T = 1,000 simulations (standard error 1.3 points). The test's power alone asked for 23 runs and promised
    80.5% where 67.4% came out (the issue's study)."""
    n = power.runs_needed(0.8, 0.45)
    predicted = power.power(n, 0.8, 0.45)
    rng = np.random.default_rng(2650)
    found = float(np.mean(compare.cost_batch(draw(rng, 1000, 1, n, stats.log_sd(0.8), [math.log(0.55)]), resamples=300,
                                             rng_ci=rng, rng_p=rng)["sign"] < 0))
    print(f"one case, CV 0.8, 45% drop: plan {n} runs, {predicted:.1%}; simulated {found:.1%}")
    assert n > stats.runs_needed(0.8, 0.45) and abs(found - predicted) <= 0.05


def test_per_case_verdicts_family_wise_when_some_cases_differ() -> None:
    """Five cases x 8 runs (log-sd 0.3), two of them 40% cheaper, three unchanged: per-case verdicts (each case's
    interval and exact test, decided on Holm's adjustment over the five, as ``compare.with_bh``). Measured (T = 1,000,
    bound 6.4%): a false verdict on an unchanged case in 4.0% of trials (on BH, used before: 7.7%); the two true
    drops found in 66% / 67% of trials."""
    rng = np.random.default_rng(2660)
    trials, log_ratios = 1000, np.log([0.6, 0.6, 1.0, 1.0, 1.0])
    data = draw(rng, trials, 5, 8, 0.3, log_ratios)
    r = [compare.cost_batch([case], resamples=300, rng_ci=rng, rng_p=rng) for case in data]
    p = np.stack([x["p"] for x in r], axis=1)
    raw = np.stack([x["sign"] for x in r], axis=1)
    holm = np.where(stats.holm_adjust_array(p) < ALPHA, raw, 0)
    from scipy.stats import false_discovery_control

    bh = np.where(false_discovery_control(p, axis=1) < ALPHA, raw, 0)
    false_any, bh_any = float(np.mean((holm[:, 2:] != 0).any(axis=1))), float(np.mean((bh[:, 2:] != 0).any(axis=1)))
    found = (holm[:, :2] < 0).mean(axis=0)
    print(f"per-case verdicts, 2 of 5 cases 40% cheaper: false on an unchanged case {false_any:.2%} (BH {bh_any:.2%}), found {found}")
    assert false_any <= mc_bound(trials) and np.all(found > 0.5)


def _race_outcome(session: int, task: int, agent: str, rep: int, passed: bool, seconds: float) -> Outcome:
    checks = {"tests": CheckResult("tests", "pytest -q", 0 if passed else 1, 0.5, "tests.log"), "lint": CheckResult("lint", "ruff", 0, 0.1, "lint.log")}
    return Outcome(run_id=f"task:t{task}/default/{agent}/r{rep}", kind="task", source="/suite/tasks.yaml", case=f"t{task}", arm="default",
                   agent=agent, rep=rep, status="passed" if passed else "failed", session_id=f"s{session}", seconds=seconds,
                   lines_changed=12, exit_code=0, checks=checks, has_lint=True, usage=Usage(total_tokens=1000))


def test_identical_agents_are_not_told_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two agents running the identical command: the same outcome in each rep (pass rates 0.5 .. 0.95 by task), the
    same diff, run times 2-60 s by task plus the harness's timing noise (sd 0.3 s plus 1% of the run). 300 sessions x 5
    tasks x 3 reps; a race is one task in one session (1,500 races, bound 6.1%). Measured: a winner named in 3.5% of
    races (without the 2 s time resolution: 24.2%; with 1 s: 10.6%)."""
    rng = np.random.default_rng(2670)
    sessions, tasks, reps = 300, 5, 3
    pass_rates, base = np.linspace(0.5, 0.95, tasks), np.linspace(2.0, 60.0, tasks)
    outcomes = []
    for s in range(sessions):
        for t in range(tasks):
            for r in range(1, reps + 1):
                passed = bool(rng.random() < pass_rates[t])
                for agent in ("a", "b"):
                    outcomes.append(_race_outcome(s, t, agent, r, passed, base[t] + rng.normal(0, 0.3 + 0.01 * base[t])))
    found = races(score.score_outcomes(outcomes))
    named = float(np.mean([winner(race.scores) is not None for race in found]))
    monkeypatch.setattr(score, "TIME_RESOLUTION", 0.0)
    before = float(np.mean([winner(race.scores) is not None for race in races(score.score_outcomes(outcomes))]))
    print(f"identical agents: a winner named in {named:.2%} of {len(found)} races (bound {mc_bound(len(found)):.2%}; "
          f"without the time resolution {before:.1%})")
    assert len(found) == sessions * tasks and named <= mc_bound(len(found)) < before


@pytest.mark.parametrize("n", RUNS)
def test_score_interval_covers_mostly_passing_scores(n: int) -> None:
    """Scores of ``n`` runs: passing runs 85-100 (time and lines), failing runs 20 or 35 (exit and lint), pass rates
    0.5 .. 0.95; the interval of the mean (``ratings.score_interval``) against the true mean, T = 2,000 per rate
    (standard error 0.49 points). Measured coverage 99.4-100% at every n and rate: conservative, as it assumes the
    largest variance a 0-100 score can have; never zero-width (all-pass runs at 100 give 100 n / (n + 3.84) .. 100).
    The t interval it replaces covered 34-72% at pass rates 0.9-0.95 (the issue's study)."""
    rng = np.random.default_rng(2680 + n)
    trials, worst = 2000, 1.0
    for p in (0.5, 0.7, 0.9, 0.95):
        passed = rng.random((trials, n)) < p
        scores = np.where(passed, rng.uniform(85, 100, (trials, n)), np.where(rng.random((trials, n)) < 0.5, 20.0, 35.0))
        true = p * 92.5 + (1 - p) * 27.5
        ci = [score_interval(list(row)) for row in scores]
        cov = float(np.mean([lo <= true <= hi for lo, hi in ci]))
        worst = min(worst, cov)
        assert all(hi > lo for lo, hi in ci)
        print(f"score interval, n={n}, pass rate {p}: coverage {cov:.1%}")
    assert worst >= 0.93
    lo, hi = score_interval([100.0] * n)
    assert hi == 100.0 and lo == pytest.approx(100 * n / (n + stats.z_value(0.95) ** 2))
