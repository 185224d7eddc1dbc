"""Pure numerics for the statistics report. No pytest import; numpy/scipy are imported inside functions.

Everything here takes plain numbers (counts, lists of tokens) and returns plain numbers or ``Interval``s, so
the same code serves the session summary, the CLI and the simulation tests. Sources of each method are in
the docstrings. Conventions:

- ``confidence`` is two-sided (0.95 -> a 95% interval); ``alpha`` is a two-sided test level.
- Random numbers come from ``rng_for(seed, *key)``: a ``numpy.random.Generator`` seeded from the session
  seed *and* a stable hash of what is being estimated, so a figure does not change when other cells are
  added to or removed from a report.
- Intervals that cannot be computed (no data, one run) have ``lo = hi = None`` and method ``"none"``.

Small-sample expansion (used by every BCa interval here; relative costs over several cases, or over one case from 8
runs a side, use the symmetric bootstrap-t of ``resample.stratified_contrast`` instead). A bootstrap interval for a mean is too narrow
at small n for two reasons: the bootstrap variance of a mean is ``(n-1)/n`` of the unbiased one, and a normal
quantile is used where Student's t belongs. Following Hesterberg's *expanded percentile interval*
(T. Hesterberg, "What teachers should know about the bootstrap", The American Statistician 69(4), 2015,
sec. 3.4), the critical value ``z = 1.96`` is replaced by ``t_{1-a/2, df} * sqrt(V / V_boot)``; for one sample
this is exactly Hesterberg's ``sqrt(n/(n-1)) t_{n-1}``. For statistics built from several independent groups
(two arms, several cases) ``V`` is the delta-method variance ``sum(u_k)``, ``V_boot = sum(u_k (n_k-1)/n_k)`` and
``df`` is Welch-Satterthwaite's ``V^2 / sum(u_k^2/(n_k-1))``. The expanded critical value is then used in
Efron's BCa formula (B. Efron, "Better bootstrap confidence intervals", JASA 82, 1987) in place of ``z``.
"""

from __future__ import annotations

import functools
import math
import os
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, TypeVar

from pytest_agentrace.stats import permutation, resample
from pytest_agentrace.stats.resample import DEFAULT_RESAMPLES, METHODS, NONE, critical, interval

_N = NormalDist()


@dataclass(frozen=True)
class Interval:
    """A two-sided interval ``[lo, hi]`` at ``confidence``; ``method`` says how it was made.

    Methods: ``bca`` (bootstrap, bias-corrected and accelerated), ``percentile`` (bootstrap, used where BCa is
    not defined), ``bootstrap-t`` (symmetric studentized bootstrap on the log scale, ``resample.stratified_contrast``),
    ``point`` (every resample equal: the sample has no spread), ``wilson``, ``newcombe``, ``mover-wilson``
    (``strata.stratified_pass_interval``), ``none`` (not computable: ``lo`` and ``hi`` are None).
    """

    lo: float | None
    hi: float | None
    method: str
    confidence: float = 0.95

    @classmethod
    def none(cls, confidence: float = 0.95) -> Interval:
        return cls(None, None, "none", confidence)

    @property
    def defined(self) -> bool:
        return self.lo is not None and self.hi is not None

    def to_dict(self) -> dict[str, Any]:
        return {"lo": _num(self.lo), "hi": _num(self.hi), "method": self.method, "confidence": self.confidence}


