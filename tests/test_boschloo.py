"""``stats.boschloo``: Boschloo's exact test with its work per pair of sample sizes shared, against
``scipy.stats.boschloo_exact`` (the definition it follows) over seeded tables of many sizes."""

from __future__ import annotations

import random

import pytest
from scipy.stats import boschloo_exact

from pytest_agentrace.stats import numerics
from pytest_agentrace.stats.boschloo import boschloo_exact_p

SIZES = [(1, 1), (2, 3), (4, 4), (3, 7), (8, 12), (10, 10), (20, 20), (30, 45), (50, 50), (100, 100), (150, 60)]


def tables(per_size: int, seed: int = 7) -> list[tuple[int, int, int, int, str]]:
    rnd = random.Random(seed)
    out = []
    for n1, n0 in SIZES:
        for _ in range(per_size):
            k1, k0 = rnd.randint(0, n1), rnd.randint(0, n0)
            if k1 + k0 not in (0, n1 + n0):
                out.append((k1, n1, k0, n0, rnd.choice(["two-sided", "less", "greater"])))
    return out


@pytest.mark.parametrize("table", tables(6))
def test_equal_to_scipy_and_never_below_it(table: tuple[int, int, int, int, str]) -> None:
    k1, n1, k0, n0, alternative = table
    want = min(1.0, max(0.0, boschloo_exact([[k1, k0], [n1 - k1, n0 - k0]], alternative=alternative).pvalue))
    got = boschloo_exact_p(k1, n1, k0, n0, alternative)
    assert got == pytest.approx(want, abs=1e-9)
    assert got >= want - 1e-12  # a maximum over the nuisance parameter: a finer search finds as high or higher
    for alpha in (0.05, 0.025, 0.01):
        assert (got < alpha) == (want < alpha)


def test_the_report_path_uses_it_with_its_symmetries() -> None:
    numerics._boschloo.cache_clear()
    p = numerics.boschloo_p(9, 10, 3, 10)
    assert p == pytest.approx(boschloo_exact([[9, 3], [1, 7]]).pvalue, abs=1e-9)
    assert numerics.boschloo_p(3, 10, 9, 10) == p and numerics.boschloo_p(1, 10, 7, 10) == p  # swapped sides, outcomes
    assert numerics.boschloo_p(9, 10, 3, 10, "greater") == pytest.approx(
        boschloo_exact([[9, 3], [1, 7]], alternative="greater").pvalue, abs=1e-9)
