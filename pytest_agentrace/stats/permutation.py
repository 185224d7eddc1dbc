"""Permutation tests with a leading batch axis, the resampling engine's other half (``stats.resample`` has the
bootstrap): a stratified permutation test of arm against baseline over cases (exact up to ``EXACT_PERMUTATIONS``
relabellings, Monte Carlo beyond), one-case permutation tests, and a sign-flip test over cases. Every function takes
``T`` independent data sets at once and returns arrays of length ``T``; numpy is imported inside functions. Sources
are in ``stats``' module docstring.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence

from pytest_agentrace.stats.resample import EXACT_PERMUTATIONS, EXACT_SIGN_FLIP_CASES, SHARED, _prepare, blocks


@functools.lru_cache(maxsize=64)
def splits(n: int, k: int):
    """Every way to pick ``k`` of ``n`` indices, as a read-only int array (C(n, k), k); cached."""
    import numpy as np

    idx = np.array(list(itertools.combinations(range(n), k)), dtype=np.int64).reshape(-1, k)
    idx.setflags(write=False)
    return idx


def stratified_permutation_p(cases: Sequence[tuple], kind: str = "ratio", resamples: int = 10_000, rng=None,
                             exact_limit: int = EXACT_PERMUTATIONS):
    """Two-sided stratified permutation test of "no difference between arm and baseline in any case", for T data
    sets: arm labels are permuted within each case only (each case keeps its runs, so cases may differ in scale
    and in their true ratios). The test of the *fixed cases* target; with one case the ordinary two-sample
    permutation test.

    ``cases``: per case ``(A, B)`` arrays (T, n_arm), (T, n_base). Statistic: ``|mean over cases of log(mean A /
    mean B)|`` (``kind`` ratio; rows with a value <= 0 use the mean over cases of ``(mean A - mean B) / mean of the
    case's runs``) or ``|mean over cases of (mean A - mean B)|`` (difference). Both change sign when every label is
    swapped, so the observed labelling and its mirror image are equally extreme and the smallest p is ``2 / M``. Every relabelling is enumerated when there are at most ``exact_limit`` (the product over cases
    of ``C(n_arm + n_base, n_arm)``); otherwise ``resamples`` random relabellings give the Monte Carlo p-value
    ``(1 + hits) / (1 + resamples)`` (Phipson & Smyth 2010), which is itself a valid p-value.
    Returns ``(p, error)`` arrays: ``error`` is the Monte Carlo standard error ``sqrt(p (1 - p) / resamples)``,
    0 where the p-value is exact.
    """
    import numpy as np

    data = _prepare(cases)
    t_count = data[0][0].shape[0]
    plan = Relabelling(data, kind)
    pooled, sizes, contribution, threshold, total = plan.pooled, plan.sizes, plan.contribution, plan.threshold, plan.total

    def statistic(acc, rows):
        return np.abs(acc)

    everyone = np.arange(t_count)
    p, err = np.empty(t_count), np.zeros(t_count)
    if total <= exact_limit:
        pick = [indicator(splits(na + nb, na), na + nb) for na, nb in sizes]
        for blk in blocks(t_count, total + max(m.shape[0] for m in pick)):
            rows = everyone[blk]
            acc = None
            for j, x in enumerate(pooled):
                c = contribution(j, np.einsum("tn,mn->tm", x[blk], pick[j]), rows)
                acc = c if acc is None else (acc[:, :, None] + c[:, None, :]).reshape(rows.size, -1)
            p[blk] = np.mean(statistic(acc, rows) >= threshold[blk, None], axis=1)
        return p, err
    rng = rng if rng is not None else np.random.default_rng(0)
    if getattr(rng, "sums", None) is not None:  # summed as the cases were drawn (draws.report_figures)
        p[:] = plan.monte_carlo_p(rng.sums, everyone)
        return p, np.sqrt(p * (1 - p) / resamples)
    for start in range(0, t_count, SHARED):  # rows of a block share their random relabellings
        rows = everyone[start:start + SHARED]
        acc = 0.0
        for j, x in enumerate(pooled):
            na, nb = sizes[j]
            if hasattr(rng, "summed") and rows.size == 1:  # relabellings owned by the case (draws.Streams)
                sa = rng.summed(x[rows], na, nb)
            else:
                chosen = rng.chosen(na, nb) if hasattr(rng, "chosen") else smallest(rng.random((resamples, na + nb)), na)
                sa = np.einsum("tn,rn->tr", x[rows], chosen.astype(float, copy=False))
            acc = acc + contribution(j, sa, rows)
        p[rows] = plan.monte_carlo_p(acc, rows)
    err = np.sqrt(p * (1 - p) / resamples)
    return p, err


class Relabelling:
    """What ``stratified_permutation_p`` knows of its data before any relabelling: ``pooled`` runs per case (T,
    n_arm + n_base), ``sizes``, the number of relabellings ``total``, the ``threshold`` (T,) a relabelled statistic
    must reach to count as a hit, and ``contribution(j, sa, rows)``: case ``j``'s term for relabellings whose arm
    runs sum to ``sa``. ``data``: per case the (T, n) arrays; ``kind``: ratio or difference."""

    def __init__(self, data, kind: str) -> None:
        import numpy as np

        t_count, self.k, self.kind = data[0][0].shape[0], len(data), kind
        self.pooled = [np.concatenate([a, b], axis=1) for a, b in data]
        self.sizes = [(a.shape[1], b.shape[1]) for a, b in data]
        self.totals = [x.sum(axis=1, keepdims=True) for x in self.pooled]
        if kind == "ratio":
            self.use_log = np.all([x.min(axis=1) > 0 for x in self.pooled], axis=0)[:, None]
        else:
            self.use_log = np.zeros((t_count, 1), dtype=bool)
        everyone = np.arange(t_count)
        observed = np.abs(sum(self.contribution(j, a.sum(axis=1, keepdims=True), everyone) for j, (a, _) in enumerate(data)))[:, 0]
        self.threshold = observed * (1 - 1e-9) - 1e-12
        self.total = math.prod(math.comb(na + nb, na) for na, nb in self.sizes)

    def contribution(self, j: int, sa, rows):
        return relabelled_contribution(sa, self.totals[j][rows], *self.sizes[j], self.kind, self.k, self.use_log[rows])

    def monte_carlo_p(self, acc, rows):
        """``(1 + hits) / (1 + M)`` of the rows ``rows`` from ``acc`` (T, M): the statistic's sum over cases of
        ``contribution`` for ``M`` random relabellings."""
        import numpy as np

        hits = np.sum(np.abs(acc) >= self.threshold[rows, None], axis=1)
        return (1 + hits) / (1 + acc.shape[1])


def relabelled_contribution(sa, tot, na: int, nb: int, kind: str, k: int, use_log):
    """One case's term of ``stratified_permutation_p``'s statistic (before the absolute value) for relabellings
    whose arm-labelled runs sum to ``sa`` (T, M): ``log(mean A / mean B) / k`` (ratio, where ``use_log`` (T, 1));
    ``(mean A - mean B) / (mean of the case's runs) / k`` (ratio elsewhere); ``(mean A - mean B) / k``
    (difference). ``tot`` (T, 1): the case's sum over its ``na + nb`` runs; ``k`` the cases of the statistic."""
    import numpy as np

    ma, mb = sa / na, (tot - sa) / nb
    with np.errstate(divide="ignore", invalid="ignore"):
        if kind == "ratio":
            if np.all(use_log):  # every row on the log scale (positive tokens): the relative difference is not read
                return np.log(ma / mb) / k
            scale = tot / (na + nb)
            rel = np.where(scale > 0, (ma - mb) / np.where(scale > 0, scale, 1.0), 0.0)
            return np.where(use_log, np.log(ma / mb), rel) / k
        return (ma - mb) / k


def smallest(keys, k: int):
    """0/1 rows (M, n) marking the ``k`` smallest of each row of ``keys`` (M, n): ``indicator(argsort(keys)[:, :k])``,
    found from the sorted keys (numpy's vectorised ``sort`` of floats is several times faster than ``argsort``) as
    the keys at or below each row's ``k``-th smallest. A row whose ``k``-th and ``k+1``-th smallest keys are equal (a
    tie across the cut; random floats: about ``n^2 / 2^53`` per row) takes ``argsort``'s pick, so the marks are those
    of ``argsort`` in every row."""
    import numpy as np

    ordered = np.sort(keys, axis=1)
    out = (keys <= ordered[:, k - 1:k]).astype(float)
    if k < keys.shape[1]:
        tied = np.flatnonzero(ordered[:, k - 1] == ordered[:, k])
        if tied.size:
            out[tied] = indicator(np.argsort(keys[tied], axis=1)[:, :k], keys.shape[1])
    return out


def indicator(idx, n: int):
    """0/1 rows (M, n) marking the chosen indices ``idx`` (M, k) of each row (sums become one matrix product)."""
    import numpy as np

    out = np.zeros((idx.shape[0], n))
    out[np.arange(idx.shape[0])[:, None], idx] = 1.0
    return out


def permutation_p(a, b, resamples: int = 10_000, rng=None, log_ratio: bool = True):
    """Two-sided permutation p-values for T two-sample data sets ``a`` (T, na), ``b`` (T, nb): the one-case
    ``stratified_permutation_p`` (statistic ``|log(mean a / mean b)|``, rows with a value <= 0 the relative
    difference of means; or ``|mean a - mean b|`` without ``log_ratio``). Exact up to ``EXACT_PERMUTATIONS``
    relabellings (8 + 8 runs: 12,870), else ``(1 + hits) / (1 + resamples)`` (Phipson & Smyth 2010)."""
    return stratified_permutation_p([(a, b)], "ratio" if log_ratio else "difference", resamples, rng)[0]


def sign_flip_p(d, resamples: int = 10_000, rng=None):
    """Two-sided sign-flip p-values for T sets of per-case differences ``d`` (T, n): exact (all ``2^n`` patterns)
    up to ``EXACT_SIGN_FLIP_CASES`` cases, else ``resamples`` random patterns with ``(1 + hits) / (1 + resamples)``."""
    import numpy as np

    d = np.atleast_2d(np.asarray(d, dtype=float))
    t_count, n = d.shape
    observed = np.abs(d.mean(axis=1)) - 1e-12
    if n <= EXACT_SIGN_FLIP_CASES:
        signs = 1.0 - 2.0 * ((np.arange(2**n)[:, None] >> np.arange(n)[None, :]) & 1)
        out = np.empty(t_count)
        for blk in blocks(t_count, 2**n):
            out[blk] = np.mean(np.abs(d[blk] @ signs.T) / n >= observed[blk, None], axis=1)
        return out
    rng = rng if rng is not None else np.random.default_rng(0)
    signs = rng.choice(np.array([-1.0, 1.0]), size=(resamples, n))
    return (1 + np.sum(np.abs(d @ signs.T) / n >= observed[:, None], axis=1)) / (1 + resamples)
