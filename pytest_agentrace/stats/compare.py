"""Arm-vs-baseline comparisons over Outcomes: relative cost, pass rate and score, under either inference target.
Pure functions; no pytest import.

Comparisons are made per (kind, source file, agent) between each arm and the baseline arm, over the cases both
have valid runs for (``error`` runs are never samples; runs with unknown tokens are left out of token figures).
Every random figure is seeded from ``seed`` and the comparison's key (``stats.rng_for``).

The inference target (``verdict.TARGETS``) decides what a comparison over several cases is about:

- ``fixed`` (the default): "on the cases this trial ran, is the arm cheaper?". Cases are strata: a bootstrap
  stratified by case (``strata``), permutation tests with arm labels permuted within each case, each case
  weighted equally. It can decide with 2 or 3 cases, and says nothing about cases that did not run.
- ``cases`` (``--agentrace-generalize cases``): "would it hold for other cases like these?". Cases are a sample:
  a clustered-t interval over the per-case figures (t on K - 1 df) and sign-flip tests over them, which need 6 cases or more
  to reach p < 0.05 (with n cases a sign-flip p cannot go below ``2 / 2**n``).

With one case both targets use the same methods (a two-sample bootstrap and the exact permutation test).
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from pytest_agentrace.record.model import Outcome, Status
from pytest_agentrace.stats import numerics as stats
from pytest_agentrace.stats import permutation, resample, strata
from pytest_agentrace.stats.cells import score_value, tokens_of
from pytest_agentrace.stats.draws import Memo, Streams
from pytest_agentrace.stats.verdict import (
    CASES,
    FIXED,
    Verdict,
    check_target,
    cost_signs,
    cost_verdict,
    difference_verdict,
    provisional,
    test_verdict,
)


def _num(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


@dataclass(frozen=True)
class ArmComparison:
    """One arm against the baseline arm for one agent, over ``cases`` (the cases both have valid runs for), for
    the inference ``target`` (``fixed`` or ``cases``; see the module docstring).

    Relative cost (the arm's mean tokens / the baseline's mean, per case; over cases their geometric mean, each case
    weighted equally): ``relative_cost`` with ``relative_cost_ci`` (fixed: bootstrap stratified by case, ``strata``; cases:
    clustered-t, ``stats.cluster_contrast``; over several cases the estimate is the geometric mean of the case
    ratios); ``cost_test`` / ``cost_p``: ``permutation`` (one case),
    ``stratified permutation`` (fixed, several cases) or ``sign-flip`` on the per-case log ratios (cases, whose
    paired case-level bootstrap interval is ``log_ratio_ci``); ``cost_p_error`` the Monte Carlo standard error of
    a permutation p-value that was not enumerated (0 when exact), ``cost_p_min`` the smallest p-value its test can
    reach with these runs and cases (``min_p``; at or above alpha no verdict is possible). ``cost_verdict``: cheaper / dearer / no clear
    difference (``verdict.cost_verdict``); ``provisional`` when some case has fewer than 8 runs with tokens on a
    side (``runs_per_case`` is that fewest number). Pass rate: pooled over cases ``pass_rate_arm`` / ``pass_rate_base``
    (errors excluded, and ``*_errors_as_failures``); ``pass_diff`` with ``pass_diff_ci`` (one case: the pooled
    difference with Newcombe's interval; fixed, several cases: the mean per-case difference with the MOVER-Wilson
    interval, ``strata.stratified_pass_interval``; cases: as one case, the pooled figures) and Boschloo's
    two-sided ``boschloo_p`` on the pooled counts; the verdict (better / worse) rests on Boschloo for one case, on the
    stratified exact test (``strata.stratified_binary_p``) and ``pass_diff_ci`` for fixed cases, and on the per-case
    differences (``paired_pass_diff``, case bootstrap ``paired_pass_ci``, sign-flip ``pass_p``) for new cases.
    Score (``cells.score_value``): ``score_delta`` with ``score_delta_ci`` (as relative cost, on differences; within
    -100..100), ``score_p``, ``cohens_d`` (None for zero-variance samples), ``score_verdict``. ``cost_p_adj`` /
    ``pass_p_adj``: Benjamini-Hochberg over every cost and pass p-value of the comparisons reported together;
    ``score_p_adj`` over their score p-values; per-case comparisons instead carry Holm's adjustment over the cases of
    their arm, per metric, and are decided on it (``with_bh``).
    ``sequential``: the stop-when-decided decision when the session used it (its verdict replaces ``cost_verdict``).
    """

    kind: str
    source: str
    agent: str
    arm: str
    baseline: str
    cases: tuple[str, ...]
    runs_arm: int
    runs_base: int
    errors_arm: int
    errors_base: int
    tokens_unknown: int
    relative_cost: float | None
    relative_cost_ci: stats.Interval
    cost_test: str
    cost_p: float | None
    cost_verdict: str
    provisional: bool
    log_ratio_mean: float | None
    log_ratio_ci: stats.Interval
    pass_rate_arm: float | None
    pass_rate_base: float | None
    pass_rate_arm_errors_as_failures: float | None
    pass_rate_base_errors_as_failures: float | None
    pass_diff: float | None
    pass_diff_ci: tuple[float, float]
    boschloo_p: float | None
    pass_test: str
    paired_pass_diff: float | None
    paired_pass_ci: stats.Interval
    pass_p: float | None
    pass_verdict: str
    score_delta: float | None
    score_delta_ci: stats.Interval
    score_p: float | None
    cohens_d: float | None
    score_verdict: str
    cost_p_adj: float | None = None
    pass_p_adj: float | None = None
    sequential: dict[str, Any] | None = None
    target: str = FIXED
    cost_p_error: float | None = None
    score_p_adj: float | None = None
    runs_per_case: int = 0
    cost_p_min: float | None = None

    def summary(self, metric: str = "relative cost") -> str:
        """A short phrase with the figure behind ``metric``'s verdict (used in reason lines)."""
        if metric == "relative cost":
            iv = self.relative_cost_ci
            ci = f" (95% CI {iv.lo:.2f}-{iv.hi:.2f})" if iv.defined else ""
            rc = "-" if self.relative_cost is None else f"{self.relative_cost:.2f}"
            return f"relative cost {rc}{ci}, {self.cost_test} p={_p(self.cost_p)}"
        if metric == "pass rate":
            return f"pass rate {_pct(self.pass_rate_arm)} vs {_pct(self.pass_rate_base)}, {self.pass_test} p={_p(self.pass_p)}"
        return f"score delta {self.score_delta:+.1f}" if self.score_delta is not None else "score delta -"

    def to_dict(self) -> dict[str, Any]:
        d = {k: _num(v) for k, v in asdict(self).items()}
        for k in ("relative_cost_ci", "log_ratio_ci", "paired_pass_ci", "score_delta_ci"):
            d[k] = getattr(self, k).to_dict()
        d["cases"], d["pass_diff_ci"] = list(self.cases), list(self.pass_diff_ci)
        return d


