"""Per-cell summaries and arm-vs-baseline comparisons over Outcomes. Pure functions; no pytest import.

A *cell* is case x arm x agent (case = task name or trial question id). Rules shared by everything here:

- ``error`` runs (infrastructure) are never samples: they are counted (``errors``) and left out; ``timeout`` and
  ``failed`` runs are failures. Pass rates are given with errors excluded and, to show the bracket, with errors
  counted as failures.
- Tokens are ``usage.total_tokens``; runs whose tokens are unknown (None) are left out of token figures and
  counted (``tokens_unknown``).
- Every random figure is seeded from ``seed`` and the cell/comparison key (``stats.rng_for``), so a report is
  reproducible and a figure does not move when other cells are added.
- Comparisons are made per (kind, source file, agent) between each arm and the baseline arm, over the cases both
  have valid runs for. See ``compare_arms`` for the methods and ``verdict`` for the rules.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from pytest_agentrace.record.model import Outcome, Status
from pytest_agentrace.stats import numerics as stats
from pytest_agentrace.stats import resample
from pytest_agentrace.stats.verdict import (
    Verdict,
    cost_signs,
    difference_verdict,
    provisional,
    test_verdict,
)


def _num(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def score_value(o: Outcome) -> float:
    """The per-run score used in comparisons: the composite ``score`` (tasks, 0..100) when set, else 100 for a
    passed run and 0 otherwise (trials: correct and verified)."""
    return float(o.score) if o.score is not None else (100.0 if o.status == Status.PASSED else 0.0)


def tokens_of(runs: Iterable[Outcome]) -> list[float]:
    """Known ``total_tokens`` of ``runs`` (unknown ones dropped)."""
    return [float(o.usage.total_tokens) for o in runs if o.usage.total_tokens is not None]


# ---------------------------------------------------------------------------------------------- cells


@dataclass(frozen=True)
class CellSummary:
    """Figures of one cell (case x arm x agent) over its runs.

    Counts: ``runs`` (records), ``errors`` (status error), ``valid = runs - errors``, ``passed``, ``timeouts``.
    ``pass_rate = passed / valid`` with its Wilson 95% interval ``pass_ci``; ``pass_rate_errors_as_failures =
    passed / runs`` (+ ``pass_ci_errors_as_failures``). Tokens per run: ``tokens_mean`` / ``tokens_sd`` over the
    ``tokens_n`` valid runs with known tokens, ``tokens_ci`` a bootstrap interval (``stats.mean_interval``: BCa
    with the small-sample expansion; it cannot reach beyond the sample's range, so at 4 runs it covers a mean
    less often than 95%). ``seconds_mean`` is agent wall time (seconds), ``cost_mean`` USD over runs with a cost,
    ``turns_mean`` over runs that report turns. ``used_tool`` counts runs whose tool calls matched the arm's
    ``uses`` regex (``used_tool_known`` runs recorded it). ``score_mean``/``score_sd``: composite score (tasks).
    ``pass_at_k`` / ``pass_hat_k``: ``{str(k): value}`` for k = 1..valid (``stats.pass_at_k``). Claims (trials):
    ``claims`` recorded, ``false_pass`` / ``false_fail`` counts, ``claims_invalid``.
    """

    kind: str
    source: str
    case: str
    arm: str
    agent: str
    runs: int
    valid: int
    errors: int
    passed: int
    timeouts: int
    pass_rate: float | None
    pass_ci: tuple[float, float]
    pass_rate_errors_as_failures: float | None
    pass_ci_errors_as_failures: tuple[float, float]
    tokens_n: int
    tokens_unknown: int
    tokens_mean: float | None
    tokens_sd: float | None
    tokens_ci: stats.Interval
    turns_mean: float | None
    used_tool: int
    used_tool_known: int
    seconds_mean: float | None
    cost_mean: float | None
    score_mean: float | None
    score_sd: float | None
    pass_at_k: dict[str, float] = field(default_factory=dict)
    pass_hat_k: dict[str, float] = field(default_factory=dict)
    claims: int = 0
    false_pass: int = 0
    false_fail: int = 0
    claims_invalid: int = 0
    models: tuple[str, ...] = ()
    cli_versions: tuple[str, ...] = ()

    @property
    def flaky(self) -> bool:
        """Neither always passing nor always failing (over at least 2 valid runs)."""
        return self.valid >= 2 and 0 < self.passed < self.valid

    def to_dict(self) -> dict[str, Any]:
        d = {k: _num(v) for k, v in asdict(self).items()}
        d["tokens_ci"] = self.tokens_ci.to_dict()
        d["pass_ci"] = list(self.pass_ci)
        d["pass_ci_errors_as_failures"] = list(self.pass_ci_errors_as_failures)
        d["models"], d["cli_versions"] = list(self.models), list(self.cli_versions)
        d["flaky"] = self.flaky
        return d


def _group(outcomes: Iterable[Outcome]) -> dict[tuple[str, str, str, str, str], list[Outcome]]:
    groups: dict[tuple[str, str, str, str, str], list[Outcome]] = defaultdict(list)
    for o in outcomes:
        groups[(o.kind, o.source, o.case, o.arm, o.agent)].append(o)
    return groups


def summarize_cell(runs: Sequence[Outcome], seed: int = 0, resamples: int = stats.DEFAULT_RESAMPLES, confidence: float = 0.95) -> CellSummary:
    """Summarise the runs of one cell (all sharing kind, source, case, arm, agent). See ``CellSummary``."""
    first = runs[0]
    valid = [o for o in runs if o.is_sample]
    passed = sum(o.status == Status.PASSED for o in valid)
    tokens = tokens_of(valid)
    key = (first.kind, first.source, first.case, first.arm, first.agent)
    scores = [float(o.score) for o in valid if o.score is not None]
    costs = [o.usage.cost_usd for o in valid if o.usage.cost_usd is not None]
    turns = [o.usage.turns for o in valid if o.usage.turns is not None]
    claims = [o.claim for o in valid if o.claim]
    n = len(valid)
    return CellSummary(
        kind=first.kind, source=first.source, case=first.case, arm=first.arm, agent=first.agent,
        runs=len(runs), valid=n, errors=len(runs) - n, passed=passed,
        timeouts=sum(o.status == Status.TIMEOUT for o in valid),
        pass_rate=passed / n if n else None, pass_ci=stats.wilson_interval(passed, n, confidence),
        pass_rate_errors_as_failures=passed / len(runs) if runs else None,
        pass_ci_errors_as_failures=stats.wilson_interval(passed, len(runs), confidence),
        tokens_n=len(tokens), tokens_unknown=n - len(tokens), tokens_mean=_mean(tokens),
        tokens_sd=math.sqrt(stats._var(tokens)) if len(tokens) >= 2 else None,
        tokens_ci=stats.mean_interval(tokens, confidence, resamples, stats.rng_for(seed, "tokens", *key)),
        turns_mean=_mean(turns), used_tool=sum(o.used_tool is True for o in valid),
        used_tool_known=sum(o.used_tool is not None for o in valid),
        seconds_mean=_mean([o.seconds for o in valid]), cost_mean=_mean(costs),
        score_mean=_mean(scores), score_sd=math.sqrt(stats._var(scores)) if len(scores) >= 2 else None,
        pass_at_k={str(k): stats.pass_at_k(n, passed, k) for k in range(1, n + 1)},  # type: ignore[misc]
        pass_hat_k={str(k): stats.pass_hat_k(n, passed, k) for k in range(1, n + 1)},  # type: ignore[misc]
        claims=len(claims), false_pass=sum(bool(c.get("false_pass")) for c in claims),
        false_fail=sum(bool(c.get("false_fail")) for c in claims),
        claims_invalid=sum(bool(c.get("invalid")) or c.get("status") == "invalid" for c in claims),
        models=tuple(sorted({m for o in runs for m in (o.usage.model or o.model,) if m})),
        cli_versions=tuple(sorted({o.usage.cli_version for o in runs if o.usage.cli_version})),
    )


def summarize(outcomes: Iterable[Outcome], seed: int = 0, resamples: int = stats.DEFAULT_RESAMPLES, confidence: float = 0.95) -> list[CellSummary]:
    """One ``CellSummary`` per cell, sorted by (kind, source, case, arm, agent)."""
    return [summarize_cell(runs, seed, resamples, confidence) for _, runs in sorted(_group(outcomes).items())]


@dataclass(frozen=True)
class ArmTokens:
    """Tokens per run of one arm over several cases (``kind, source, agent, arm``): ``mean`` is the mean over its
    ``cases`` of each case's mean tokens per run, ``ci`` a two-stage cluster bootstrap interval (cases, then runs
    within a case; ``stats.cluster_contrast``, as for relative cost), so it says how much the figure would move
    with another draw of cases as well as of runs."""

    kind: str
    source: str
    agent: str
    arm: str
    cases: int
    mean: float | None
    ci: stats.Interval

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ci": self.ci.to_dict()}


def arm_tokens(outcomes: Iterable[Outcome], seed: int = 0, resamples: int = stats.DEFAULT_RESAMPLES, confidence: float = 0.95) -> list[ArmTokens]:
    """``ArmTokens`` for every (kind, source, agent, arm) with known tokens in at least 2 cases (one case: the
    cell summary's interval says it), sorted by key. Only valid runs (not ``error``) with known tokens count."""
    groups: dict[tuple[str, str, str, str], list[list[float]]] = defaultdict(list)
    for (kind, source, _case, arm, agent), runs in sorted(_group(outcomes).items()):
        if toks := tokens_of(o for o in runs if o.is_sample):
            groups[(kind, source, agent, arm)].append(toks)
    out = []
    for key, per_case in sorted(groups.items()):
        if len(per_case) < 2:
            continue
        c = stats.cluster_contrast([(t, [0.0]) for t in per_case], "difference", confidence, resamples, stats.rng_for(seed, "arm-tokens", *key))
        out.append(ArmTokens(*key, cases=len(per_case), mean=c.estimate, ci=c.interval))
    return out


# ---------------------------------------------------------------------------------------------- reliability, spread


@dataclass(frozen=True)
class Reliability:
    """Per (kind, agent, arm) over its cases: ``cases`` with at least 2 valid runs, ``flipping`` cases (neither
    always passing nor always failing), ``flip_rate = flipping / cases``, and the mean over those cases of
    pass@k and pass^k for k up to the fewest valid runs of any case (``{str(k): value}``)."""

    kind: str
    agent: str
    arm: str
    cases: int
    flipping: int
    flip_rate: float | None
    pass_at_k: dict[str, float]
    pass_hat_k: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def reliability(cells: Iterable[CellSummary]) -> list[Reliability]:
    """``Reliability`` per (kind, agent, arm) from cell summaries."""
    groups: dict[tuple[str, str, str], list[CellSummary]] = defaultdict(list)
    for c in cells:
        if c.valid >= 2:
            groups[(c.kind, c.agent, c.arm)].append(c)
    out = []
    for (kind, agent, arm), cs in sorted(groups.items()):
        kmax = min(c.valid for c in cs)
        flipping = sum(c.flaky for c in cs)
        out.append(Reliability(
            kind, agent, arm, len(cs), flipping, flipping / len(cs),
            {str(k): sum(c.pass_at_k[str(k)] for c in cs) / len(cs) for k in range(1, kmax + 1)},
            {str(k): sum(c.pass_hat_k[str(k)] for c in cs) / len(cs) for k in range(1, kmax + 1)},
        ))
    return out


@dataclass(frozen=True)
class Spread:
    """Run-to-run spread of one agent's cost and what it implies for planning.

    ``cv``: coefficient of variation of relative cost, pooled over the agent's cells (``sqrt(sum((n-1) cv_c^2) /
    sum(n-1))``; dividing by a per-case baseline mean does not change a cell's CV). ``runs_needed``: runs per
    arm to detect a relative change of ``effect`` with ``power`` at two-sided ``alpha`` (``stats.runs_needed``).
    """

    kind: str
    agent: str
    cv: float | None
    cells: int
    runs_needed: int | None
    effect: float = 0.2
    alpha: float = 0.05
    power: float = 0.8

    def sentence(self) -> str:
        if self.cv is None:
            return f"{self.agent}: not enough runs with tokens to estimate the spread (need 2 per cell)."
        need = f"{self.runs_needed}" if self.runs_needed is not None else "more than 100,000"
        return (f"{self.agent}: CV of relative cost {self.cv:.2f} (pooled over {self.cells} cells); runs per arm to detect a "
                f"{self.effect:.0%} difference with {self.power:.0%} power at alpha {self.alpha:g}: {need} "
                f"(two-sample t test on log cost, sigma^2 = ln(1 + CV^2), at the exact test's attainable level).")

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "sentence": self.sentence()}