def _num(x: float | None) -> float | None:
    """A float for JSON: None for None/NaN/inf."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def z_value(confidence: float) -> float:
    """Two-sided normal critical value: ``z_value(0.95) = 1.959964``."""
    return _N.inv_cdf(1.0 - (1.0 - confidence) / 2.0)


def rng_for(seed: int, *key: object):
    """A ``numpy.random.Generator`` from ``seed`` and a stable (crc32) hash of ``key``."""
    import numpy as np

    words = [int(seed) & 0xFFFFFFFF] + [zlib.crc32(repr(k).encode("utf-8")) for k in key]
    return np.random.default_rng(np.random.SeedSequence(words))


T = TypeVar("T")
R = TypeVar("R")
PARALLEL_MIN = 8  # fewer items than this are computed in the calling thread


def workers() -> int:
    """Threads ``parallel_map`` uses: ``OMP_NUM_THREADS`` when set to a positive whole number (the usual switch to one
    thread), else the CPUs this process may run on."""
    value = os.environ.get("OMP_NUM_THREADS", "")
    if value.isdigit() and int(value) > 0:
        return int(value)
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def parallel_map(fn: Callable[[T], R], items: Iterable[T], least: int = PARALLEL_MIN) -> list[R]:
    """``[fn(i) for i in items]``, spread over ``workers()`` threads when there are ``least`` items or more.

    For the independent figures of a report (cells, comparisons): each seeds its own generator from its key
    (``rng_for``), so its value does not depend on which thread computes it or when, and the list is in the order of
    ``items``. numpy releases the GIL while it draws random numbers, sorts and sums, which is where these spend their
    time. An exception of ``fn`` is raised here (the first in ``items`` order)."""
    items = list(items)
    threads = min(workers(), len(items))
    if threads < 2 or len(items) < least:
        return [fn(i) for i in items]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(threads, thread_name_prefix="agentrace-stats") as pool:
        return list(pool.map(fn, items))


# ---------------------------------------------------------------------------------------------- proportions


def wilson_interval(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval for a proportion ``k/n`` (E. B. Wilson, JASA 22, 1927).

    Returns ``(lo, hi)`` in [0, 1]; ``(0.0, 1.0)`` when ``n == 0``. Raises ``ValueError`` unless ``0 <= k <= n``.
    """
    if n < 0 or k < 0 or k > n:
        raise ValueError(f"wilson_interval: need 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return (0.0, 1.0)
    z = z_value(confidence)
    p = k / n
    denom = 1.0 + z * z / n
    center = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    lo = 0.0 if k == 0 else max(0.0, center - half)
    hi = 1.0 if k == n else min(1.0, center + half)
    return (lo, hi)


def newcombe_interval(k1: int, n1: int, k0: int, n0: int, confidence: float = 0.95) -> tuple[float, float]:
    """Newcombe's hybrid score interval for the difference ``k1/n1 - k0/n0`` (R. G. Newcombe, Statistics in
    Medicine 17, 1998, method 10: Wilson limits of each proportion combined). ``(-1.0, 1.0)`` when a side is empty.
    """
    if n1 == 0 or n0 == 0:
        return (-1.0, 1.0)
    p1, p0 = k1 / n1, k0 / n0
    l1, u1 = wilson_interval(k1, n1, confidence)
    l0, u0 = wilson_interval(k0, n0, confidence)
    d = p1 - p0
    lo = d - math.sqrt((p1 - l1) ** 2 + (u0 - p0) ** 2)
    hi = d + math.sqrt((u1 - p1) ** 2 + (p0 - l0) ** 2)
    return (max(-1.0, lo), min(1.0, hi))


# n1 * n0 above which Boschloo's test gives way to Fisher's: scipy's boschloo_exact works on (n1 + 1) x (n0 + 1)
# arrays and its time grows about as (n1 n0)^1.5 (0.8 s at 200 x 200 runs, 2.6 s at 300 x 300; 50,000 runs a side
# would need 20 GB)
BOSCHLOO_MAX_TABLE = 200 * 200


def exact_test_name(n1: int, n0: int) -> str:
    """The exact test ``boschloo_p`` uses for samples of ``n1`` and ``n0`` runs: ``Boschloo`` or ``Fisher``."""
    return "Boschloo" if n1 * n0 <= BOSCHLOO_MAX_TABLE else "Fisher"


def boschloo_p(k1: int, n1: int, k0: int, n0: int, alternative: str = "two-sided") -> float:
    """p-value of Boschloo's exact unconditional test of ``p1 = p0`` (``scipy.stats.boschloo_exact``'s, computed by
    ``stats.boschloo`` with its work per pair of sample sizes shared); for tables
    larger than ``BOSCHLOO_MAX_TABLE`` (``n1 * n0``), Fisher's exact test (``scipy.stats.fisher_exact``): exact
    too, and never smaller than Boschloo's p (Boschloo's test is Fisher's p used as a statistic, maximised over the
    nuisance parameter: R. D. Boschloo, Statistica Neerlandica 24, 1970), so a verdict stays at its level; at these
    sizes the two differ little (``exact_test_name`` says which ran).

    ``alternative``: ``two-sided``, ``less`` (``p1 < p0``) or ``greater`` (``p1 > p0``). Returns 1.0 when a
    table carries no information (an empty side, or all runs passed / all failed). Cached by table, with the
    test's symmetries (swapping the samples flips the direction; swapping passed and failed flips it too) mapped
    to one canonical table.
    """
    if alternative not in ("two-sided", "less", "greater"):
        raise ValueError(f"boschloo_p: alternative must be two-sided, less or greater, not {alternative!r}")
    if n1 == 0 or n0 == 0 or k1 + k0 in (0, n1 + n0):
        return 1.0
    flip = {"less": "greater", "greater": "less", "two-sided": "two-sided"}
    same = [((k1, n1, k0, n0), alternative), ((n0 - k0, n0, n1 - k1, n1), alternative),
            ((k0, n0, k1, n1), flip[alternative]), ((n1 - k1, n1, n0 - k0, n0), flip[alternative])]
    return _boschloo(*min(same))


@functools.lru_cache(maxsize=8192)
def _boschloo(table: tuple[int, int, int, int], alternative: str) -> float:
    k1, n1, k0, n0 = table
    if exact_test_name(n1, n0) == "Fisher":
        from scipy.stats import fisher_exact

        p = fisher_exact([[k1, k0], [n1 - k1, n0 - k0]], alternative=alternative).pvalue
    else:
        from pytest_agentrace.stats.boschloo import boschloo_exact_p

        p = boschloo_exact_p(k1, n1, k0, n0, alternative)
    return 1.0 if not math.isfinite(p) else float(min(1.0, max(0.0, p)))


def small_sample_critical(parts: Sequence[tuple[float, int]], confidence: float = 0.95) -> float:
    """The expanded critical value (see module docstring) replacing ``z`` in a bootstrap interval.

    ``parts``: ``(u_k, n_k)`` per independent group, ``u_k`` its delta-method variance contribution
    (``w_k^2 s_k^2 / n_k``) and ``n_k`` its size. Groups with ``n_k < 2`` or ``u_k = 0`` are ignored. Returns
    the normal ``z`` when nothing is left.
    """
    if not parts:
        return z_value(confidence)
    return float(critical([[u for u, _ in parts]], [n for _, n in parts], confidence)[0])


def _interval(lo, hi, method, confidence: float, i: int = 0) -> Interval:
    if int(method[i]) == NONE:
        return Interval.none(confidence)
    return Interval(float(lo[i]), float(hi[i]), METHODS[int(method[i])], confidence)


def bootstrap_interval(estimate: float, replicates, confidence: float = 0.95, jackknife=None, critical: float | None = None) -> Interval:
    """Interval from bootstrap ``replicates`` of a statistic whose value on the data is ``estimate``.

    BCa (Efron 1987) when defined: the bias correction ``z0 = Phi^-1(share of replicates below the estimate,
    ties half)`` needs that share strictly between 0 and 1, and the acceleration comes from the ``jackknife``
    values (``a = sum(d^3) / (6 sum(d^2)^1.5)``, ``d = mean - value``; 0 when they do not vary). Otherwise the
    percentile interval. ``critical`` replaces the normal critical value (small-sample expansion). Non-finite
    replicates are dropped. All replicates equal -> method ``point``. (``resample.interval`` with one data set.)
    """
    import numpy as np

    jack = None if jackknife is None else np.asarray(jackknife, dtype=float)[None, :]
    crit = None if critical is None else np.array([critical])
    lo, hi, method = interval(np.array([estimate], dtype=float), np.asarray(replicates, dtype=float)[None, :], jack, crit, confidence)
    return _interval(lo, hi, method, confidence)


def _var(x) -> float:
    import numpy as np

    return float(np.var(x, ddof=1)) if len(x) >= 2 else 0.0


def mean_interval(values: Sequence[float], confidence: float = 0.95, resamples: int = DEFAULT_RESAMPLES, rng=None) -> Interval:
    """Bootstrap interval for a mean (BCa with the small-sample expansion; see module docstring).

    ``values``: the sample (e.g. tokens per run). Fewer than 2 values -> ``Interval.none``. A bootstrap interval
    cannot reach beyond the sample's range, so with 4 values it covers a mean less often than 95% (measured 86%
    for log-normal costs with CV 0.3; 94% at 8 and 12 values: ``tests/test_sim_coverage.py``).
    """
    if len(values) < 2:
        return Interval.none(confidence)
    lo, hi, method = resample.mean_interval([list(values)], confidence, resamples, rng if rng is not None else rng_for(0, "mean_interval"))
    return _interval(lo, hi, method, confidence)


@dataclass(frozen=True)
class Contrast:
    """A contrast between an arm and its baseline over cases: the estimate, its interval, and the sample.

    ``kind`` is ``ratio`` (mean over cases of ``mean_arm / mean_baseline``: the relative cost) or
    ``difference`` (mean over cases of ``mean_arm - mean_baseline``). ``spread`` is False when every group of
    runs had a single distinct value (no noise can be estimated). ``n_arm``/``n_base`` count runs used.
    """

    kind: str
    estimate: float | None
    interval: Interval
    cases: int
    n_arm: int
    n_base: int
    spread: bool

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "estimate": _num(self.estimate), "interval": self.interval.to_dict(), "cases": self.cases,
                "n_arm": self.n_arm, "n_base": self.n_base, "spread": self.spread}


