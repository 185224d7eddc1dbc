"""Inference over fixed cases (strata): the cases a trial ran are kept, only runs within each case vary.

The *fixed cases* target (the default; ``verdict.FIXED``) asks "on the cases this trial ran, is the arm cheaper /
better?". Every figure here treats the cases as strata: bootstraps redraw runs within each case, permutation tests
permute arm labels within each case, and each case is weighted equally (``w_c = 1 / C``), so a case with more runs
does not count more. With one case every function reduces to the ordinary two-sample method. The *new cases*
target (``--agentrace-generalize cases``) resamples cases instead (``resample.cluster_contrast``, sign-flip tests).
Pure functions; numpy/scipy are imported inside functions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pytest_agentrace.stats import numerics as stats
from pytest_agentrace.stats import permutation, resample

EXACT_SUMS = 200_000  # distinct values of a stratified pass-rate statistic enumerated exactly (else Monte Carlo)


def stratified_contrast(cases: Sequence[tuple[Sequence[float], Sequence[float]]], kind: str = "ratio", confidence: float = 0.95,
                        resamples: int = stats.DEFAULT_RESAMPLES, rng=None) -> stats.Contrast:
    """Bootstrap stratified by case of an arm-vs-baseline contrast (``resample.stratified_contrast`` with one data
    set): ``cases`` per case ``(arm values, baseline values)``; cases with an empty side, or (ratio) a baseline
    mean <= 0, are dropped. The estimate is ``resample.over_cases`` of the per-case contrasts: for ratios their
    geometric mean, for differences their mean."""
    data = stats.usable_cases(cases, kind)
    if not data:
        return stats.Contrast(kind, None, stats.Interval.none(confidence), 0, 0, 0, False)
    est, lo, hi, method, spread = resample.stratified_contrast([([a], [b]) for a, b in data], kind, confidence, resamples,
                                        rng if rng is not None else stats.rng_for(0, "stratified_contrast"))
    return stats.Contrast(kind, float(est[0]), stats._interval(lo, hi, method, confidence), len(data), sum(len(a) for a, _ in data),
                          sum(len(b) for _, b in data), bool(spread[0]))


def stratified_permutation_p(cases: Sequence[tuple[Sequence[float], Sequence[float]]], kind: str = "ratio",
                             resamples: int = stats.DEFAULT_RESAMPLES, rng=None) -> tuple[float | None, float | None]:
    """``(p, Monte Carlo standard error)`` of the stratified permutation test (``permutation.stratified_permutation_p``
    with one data set; the error is 0 when every relabelling was enumerated). ``(None, None)`` without a usable case."""
    data = [(list(a), list(b)) for a, b in cases if len(a) and len(b)]
    if not data:
        return None, None
    p, err = permutation.stratified_permutation_p([([a], [b]) for a, b in data], kind, resamples, rng if rng is not None else stats.rng_for(0, "stratified_permutation_p"))
    return float(p[0]), float(err[0])


def _case_null(k_arm: int, n_arm: int, k_base: int, n_base: int):
    """Values of one case's pass-rate difference ``k/n_arm - (m - k)/n_base`` over the arm's possible pass counts
    ``k`` given the case's total passes ``m``, and their hypergeometric probabilities (arm labels permuted)."""
    import numpy as np
    from scipy.stats import hypergeom

    m = k_arm + k_base
    ks = np.arange(max(0, m - n_base), min(m, n_arm) + 1)
    return ks / n_arm - (m - ks) / n_base, hypergeom.pmf(ks, n_arm + n_base, m, n_arm)