def pooled_cv(cells: Iterable[CellSummary]) -> tuple[float | None, int]:
    """Pooled within-cell coefficient of variation of tokens and the number of cells that contributed."""
    num = den = 0.0
    used = 0
    for c in cells:
        if c.tokens_n >= 2 and c.tokens_mean and c.tokens_sd is not None:
            num += (c.tokens_n - 1) * (c.tokens_sd / c.tokens_mean) ** 2
            den += c.tokens_n - 1
            used += 1
    return (math.sqrt(num / den) if den else None), used


def spread(cells: Iterable[CellSummary], effect: float = 0.2, alpha: float = 0.05, power: float = 0.8) -> list[Spread]:
    """One ``Spread`` per (kind, agent)."""
    groups: dict[tuple[str, str], list[CellSummary]] = defaultdict(list)
    for c in cells:
        groups[(c.kind, c.agent)].append(c)
    out = []
    for (kind, agent), cs in sorted(groups.items()):
        value, used = pooled_cv(cs)
        need = stats.runs_needed(value, effect, alpha, power) if value is not None else None
        out.append(Spread(kind, agent, value, used, need, effect, alpha, power))
    return out


# ---------------------------------------------------------------------------------------------- comparisons


@dataclass(frozen=True)
class ArmComparison:
    """One arm against the baseline arm for one agent, over ``cases`` (the cases both have valid runs for).

    Relative cost (tokens of the arm's runs / the baseline's mean, per case, averaged over cases):
    ``relative_cost`` with ``relative_cost_ci`` from the cluster bootstrap (``stats.cluster_contrast``);
    ``cost_p`` from an exact permutation test on the runs (one case) or a sign-flip test on the per-case log
    ratios (several cases, whose paired case-level bootstrap interval is ``log_ratio_ci``); ``cost_verdict``
    cheaper / dearer / no clear difference (``verdict.cost_verdict``), ``provisional`` below 8 runs per arm.
    Pass rate: pooled over cases ``pass_rate_arm`` / ``pass_rate_base`` (errors excluded, and ``*_errors_as_failures``),
    ``pass_diff`` with Newcombe's interval ``pass_diff_ci`` and Boschloo's two-sided ``boschloo_p``; the verdict
    (better / worse) rests on Boschloo for one case, and for several cases on the per-case differences
    (``paired_pass_diff``, case bootstrap ``paired_pass_ci``, sign-flip ``pass_p``). Score (``score_value``):
    ``score_delta`` with ``score_delta_ci``, ``cohens_d`` (None for zero-variance samples), ``score_verdict``.
    ``cost_p_adj`` / ``pass_p_adj``: Benjamini-Hochberg over every p-value of the comparisons reported together.
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
    ``[defaults] baseline`` (``extra["baseline_arm"]``); else an arm named ``baseline``, ``default``; else the
    first arm in sorted order."""
    arms = sorted({o.arm for o in runs})
    if baseline in arms:
        return baseline  # type: ignore[return-value]
    named = [o.extra.get("baseline_arm") for o in runs if o.extra.get("baseline_arm") in arms]
    if named:
        return max(set(named), key=named.count)  # type: ignore[arg-type]
    for name in ("baseline", "default"):
        if name in arms:
            return name
    return arms[0]