def usable_cases(cases: Sequence[tuple[Sequence[float], Sequence[float]]], kind: str = "ratio") -> list[tuple[list[float], list[float]]]:
    """The cases a contrast can use: both sides non-empty and (ratio) a baseline mean above 0."""
    return [(list(a), list(b)) for a, b in cases if len(a) and len(b) and (kind == "difference" or sum(b) > 0)]


def cluster_contrast(cases: Sequence[tuple[Sequence[float], Sequence[float]]], kind: str = "ratio", confidence: float = 0.95,
                     resamples: int = DEFAULT_RESAMPLES, rng=None) -> Contrast:
    """The new-cases interval of an arm-vs-baseline contrast over cases (``resample.cluster_contrast`` with one data
    set): the clustered-t interval of the per-case contrasts (log ratios, or differences), ``K - 1`` df (Miller,
    "Adding Error Bars to Evals", 2024); for ratios the estimate is the geometric mean of the case ratios.

    ``cases``: per case ``(arm_values, baseline_values)`` (e.g. tokens of every run). Cases with an empty side,
    or (ratio) a baseline mean <= 0, are dropped. With one case the two-sample bootstrap of
    ``resample.stratified_contrast`` (``resamples`` draws, default 10,000).
    """
    if kind not in ("ratio", "difference"):
        raise ValueError(f"cluster_contrast: kind must be ratio or difference, not {kind!r}")
    data = usable_cases(cases, kind)
    if not data:
        return Contrast(kind, None, Interval.none(confidence), 0, 0, 0, False)
    est, lo, hi, method, spread = resample.cluster_contrast([([a], [b]) for a, b in data], kind, confidence, resamples,
                                        rng if rng is not None else rng_for(0, "cluster_contrast"))
    return Contrast(kind, float(est[0]), _interval(lo, hi, method, confidence), len(data), sum(len(a) for a, _ in data),
                    sum(len(b) for _, b in data), bool(spread[0]))


