"""Unit tests of ``stats`` / ``resample``: each function against a value computed independently (by hand, from
the formula, or by scipy's own implementation)."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats as sps

from pytest_agentrace.stats import numerics as stats
from pytest_agentrace.stats import permutation


def test_wilson_known_values_and_errors() -> None:
    assert stats.wilson_interval(0, 0) == (0.0, 1.0)
    assert stats.wilson_interval(3, 4) == pytest.approx((0.300642, 0.954413), abs=1e-6)
    assert stats.wilson_interval(0, 10)[0] == 0.0 and stats.wilson_interval(10, 10)[1] == 1.0
    # statsmodels' proportion_confint(method="wilson") gives (0.0, 0.277533) for 0/10
    assert stats.wilson_interval(0, 10)[1] == pytest.approx(0.277533, abs=1e-6)
    with pytest.raises(ValueError, match="0 <= k <= n"):
        stats.wilson_interval(5, 4)


def test_newcombe_matches_newcombe_1998_example() -> None:
    """Newcombe (1998), Table II, example (a): 56/70 - 48/80, method 10 interval 0.0524 to 0.3339."""
    lo, hi = stats.newcombe_interval(56, 70, 48, 80)
    assert (round(lo, 4), round(hi, 4)) == (0.0524, 0.3339)
    assert stats.newcombe_interval(1, 1, 0, 0) == (-1.0, 1.0)


def test_boschloo_wrapper_agrees_with_scipy_and_uses_symmetry() -> None:
    assert stats.boschloo_p(7, 10, 2, 10) == pytest.approx(sps.boschloo_exact([[7, 2], [3, 8]]).pvalue)
    assert stats.boschloo_p(2, 10, 7, 10, "less") == pytest.approx(sps.boschloo_exact([[2, 7], [8, 3]], alternative="less").pvalue, abs=1e-7)
    assert stats.boschloo_p(4, 4, 4, 4) == 1.0 and stats.boschloo_p(0, 3, 0, 5) == 1.0 and stats.boschloo_p(1, 0, 1, 2) == 1.0
    with pytest.raises(ValueError, match="alternative"):
        stats.boschloo_p(1, 2, 1, 2, "bigger")


def test_small_sample_critical_is_hesterberg_for_one_sample() -> None:
    for n in (3, 4, 8, 30):
        expected = math.sqrt(n / (n - 1)) * sps.t.ppf(0.975, n - 1)
        assert stats.small_sample_critical([(2.5, n)]) == pytest.approx(expected)
    # two equal groups: Welch df = 2(n-1)
    assert stats.small_sample_critical([(1.0, 5), (1.0, 5)]) == pytest.approx(sps.t.ppf(0.975, 8) * math.sqrt(5 / 4))
    assert stats.small_sample_critical([]) == pytest.approx(1.959964, abs=1e-6)
    assert stats.small_sample_critical([(0.0, 5), (3.0, 1)]) == pytest.approx(1.959964, abs=1e-6)


def test_bootstrap_interval_bca_matches_scipy_for_a_large_sample() -> None:
    """Without the expansion our BCa and scipy.stats.bootstrap's BCa agree (up to resampling noise)."""
    rng = np.random.default_rng(1)
    x = rng.lognormal(0, 0.5, 60)
    boot = x[rng.integers(0, 60, (20000, 60))].mean(axis=1)
    jack = (x.sum() - x) / 59
    ours = stats.bootstrap_interval(float(x.mean()), boot, 0.95, jack)
    ref = sps.bootstrap((x,), np.mean, n_resamples=20000, method="BCa", random_state=2).confidence_interval
    assert ours.method == "bca"
    assert ours.lo == pytest.approx(ref.low, rel=0.01) and ours.hi == pytest.approx(ref.high, rel=0.01)


def test_bootstrap_interval_degenerate_cases() -> None:
    assert stats.bootstrap_interval(5.0, [5.0, 5.0, 5.0]).method == "point"
    assert stats.bootstrap_interval(5.0, [math.nan, math.inf]).method == "none"
    iv = stats.bootstrap_interval(1.0, [2.0, 3.0, 4.0, 5.0])  # every replicate above the estimate: no BCa
    assert iv.method == "percentile"
    assert stats.Interval.none().to_dict() == {"lo": None, "hi": None, "method": "none", "confidence": 0.95}