@dataclass(frozen=True)
class CostResult:
    """Relative cost of an arm over cases: the cluster-bootstrap ``contrast``, the exact ``test`` (``permutation``
    for one case, ``sign-flip`` on per-case log ratios for several) with its ``p``, the paired case-level
    bootstrap of the log ratios (several cases), and the ``verdict`` (``verdict.cost_verdict``)."""

    contrast: stats.Contrast
    test: str
    p: float | None
    log_ratio_mean: float | None
    log_ratio_ci: stats.Interval
    verdict: str


def cost_batch(cases: Sequence[tuple[Any, Any]], confidence: float = 0.95, resamples: int = stats.DEFAULT_RESAMPLES, alpha: float = 0.05,
               rng_ci=None, rng_p=None, rng_log=None) -> dict[str, Any]:
    """The relative-cost decision for T data sets at once (the path every cost verdict takes; the A/A simulations
    call it with thousands). ``cases``: per case ``(A, B)`` token arrays (T, n_arm), (T, n_base), every value > 0.

    Returns arrays: ``estimate``, ``lo``, ``hi``, ``method`` (interval of the cluster bootstrap), ``p`` (exact
    permutation test for one case, sign-flip on per-case log ratios for several), ``log_mean``/``log_lo``/``log_hi``/
    ``log_method`` (paired case-level bootstrap of the log ratios; several cases), ``sign`` (-1 cheaper, +1 dearer,
    0 no clear difference: the interval excludes 1.00 and p < ``alpha``), and ``test``."""
    import numpy as np

    data = [(np.atleast_2d(np.asarray(a, dtype=float)), np.atleast_2d(np.asarray(b, dtype=float))) for a, b in cases]
    est, lo, hi, method, _ = resample.cluster_contrast(data, "ratio", confidence, resamples, rng_ci)
    t_count = est.shape[0]
    nan = np.full(t_count, np.nan)
    out = {"estimate": est, "lo": lo, "hi": hi, "method": method, "log_mean": nan, "log_lo": nan, "log_hi": nan,
           "log_method": np.full(t_count, resample.NONE)}
    if len(data) > 1:
        logs = np.stack([np.log(a.mean(axis=1) / b.mean(axis=1)) for a, b in data], axis=1)
        out["test"], out["p"] = "sign-flip", resample.sign_flip_p(logs, resamples, rng_p)
        out["log_mean"] = logs.mean(axis=1)
        out["log_lo"], out["log_hi"], out["log_method"] = resample.mean_interval(logs, confidence, resamples, rng_log)
    else:
        out["test"], out["p"] = "permutation", resample.permutation_p(data[0][0], data[0][1], resamples, rng_p)
    out["sign"] = cost_signs(lo, hi, out["p"], alpha)
    return out