def _p(p: float | None) -> str:
    return "-" if p is None else f"{p:.3g}"


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def resolve_baseline(runs: Sequence[Outcome], baseline: str | None = None) -> str:
    """The baseline arm of a group of runs: ``baseline`` when it is one of their arms; else the trial's
    ``[defaults] baseline`` (``Outcome.baseline_arm``); else an arm named ``baseline``, ``default``; else the
    first arm in sorted order."""
    arms = sorted({o.arm for o in runs})
    if baseline in arms:
        return baseline  # type: ignore[return-value]
    named = [o.baseline_arm for o in runs if o.baseline_arm in arms]
    if named:
        return max(set(named), key=named.count)  # type: ignore[arg-type]
    for name in ("baseline", "default"):
        if name in arms:
            return name
    return arms[0]


# ---------------------------------------------------------------------------------------------- relative cost


@dataclass(frozen=True)
class CostResult:
    """Relative cost of an arm over cases: the bootstrap ``contrast``, the exact ``test`` with its ``p`` (and the
    Monte Carlo standard error ``p_error``), the paired case-level bootstrap of the log ratios (new cases, several),
    and the ``verdict`` (``verdict.cost_verdict``)."""

    contrast: stats.Contrast
    test: str
    p: float | None
    log_ratio_mean: float | None
    log_ratio_ci: stats.Interval
    verdict: str
    p_error: float | None = None