def test_mean_interval_is_reproducible_and_contains_the_mean() -> None:
    x = [100, 120, 90, 110, 105, 95, 130, 85]
    a = stats.mean_interval(x, rng=stats.rng_for(3, "k"))
    b = stats.mean_interval(x, rng=stats.rng_for(3, "k"))
    assert a == b and a.lo < np.mean(x) < a.hi and a.method == "bca"
    assert stats.mean_interval([7]).method == "none"
    # the same data under another key gives (slightly) different draws
    assert stats.mean_interval(x, rng=stats.rng_for(3, "other")) != a


def test_cluster_contrast_point_none_and_dropped_cases() -> None:
    c = stats.cluster_contrast([([5, 5], [5, 5])])
    assert (c.estimate, c.interval.method, c.spread) == (1.0, "point", False)
    assert stats.cluster_contrast([([5], [5])]).interval.method == "none"
    c = stats.cluster_contrast([([1, 2], [0, 0]), ([2, 4], [2, 4])])  # zero-baseline case dropped
    assert (c.cases, c.estimate) == (1, 1.0)
    assert stats.cluster_contrast([]).estimate is None
    d = stats.cluster_contrast([([3, 4], [1, 2])], "difference")
    assert d.estimate == pytest.approx(2.0) and d.kind == "difference"
    with pytest.raises(ValueError, match="ratio or difference"):
        stats.cluster_contrast([([1], [1])], "product")


def test_cluster_contrast_several_cases_estimate_is_geometric_mean_of_case_ratios() -> None:
    c = stats.cluster_contrast([([50, 70], [100, 100]), ([900, 1100], [1000, 1000]), ([5, 7, 6], [10, 10])], resamples=2000)
    assert c.estimate == pytest.approx((0.6 * 1.0 * 0.6) ** (1 / 3))
    logs = np.log([0.6, 1.0, 0.6])  # the clustered-t interval on the log ratios, 2 df (Miller 2024)
    half = sps.t.ppf(0.975, 2) * logs.std(ddof=1) / math.sqrt(3)
    assert c.interval.method == "clustered-t"
    assert (c.interval.lo, c.interval.hi) == pytest.approx((math.exp(logs.mean() - half), math.exp(logs.mean() + half)))
    assert (c.cases, c.n_arm, c.n_base) == (3, 7, 6)
    assert c.interval.lo < c.estimate < c.interval.hi


def test_permutation_p_exact_small_cases() -> None:
    # [1,2] vs [3,4]: 6 splits, two are as extreme as the observed |difference| of 2
    assert stats.permutation_p([1, 2], [3, 4], log_ratio=False) == pytest.approx(2 / 6)
    assert stats.permutation_p([600, 700, 500, 600], [1000, 1200, 800, 1000]) == pytest.approx(2 / 70)
    assert stats.permutation_p([], [1]) is None
    # with 12 a side the Monte Carlo p is (1 + hits) / (1 + resamples): never 0
    p = stats.permutation_p(list(range(1, 13)), list(range(100, 112)), resamples=999)
    assert p == pytest.approx(1 / 1000)


def test_sign_flip_p_exact_and_monte_carlo() -> None:
    assert stats.sign_flip_p([1.0, 2.0, 3.0]) == pytest.approx(2 / 8)
    assert stats.sign_flip_p([0.5] * 5) == pytest.approx(2 / 32)  # 5 cases can never reach p < 0.05
    assert stats.sign_flip_p([]) is None
    p = stats.sign_flip_p([1.0] * 20, resamples=999)
    assert p == pytest.approx(1 / 1000)


def test_bh_adjust_matches_hand_computation() -> None:
    # sorted 0.01, 0.03, 0.04 (m = 3): 0.03, min(0.045, 0.04), 0.04
    assert stats.bh_adjust([0.04, None, 0.01, 0.03]) == pytest.approx([0.04, None, 0.03, 0.04])
    assert stats.bh_adjust([None]) == [None]


def test_pass_at_k_and_pass_hat_k() -> None:
    assert stats.pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert stats.pass_at_k(10, 3, 5) == pytest.approx(1 - math.comb(7, 5) / math.comb(10, 5))
    assert stats.pass_hat_k(10, 3, 2) == pytest.approx(3 / 45)
    assert stats.pass_at_k(3, 1, 4) is None and stats.pass_hat_k(3, 1, 0) is None