def cost_result(tok: Sequence[tuple[Sequence[float], Sequence[float]]], confidence: float = 0.95, resamples: int = stats.DEFAULT_RESAMPLES,
                alpha: float = 0.05, rng_ci=None, rng_p=None, rng_log=None) -> CostResult:
    """Relative cost of arm vs baseline from per-case ``(arm tokens, baseline tokens)`` (``cost_batch`` on one data
    set). Cases with an empty side or a zero baseline are left out; with a token <= 0 the log ratios of several
    cases are undefined, so their test is skipped (no verdict)."""
    tok = stats.usable_cases(tok, "ratio")
    if not tok:
        return CostResult(stats.Contrast("ratio", None, stats.Interval.none(confidence), 0, 0, 0, False), "permutation", None, None,
                          stats.Interval.none(confidence), Verdict.NO_CLEAR.value)
    if len(tok) > 1 and min(min(a) for a, _ in tok) <= 0:
        contrast = stats.cluster_contrast(tok, "ratio", confidence, resamples, rng_ci)
        return CostResult(contrast, "sign-flip", None, None, stats.Interval.none(confidence), Verdict.NO_CLEAR.value)
    r = cost_batch([([a], [b]) for a, b in tok], confidence, resamples, alpha, rng_ci, rng_p, rng_log)
    log_ci = stats._interval(r["log_lo"], r["log_hi"], r["log_method"], confidence)
    log_mean = None if len(tok) == 1 else float(r["log_mean"][0])
    sign = int(r["sign"][0])
    verdict = Verdict.CHEAPER.value if sign < 0 else Verdict.DEARER.value if sign > 0 else Verdict.NO_CLEAR.value
    spread = any(max(a) > min(a) or max(b) > min(b) for a, b in tok)
    contrast = stats.Contrast("ratio", float(r["estimate"][0]), stats._interval(r["lo"], r["hi"], r["method"], confidence),
                              len(tok), sum(len(a) for a, _ in tok), sum(len(b) for _, b in tok), spread)
    return CostResult(contrast, r["test"], float(r["p"][0]), log_mean, log_ci, verdict)