def permutation_p(a: Sequence[float], b: Sequence[float], resamples: int = DEFAULT_RESAMPLES, rng=None, log_ratio: bool = True) -> float | None:
    """Two-sided permutation p-value for a difference between two samples (exchangeable under the null).

    Statistic: ``|log(mean(a)/mean(b))|`` (``log_ratio``; falls back to the difference when a value is <= 0) or
    ``|mean(a) - mean(b)|``. Exact (every relabelling) up to 20,000 relabellings (8 runs a side), else ``resamples`` random ones
    with ``(1 + hits) / (1 + resamples)`` (Phipson & Smyth, SAGMB 9, 2010). None when a side is empty.
    """
    if not len(a) or not len(b):
        return None
    return float(permutation.permutation_p([list(a)], [list(b)], resamples, rng if rng is not None else rng_for(0, "permutation_p"), log_ratio)[0])


def sign_flip_p(diffs: Sequence[float], resamples: int = DEFAULT_RESAMPLES, rng=None) -> float | None:
    """Two-sided sign-flip permutation p-value for a mean paired difference of zero (cases as units).

    Exact (all ``2^n`` sign patterns) for at most 16 cases, else ``resamples`` random patterns with
    ``(1 + hits) / (1 + resamples)``. Statistic ``|mean|``. The smallest possible exact p is ``2 / 2^n``: with 5 or
    fewer cases it cannot fall below 0.05. None for no cases.
    """
    if not len(diffs):
        return None
    return float(permutation.sign_flip_p([list(diffs)], resamples, rng if rng is not None else rng_for(0, "sign_flip_p"))[0])