def stratified_binary_p(tables: Sequence[tuple[int, int, int, int]], alternative: str = "two-sided", resamples: int = 100_000,
                        rng=None) -> float | None:
    """Exact stratified permutation test of equal pass rates in every case (arm labels permuted within each case).

    ``tables``: per case ``(passed_arm, runs_arm, passed_base, runs_base)``. Statistic: the mean over cases of
    ``passed_arm / runs_arm - passed_base / runs_base``. Under the null the arm's passes in a case are
    hypergeometric given the case's passes (Fisher's conditioning, one stratum at a time), so the statistic's
    exact distribution is the convolution of the per-case ones (the exact test of Mantel-Haenszel type; with one
    case Fisher's exact test with the difference as statistic). ``alternative``: ``two-sided`` (``|D| >= |d|``),
    ``less`` (``D <= d``: the arm passes less) or ``greater``. Exact while the convolution has at most
    ``EXACT_SUMS`` distinct values, else ``resamples`` hypergeometric draws (``(1 + hits) / (1 + resamples)``).
    None when no case has both sides; 1.0 when no case carries information (all passed or all failed).
    """
    import numpy as np

    if alternative not in ("two-sided", "less", "greater"):
        raise ValueError(f"stratified_binary_p: alternative must be two-sided, less or greater, not {alternative!r}")
    tables = [t for t in tables if t[1] > 0 and t[3] > 0]
    if not tables:
        return None
    w = 1.0 / len(tables)
    observed = w * sum(ka / na - kb / nb for ka, na, kb, nb in tables)
    informative = [t for t in tables if 0 < t[0] + t[2] < t[1] + t[3]]
    if not informative:
        return 1.0
    fixed = w * sum(ka / na - kb / nb for ka, na, kb, nb in tables if (ka, na, kb, nb) not in informative)
    tol = 1e-9

    def hit(values):
        if alternative == "two-sided":
            return np.abs(values) >= abs(observed) - tol
        return values <= observed + tol if alternative == "less" else values >= observed - tol

    if len({(na, nb) for _, na, _, nb in informative}) == 1:  # one lattice: the arm's passes summed over cases
        lattice = _one_lattice(informative, fixed, w)
        if lattice is not None:
            values, probs = lattice
            return float(min(1.0, np.sum(probs[hit(values)])))
    values, probs = np.array([fixed]), np.array([1.0])
    for t in informative:
        f, pf = _case_null(*t)
        values = (values[:, None] + w * f[None, :]).ravel()
        probs = (probs[:, None] * pf[None, :]).ravel()
        keys, inverse = np.unique(np.round(values, 12), return_inverse=True)
        if keys.size > EXACT_SUMS:
            break
        values, probs = keys, np.bincount(inverse.ravel(), weights=probs)
    else:
        return float(min(1.0, np.sum(probs[hit(values)])))
    rng = rng if rng is not None else stats.rng_for(0, "stratified_binary_p")  # too many distinct sums: Monte Carlo
    draws = np.full(resamples, fixed)
    for ka, na, kb, nb in informative:
        k = rng.hypergeometric(ka + kb, na + nb - ka - kb, na, resamples)
        draws += w * (k / na - (ka + kb - k) / nb)
    return (1 + int(np.sum(hit(draws)))) / (1 + resamples)


def _one_lattice(tables, fixed: float, w: float):
    """``stratified_binary_p``'s null distribution when every table has the same ``(n_arm, n_base)``: the statistic is
    ``fixed + w (K (1/n_arm + 1/n_base) - M / n_base)`` with ``K`` the arm's passes summed over the cases and ``M`` the
    cases' passes, so it is the convolution of the cases' hypergeometric laws of ``k`` on the whole numbers (one
    ``numpy.convolve`` per case, sums of positive terms only: exact as the general path, without sorting every
    partial sum). None when it has more than ``EXACT_SUMS`` values (the Monte Carlo path decides then, as before).
    Returns ``(values, probabilities)``."""
    import numpy as np

    na, nb = tables[0][1], tables[0][3]
    probs, low, total = np.array([1.0]), 0, 0
    for ka, _, kb, _ in tables:
        f, pf = _case_null(ka, na, kb, nb)
        m = ka + kb
        low += max(0, m - nb)
        total += m
        probs = np.convolve(probs, pf)
        if probs.size > EXACT_SUMS:
            return None
    k = low + np.arange(probs.size)
    return fixed + w * (k * (1.0 / na + 1.0 / nb) - total / nb), probs


def stratified_pass_interval(tables: Sequence[tuple[int, int, int, int]], confidence: float = 0.95) -> tuple[float, float]:
    """Interval for the mean over cases of the pass-rate difference (arm - baseline), each case weighted equally.

    Zou & Donner's MOVER ("Construction of confidence limits about effect measures: a general approach",
    Statistics in Medicine 27, 2008) with Wilson limits of every proportion: ``d -/+ sqrt(sum_c w_c^2 [(p_a -
    l_a)^2 + (u_b - p_b)^2])`` (upper: the mirror terms). With one case this is exactly Newcombe's hybrid score
    interval (``stats.newcombe_interval``). Within [-1, 1]. ``(-1.0, 1.0)`` when no case has both sides.
    """
    tables = [t for t in tables if t[1] > 0 and t[3] > 0]
    if not tables:
        return (-1.0, 1.0)
    w = 1.0 / len(tables)
    d = low = high = 0.0
    for ka, na, kb, nb in tables:
        pa, pb = ka / na, kb / nb
        la, ua = stats.wilson_interval(ka, na, confidence)
        lb, ub = stats.wilson_interval(kb, nb, confidence)
        d += w * (pa - pb)
        low += w * w * ((pa - la) ** 2 + (ub - pb) ** 2)
        high += w * w * ((ua - pa) ** 2 + (pb - lb) ** 2)
    return (max(-1.0, d - math.sqrt(low)), min(1.0, d + math.sqrt(high)))
