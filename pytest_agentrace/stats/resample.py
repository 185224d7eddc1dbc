"""The resampling engine behind ``stats``: bootstrap intervals and permutation tests with a leading batch axis.

Every function takes ``T`` independent data sets at once (arrays of shape ``(T, ...)``) and returns arrays of
length ``T``. A report calls them with ``T = 1`` (through the wrappers in ``stats``); the simulation tests call
the very same code with thousands of simulated trials. Memory is bounded by working in blocks.
Methods and their sources are described in ``stats``' module docstring. numpy/scipy are imported inside
functions. Interval methods are coded ``METHODS[i]``: none, point, percentile, bca, bootstrap-t, clustered-t.

Relative cost over several cases is the *geometric* mean over cases of the per-case ratios of mean cost,
``exp(mean_c log(mean A_c / mean B_c))``: the quantity the permutation and sign-flip tests are about, and one whose
estimate carries no first-order bias when both arms have the same spread (the arithmetic mean of ratios of sample
means is biased upward by about ``CV^2 / n``: 1.16 at 4 runs and CV 0.8 in an A/A trial). With one case it is the
ratio of mean costs.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

METHODS = ("none", "point", "percentile", "bca", "bootstrap-t", "clustered-t")
NONE, POINT, PERCENTILE, BCA, STUDENTIZED, CLUSTERED = range(6)
EXACT_PERMUTATIONS = 20_000  # enumerate label permutations exactly up to this many (8 + 8 runs: 12,870)
EXACT_SIGN_FLIP_CASES = 16  # enumerate all 2^n sign patterns up to this many cases
BLOCK = 2_000_000  # array elements per working block
DEFAULT_RESAMPLES = 10_000  # bootstrap resamples (and random permutations) per interval or test unless told
STUDENTIZED_DF = 14  # degrees of freedom in its runs from which a one-case relative-cost interval is studentized


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
    boot = np.asarray(boot, dtype=float)
    finite = np.isfinite(boot)
    m = finite.sum(axis=1)
    if m.min(initial=boot.shape[1]) < boot.shape[1]:  # non-finite replicates become NaN (no copy when there is none)
        boot = np.where(finite, boot, np.nan)
    t_count = boot.shape[0]
    rows = np.arange(t_count)
    none = (m == 0) | ~np.isfinite(est)
    last = np.maximum(m - 1, 0)
    z = np.full(t_count, float(-ndtri((1.0 - confidence) / 2.0))) if crit is None else np.asarray(crit, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):  # counts of NaN-free comparisons: NaN is neither below nor equal
        below = (boot < est[:, None]).sum(axis=1) + 0.5 * (boot == est[:, None]).sum(axis=1)
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
    with np.errstate(invalid="ignore"):
        places = [(level * last, np.floor(level * last)) for level in (lo_l, hi_l)]
    s = _ordered(boot, last, [k for _, f in places for k in (f, f + 1)])
    lo_v, hi_v = s[rows, 0], s[rows, last]
    point = ~none & (lo_v == hi_v)

    def quantile(pos, floor):
        i = floor.astype(np.int64)
        j = np.minimum(i + 1, last)
        return s[rows, i] + (pos - i) * (s[rows, j] - s[rows, i])

    lo, hi = quantile(*places[0]), quantile(*places[1])
    method = np.where(none, NONE, np.where(point, POINT, np.where(bc_ok, BCA, PERCENTILE)))
    lo = np.where(none, np.nan, np.where(point, lo_v, lo))
    hi = np.where(none, np.nan, np.where(point, hi_v, hi))
    return lo, hi, method


def _ordered(boot, last, wanted):
    """``boot`` (T, B) sorted along its rows (NaN last), or - one row - partitioned so that its first, ``last``-th
    and ``wanted`` places (arrays of whole floats) hold what a sort puts there (``numpy.partition``: the same values,
    without sorting the rest)."""
    import numpy as np

    if boot.shape[0] != 1 or not all(np.isfinite(w).all() for w in wanted):
        return np.sort(boot, axis=1)
    kth = sorted({0, int(last[0])} | {min(max(int(w[0]), 0), int(last[0])) for w in wanted})
    return np.partition(boot, kth, axis=1)


def _var(x):
    import numpy as np

    return x.var(axis=-1, ddof=1) if x.shape[-1] >= 2 else np.zeros(x.shape[:-1])


SHARED = 64  # data sets of a batch that share one set of bootstrap draws / random relabellings


def _whole(x) -> bool:
    """True when every value of ``x`` is a whole number and any sum of as many of them as ``x`` has columns is
    exact in a float64 (below 2^53): such sums come out the same in any order."""
    import numpy as np

    big = float(np.abs(x).max(initial=0.0)) * x.shape[-1]
    return big < 2.0**53 and bool(np.all(np.floor(x) == x))


def resampled_means(x, resamples: int, rng, moments: bool = False):
    """Means of ``resamples`` bootstrap resamples of every row of ``x`` (T, n), as (T, resamples); with
    ``moments`` also their sample variances (ddof 1), as a pair.

    Each resample is a vector of counts (how often each run was drawn); blocks of ``SHARED`` rows share one set
    of draws, so the means are one product per block (``einsum``: numpy's own loops, which beat a multi-threaded
    BLAS on these small products when the cores are busy). A single row of whole numbers (a report's data set of
    tokens or scores) is summed straight from the drawn indices instead: its sums are exact either way, so the
    means are the same to the bit, without the counts. Rows without spread get their value exactly."""
    import numpy as np

    t_count, n = x.shape
    if t_count == 1 and hasattr(rng, "counted"):  # draws owned by a cell (``draws.Streams``)
        return rng.counted(x, moments)
    out = np.empty((t_count, resamples))
    second = np.empty((t_count, resamples)) if moments else None
    for start in range(0, t_count, SHARED):
        draws = rng.integers(0, n, size=(resamples, n))
        rows = x[start:start + SHARED]
        if second is None and rows.shape[0] == 1 and _whole(rows):  # one data set of whole numbers: sums are exact
            out[start] = np.einsum("rn->r", rows[0][draws]) / n
            continue
        counts = counts_of(draws)
        out[start:start + SHARED] = np.einsum("tn,rn->tr", rows, counts) / n
        if second is not None:
            second[start:start + SHARED] = _second(rows, counts)
    flat = np.ptp(x, axis=1) == 0
    if flat.any():
        out[flat] = x[flat, :1]
        if second is not None:
            second[flat] = 0.0
    return (out, second) if moments else out


COUNT_BLOCK = 100_000  # draws counted at once by ``counts_of`` (its working arrays stay in the CPU's cache)


def counts_of(draws, dtype=None):
    """How often each run was drawn: ``draws`` (B, n) indices in ``range(n)`` -> counts (B, n) of ``dtype`` (default
    numpy's integer): ``bincount`` of the rows, offset so one call counts a block of rows, block by block."""
    import numpy as np

    resamples, n = draws.shape
    out = np.empty((resamples, n), dtype=np.intp if dtype is None else dtype)
    step = max(1, COUNT_BLOCK // max(n, 1))
    offsets = n * np.arange(min(step, resamples), dtype=np.intp)[:, None]
    for start in range(0, resamples, step):
        block = draws[start:start + step]
        flat = block.astype(np.intp)  # the one index array ``bincount`` takes, offset in place
        flat += offsets[:block.shape[0]]
        out[start:start + step] = np.bincount(flat.ravel(), minlength=block.size).reshape(block.shape)
    return out


def _second(rows, counts):
    """Sample variances (ddof 1) of the resamples ``counts`` (B, n) of every row of ``rows`` (T, n), as (T, B)."""
    import numpy as np

    n = rows.shape[1]
    centred = rows - rows.mean(axis=1, keepdims=True)  # shift first: variances of large tokens lose no digits
    m1 = np.einsum("tn,rn->tr", centred, counts) / n
    return np.maximum(np.einsum("tn,rn->tr", centred * centred, counts) / n - m1 * m1, 0.0) * n / max(n - 1, 1)


def counted_means(x, counts, moments: bool = False):
    """``resampled_means`` of one data set ``x`` (1, n) from given resamples ``counts`` (B, n) float
    (``counts_of``): how ``resampled_means`` serves draws owned by a cell (``draws.Streams``), each figure one
    product with the counts (``einsum``: numpy's own loop, which beats a multi-threaded BLAS on these small products
    when the cores are busy). Returns (1, B), with ``moments`` also the variances (``_second``)."""
    import numpy as np

    n = x.shape[1]
    out = np.einsum("tn,rn->tr", x, counts) / n
    second = _second(x, counts) if moments else None
    if np.ptp(x) == 0:
        out[:] = x[0, 0]
        if second is not None:
            second[:] = 0.0
    return (out, second) if moments else out


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
    boot = resampled_means(x, resamples, rng)
    jack = (x.sum(axis=1, keepdims=True) - x) / (n - 1)
    crit = critical((_var(x) / n)[:, None], [n], confidence)
    return interval(x.mean(axis=1), boot, jack, crit, confidence)


def contrast_value(ma, mb, kind: str):
    """The per-case contrast of means: ``ma / mb`` (ratio), ``log(ma / mb)`` (log), ``ma - mb`` (difference)."""
    import numpy as np

    with np.errstate(divide="ignore", invalid="ignore"):
        if kind == "log":
            return np.log(ma / mb)
        return ma / mb if kind == "ratio" else ma - mb


def over_cases(per_case, kind: str):
    """The statistic over cases of per-case contrasts ``per_case`` (..., K): for ratios the geometric mean (the mean of
    their logs, exponentiated), for differences the mean; each case weighted equally."""
    import numpy as np

    with np.errstate(divide="ignore", invalid="ignore"):
        return np.exp(np.log(per_case).mean(axis=-1)) if kind == "ratio" else per_case.mean(axis=-1)


def _prepare(cases):
    import numpy as np

    return [(np.atleast_2d(np.asarray(a, dtype=float)), np.atleast_2d(np.asarray(b, dtype=float))) for a, b in cases]


def _spread(data, t_count: int):
    import numpy as np

    spread = np.zeros(t_count, dtype=bool)
    for a, b in data:
        spread |= (np.ptp(a, axis=1) > 0) | (np.ptp(b, axis=1) > 0)
    return spread


def _delta_parts(data, means, kind: str, k: int):
    """Delta-method variance contributions ``(g/k)^2 s^2 / n`` of every (case, side) group and the group sizes."""
    import numpy as np

    t_count = data[0][0].shape[0]
    u, sizes = [], []
    for (a, b), (ma, mb) in zip(data, means, strict=True):
        with np.errstate(divide="ignore", invalid="ignore"):
            ga, gb = ((1.0 / mb, -ma / mb**2) if kind == "ratio" else (1.0 / ma, -1.0 / mb) if kind == "log"
                      else (np.ones(t_count), -np.ones(t_count)))
        u += [(ga / k) ** 2 * _var(a) / a.shape[1], (gb / k) ** 2 * _var(b) / b.shape[1]]
        sizes += [a.shape[1], b.shape[1]]
    return np.stack(u, axis=1), sizes


def _run_jackknife(data, means, kind: str):
    """Leave-one-run-out values of the mean-over-cases contrast, one column per run (every case and side), scaled
    so that ``mean - value`` approximates each run's empirical influence over its group size (the acceleration of a
    stratified bootstrap, Davison & Hinkley 1997 sec. 3.2.1): column values ``theta - (n_g - 1)/n_g (theta - theta_(-i))``."""
    import numpy as np

    k = len(data)
    per_case = np.stack([contrast_value(ma, mb, kind) for ma, mb in means], axis=1)
    theta = per_case.mean(axis=1, keepdims=True)
    cols = []
    for j, ((a, b), (ma, mb)) in enumerate(zip(data, means, strict=True)):
        for side, x in ((0, a), (1, b)):
            n = x.shape[1]
            if n < 2:
                continue
            loo = (x.sum(axis=1, keepdims=True) - x) / (n - 1)
            c = contrast_value(loo, mb[:, None], kind) if side == 0 else contrast_value(ma[:, None], loo, kind)
            value = theta + (c - per_case[:, j:j + 1]) / k  # theta with this run left out
            cols.append(theta - (n - 1) / n * (theta - value))
    return np.concatenate(cols, axis=1) if cols else None


def cluster_contrast(cases: Sequence[tuple], kind: str = "ratio", confidence: float = 0.95, resamples: int = 10_000, rng=None):
    """Interval of an arm-vs-baseline contrast for *new cases* like these (``--agentrace-generalize cases``), for T
    data sets: cases are the sampled units, so the interval rests on the spread of the per-case contrasts alone.

    ``cases``: per case ``(A, B)`` arrays (T, n_arm) and (T, n_base) - sizes may differ between cases, not between
    data sets. Per-case values ``log(mean A / mean B)`` (ratio) or ``mean A - mean B`` (difference); statistic their
    mean ``m`` over the ``K`` cases (reported as ``exp(m)`` for ratios: the geometric mean of the case ratios). Interval
    ``m -/+ t_{1-a/2, K-1} s / sqrt(K)``, ``s`` the sd of the per-case values: the clustered standard error with a t
    critical value on ``K - 1`` degrees of freedom (E. Miller, "Adding Error Bars to Evals", 2024, sec. 2.2; cluster
    = case). The runs' noise within a case is in the spread of the per-case values once - a two-stage bootstrap
    (cases, then runs within them) counts it twice and covered 97-99.8% at a nominal 95%. Method ``clustered-t``.
    One case: ``stratified_contrast`` (no case-to-case spread to measure). ``resamples`` and ``rng`` serve that case.
    Returns ``(estimate, lo, hi, method, spread)``; ``spread`` False where every group had a single distinct value.
    """
    import numpy as np
    from scipy.special import stdtrit

    data = _prepare(cases)
    t_count, k = data[0][0].shape[0], len(data)
    if k == 1:
        return stratified_contrast(cases, kind, confidence, resamples, rng)
    per_case = np.stack([contrast_value(a.mean(axis=1), b.mean(axis=1), "log" if kind == "ratio" else kind) for a, b in data], axis=1)
    m = per_case.mean(axis=1)
    half = stdtrit(k - 1, 1.0 - (1.0 - confidence) / 2.0) * per_case.std(axis=1, ddof=1) / math.sqrt(k)
    ok = np.isfinite(m) & np.isfinite(half)
    back = np.exp if kind == "ratio" else (lambda x: x)
    with np.errstate(over="ignore", invalid="ignore"):
        estimate, lo, hi = back(m), np.where(ok, back(m - half), np.nan), np.where(ok, back(m + half), np.nan)
    method = np.where(ok, np.where(half == 0, POINT, CLUSTERED), NONE)
    return estimate, lo, hi, method, _spread(data, t_count)


def stratified_contrast(cases: Sequence[tuple], kind: str = "ratio", confidence: float = 0.95, resamples: int = 10_000, rng=None,
                        method: str | None = None):
    """Bootstrap stratified by case of an arm-vs-baseline contrast, for T data sets: the interval of the *fixed
    cases* target (the default). Each resample redraws, inside every case, the arm's runs and the baseline's runs
    with replacement (Davison & Hinkley 1997, sec. 3.2: the strata are fixed, only runs vary); the statistic is
    ``over_cases`` of the per-case ``contrast(mean A, mean B)``, each case weighted equally: for ratios the geometric
    mean of the case ratios (module docstring), for differences their mean. With one case this is the ordinary
    two-sample bootstrap. ``cases`` as for ``cluster_contrast``.

    ``method`` (default: ``t`` for ratios over several cases, and over one case from ``STUDENTIZED_DF`` degrees of
    freedom in its runs, ``n_a + n_b - 2``: 8 runs a side; else ``bca``):

    - ``t``: the symmetric bootstrap-t interval on the log scale (P. Hall, "On symmetric bootstrap confidence
      intervals", JRSS B 50, 1988; Efron & Tibshirani 1993, ch. 12): ``theta = mean_c log R_c`` (``R_c`` the case
      ratios of means) with its delta-method standard error ``se = sqrt(sum_c (s_a^2 / (n_a m_a^2) + s_b^2 / (n_b
      m_b^2))) / C``, ``q`` the ``confidence`` quantile of ``|theta* - theta| / se*`` over the resamples, interval
      ``exp(theta -/+ q se)``. On the log scale the ratio's skew is gone, so the symmetric quantile loses nothing:
      at 10 cases x 4 runs and log-sd 0.8 the misses split evenly between the two sides
      (``tests/test_sim_honest.py``; the arithmetic mean of the ratios, used before, missed 5-28 times as often above). Studentizing follows the skew of token
      costs that a percentile-type interval misses (``tests/test_sim_coverage.py``).
    - ``bca``: BCa with the small-sample expansion (module ``stats``), acceleration from leave-one-run-out values.
      For one case below ``STUDENTIZED_DF`` the standard errors of the resamples rest on too few runs: the
      bootstrap-t quantile grows (at 4 runs a side it covers 96-98%) and costs a third of the power, while BCa
      covers 93-94%. Over several cases the standard error pools every case's runs and stays stable (2 cases x 4
      runs: 95.5-96.3%, where BCa covers 92-93.5% at CV 0.8); with 2 runs per arm and case it is conservative.

    A case with fewer than 2 runs on both sides shows no spread of its own: the interval is then ``none`` (one
    run per arm and case cannot say how much a case's figure would move); so is a ``t`` interval whose quantile is
    infinite (more than ``1 - confidence`` of the resamples without spread). Returns ``(estimate, lo, hi, method,
    spread)``.
    """
    import numpy as np

    data = _prepare(cases)
    t_count, k = data[0][0].shape[0], len(data)
    rng = rng if rng is not None else np.random.default_rng(0)
    if method is None:
        enough = k > 1 or sum(a.shape[1] + b.shape[1] - 2 for a, b in data) >= STUDENTIZED_DF
        method = "t" if kind == "ratio" and enough else "bca"
    means = [(a.mean(axis=1), b.mean(axis=1)) for a, b in data]
    per_case = np.stack([contrast_value(ma, mb, kind) for ma, mb in means], axis=1)
    estimate = over_cases(per_case, kind)
    spread = _spread(data, t_count)
    nan = np.full(t_count, np.nan)
    if any(a.shape[1] < 2 and b.shape[1] < 2 for a, b in data):
        return estimate, nan, nan.copy(), np.full(t_count, NONE), spread
    if method == "t":
        if kind != "ratio":
            raise ValueError("stratified_contrast: method t is for ratios")
        return (estimate, *_symmetric_t(data, means, estimate, confidence, resamples, rng), spread)
    if kind == "ratio" and k > 1:  # BCa of the mean log ratio, carried back
        est_log, lo, hi, method_code, _ = stratified_contrast(cases, "log", confidence, resamples, rng, "bca")
        with np.errstate(over="ignore", invalid="ignore"):
            return estimate, np.exp(lo), np.exp(hi), method_code, spread
    boot = getattr(rng, "sums", None)
    if boot is None:
        boot = np.zeros((t_count, resamples))
        for a, b in data:
            boot += contrast_value(resampled_means(a, resamples, rng), resampled_means(b, resamples, rng), kind)
    return (estimate, *bca_contrast(data, means, estimate, boot, kind, confidence), spread)


def bca_contrast(data, means, estimate, boot_sum, kind: str, confidence: float = 0.95):
    """``stratified_contrast``'s BCa interval from ``boot_sum`` (T, B), the sum over cases (in case order, from
    zeros) of each resample's per-case contrast, with the acceleration from leave-one-run-out values and the
    small-sample expansion. ``data``/``means``: per case the arrays and their means. Returns ``(lo, hi, method)``."""
    import numpy as np

    k = len(data)
    boot = boot_sum / k
    if k == 1:
        a, b = data[0]
        ma, mb = means[0]
        cols = []
        if a.shape[1] > 1:
            cols.append(contrast_value((a.sum(axis=1, keepdims=True) - a) / (a.shape[1] - 1), mb[:, None], kind))
        if b.shape[1] > 1:
            cols.append(contrast_value(ma[:, None], (b.sum(axis=1, keepdims=True) - b) / (b.shape[1] - 1), kind))
        jack = np.concatenate(cols, axis=1)
    else:
        jack = _run_jackknife(data, means, kind)
    u, sizes = _delta_parts(data, means, kind, k)
    crit = critical(u, sizes, confidence)
    return interval(estimate, boot, jack, crit, confidence)


def log_ratio_se(means, variances, sizes):
    """``theta = mean over cases of log(m_a / m_b)`` and its delta-method standard error ``sqrt(sum_c (s_a^2 / (n_a
    m_a^2) + s_b^2 / (n_b m_b^2))) / C``: ``means``/``variances`` per case ``(m_a, m_b)`` / ``(s_a^2, s_b^2)`` arrays
    of one shape, ``sizes`` per case ``(n_a, n_b)``. Returns ``(theta, se)``."""
    import numpy as np

    k = len(means)
    terms = [log_ratio_terms(ma, mb, va, vb, na, nb) for (ma, mb), (va, vb), (na, nb) in zip(means, variances, sizes, strict=True)]
    with np.errstate(divide="ignore", invalid="ignore"):
        return sum(t[0] for t in terms) / k, np.sqrt(sum(t[1] for t in terms)) / k


def log_ratio_terms(ma, mb, va, vb, na: int, nb: int):
    """One case's terms of ``log_ratio_se``: ``log(m_a / m_b)`` and ``s_a^2 / (n_a m_a^2) + s_b^2 / (n_b m_b^2)``
    (their sums over cases, in case order, make ``theta * C`` and ``(se * C)^2``)."""
    import numpy as np

    with np.errstate(divide="ignore", invalid="ignore"):
        return np.log(ma / mb), va / (na * ma * ma) + vb / (nb * mb * mb)


def _symmetric_t(data, means, estimate, confidence: float, resamples: int, rng):
    import numpy as np

    sizes = [(a.shape[1], b.shape[1]) for a, b in data]
    theta, se = log_ratio_se(means, [(_var(a), _var(b)) for a, b in data], sizes)
    summed = getattr(rng, "sums", None)
    if summed is not None:  # the sums over cases of log_ratio_terms, made as the cases were drawn (draws.report_figures)
        theta_b, se_b = summed[0] / len(data), np.sqrt(summed[1]) / len(data)
        return symmetric_t(theta, se, estimate, theta_b, se_b, confidence)
    boot_means, boot_vars = [], []
    for a, b in data:
        (ma, va), (mb, vb) = resampled_means(a, resamples, rng, True), resampled_means(b, resamples, rng, True)
        boot_means.append((ma, mb))
        boot_vars.append((va, vb))
    theta_b, se_b = log_ratio_se(boot_means, boot_vars, sizes)
    return symmetric_t(theta, se, estimate, theta_b, se_b, confidence)


def symmetric_t(theta, se, estimate, theta_b, se_b, confidence: float = 0.95):
    """The symmetric bootstrap-t interval (``stratified_contrast``, method ``t``) from ``theta``/``se`` (T,) of the
    data (``log_ratio_se``), the estimate (T,) and the resamples' ``theta_b``/``se_b`` (T, B). Returns ``(lo, hi,
    method)``."""
    import numpy as np

    with np.errstate(divide="ignore", invalid="ignore"):
        dev = np.abs(theta_b - theta[:, None])
        t = np.where(dev <= 1e-12 * np.maximum(1.0, np.abs(theta[:, None])), 0.0, dev / se_b)
    t = np.where(np.isnan(t), np.inf, t)
    with np.errstate(invalid="ignore"):  # a quantile between two infinite values is NaN: no interval either way
        q = np.quantile(t, confidence, axis=1)
    point = se == 0
    ok = np.isfinite(q) & np.isfinite(theta) & np.isfinite(se)
    lo = np.where(point, estimate, np.where(ok, np.exp(theta - q * se), np.nan))
    hi = np.where(point, estimate, np.where(ok, np.exp(theta + q * se), np.nan))
    method = np.where(point & np.isfinite(estimate), POINT, np.where(ok, STUDENTIZED, NONE))
    return lo, hi, method