def cost_test_name(cases: int, target: str) -> str:
    """The exact test behind a relative-cost verdict over ``cases`` cases for ``target``."""
    if cases <= 1:
        return "permutation"
    return "stratified permutation" if target == FIXED else "sign-flip"


def min_p(sizes: Sequence[tuple[int, int]], target: str = FIXED, resamples: int = stats.DEFAULT_RESAMPLES) -> float:
    """The smallest two-sided p-value of the relative-cost test with ``sizes`` = per case ``(n_arm, n_base)``:
    ``2 / prod C(n_arm + n_base, n_arm)`` for the (stratified) permutation test (``1 / (1 + resamples)`` when it
    is drawn by Monte Carlo), ``2 / 2^C`` for the sign-flip test over ``C`` cases (``cases`` target)."""
    if target == CASES and len(sizes) > 1:
        return 2.0 / 2 ** len(sizes) if len(sizes) <= resample.EXACT_SIGN_FLIP_CASES else 1.0 / (1 + resamples)
    total = math.prod(math.comb(a + b, a) for a, b in sizes)
    return min(1.0, 2.0 / total) if total <= resample.EXACT_PERMUTATIONS else 1.0 / (1 + resamples)


def cost_batch(cases: Sequence[tuple[Any, Any]], confidence: float = 0.95, resamples: int = stats.DEFAULT_RESAMPLES, alpha: float = 0.05,
               rng_ci=None, rng_p=None, rng_log=None, target: str = FIXED) -> dict[str, Any]:
    """The relative-cost decision for T data sets at once (the path every cost verdict takes; the simulations call
    it with thousands). ``cases``: per case ``(A, B)`` token arrays (T, n_arm), (T, n_base), every value > 0.

    Returns arrays: ``estimate``, ``lo``, ``hi``, ``method`` (the interval: stratified bootstrap for ``fixed``,
    clustered-t for ``cases``; one case: the same two-sample bootstrap), ``p`` and ``p_error`` (the test:
    permutation for one case, stratified permutation for ``fixed``, sign-flip on per-case log ratios for ``cases``),
    ``log_mean``/``log_lo``/``log_hi``/``log_method`` (paired case-level bootstrap of the log ratios; ``cases``, several
    cases), ``sign`` (-1 cheaper, +1 dearer, 0 no clear difference: the interval excludes 1.00, p < ``alpha``, and -
    several cases - the mean over cases of the log ratios, which the tests are about, points the same way as the
    mean of the ratios, which the interval is about; cases whose effects differ in sign can make the two disagree),
    and ``test`` (its name)."""
    import numpy as np

    check_target(target)
    data = [(np.atleast_2d(np.asarray(a, dtype=float)), np.atleast_2d(np.asarray(b, dtype=float))) for a, b in cases]
    t_count = data[0][0].shape[0]
    nan = np.full(t_count, np.nan)
    out: dict[str, Any] = {"log_mean": nan, "log_lo": nan, "log_hi": nan, "log_method": np.full(t_count, resample.NONE),
                           "test": cost_test_name(len(data), target), "p_error": np.zeros(t_count)}
    if target == FIXED or len(data) == 1:
        est, lo, hi, method, _ = resample.stratified_contrast(data, "ratio", confidence, resamples, rng_ci)
        out["p"], out["p_error"] = permutation.stratified_permutation_p(data, "ratio", resamples, rng_p)
    else:
        est, lo, hi, method, _ = resample.cluster_contrast(data, "ratio", confidence, resamples, rng_ci)
        logs = np.stack([np.log(a.mean(axis=1) / b.mean(axis=1)) for a, b in data], axis=1)
        out["p"] = permutation.sign_flip_p(logs, resamples, rng_p)
        out["log_mean"] = logs.mean(axis=1)
        out["log_lo"], out["log_hi"], out["log_method"] = resample.mean_interval(logs, confidence, resamples, rng_log)
    out.update(estimate=est, lo=lo, hi=hi, method=method)
    with np.errstate(divide="ignore", invalid="ignore"):
        direction = np.sign(sum(np.log(a.mean(axis=1) / b.mean(axis=1)) for a, b in data))
    sign = cost_signs(lo, hi, out["p"], alpha)
    out["sign"] = np.where((sign == direction) | (len(data) == 1), sign, 0)
    return out


