"""Simulation proof (issue 5): with no true difference (A/A), verdicts other than "no clear difference" stay at or
below 5% plus Monte Carlo error, for relative cost, pass rate and `regressed`, with and without stop-when-decided.

Every test draws at least 2,000 simulated trials per sample size (4, 8 and 12 runs per arm) from a fixed seed and
runs them, vectorised over trials, through the same functions the reports use (``compare.cost_batch``, ``stats.boschloo_p`` +
``verdict.test_verdict``, ``verdict.snapshot_verdict``, ``sequential.decide_batch``). The bound is
``0.05 + 2 * sqrt(0.05 * 0.95 / T)`` (two Monte Carlo standard errors). Where the rate can be computed exactly
(pass-rate tests over all binomial outcomes) it is, and the exact rate must be at or below 5% itself.
Costs are log-normal with a coefficient of variation of 0.3 (a typical run-to-run spread of agent tokens).
The measured rates are printed (``pytest -s``) and recorded in the module constants' comments.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binom

from pytest_agentrace.stats import compare, sequential, verdict
from pytest_agentrace.stats import numerics as stats

ALPHA = 0.05
SIGMA = stats.log_sd(0.3)
RESAMPLES = 1000  # bootstrap draws per simulated trial (the product default is 10,000; the rate does not depend on it)


def mc_bound(trials: int, alpha: float = ALPHA) -> float:
    return alpha + 2 * math.sqrt(alpha * (1 - alpha) / trials)


def lognormal(rng: np.random.Generator, size, ratio: float = 1.0) -> np.ndarray:
    return ratio * np.exp(rng.normal(0.0, SIGMA, size))


@pytest.mark.parametrize("n", [4, 8, 12])
def test_aa_relative_cost_single_case(n: int) -> None:
    """One case, n runs per arm, same cost distribution: share of cheaper/dearer verdicts.
    Measured (seed = n, 1,000 resamples): 4 -> 3.7%, 8 -> 4.4%, 12 -> 5.3% (bound 5.97%); the interval alone
    would call 7.55% / 4.7% / 5.8% (BCa at 4 runs; the symmetric bootstrap-t from 8; BCa alone called 5.5% and
    7.35% at 8 and 12) - which is why a verdict also needs the exact permutation test."""
    trials = 2000
    rng = np.random.default_rng(n)
    a, b = lognormal(rng, (trials, n)), lognormal(rng, (trials, n))
    r = compare.cost_batch([(a, b)], resamples=RESAMPLES, rng_ci=rng, rng_p=rng)
    rate = float(np.mean(r["sign"] != 0))
    alone = float(np.mean((r["lo"] > 1) | (r["hi"] < 1)))
    print(f"  (the bootstrap interval alone: {alone:.2%})")
    print(f"A/A relative cost, one case, n={n}: {rate:.2%} (bound {mc_bound(trials):.2%})")
    assert rate <= mc_bound(trials)


def test_aa_relative_cost_several_cases() -> None:
    """Eight cases (per-case costs differ tenfold), 4 runs per arm each: the paired sign-flip path (the new-cases
    target; the fixed-cases target's grid is in ``tests/test_sim_targets.py``).
    Measured: 0.75% (conservative: with few cases the case-level sign-flip test rarely reaches p < 0.05)."""
    trials, n, k = 2000, 4, 8
    rng = np.random.default_rng(88)
    scale = np.exp(rng.normal(0, 1.2, (trials, k, 1))) * 1000
    a, b = scale * lognormal(rng, (trials, k, n)), scale * lognormal(rng, (trials, k, n))
    r = compare.cost_batch([(a[:, j], b[:, j]) for j in range(k)], resamples=300, rng_ci=rng, rng_p=rng, rng_log=rng, target="cases")
    rate = float(np.mean(r["sign"] != 0))
    print(f"A/A relative cost, {k} cases x {n} runs: {rate:.2%}")
    assert rate <= mc_bound(trials)


def _exact_rate(n1: int, n0: int, p: float, rejects) -> float:
    """Exact probability over all binomial outcomes that ``rejects(k1, k0)``."""
    return sum(binom.pmf(k1, n1, p) * binom.pmf(k0, n0, p) for k1 in range(n1 + 1) for k0 in range(n0 + 1) if rejects(k1, k0))


@pytest.mark.parametrize("n", [4, 8, 12])
def test_aa_pass_rate(n: int) -> None:
    """Two-sided Boschloo at 0.05 (the one-case pass-rate verdict), true pass rates 0.3, 0.5, 0.8 and 0.9.
    Exact sizes: n=4 <= 0.8%, n=8 <= 2.8%, n=12 <= 4.5%; simulated rates agree."""
    def better_or_worse(k1: int, k0: int) -> bool:
        return verdict.test_verdict(stats.boschloo_p(k1, n, k0, n), k1 / n - k0 / n) != "no clear difference"

    trials = 2000
    rng = np.random.default_rng(100 + n)
    for p in (0.3, 0.5, 0.8, 0.9):
        exact = _exact_rate(n, n, p, better_or_worse)
        k1, k0 = rng.binomial(n, p, trials), rng.binomial(n, p, trials)
        simulated = sum(better_or_worse(int(x), int(y)) for x, y in zip(k1, k0, strict=True)) / trials
        print(f"A/A pass rate n={n} p={p}: exact {exact:.2%}, simulated {simulated:.2%}")
        assert exact <= ALPHA
        assert simulated <= mc_bound(trials)


@pytest.mark.parametrize("n", [4, 8, 12])
def test_aa_regressed(n: int) -> None:
    """`regressed` against a snapshot of the same true pass rate (old and new n runs).

    Exact worst case over true pass rates 0.05..0.95 at the default one-sided level 0.05: n=4 3.5%, n=8 3.5%,
    n=12 4.6%. The issue's p < 0.1 would flag up to 8.9% (n=4), 6.8% (n=8), 8.0% (n=12) - above the 5% the
    issue also asks for, which is why the default level is 0.05 (``verdict.REGRESSION_ALPHA``)."""
    def regressed(k_new: int, k_old: int, alpha: float = verdict.REGRESSION_ALPHA) -> bool:
        return verdict.snapshot_verdict(k_old, n, k_new, n, alpha=alpha)[0] == "regressed"

    grid = np.round(np.arange(0.05, 0.96, 0.05), 2)
    worst = max(_exact_rate(n, n, p, regressed) for p in grid)
    worst_at_01 = max(_exact_rate(n, n, p, lambda a, b: regressed(a, b, 0.1)) for p in grid)
    trials = 2000
    rng = np.random.default_rng(200 + n)
    sims = []
    for p in (0.5, 0.8):
        new, old = rng.binomial(n, p, trials), rng.binomial(n, p, trials)
        sims.append(sum(regressed(int(x), int(y)) for x, y in zip(new, old, strict=True)) / trials)
    print(f"A/A regressed n={n}: exact worst {worst:.2%} (at alpha 0.1: {worst_at_01:.2%}), simulated p=0.5/0.8: {sims[0]:.2%}/{sims[1]:.2%}")
    assert worst <= ALPHA
    assert all(s <= mc_bound(trials) for s in sims)
    assert worst_at_01 > ALPHA  # the documented reason for not using p < 0.1


@pytest.mark.parametrize("cap", [4, 8, 12])
def test_aa_stop_when_decided(cap: int) -> None:
    """Group-sequential looks at every n from 4 to the cap (Lan-DeMets O'Brien-Fleming-type spending).
    Measured over 4,000 trials: cap 4 -> 4.4%, 8 -> 4.6%, 12 -> 4.65%; mean runs per arm 4.0 / 5.2 / 6.7
    (futility stops 86% / 90% of the A/A cells early)."""
    trials = 4000
    rng = np.random.default_rng(300 + cap)
    a, b = np.log(lognormal(rng, (trials, cap))), np.log(lognormal(rng, (trials, cap)))
    state, _sign, look = sequential.decide_batch(a, b, cap)
    rate = float(np.mean(state == 1))
    print(f"A/A stop-when-decided cap={cap}: {rate:.2%} clear, {np.mean(state == 2):.0%} futile, mean runs per arm {look.mean():.1f}")
    assert rate <= mc_bound(trials)
    if cap > 4:
        assert look.mean() < cap  # it does stop early


def test_sequential_boundaries_spend_exactly_alpha() -> None:
    """The computed boundaries (recursive integration) give the Lan-DeMets increments: checked on 400,000 simulated
    Brownian paths observed at 4..12 of 12."""
    ns = list(range(4, 13))
    fractions = np.array(ns) / 12
    bounds = np.array(sequential.boundaries(tuple(fractions)))
    rng = np.random.default_rng(7)
    paths = np.cumsum(rng.normal(0, 1, (400_000, len(ns))) * np.sqrt(np.diff(np.concatenate([[0], fractions]))), axis=1) / np.sqrt(fractions)
    crossed = np.abs(paths) >= bounds
    first = np.where(crossed.any(axis=1), crossed.argmax(axis=1), -1)
    per_look = np.bincount(first[first >= 0], minlength=len(ns)) / len(paths)
    spend = np.diff(np.concatenate([[0], [sequential.spent(t) for t in fractions]]))
    assert np.allclose(per_look, spend, atol=0.0008)
    assert abs(per_look.sum() - ALPHA) < 0.0015
    assert bounds[0] == pytest.approx(stats.z_value(1 - sequential.spent(4 / 12)))
    assert sequential.boundaries((1.0,))[0] == pytest.approx(1.959964, abs=1e-6)


def test_aa_pass_rate_several_cases() -> None:
    """Eight cases with different true pass rates (the same in both arms), 4 runs per arm each: the paired path
    (case-level bootstrap interval of the mean per-case difference + exact sign-flip test, both must agree, as
    ``compare.pass_result`` for the new-cases target / ``verdict.difference_verdict``). Measured: 1.05%."""
    from pytest_agentrace.stats import permutation, resample

    trials, n, k = 2000, 4, 8
    rng = np.random.default_rng(400)
    p = rng.uniform(0.1, 0.95, (trials, k))
    d = (rng.binomial(n, p) - rng.binomial(n, p)) / n  # per-case pass-rate difference (arm - baseline)
    lo, hi, _method = resample.mean_interval(d, 0.95, RESAMPLES, rng)
    pv = permutation.sign_flip_p(d, RESAMPLES, rng)
    rate = float(np.mean(((lo > 0) | (hi < 0)) & (pv < ALPHA)))
    print(f"A/A pass rate, {k} cases x {n} runs: {rate:.2%}")
    assert rate <= mc_bound(trials)


@pytest.mark.parametrize("cap", [8, 12])
def test_aa_pass_rate_and_regressed_after_stopping_early(cap: int) -> None:
    """Under --agentrace-stop-when-decided a cell stops at a look chosen from its token costs; the pass-rate verdict
    (Boschloo) and `regressed` (against a snapshot of ``cap`` runs) are then taken on the runs made. Pass and cost
    are drawn independently here (A/A on both), and the rates stay at or below 5%: stopping on cost does not pick
    the pass-rate sample. Measured (4,000 trials, true pass rate 0.7): cap 8 1.18% / 3.33%, cap 12 2.17% / 3.80%."""
    trials, p = 4000, 0.7
    rng = np.random.default_rng(500 + cap)
    a, b = np.log(lognormal(rng, (trials, cap))), np.log(lognormal(rng, (trials, cap)))
    _state, _sign, look = sequential.decide_batch(a, b, cap)
    pass_a, pass_b = rng.random((trials, cap)) < p, rng.random((trials, cap)) < p
    old = rng.binomial(cap, p, trials)  # the snapshot's passes out of cap runs
    verdicts, regressions = 0, 0
    for t in range(trials):
        n = int(look[t])
        ka, kb = int(pass_a[t, :n].sum()), int(pass_b[t, :n].sum())
        verdicts += verdict.test_verdict(stats.boschloo_p(ka, n, kb, n), ka / n - kb / n) != "no clear difference"
        regressions += verdict.snapshot_verdict(int(old[t]), cap, ka, n)[0] == "regressed"
    print(f"A/A after stop-when-decided cap={cap}: pass-rate verdicts {verdicts / trials:.2%}, regressed {regressions / trials:.2%}")
    assert verdicts / trials <= mc_bound(trials) and regressions / trials <= mc_bound(trials)