def bh_adjust(pvalues: Sequence[float | None]) -> list[float | None]:
    """Benjamini-Hochberg adjusted p-values (``scipy.stats.false_discovery_control``, method ``bh``;
    Benjamini & Hochberg, JRSS B 57, 1995). None entries stay None and are not counted."""
    idx = [i for i, p in enumerate(pvalues) if p is not None and math.isfinite(p)]
    out: list[float | None] = [None] * len(pvalues)
    if not idx:
        return out
    from scipy.stats import false_discovery_control

    adj = false_discovery_control([float(pvalues[i]) for i in idx], method="bh")  # type: ignore[arg-type]
    for i, p in zip(idx, adj, strict=True):
        out[i] = float(p)
    return out


def holm_adjust_array(p):
    """Holm's step-down adjusted p-values along the last axis of ``p`` (..., m) (Holm, "A simple sequentially
    rejective multiple test procedure", Scand. J. Statist. 6, 1979): sorted ascending, the i-th (from 0) becomes
    ``max_{j <= i} min(1, (m - j) p_(j))``. Rejecting where the adjusted value is below ``alpha`` keeps the chance of
    any false rejection among the ``m`` tests at or below ``alpha`` whatever their dependence. NaN entries count as 1
    (a test that was looked at and found nothing). Returns an array of the same shape."""
    import numpy as np

    p = np.asarray(p, dtype=float)
    p = np.where(np.isfinite(p), p, 1.0)
    m = p.shape[-1]
    if m == 0:
        return p.copy()
    order = np.argsort(p, axis=-1, kind="stable")
    ranked = np.take_along_axis(p, order, axis=-1) * (m - np.arange(m))
    ranked = np.minimum(1.0, np.maximum.accumulate(ranked, axis=-1))
    out = np.empty_like(p)
    np.put_along_axis(out, order, ranked, axis=-1)
    return out