def cost_result(tok: Sequence[tuple[Sequence[float], Sequence[float]]], confidence: float = 0.95, resamples: int = stats.DEFAULT_RESAMPLES,
                alpha: float = 0.05, rng_ci=None, rng_p=None, rng_log=None, target: str = FIXED) -> CostResult:
    """Relative cost of arm vs baseline from per-case ``(arm tokens, baseline tokens)`` (``cost_batch`` on one data
    set). Cases with an empty side or a zero baseline are left out; under ``cases`` with a token <= 0 the log ratios
    of several cases are undefined, so their test is skipped (no verdict)."""
    tok = stats.usable_cases(tok, "ratio")
    if not tok:
        return CostResult(stats.Contrast("ratio", None, stats.Interval.none(confidence), 0, 0, 0, False), cost_test_name(1, target), None, None,
                          stats.Interval.none(confidence), Verdict.NO_CLEAR.value)
    if target == CASES and len(tok) > 1 and min(min(a) for a, _ in tok) <= 0:
        contrast = stats.cluster_contrast(tok, "ratio", confidence, resamples, rng_ci)
        return CostResult(contrast, "sign-flip", None, None, stats.Interval.none(confidence), Verdict.NO_CLEAR.value)
    r = cost_batch([([a], [b]) for a, b in tok], confidence, resamples, alpha, rng_ci, rng_p, rng_log, target)
    log_ci = stats._interval(r["log_lo"], r["log_hi"], r["log_method"], confidence)
    log_mean = None if not math.isfinite(float(r["log_mean"][0])) else float(r["log_mean"][0])
    sign = int(r["sign"][0])
    verdict = Verdict.CHEAPER.value if sign < 0 else Verdict.DEARER.value if sign > 0 else Verdict.NO_CLEAR.value
    spread = any(max(a) > min(a) or max(b) > min(b) for a, b in tok)
    contrast = stats.Contrast("ratio", float(r["estimate"][0]), stats._interval(r["lo"], r["hi"], r["method"], confidence),
                              len(tok), sum(len(a) for a, _ in tok), sum(len(b) for _, b in tok), spread)
    return CostResult(contrast, r["test"], float(r["p"][0]), log_mean, log_ci, verdict, float(r["p_error"][0]))


# ---------------------------------------------------------------------------------------------- pass rate, score


@dataclass(frozen=True)
class PassResult:
    """The pass-rate comparison's figures (see ``ArmComparison``)."""

    diff: float | None
    diff_ci: tuple[float, float]
    test: str
    p: float | None
    paired_diff: float | None
    paired_ci: stats.Interval
    verdict: str