def _compare(kind: str, source: str, agent: str, arm: str, base: str, cases: Sequence[str],
             by_cell: dict[tuple[str, str], list[Outcome]], seed: int, resamples: int, confidence: float, alpha: float) -> ArmComparison:
    key = (kind, source, agent, arm, base, tuple(cases))
    rng = lambda what: stats.rng_for(seed, what, *key)
    arm_all = {c: by_cell[(c, arm)] for c in cases}
    base_all = {c: by_cell[(c, base)] for c in cases}
    arm_v = {c: [o for o in rs if o.is_sample] for c, rs in arm_all.items()}
    base_v = {c: [o for o in rs if o.is_sample] for c, rs in base_all.items()}
    many = len(cases) > 1
    # relative cost
    tok = [(tokens_of(arm_v[c]), tokens_of(base_v[c])) for c in cases]
    cr = cost_result(tok, confidence, resamples, alpha, rng("cost"), rng("cost-p"), rng("log-ratio"))
    cost = cr.contrast
    # pass rate
    ka = sum(o.status == Status.PASSED for c in cases for o in arm_v[c])
    kb = sum(o.status == Status.PASSED for c in cases for o in base_v[c])
    na, nb = sum(map(len, arm_v.values())), sum(map(len, base_v.values()))
    ra, rb = sum(map(len, arm_all.values())), sum(map(len, base_all.values()))
    rate_a, rate_b = (ka / na if na else None), (kb / nb if nb else None)
    diff = rate_a - rate_b if rate_a is not None and rate_b is not None else None
    bp = stats.boschloo_p(ka, na, kb, nb) if na and nb else None
    if many:
        d = [sum(o.status == Status.PASSED for o in arm_v[c]) / len(arm_v[c]) - sum(o.status == Status.PASSED for o in base_v[c]) / len(base_v[c]) for c in cases]
        paired_diff, paired_ci = sum(d) / len(d), stats.mean_interval(d, confidence, resamples, rng("pass-paired"))
        pass_test, pass_p = "sign-flip", stats.sign_flip_p(d, resamples, rng("pass-p"))
        pass_v = difference_verdict(paired_ci, pass_p, alpha)
    else:
        paired_diff, paired_ci = None, stats.Interval.none(confidence)
        pass_test, pass_p = "Boschloo", bp
        pass_v = test_verdict(bp, diff, alpha)
    # score
    sc = [([score_value(o) for o in arm_v[c]], [score_value(o) for o in base_v[c]]) for c in cases]
    score = stats.cluster_contrast(sc, "difference", confidence, resamples, rng("score"))
    if many:
        score_p = stats.sign_flip_p([sum(a) / len(a) - sum(b) / len(b) for a, b in sc], resamples, rng("score-p"))
    else:
        score_p = stats.permutation_p(sc[0][0], sc[0][1], resamples, rng("score-p"), log_ratio=False)
    d_all = stats.cohens_d([x for a, _ in sc for x in a], [x for _, b in sc for x in b])
    return ArmComparison(
        kind=kind, source=source, agent=agent, arm=arm, baseline=base, cases=tuple(cases),
        runs_arm=na, runs_base=nb, errors_arm=ra - na, errors_base=rb - nb,
        tokens_unknown=(na - sum(len(tokens_of(v)) for v in arm_v.values())) + (nb - sum(len(tokens_of(v)) for v in base_v.values())),
        relative_cost=cost.estimate, relative_cost_ci=cost.interval, cost_test=cr.test, cost_p=cr.p,
        cost_verdict=cr.verdict, provisional=provisional(cost.n_arm, cost.n_base),
        log_ratio_mean=cr.log_ratio_mean, log_ratio_ci=cr.log_ratio_ci,
        pass_rate_arm=rate_a, pass_rate_base=rate_b,
        pass_rate_arm_errors_as_failures=ka / ra if ra else None, pass_rate_base_errors_as_failures=kb / rb if rb else None,
        pass_diff=diff, pass_diff_ci=stats.newcombe_interval(ka, na, kb, nb, confidence), boschloo_p=bp,
        pass_test=pass_test, paired_pass_diff=paired_diff, paired_pass_ci=paired_ci, pass_p=pass_p, pass_verdict=pass_v,
        score_delta=score.estimate, score_delta_ci=score.interval, score_p=score_p, cohens_d=d_all,
        score_verdict=difference_verdict(score.interval, score_p, alpha),
    )


