"""Boschloo's exact unconditional test of two binomial proportions, as ``scipy.stats.boschloo_exact`` defines it,
with its work per pair of sample sizes done once.

The test (R. D. Boschloo, Statistica Neerlandica 24, 1970; scipy's implementation and its parameters): for samples
of ``n1`` and ``n0`` runs, every table ``(x1, x0)`` gets Fisher's one-sided p-value as its statistic; the p-value of
the observed table ``(k1, k0)`` is the largest probability, over the common pass rate ``pi`` (the nuisance
parameter), of the tables whose statistic is at most the observed one (times ``1 + 1e-13``, scipy's tolerance):
``max_pi sum_{(x1,x0) in T} C(n1,x1) C(n0,x0) pi^(x1+x0) (1-pi)^(n-x1-x0)``. Two-sided: twice the smaller one-sided
p-value, at most 1.

scipy maximises over ``pi`` with ``shgo`` for each table (10-30 ms a table at 50 runs a side, most of a report's
pass-rate tests when cases differ). Here the statistic grid and the powers of ``pi`` belong to the sample sizes
(cached): a table's terms collapse to one weight per ``x1 + x0``, the maximum is found on a 1,023-point grid of
``pi`` by one matrix product and refined by three zooms of 65 points around the best one (about 1 ms a table).
``tests/test_boschloo.py`` compares it with scipy over seeded tables: equal to 1e-9 (the maximum here is never
below scipy's), and no decision at 0.05, 0.025 or 0.01 differs.
"""

from __future__ import annotations

import functools
import math
from typing import Any

GRID_POINTS = 1023  # interior points of the first grid of pi
ZOOM_POINTS, ZOOMS = 65, 3
TOLERANCE = 1 + 1e-13  # scipy's: tables whose statistic is within this factor of the observed one count as extreme


@functools.lru_cache(maxsize=128)
def _tables(n1: int, n0: int, alternative: str) -> tuple[Any, Any, Any]:
    """``(statistic, log C(n1,x1) + log C(n0,x0), x1 + x0)`` over every table, each an ``(n1+1, n0+1)`` array
    indexed ``[x1, x0]``; the statistic as ``scipy.stats.boschloo_exact`` computes it (``hypergeom.cdf``)."""
    import numpy as np
    from scipy.special import gammaln
    from scipy.stats import hypergeom

    x1 = np.arange(n1 + 1).reshape(1, -1)
    x0 = np.arange(n0 + 1).reshape(-1, 1)
    if alternative == "less":
        stat = hypergeom.cdf(x1, n1 + n0, x1 + x0, n1).T
    else:
        stat = hypergeom.cdf(x0, n1 + n0, x1 + x0, n0).T

    def log_comb(n: int) -> Any:
        k = np.arange(n + 1)
        return gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1)

    return stat, log_comb(n1)[:, None] + log_comb(n0)[None, :], np.add.outer(np.arange(n1 + 1), np.arange(n0 + 1))


@functools.lru_cache(maxsize=64)
def _powers(n: int) -> tuple[Any, Any]:
    """``(grid, P)``: the first grid of ``pi`` and ``P[g, s] = pi_g^s (1 - pi_g)^(n - s)``."""
    import numpy as np

    grid = np.linspace(0.0, 1.0, GRID_POINTS + 2)[1:-1]
    s = np.arange(n + 1)
    return grid, np.exp(s[None, :] * np.log(grid)[:, None] + (n - s)[None, :] * np.log1p(-grid)[:, None])


def one_sided(k1: int, n1: int, k0: int, n0: int, alternative: str) -> float:
    """Boschloo's one-sided p-value (``alternative`` ``less``: ``p1 < p0``; ``greater``: ``p1 > p0``) of ``k1`` of
    ``n1`` against ``k0`` of ``n0`` (both samples non-empty)."""
    import numpy as np
    from scipy.special import logsumexp

    stat, log_comb, s = _tables(n1, n0, alternative)
    extreme = stat <= stat[k1, k0] * TOLERANCE
    n = n1 + n0
    top = float(log_comb[extreme].max())
    weights = np.bincount(s[extreme], weights=np.exp(log_comb[extreme] - top), minlength=n + 1)
    sums = np.nonzero(weights)[0]
    log_w = np.log(weights[sums])

    def log_p(pi: Any) -> Any:
        with np.errstate(divide="ignore"):
            terms = log_w[None, :] + sums[None, :] * np.log(pi)[:, None] + (n - sums)[None, :] * np.log1p(-pi)[:, None]
        return logsumexp(terms, axis=1)

    grid, powers = _powers(n)
    with np.errstate(divide="ignore"):
        first = np.log(powers @ weights)
    i = int(np.argmax(first))
    best = float(first[i])
    lo, hi = grid[max(i - 1, 0)], grid[min(i + 1, len(grid) - 1)]
    for _ in range(ZOOMS):  # the maximum is smooth: each zoom's error is of second order in its spacing
        points = np.linspace(lo, hi, ZOOM_POINTS)
        values = log_p(points)
        j = int(np.argmax(values))
        best = max(best, float(values[j]))
        lo, hi = points[max(j - 1, 0)], points[min(j + 1, ZOOM_POINTS - 1)]
    return min(1.0, math.exp(best + top))


def boschloo_exact_p(k1: int, n1: int, k0: int, n0: int, alternative: str = "two-sided") -> float:
    """Boschloo's exact p-value of ``k1`` passes of ``n1`` runs against ``k0`` of ``n0`` (``alternative``:
    ``two-sided``, ``less`` or ``greater``), as ``scipy.stats.boschloo_exact([[k1, k0], [n1-k1, n0-k0]])`` gives
    it (module docstring). Both samples must be non-empty (scipy's p is undefined otherwise)."""
    if alternative == "two-sided":
        return min(1.0, 2 * min(one_sided(k1, n1, k0, n0, "less"), one_sided(k1, n1, k0, n0, "greater")))
    return one_sided(k1, n1, k0, n0, alternative)