def pass_result(tables: Sequence[tuple[int, int, int, int]], target: str = FIXED, confidence: float = 0.95, resamples: int = stats.DEFAULT_RESAMPLES,
                alpha: float = 0.05, rng_ci=None, rng_p=None) -> PassResult:
    """Pass rate of arm vs baseline from per-case ``(passed_arm, runs_arm, passed_base, runs_base)`` (every side
    non-empty). One case: Newcombe's interval and Boschloo's exact test (the verdict on the test alone);
    ``fixed``: the mean per-case difference, its MOVER-Wilson interval and the stratified exact test, both must
    agree; ``cases``: the pooled difference with Newcombe's interval, the verdict on the per-case differences
    (case bootstrap interval and sign-flip test)."""
    ka, na = sum(t[0] for t in tables), sum(t[1] for t in tables)
    kb, nb = sum(t[2] for t in tables), sum(t[3] for t in tables)
    pooled = ka / na - kb / nb if na and nb else None
    none = stats.Interval.none(confidence)
    if len(tables) == 1:
        p = stats.boschloo_p(ka, na, kb, nb) if na and nb else None
        return PassResult(pooled, stats.newcombe_interval(ka, na, kb, nb, confidence), stats.exact_test_name(na, nb),
                          p, None, none, test_verdict(p, pooled, alpha))
    if target == FIXED:
        diff = sum(a / n - b / m for a, n, b, m in tables) / len(tables)
        ci = strata.stratified_pass_interval(tables, confidence)
        p = strata.stratified_binary_p(tables, rng=rng_p)
        verdict = difference_verdict(stats.Interval(ci[0], ci[1], "mover-wilson", confidence), p, alpha)
        return PassResult(diff, ci, "stratified exact", p, None, none, verdict)
    d = [a / n - b / m for a, n, b, m in tables]
    paired_ci = stats.mean_interval(d, confidence, resamples, rng_ci)
    p = stats.sign_flip_p(d, resamples, rng_p)
    return PassResult(pooled, stats.newcombe_interval(ka, na, kb, nb, confidence), "sign-flip", p, sum(d) / len(d), paired_ci,
                      difference_verdict(paired_ci, p, alpha))


def score_result(sc: Sequence[tuple[Sequence[float], Sequence[float]]], target: str = FIXED, confidence: float = 0.95,
                 resamples: int = stats.DEFAULT_RESAMPLES, rng_ci=None, rng_p=None) -> tuple[stats.Contrast, float | None]:
    """Score delta (arm - baseline, mean over cases) and its test's p: stratified bootstrap and stratified
    permutation test (one case or ``fixed``), clustered-t interval and sign-flip test (``cases``, several cases)."""
    if target == FIXED or len(sc) == 1:
        p, _ = strata.stratified_permutation_p(sc, "difference", resamples, rng_p)
        return strata.stratified_contrast(sc, "difference", confidence, resamples, rng_ci), p
    p = stats.sign_flip_p([sum(a) / len(a) - sum(b) / len(b) for a, b in sc], resamples, rng_p)
    return stats.cluster_contrast(sc, "difference", confidence, resamples, rng_ci), p


# ---------------------------------------------------------------------------------------------- comparisons