def test_runs_needed_and_power() -> None:
    assert stats.runs_needed(0.3, 0.2) == 29  # the first-order formula gives 27.2; the t test needs a little more
    assert stats.power_two_sample(28, 0.3, 0.2) < 0.8 <= stats.power_two_sample(29, 0.3, 0.2)
    assert stats.runs_needed(0.3, 0.4) == 7
    assert stats.runs_needed(0.0, 0.2) == 4  # no spread: still 4, the fewest runs at which the exact test reaches p < 0.05
    assert [round(stats.exact_level(n), 4) for n in (2, 3, 4, 5, 6)] == [0.0, 0.0, round(2 / 70, 4), round(12 / 252, 4), round(46 / 924, 4)]
    assert stats.runs_needed(50.0, 0.01) is None
    assert stats.runs_needed(0.3, 0.05) == 516  # first order 514.2; past n = 512, where C(2n, n) overflows a float
    with pytest.raises(ValueError, match="effect"):
        stats.runs_needed(0.3, 1.5)
    assert stats.effect_for_ratio(0.6) == pytest.approx(0.4) and stats.effect_for_ratio(1 / 0.6) == pytest.approx(0.4)
    assert stats.effect_for_ratio(1.0) is None


def test_cv_cohens_d_and_t_interval() -> None:
    assert stats.cv([1.0, 2.0, 3.0]) == pytest.approx(0.5)
    assert stats.cv([1.0]) is None and stats.cv([0.0, 0.0]) is None
    assert stats.cohens_d([1, 2, 3], [3, 4, 5]) == pytest.approx(-2.0)
    assert stats.cohens_d([1, 1], [2, 2]) is None  # zero-variance samples of size 2: no standardised size
    assert stats.cohens_d([1], [2, 3]) is None
    lo, hi = stats.t_interval([1.0, 2.0, 3.0])
    half = sps.t.ppf(0.975, 2) * 1 / math.sqrt(3)
    assert (lo, hi) == pytest.approx((2 - half, 2 + half))


def test_rng_for_is_stable_across_processes() -> None:
    """crc32, not hash(): the same seed and key give the same first draw in every process."""
    code = "from pytest_agentrace.stats import numerics as stats; print(stats.rng_for(0, 'tokens', 'trial', 'q1').integers(0, 1_000_000))"
    # a fresh interpreter with another hash seed: Python's hash() of strings would differ there
    draws = {subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONHASHSEED": seed}, capture_output=True,
                            text=True, check=True).stdout.strip() for seed in ("1", "2")}
    assert draws == {str(stats.rng_for(0, "tokens", "trial", "q1").integers(0, 1_000_000))}
    assert stats.rng_for(0, "a").integers(0, 2**31) != stats.rng_for(1, "a").integers(0, 2**31)


def test_resample_batch_equals_one_at_a_time() -> None:
    """A batch of data sets gives each the same p-value as on its own (exact enumeration is deterministic)."""
    rng = np.random.default_rng(5)
    a, b = rng.lognormal(0, 0.3, (7, 5)), rng.lognormal(0, 0.3, (7, 5))
    batch = permutation.permutation_p(a, b)
    assert batch == pytest.approx([stats.permutation_p(a[i], b[i]) for i in range(7)])
    d = rng.normal(0, 1, (6, 8))
    assert permutation.sign_flip_p(d) == pytest.approx([stats.sign_flip_p(row) for row in d])


def test_large_tables_use_fisher_which_is_never_below_boschloo() -> None:
    """Above ``BOSCHLOO_MAX_TABLE`` Boschloo's test (memory and time growing with n1 * n0) gives way to Fisher's
    exact test, whose p is never smaller, so a verdict keeps its level; small tables stay Boschloo."""
    assert stats.exact_test_name(200, 200) == "Boschloo" and stats.exact_test_name(201, 200) == "Fisher"
    assert stats.boschloo_p(140, 201, 120, 200) == pytest.approx(sps.fisher_exact([[140, 120], [61, 80]]).pvalue)
    boschloo = sps.boschloo_exact([[140, 120], [61, 80]]).pvalue
    assert boschloo <= stats.boschloo_p(140, 201, 120, 200) < boschloo + 0.02
    less = stats.boschloo_p(30_000, 50_000, 30_400, 50_000, "less")  # 100,000 runs: milliseconds, not 20 GB
    assert less == pytest.approx(sps.fisher_exact([[30_000, 30_400], [20_000, 19_600]], alternative="less").pvalue)
    assert less < 0.01
