"""The resampling engine behind ``stats``: bootstrap intervals and permutation tests with a leading batch axis.

Every function takes ``T`` independent data sets at once (arrays of shape ``(T, ...)``) and returns arrays of
length ``T``. A report calls them with ``T = 1`` (through the wrappers in ``stats``); the simulation tests call
the very same code with thousands of simulated trials. Memory is bounded by working in blocks.
Methods and their sources are described in ``stats``' module docstring. numpy/scipy are imported inside
functions. Interval methods are coded ``METHODS[i]``: none, point, percentile, bca.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterator, Sequence

METHODS = ("none", "point", "percentile", "bca")
NONE, POINT, PERCENTILE, BCA = range(4)
EXACT_PERMUTATIONS = 5_000  # enumerate label permutations exactly up to this many (7 + 7 runs: 3,432)
EXACT_SIGN_FLIP_CASES = 16  # enumerate all 2^n sign patterns up to this many cases
BLOCK = 2_000_000  # array elements per working block


def blocks(total: int, per_item: int) -> Iterator[slice]:
    """Slices of ``range(total)`` whose items times ``per_item`` stay near ``BLOCK`` elements."""
    step = max(1, BLOCK // max(1, per_item))
    for start in range(0, total, step):
        yield slice(start, min(total, start + step))


def critical(u, n, confidence: float = 0.95):
    """Expanded critical values (see ``stats``): ``u`` (T, K) variance contributions of K groups of sizes ``n`` (K,).

    ``t_{1-a/2, df} * sqrt(V / V_boot)`` with Welch-Satterthwaite ``df``; the normal ``z`` where no group has
    ``n >= 2`` and ``u > 0``. Returns (T,)."""
    import numpy as np
    from scipy.special import ndtri, stdtrit

    u = np.atleast_2d(np.asarray(u, dtype=float))
    n = np.broadcast_to(np.asarray(n, dtype=float), u.shape)
    used = (n >= 2) & (u > 0) & np.isfinite(u)
    uu = np.where(used, u, 0.0)
    nn = np.where(used, n, 2.0)
    v = uu.sum(axis=1)
    v_boot = (uu * (nn - 1) / nn).sum(axis=1)
    denom = (uu * uu / (nn - 1)).sum(axis=1)
    z = float(-ndtri((1.0 - confidence) / 2.0))
    ok = v > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(ok, v * v / np.where(denom > 0, denom, 1.0), 1.0)
        crit = stdtrit(df, 1.0 - (1.0 - confidence) / 2.0) * np.sqrt(np.where(ok, v / v_boot, 1.0))
    return np.where(ok, crit, z)


def interval(estimate, boot, jack=None, crit=None, confidence: float = 0.95):
    """BCa (else percentile) intervals from bootstrap replicates ``boot`` (T, B) of statistics with values
    ``estimate`` (T,); ``jack`` (T, J) jackknife values for the acceleration (NaN entries ignored; 0 when they do
    not vary); ``crit`` (T,) critical values (default normal). Non-finite replicates are dropped.
    Returns ``(lo, hi, method)`` arrays (method codes index ``METHODS``; lo/hi NaN for ``none``)."""
    import numpy as np
    from scipy.special import ndtr, ndtri

    est = np.asarray(estimate, dtype=float).reshape(-1)
    boot = np.where(np.isfinite(boot), boot, np.nan)
    t_count = boot.shape[0]
    rows = np.arange(t_count)
    s = np.sort(boot, axis=1)  # NaN sorts last
    m = np.isfinite(s).sum(axis=1)
    none = (m == 0) | ~np.isfinite(est)
    last = np.maximum(m - 1, 0)
    lo_v, hi_v = s[rows, 0], s[rows, last]
    point = ~none & (lo_v == hi_v)
    z = np.full(t_count, float(-ndtri((1.0 - confidence) / 2.0))) if crit is None else np.asarray(crit, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        below = np.nansum(boot < est[:, None], axis=1) + 0.5 * np.nansum(boot == est[:, None], axis=1)
        share = below / np.maximum(m, 1)
        bc_ok = (share > 0) & (share < 1)
        z0 = ndtri(np.clip(share, 1e-12, 1 - 1e-12))
        a = np.zeros(t_count)
        if jack is not None:
            jk = np.asarray(jack, dtype=float)
            d = np.nanmean(jk, axis=1, keepdims=True) - jk
            ss = np.nansum(d * d, axis=1)
            a = np.where(ss > 0, np.nansum(d**3, axis=1) / (6.0 * np.where(ss > 0, ss, 1.0) ** 1.5), 0.0)
        levels = []
        for zz in (-z, z):
            den = 1.0 - a * (z0 + zz)
            lvl = ndtr(z0 + (z0 + zz) / np.where(den > 0, den, 1.0))
            bc_ok &= (den > 0) & (lvl > 0) & (lvl < 1)
            levels.append(lvl)
    lo_l = np.where(bc_ok, levels[0], ndtr(-z))
    hi_l = np.where(bc_ok, levels[1], ndtr(z))

    def quantile(level):
        pos = level * last
        i = np.floor(pos).astype(np.int64)
        j = np.minimum(i + 1, last)
        return s[rows, i] + (pos - i) * (s[rows, j] - s[rows, i])

    lo, hi = quantile(lo_l), quantile(hi_l)
    method = np.where(none, NONE, np.where(point, POINT, np.where(bc_ok, BCA, PERCENTILE)))
    lo = np.where(none, np.nan, np.where(point, lo_v, lo))
    hi = np.where(none, np.nan, np.where(point, hi_v, hi))
    return lo, hi, method


def _var(x):
    import numpy as np

    return x.var(axis=-1, ddof=1) if x.shape[-1] >= 2 else np.zeros(x.shape[:-1])


def _resampled_means(x, rows, rng):
    """Means of one bootstrap resample of ``x[rows[i]]`` for each i (x: (T, n); rows: (M,)). Returns (M,)."""
    import numpy as np

    n = x.shape[1]
    out = np.empty(rows.size)
    for blk in blocks(rows.size, n):
        r = rows[blk]
        out[blk] = x[r[:, None], rng.integers(0, n, size=(r.size, n))].mean(axis=1)
    return out


def mean_interval(x, confidence: float = 0.95, resamples: int = 10_000, rng=None):
    """Bootstrap intervals for the means of the rows of ``x`` (T, n): BCa with the small-sample expansion
    (jackknife: leave one out). Fewer than 2 values -> none. Returns ``(lo, hi, method)``."""
    import numpy as np

    x = np.atleast_2d(np.asarray(x, dtype=float))
    t_count, n = x.shape
    if n < 2:
        nan = np.full(t_count, np.nan)
        return nan, nan.copy(), np.full(t_count, NONE)
    rng = rng if rng is not None else np.random.default_rng(0)
    boot = _resampled_means(x, np.repeat(np.arange(t_count), resamples), rng).reshape(t_count, resamples)
    jack = (x.sum(axis=1, keepdims=True) - x) / (n - 1)
    crit = critical((_var(x) / n)[:, None], [n], confidence)
    return interval(x.mean(axis=1), boot, jack, crit, confidence)


def contrast_value(ma, mb, kind: str):
    import numpy as np

    with np.errstate(divide="ignore", invalid="ignore"):
        return ma / mb if kind == "ratio" else ma - mb


def cluster_contrast(cases: Sequence[tuple], kind: str = "ratio", confidence: float = 0.95, resamples: int = 10_000, rng=None):
    """Two-stage (cases, then runs within each case) bootstrap of an arm-vs-baseline contrast, for T data sets.

    ``cases``: per case ``(A, B)`` arrays (T, n_arm) and (T, n_base) - sizes may differ between cases, not between
    data sets. Statistic: mean over cases of ``contrast(mean A, mean B)`` (``kind`` ratio or difference).
    Jackknife: leave one case out (several cases) or one run out (one case). Critical value: the expansion over
    the per-case, per-side groups (delta method), and for several cases at least the case-level one (C - 1 df).
    Returns ``(estimate, lo, hi, method, spread)``; ``spread`` False where every group had a single distinct value.
    """
    import numpy as np

    data = [(np.atleast_2d(np.asarray(a, dtype=float)), np.atleast_2d(np.asarray(b, dtype=float))) for a, b in cases]
    t_count, k = data[0][0].shape[0], len(data)
    rng = rng if rng is not None else np.random.default_rng(0)
    means = [(a.mean(axis=1), b.mean(axis=1)) for a, b in data]
    per_case = np.stack([contrast_value(ma, mb, kind) for ma, mb in means], axis=1)  # (T, k)
    estimate = per_case.mean(axis=1)
    spread = np.zeros(t_count, dtype=bool)
    for a, b in data:
        spread |= (np.ptp(a, axis=1) > 0) | (np.ptp(b, axis=1) > 0)
    if k == 1 and data[0][0].shape[1] < 2 and data[0][1].shape[1] < 2:
        nan = np.full(t_count, np.nan)
        return estimate, nan, nan.copy(), np.full(t_count, NONE), spread
    picks = rng.integers(0, k, size=(t_count, resamples, k)) if k > 1 else np.zeros((t_count, resamples, 1), dtype=np.int64)
    values = np.empty(picks.shape)
    for j, (a, b) in enumerate(data):
        t_idx, b_idx, s_idx = np.nonzero(picks == j)
        values[t_idx, b_idx, s_idx] = contrast_value(_resampled_means(a, t_idx, rng), _resampled_means(b, t_idx, rng), kind)
    boot = values.mean(axis=2)
    if k > 1:
        jack = (per_case.sum(axis=1, keepdims=True) - per_case) / (k - 1)
    else:
        a, b = data[0]
        cols = []
        if a.shape[1] > 1:
            cols.append(contrast_value((a.sum(axis=1, keepdims=True) - a) / (a.shape[1] - 1), b.mean(axis=1, keepdims=True), kind))
        if b.shape[1] > 1:
            cols.append(contrast_value(a.mean(axis=1, keepdims=True), (b.sum(axis=1, keepdims=True) - b) / (b.shape[1] - 1), kind))
        jack = np.concatenate(cols, axis=1)
    u, sizes = [], []
    for (a, b), (ma, mb) in zip(data, means, strict=True):
        with np.errstate(divide="ignore", invalid="ignore"):
            ga, gb = (1.0 / mb, -ma / mb**2) if kind == "ratio" else (np.ones(t_count), -np.ones(t_count))
        u += [(ga / k) ** 2 * _var(a) / a.shape[1], (gb / k) ** 2 * _var(b) / b.shape[1]]
        sizes += [a.shape[1], b.shape[1]]
    crit = critical(np.stack(u, axis=1), sizes, confidence)
    if k > 1:
        crit = np.maximum(crit, critical((_var(per_case) / k)[:, None], [k], confidence))
    lo, hi, method = interval(estimate, boot, jack, crit, confidence)
    return estimate, lo, hi, method, spread


@functools.lru_cache(maxsize=64)
def splits(n: int, k: int):
    """Every way to pick ``k`` of ``n`` indices, as a read-only int array (C(n, k), k); cached."""
    import numpy as np

    idx = np.array(list(itertools.combinations(range(n), k)), dtype=np.int64).reshape(-1, k)
    idx.setflags(write=False)
    return idx


def permutation_p(a, b, resamples: int = 10_000, rng=None, log_ratio: bool = True):
    """Two-sided permutation p-values for T two-sample data sets ``a`` (T, na), ``b`` (T, nb).

    Statistic ``|log(mean a / mean b)|`` (rows with a value <= 0 use ``|mean a - mean b|``) or ``|mean a - mean b|``.
    Every relabelling is enumerated when there are at most ``EXACT_PERMUTATIONS``; otherwise ``resamples`` random
    relabellings give ``(1 + hits) / (1 + resamples)`` (Phipson & Smyth 2010), which keeps the test exact."""
    import numpy as np

    a, b = np.atleast_2d(np.asarray(a, dtype=float)), np.atleast_2d(np.asarray(b, dtype=float))
    t_count, na = a.shape
    nb = b.shape[1]
    pooled = np.concatenate([a, b], axis=1)
    total = pooled.sum(axis=1, keepdims=True)
    use_log = (np.min(pooled, axis=1, keepdims=True) > 0) if log_ratio else np.zeros((t_count, 1), dtype=bool)

    def stat(sa, tot, ul):
        ma, mb = sa / na, (tot - sa) / nb
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(ul, np.abs(np.log(ma / mb)), np.abs(ma - mb))

    observed = stat(a.sum(axis=1, keepdims=True), total, use_log)[:, 0] - 1e-12
    out = np.empty(t_count)
    if math.comb(na + nb, na) <= EXACT_PERMUTATIONS:
        idx = splits(na + nb, na)
        for blk in blocks(t_count, idx.size):
            sa = pooled[blk][:, idx].sum(axis=2)
            out[blk] = np.mean(stat(sa, total[blk], use_log[blk]) >= observed[blk, None], axis=1)
        return out
    rng = rng if rng is not None else np.random.default_rng(0)
    for blk in blocks(t_count, resamples * (na + nb)):
        perm = rng.permuted(np.repeat(pooled[blk, None, :], resamples, axis=1), axis=2)
        hits = np.sum(stat(perm[:, :, :na].sum(axis=2), total[blk], use_log[blk]) >= observed[blk, None], axis=1)
        out[blk] = (1 + hits) / (1 + resamples)
    return out


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