def _compare(kind: str, source: str, agent: str, arm: str, base: str, cases: Sequence[str],
             by_cell: dict[tuple[str, str], list[Outcome]], seed: int, resamples: int, confidence: float, alpha: float,
             target: str, memo: Memo | None = None, sums: dict[str, Any] | None = None) -> ArmComparison:
    """One comparison (``ArmComparison``). The stratified intervals and tests (``fixed``, or one case) resample with
    the draws owned by the cells and cases (``draws``; ``memo`` shares them with other figures, ``sums`` carries
    sums over cases made by ``figures.report_figures``); the other random figures draw from ``rng_for(seed, what,
    *comparison)``."""
    key = (kind, source, agent, arm, base, tuple(cases))
    memo = memo if memo is not None else Memo(seed, resamples, keep=False)
    sums = sums or {}

    def rng(what: str):
        return stats.rng_for(seed, what, *key)

    def owned(what: str, sizes: list[tuple[str, int, int]]) -> tuple[Streams, Streams]:
        """The bootstrap and relabelling streams of a figure over cases of ``sizes`` (case, n_arm, n_base)."""
        cells = [cell for c, na, nb in sizes for cell in (((kind, source, c, arm, agent), na), ((kind, source, c, base, agent), nb))]
        labels = [((kind, source, c, agent, arm, base), na, nb) for c, na, nb in sizes]
        return Streams(memo, cells, (), sums.get(what)), Streams(memo, (), labels, sums.get(what + "-p"))

    # race mode's stopped runs are neither samples nor errors
    arm_all = {c: [o for o in by_cell[(c, arm)] if o.status != Status.STOPPED] for c in cases}
    base_all = {c: [o for o in by_cell[(c, base)] if o.status != Status.STOPPED] for c in cases}
    arm_v = {c: [o for o in rs if o.is_sample] for c, rs in arm_all.items()}
    base_v = {c: [o for o in rs if o.is_sample] for c, rs in base_all.items()}
    tok = [(tokens_of(arm_v[c]), tokens_of(base_v[c])) for c in cases]
    sc = [([score_value(o) for o in arm_v[c]], [score_value(o) for o in base_v[c]]) for c in cases]
    # the cost and the score figures draw from their own generators: over several cases (one comparison that
    # outweighs the rest) they are computed side by side
    if target == FIXED or len(cases) == 1:
        cost_ci, cost_p = owned("cost", [(c, len(a), len(b)) for c, (a, b) in zip(cases, tok, strict=True) if len(a) and len(b) and sum(b) > 0])
        score_ci, score_p = owned("score", [(c, len(a), len(b)) for c, (a, b) in zip(cases, sc, strict=True)])
    else:
        cost_ci, cost_p, score_ci, score_p = rng("cost"), rng("cost-p"), rng("score"), rng("score-p")
    several = len(cases) > 1  # one case draws no case-level figure (log ratios, paired pass rates): no generator for them
    cost_job = lambda: cost_result(tok, confidence, resamples, alpha, cost_ci, cost_p, rng("log-ratio") if several else None, target)  # noqa: E731
    score_job = lambda: score_result(sc, target, confidence, resamples, score_ci, score_p)  # noqa: E731
    if len(cases) > 1:
        cr, (score, score_p) = stats.parallel_map(lambda job: job(), [cost_job, score_job], least=2)
    else:
        cr, (score, score_p) = cost_job(), score_job()
    usable = stats.usable_cases(tok, "ratio")
    per_case = min((min(len(a), len(b)) for a, b in usable), default=0)

    def passed(runs: list[Outcome]) -> int:
        return sum(o.status == Status.PASSED for o in runs)

    tables = [(passed(arm_v[c]), len(arm_v[c]), passed(base_v[c]), len(base_v[c])) for c in cases]
    ka, na, kb, nb = (sum(t[i] for t in tables) for i in range(4))
    ra, rb = sum(map(len, arm_all.values())), sum(map(len, base_all.values()))
    rate_a, rate_b = (ka / na if na else None), (kb / nb if nb else None)
    pr = pass_result(tables, target, confidence, resamples, alpha, *((rng("pass-paired"), rng("pass-p")) if several else (None, None)))
    return ArmComparison(
        kind=kind, source=source, agent=agent, arm=arm, baseline=base, cases=tuple(cases),
        runs_arm=na, runs_base=nb, errors_arm=ra - na, errors_base=rb - nb,
        tokens_unknown=(na - sum(len(a) for a, _ in tok)) + (nb - sum(len(b) for _, b in tok)),
        relative_cost=cr.contrast.estimate, relative_cost_ci=cr.contrast.interval, cost_test=cr.test, cost_p=cr.p,
        cost_verdict=cr.verdict, provisional=provisional(per_case, per_case),
        log_ratio_mean=cr.log_ratio_mean, log_ratio_ci=cr.log_ratio_ci,
        pass_rate_arm=rate_a, pass_rate_base=rate_b,
        pass_rate_arm_errors_as_failures=ka / ra if ra else None, pass_rate_base_errors_as_failures=kb / rb if rb else None,
        pass_diff=pr.diff, pass_diff_ci=pr.diff_ci, boschloo_p=stats.boschloo_p(ka, na, kb, nb) if na and nb else None,
        pass_test=pr.test, paired_pass_diff=pr.paired_diff, paired_pass_ci=pr.paired_ci, pass_p=pr.p, pass_verdict=pr.verdict,
        score_delta=score.estimate, score_delta_ci=score.interval, score_p=score_p,
        cohens_d=stats.cohens_d([x for a, _ in sc for x in a], [x for _, b in sc for x in b]),
        score_verdict=difference_verdict(score.interval, score_p, alpha),
        target=target, cost_p_error=cr.p_error, runs_per_case=per_case,
        cost_p_min=min_p([(len(a), len(b)) for a, b in usable], target, resamples) if usable else None,
    )