def holm_adjust(pvalues: Sequence[float | None]) -> list[float | None]:
    """``holm_adjust_array`` of a list; None entries stay None and are not counted in the family."""
    idx = [i for i, p in enumerate(pvalues) if p is not None and math.isfinite(p)]
    out: list[float | None] = [None] * len(pvalues)
    if idx:
        for i, p in zip(idx, holm_adjust_array([float(pvalues[i]) for i in idx]), strict=True):  # type: ignore[arg-type]
            out[i] = float(p)
    return out


# ---------------------------------------------------------------------------------------------- reliability


def pass_at_k(n: int, c: int, k: int) -> float | None:
    """Unbiased pass@k: the chance that at least one of k runs drawn without replacement from n passes,
    ``1 - C(n-c, k) / C(n, k)`` (Chen et al., "Evaluating Large Language Models Trained on Code", 2021).
    None when ``k > n`` or ``k < 1``."""
    if k < 1 or k > n:
        return None
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float | None:
    """Unbiased pass^k: the chance that all of k runs drawn without replacement from n pass,
    ``C(c, k) / C(n, k)`` (Yao et al., "tau-bench", 2024). None when ``k > n`` or ``k < 1``."""
    if k < 1 or k > n:
        return None
    return math.comb(c, k) / math.comb(n, k)


# ---------------------------------------------------------------------------------------------- spread, planning


def cv(values: Sequence[float]) -> float | None:
    """Coefficient of variation ``sd / mean`` (sample sd, ddof 1). None for fewer than 2 values or mean 0."""
    if len(values) < 2:
        return None
    m = sum(values) / len(values)
    if m == 0:
        return None
    return math.sqrt(_var(values)) / abs(m)


def log_sd(cv_value: float) -> float:
    """The sd of log cost for a log-normal cost with coefficient of variation ``cv``: ``sqrt(ln(1 + cv^2))``."""
    return math.sqrt(math.log1p(cv_value * cv_value))


def exact_level(n: int, alpha: float = 0.05) -> float:
    """The largest two-sided p-value at most ``alpha`` that an exact permutation test of two arms of ``n`` runs
    can reach: p-values come in steps of ``2 / C(2n, n)``, so the level is ``2 floor(alpha C / 2) / C``
    (n=3: 0, the smallest p is 2/20; n=4: 2/70 = 0.029; n=5: 12/252 = 0.048; from n=6 within 0.001 of alpha)."""
    if n >= 20:  # steps of 2 / C(40, 20) < 1e-10: the level is alpha (and C(2n, n) soon overflows a float)
        return alpha
    total = math.comb(2 * n, n)
    return 2 * math.floor(alpha * total / 2 + 1e-9) / total


def power_two_sample(n: int, cv_value: float, effect: float = 0.2, alpha: float = 0.05) -> float:
    """Power of a two-sided two-sample t test on log cost with ``n`` runs per arm, at the level the verdict's exact
    permutation test can actually reach (``exact_level(n, alpha)``: below ``alpha`` at small n, 0 at n <= 3).

    ``effect``: the relative change to detect (0.2 -> the arm costs 0.8 of the baseline). The formula (see
    ``runs_needed``): ``P(|T| > t_{1-a/2, nu})`` with ``a = exact_level(n, alpha)``, ``T`` non-central t,
    ``nu = 2(n-1)``, non-centrality ``lambda = delta / (sigma sqrt(2/n))``, ``delta = |ln(1 - effect)|``,
    ``sigma^2 = ln(1 + cv^2)``. At 4 runs per arm, CV 0.3 and a 40% drop this gives 42% (the plain level-0.05
    t test: 54%; the verdict is found in 37% of simulations, ``tests/test_sim_power.py``).
    """
    from scipy.stats import nct
    from scipy.stats import t as student_t

    if n < 2:
        return 0.0
    if cv_value <= 0:
        return 1.0
    level = exact_level(n, alpha)
    if level <= 0:
        return 0.0
    nu = 2 * (n - 1)
    lam = abs(math.log(1.0 - effect)) / (log_sd(cv_value) * math.sqrt(2.0 / n))
    crit = student_t.ppf(1.0 - level / 2.0, nu)
    return float(nct.sf(crit, nu, lam) + nct.cdf(-crit, nu, lam))


