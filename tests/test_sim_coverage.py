"""Simulation proof (issue 5): the 95% intervals cover the true value in 93-97% of simulations, per method, and
where small n makes that impossible the test states it (and those verdicts are provisional: fewer than 8 runs).

Binomial intervals (Wilson, Newcombe) are checked exactly, by summing binomial probabilities over every outcome;
the bootstrap intervals by simulation through the production code (``resample``, vectorised over trials) with
log-normal costs (CV 0.3). Measured coverages are in each docstring (``pytest -s`` prints them).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import binom

from pytest_agentrace.stats import numerics as stats
from pytest_agentrace.stats import resample

SIGMA = stats.log_sd(0.3)
GRID = np.round(np.arange(0.05, 0.96, 0.05), 2)


def wilson_coverage(n: int, p: float) -> float:
    ks = np.arange(n + 1)
    covered = np.array([lo <= p <= hi for lo, hi in (stats.wilson_interval(int(k), n) for k in ks)])
    return float(binom.pmf(ks, n, p) @ covered)


@pytest.mark.parametrize("n", [4, 8, 12])
def test_wilson_coverage_exact(n: int) -> None:
    """Exact coverage averaged over true pass rates 0.05..0.95: n=4 94.9%, n=8 95.3%, n=12 95.9% (minimum 87.5%,
    93.0%, 91.4%). At a single true rate it oscillates (discreteness): e.g. n=4, p=0.5 covers 87.5% (the 0/4
    and 4/4 outcomes, 1/8 of the time, give intervals excluding 0.5) - no interval on 4 runs can be right for
    every rate."""
    cov = [wilson_coverage(n, float(p)) for p in GRID]
    print(f"Wilson n={n}: mean {np.mean(cov):.1%}, min {min(cov):.1%} at p={GRID[int(np.argmin(cov))]}")
    assert 0.93 <= np.mean(cov) <= 0.97
    if n == 4:
        assert wilson_coverage(4, 0.5) == pytest.approx(0.875)


@pytest.mark.parametrize("n", [4, 8, 12])
def test_newcombe_coverage_exact(n: int) -> None:
    """Exact coverage of the difference of two pass rates (n runs each), averaged over pairs of true rates from
    0.1..0.9: n=4 94.7%, n=8 94.2%, n=12 95.4%. Worst pairs: 87.7% (n=4, 0.1 vs 0.9), 91.2% (n=8, 0.3 vs 0.8),
    91.7% (n=12, 0.1 vs 0.9): far-apart rates at small n are where discreteness bites; the pass-rate verdict
    does not rest on this interval but on Boschloo's exact test."""
    ks = np.arange(n + 1)
    lo = np.empty((n + 1, n + 1))
    hi = np.empty((n + 1, n + 1))
    for k1 in ks:
        for k0 in ks:
            lo[k1, k0], hi[k1, k0] = stats.newcombe_interval(int(k1), n, int(k0), n)
    cov = []
    for p1 in GRID[1::2]:
        for p0 in GRID[1::2]:
            w = np.outer(binom.pmf(ks, n, p1), binom.pmf(ks, n, p0))
            cov.append(float(np.sum(w * ((lo <= p1 - p0 + 1e-12) & (p1 - p0 - 1e-12 <= hi)))))
    print(f"Newcombe n={n}: mean {np.mean(cov):.1%}, min {min(cov):.1%}")
    assert 0.93 <= np.mean(cov) <= 0.97
    assert min(cov) >= (0.87 if n == 4 else 0.91)


@pytest.mark.parametrize("n", [4, 8, 12])
@pytest.mark.parametrize("ratio", [1.0, 0.6])
def test_relative_cost_interval_coverage(n: int, ratio: float) -> None:
    """Bootstrap of the relative cost, one case, 3,000 trials: BCa with the small-sample expansion at 4 runs a side,
    the symmetric bootstrap-t on the log scale from 8 (``resample.stratified_contrast``). Measured: ratio 1.0 ->
    n=4 93.3%, 8 95.2%, 12 94.9%; ratio 0.6 -> 93.2%, 95.2%, 94.9% (the BCa interval at 8 and 12 runs: 93.6%,
    94.1%). At 4 runs BCa can dip below 93% (a bootstrap sees little of the skew of a ratio of 4-run means): such
    verdicts are provisional, and every cost verdict also needs the exact permutation test (``tests/test_sim_aa.py``)."""
    trials = 3000
    rng = np.random.default_rng(1000 + n)
    a = ratio * np.exp(rng.normal(0, SIGMA, (trials, n)))
    b = np.exp(rng.normal(0, SIGMA, (trials, n)))
    _, lo, hi, _, _ = resample.stratified_contrast([(a, b)], "ratio", 0.95, 1500, rng)
    cov = float(np.mean((lo <= ratio) & (ratio <= hi)))
    print(f"relative cost n={n} ratio={ratio}: coverage {cov:.1%}")
    assert (0.915 if n == 4 else 0.93) <= cov <= 0.97


@pytest.mark.parametrize("n", [4, 8, 12])
def test_tokens_mean_interval_coverage(n: int) -> None:
    """Bootstrap interval of tokens per run (one cell). Measured: n=8 93.4%, n=12 94.0%. At n=4 it cannot reach
    95%: a bootstrap interval never extends beyond the sample's range, and all 4 runs fall on one side of the
    mean about 1 time in 8 (measured 86%); the report states it (``CellSummary``) and no verdict rests on it."""
    trials = 3000
    rng = np.random.default_rng(2000 + n)
    x = np.exp(rng.normal(0, SIGMA, (trials, n)))
    lo, hi, _ = resample.mean_interval(x, 0.95, 1500, rng)
    true = math.exp(SIGMA**2 / 2)
    cov = float(np.mean((lo <= true) & (true <= hi)))
    print(f"tokens mean n={n}: coverage {cov:.1%}")
    if n == 4:
        assert 0.80 <= cov < 0.93
    else:
        assert 0.93 <= cov <= 0.97


@pytest.mark.parametrize("cases", [8, 16])
def test_paired_case_interval_coverage(cases: int) -> None:
    """Paired case-level bootstrap of a mean per-case difference (pass rates of 4-run cells, true difference
    +0.15 with case-to-case spread; cases drawn at random, so the target is the population mean). Measured: 8 cases
    94.0%, 16 cases 94.4%."""
    trials, runs = 3000, 4
    rng = np.random.default_rng(3000 + cases)
    base_p = rng.uniform(0.3, 0.7, (trials, cases))
    arm_p = np.clip(base_p + 0.15 + rng.normal(0, 0.1, (trials, cases)), 0, 1)
    d = rng.binomial(runs, arm_p) / runs - rng.binomial(runs, base_p) / runs
    lo, hi, _ = resample.mean_interval(d, 0.95, 1500, rng)
    big = rng.uniform(0.3, 0.7, 2_000_000)  # the population mean difference over cases (the clipping shaves a little)
    true = float(np.mean(np.clip(big + 0.15 + rng.normal(0, 0.1, big.size), 0, 1) - big))
    cov = float(np.mean((lo <= true) & (true <= hi)))
    print(f"paired case bootstrap, {cases} cases: coverage {cov:.1%}")
    assert 0.93 <= cov <= 0.97