def compare_arms(outcomes: Iterable[Outcome], baseline: str | None = None, seed: int = 0, resamples: int = stats.DEFAULT_RESAMPLES,
                 confidence: float = 0.95, alpha: float = 0.05, by_case: bool = False, target: str = FIXED) -> list[ArmComparison]:
    """Compare every arm with the baseline arm, per (kind, source, agent); ``by_case`` gives one comparison per case.

    Uses the cases where both the arm and the baseline have at least one valid run; a group with one arm gives
    nothing. ``baseline``: see ``resolve_baseline``. ``target``: ``fixed`` (default) or ``cases`` (module
    docstring). ``resamples`` bootstrap draws (default 10,000), seeded by ``seed``. P-values are also given after
    Benjamini-Hochberg over the whole returned list; per-case comparisons (``by_case``) after Holm over the cases of
    each arm, and are decided on those (``with_bh``). Returns comparisons sorted by (kind, source, agent, arm[, case]).
    """
    check_target(target)
    jobs: list[tuple[Any, ...]] = []
    for kind, source, agent, base, by_cell, arms in comparison_groups(outcomes, baseline):
        for arm, shared in arms.items():
            for cases in ([[c] for c in shared] if by_case else [shared]):
                jobs.append((kind, source, agent, arm, base, cases, by_cell))
    result = stats.parallel_map(lambda job: _compare(*job, seed, resamples, confidence, alpha, target), jobs)
    return with_bh(result, decide=by_case, alpha=alpha)


def comparison_groups(outcomes: Iterable[Outcome], baseline: str | None = None) -> list[tuple[Any, ...]]:
    """The comparisons to make, per (kind, source, agent) with two or more arms, sorted: ``(kind, source, agent,
    baseline arm, by_cell, {arm: shared cases})`` with ``by_cell`` ``{(case, arm): runs in rep order}`` and the
    cases where the arm and the baseline both have a valid run (arms without one left out)."""
    groups: dict[tuple[str, str, str], list[Outcome]] = defaultdict(list)
    for o in outcomes:
        groups[(o.kind, o.source, o.agent)].append(o)
    out = []
    for (kind, source, agent), runs in sorted(groups.items()):
        arms = sorted({o.arm for o in runs})
        if len(arms) < 2:
            continue
        base = resolve_baseline(runs, baseline)
        by_cell: dict[tuple[str, str], list[Outcome]] = defaultdict(list)
        for o in sorted(runs, key=lambda o: o.rep):
            by_cell[(o.case, o.arm)].append(o)
        valid_cases = {(c, a) for (c, a), rs in by_cell.items() if any(o.is_sample for o in rs)}
        found = {arm: sorted(c for c, a in valid_cases if a == arm and (c, base) in valid_cases) for arm in arms if arm != base}
        out.append((kind, source, agent, base, by_cell, {arm: shared for arm, shared in found.items() if shared}))
    return out


def comparison_data(by_cell: dict[tuple[str, str], list[Outcome]], cases: Sequence[str], arm: str, base: str):
    """The samples of a comparison over ``cases``: per case the (arm, baseline) valid runs (race mode's stopped runs
    left out), their known tokens (``tok``) and their scores (``sc``, ``cells.score_value``), as three lists."""
    valid = [([o for o in by_cell[(c, arm)] if o.status != Status.STOPPED and o.is_sample],
              [o for o in by_cell[(c, base)] if o.status != Status.STOPPED and o.is_sample]) for c in cases]
    tok = [(tokens_of(a), tokens_of(b)) for a, b in valid]
    sc = [([score_value(o) for o in a], [score_value(o) for o in b]) for a, b in valid]
    return valid, tok, sc