def runs_needed(cv_value: float, effect: float = 0.2, alpha: float = 0.05, power: float = 0.8, limit: int = 100_000) -> int | None:
    """Runs per arm needed to detect a relative cost change of ``effect`` with ``power`` at two-sided ``alpha``.

    Formula: the smallest ``n >= 2`` with ``power_two_sample(n) >= power`` - the two-sample t test on log cost
    (at the exact permutation test's attainable level, which matters below 6 runs per arm)
    for log-normal costs, whose log-scale sd is ``sigma = sqrt(ln(1 + CV^2))`` (S. A. Julious, "Sample sizes
    for clinical trials with Normal data", Statistics in Medicine 23, 2004, sec. 6); to first order
    ``n = 2 (z_{1-alpha/2} + z_{power})^2 sigma^2 / ln(1 - effect)^2``. Example: CV 0.3, effect 0.2 -> 29 (first order: 27.2).
    Returns None when more than ``limit`` runs would be needed (or ``effect`` is 0).
    """
    if not 0 < effect < 1:
        raise ValueError(f"runs_needed: effect must be in (0, 1), got {effect}")
    if cv_value <= 0:
        return 4  # the fewest runs per arm at which the exact test can reach p < 0.05 (exact_level)
    z = z_value(1 - alpha) + _N.inv_cdf(power)
    guess = 2 * z * z * math.log1p(cv_value * cv_value) / math.log(1.0 - effect) ** 2
    if guess > limit:
        return None
    n = max(2, int(guess) - 2)
    while power_two_sample(n, cv_value, effect, alpha) < power:
        n += 1
        if n > limit:
            return None
    return n


def effect_for_ratio(ratio: float) -> float | None:
    """The ``effect`` (for ``runs_needed``) whose log-scale distance equals an observed relative cost's:
    ``1 - exp(-|ln ratio|)``. None for ratio <= 0 or exactly 1."""
    if ratio is None or ratio <= 0 or ratio == 1:
        return None
    return 1.0 - math.exp(-abs(math.log(ratio)))


def cohens_d(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Cohen's d ``(mean(a) - mean(b)) / s_pooled`` with ``s_pooled^2 = ((na-1)sa^2 + (nb-1)sb^2)/(na+nb-2)``
    (J. Cohen, "Statistical Power Analysis for the Behavioral Sciences", 1988). None when either side has fewer
    than 2 values or the pooled sd is 0 (a difference of zero-variance samples has no standardised size)."""
    na, nb = len(a), len(b)
    if na < 2 or nb < 2:
        return None
    pooled = ((na - 1) * _var(a) + (nb - 1) * _var(b)) / (na + nb - 2)
    if pooled <= 0:
        return None
    return (sum(a) / na - sum(b) / nb) / math.sqrt(pooled)


def bounded(interval: tuple[float, float] | None, lo: float, hi: float) -> tuple[float, float] | None:
    """``interval`` cut to the range ``[lo, hi]`` of the figure it is about (a score 0-100, a pass rate 0-1). A true
    value always lies in that range, so the cut interval covers it exactly as often as the uncut one: coverage is
    kept, only impossible values go. None stays None."""
    if interval is None:
        return None
    return (min(max(interval[0], lo), hi), max(min(interval[1], hi), lo))


def t_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float] | None:
    """Student t interval for a mean (coderace's ``ci_95``, with exact t quantiles). None for fewer than 2."""
    n = len(values)
    if n < 2:
        return None
    from scipy.stats import t as student_t

    m = sum(values) / n
    half = float(student_t.ppf(1.0 - (1.0 - confidence) / 2.0, n - 1)) * math.sqrt(_var(values) / n)
    return (m - half, m + half)