def compare_arms(outcomes: Iterable[Outcome], baseline: str | None = None, seed: int = 0, resamples: int = stats.DEFAULT_RESAMPLES,
                 confidence: float = 0.95, alpha: float = 0.05, by_case: bool = False) -> list[ArmComparison]:
    """Compare every arm with the baseline arm, per (kind, source, agent); ``by_case`` gives one comparison per case.

    Uses the cases where both the arm and the baseline have at least one valid run; a group with one arm gives
    nothing. ``baseline``: see ``resolve_baseline``. ``resamples`` bootstrap draws (default 10,000), seeded by
    ``seed``. P-values used for verdicts are also given after Benjamini-Hochberg over the whole returned list.
    Returns comparisons sorted by (kind, source, agent, arm[, case]).
    """
    outcomes = list(outcomes)
    groups: dict[tuple[str, str, str], list[Outcome]] = defaultdict(list)
    for o in outcomes:
        groups[(o.kind, o.source, o.agent)].append(o)
    result: list[ArmComparison] = []
    for (kind, source, agent), runs in sorted(groups.items()):
        arms = sorted({o.arm for o in runs})
        if len(arms) < 2:
            continue
        base = resolve_baseline(runs, baseline)
        by_cell: dict[tuple[str, str], list[Outcome]] = defaultdict(list)
        for o in sorted(runs, key=lambda o: o.rep):
            by_cell[(o.case, o.arm)].append(o)
        valid_cases = {(c, a) for (c, a), rs in by_cell.items() if any(o.is_sample for o in rs)}
        for arm in arms:
            if arm == base:
                continue
            shared = sorted(c for c, a in valid_cases if a == arm and (c, base) in valid_cases)
            if not shared:
                continue
            for cases in ([[c] for c in shared] if by_case else [shared]):
                result.append(_compare(kind, source, agent, arm, base, cases, by_cell, seed, resamples, confidence, alpha))
    return with_bh(result)


def with_bh(comparisons: list[ArmComparison]) -> list[ArmComparison]:
    """Fill ``cost_p_adj`` / ``pass_p_adj`` by Benjamini-Hochberg over all verdict p-values of ``comparisons``."""
    import dataclasses

    ps = [p for c in comparisons for p in (c.cost_p, c.pass_p)]
    adj = stats.bh_adjust(ps)
    return [dataclasses.replace(c, cost_p_adj=adj[2 * i], pass_p_adj=adj[2 * i + 1]) for i, c in enumerate(comparisons)]


def with_sequential(comparison: ArmComparison, decision: dict[str, Any]) -> ArmComparison:
    """Replace the cost verdict by a stop-when-decided ``decision`` (``sequential.Decision.to_dict()``)."""
    import dataclasses

    verdict = decision.get("verdict") or Verdict.NO_CLEAR.value
    return dataclasses.replace(comparison, cost_verdict=verdict, sequential=decision)