def with_bh(comparisons: list[ArmComparison], decide: bool = False, alpha: float = 0.05) -> list[ArmComparison]:
    """Fill ``cost_p_adj`` / ``pass_p_adj`` / ``score_p_adj`` with adjusted p-values.

    Arm comparisons (``decide`` False): Benjamini-Hochberg (``stats.bh_adjust``) over every cost and pass p-value of
    ``comparisons`` together, their score p-values apart - shown for reading, the verdicts keep their own p.
    Per-case comparisons (``decide``): Holm (``stats.holm_adjust``) over the cases of one arm against the baseline
    for one agent, per metric (cost, pass, score), and the verdicts are then taken on the adjusted p-values: with
    many cases some unadjusted p falls below ``alpha`` by chance (13% of 3-case and 35% of 10-case A/A trials showed
    a false per-case verdict). Holm bounds the chance of any false per-case verdict at ``alpha`` (family-wise) also
    when some cases truly differ; Benjamini-Hochberg, used before, let the cases without an effect get a false
    verdict in up to 7% of such trials (``tests/test_sim_targets.py``).
    Stop-when-decided decisions (``with_sequential``) are applied after this and keep their own verdict."""
    out = list(comparisons)
    if not decide:
        adj = stats.bh_adjust([p for c in out for p in (c.cost_p, c.pass_p)])
        score_adj = stats.bh_adjust([c.score_p for c in out])
        return [dataclasses.replace(c, cost_p_adj=adj[2 * i], pass_p_adj=adj[2 * i + 1], score_p_adj=score_adj[i]) for i, c in enumerate(out)]
    families: dict[tuple[str, str, str, str], list[int]] = defaultdict(list)
    for i, c in enumerate(out):
        families[(c.kind, c.source, c.agent, c.arm)].append(i)
    for idx in families.values():
        cost = stats.holm_adjust([out[i].cost_p for i in idx])
        passed = stats.holm_adjust([out[i].pass_p for i in idx])
        score = stats.holm_adjust([out[i].score_p for i in idx])
        for j, i in enumerate(idx):
            c = dataclasses.replace(out[i], cost_p_adj=cost[j], pass_p_adj=passed[j], score_p_adj=score[j])
            pass_ci = stats.Interval(c.pass_diff_ci[0], c.pass_diff_ci[1], "newcombe", c.relative_cost_ci.confidence)
            if c.pass_test in ("Boschloo", "Fisher"):
                pass_v = test_verdict(c.pass_p_adj, c.pass_diff, alpha)
            else:
                pass_v = difference_verdict(c.paired_pass_ci if c.pass_test == "sign-flip" else pass_ci, c.pass_p_adj, alpha)
            out[i] = dataclasses.replace(c, cost_verdict=cost_verdict(c.relative_cost_ci, c.cost_p_adj, alpha), pass_verdict=pass_v,
                                         score_verdict=difference_verdict(c.score_delta_ci, c.score_p_adj, alpha))
    return out


def with_sequential(comparison: ArmComparison, decision: dict[str, Any]) -> ArmComparison:
    """Replace the cost verdict by a stop-when-decided ``decision`` (``sequential.Decision.to_dict()``). The
    fixed-sample verdict of the same runs is kept in the decision as ``fixed_verdict`` (it can differ only where the
    sequential test is capped: its last boundary is stricter than a single test's, and the report says so)."""
    verdict = decision.get("verdict") or Verdict.NO_CLEAR.value
    return dataclasses.replace(comparison, cost_verdict=verdict, sequential={**decision, "fixed_verdict": comparison.cost_verdict})
