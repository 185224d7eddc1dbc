"""Per-cell summaries and arm-vs-baseline comparisons over Outcomes. Pure functions; no pytest import.

A *cell* is case x arm x agent (case = task name or trial question id). Rules shared by everything here:

- ``error`` runs (infrastructure) are never samples: they are counted (``errors``) and left out; ``timeout`` and
  ``failed`` runs are failures. Pass rates are given with errors excluded and, to show the bracket, with errors
  counted as failures.
- Tokens are ``usage.total_tokens``; runs whose tokens are unknown (None) are left out of token figures and
  counted (``tokens_unknown``).
- Every random figure is seeded from ``seed`` and the names of what it resamples: a cell's bootstrap draws and a
  case's relabellings belong to the cell and case and are shared by every figure over them (``draws``); other
  draws are seeded by the comparison's key (``stats.rng_for``). A report is reproducible and a figure does not move
  when other cells are added.
- Comparisons of an arm with the baseline arm are in ``compare``; the rules of their verdicts in ``verdict``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from pytest_agentrace.record.model import Outcome, Status
from pytest_agentrace.stats import numerics as stats
from pytest_agentrace.stats import power as pw
from pytest_agentrace.stats.draws import Memo, Streams
from pytest_agentrace.stats.verdict import CASES, FIXED


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


@functools.lru_cache(maxsize=4096)
def _curves(n: int, passed: int) -> tuple[dict[str, float], dict[str, float]]:
    """``({str(k): pass@k}, {str(k): pass^k})`` for k = 1..n of ``passed`` passes in ``n`` valid runs
    (``stats.pass_at_k``, ``stats.pass_hat_k``), made once per ``(n, passed)``: cells of a report share them (the
    caller copies them)."""
    return ({str(k): stats.pass_at_k(n, passed, k) for k in range(1, n + 1)},  # type: ignore[misc]
            {str(k): stats.pass_hat_k(n, passed, k) for k in range(1, n + 1)})  # type: ignore[misc]


def summarize_cell(runs: Sequence[Outcome], seed: int = 0, resamples: int = stats.DEFAULT_RESAMPLES, confidence: float = 0.95,
                   memo: Memo | None = None) -> CellSummary:
    """Summarise the runs of one cell (all sharing kind, source, case, arm, agent). See ``CellSummary``. Runs stopped
    by race mode (status ``stopped``) are left out entirely: neither samples nor errors. The token interval resamples
    with the cell's own draws (``draws``; ``memo`` shares them with the comparisons over the cell)."""
    first = runs[0]
    runs = [o for o in runs if o.status != Status.STOPPED]
    valid = sorted((o for o in runs if o.is_sample), key=lambda o: o.rep)  # in rep order, as comparisons take them
    passed = sum(o.status == Status.PASSED for o in valid)
    tokens = tokens_of(valid)
    key = (first.kind, first.source, first.case, first.arm, first.agent)
    scores = [float(o.score) for o in valid if o.score is not None]
    costs = [o.usage.cost_usd for o in valid if o.usage.cost_usd is not None]
    turns = [o.usage.turns for o in valid if o.usage.turns is not None]
    claims = [o.claim for o in valid if o.claim]
    n = len(valid)
    at_k, hat_k = _curves(n, passed)
    return CellSummary(
        kind=first.kind, source=first.source, case=first.case, arm=first.arm, agent=first.agent,
        runs=len(runs), valid=n, errors=len(runs) - n, passed=passed,
        timeouts=sum(o.status == Status.TIMEOUT for o in valid),
        pass_rate=passed / n if n else None, pass_ci=stats.wilson_interval(passed, n, confidence),
        pass_rate_errors_as_failures=passed / len(runs) if runs else None,
        pass_ci_errors_as_failures=stats.wilson_interval(passed, len(runs), confidence),
        tokens_n=len(tokens), tokens_unknown=n - len(tokens), tokens_mean=_mean(tokens),
        tokens_sd=math.sqrt(stats._var(tokens)) if len(tokens) >= 2 else None,
        tokens_ci=(stats.mean_interval(tokens, confidence, resamples, Streams(memo or Memo(seed, resamples, keep=False), [(key, len(tokens))]))
                   if len(tokens) >= 2 else stats.Interval.none(confidence)),  # fewer than 2: no generator, no numpy
        turns_mean=_mean(turns), used_tool=sum(o.used_tool is True for o in valid),
        used_tool_known=sum(o.used_tool is not None for o in valid),
        seconds_mean=_mean([o.seconds for o in valid]), cost_mean=_mean(costs),
        score_mean=_mean(scores), score_sd=math.sqrt(stats._var(scores)) if len(scores) >= 2 else None,
        pass_at_k=dict(at_k), pass_hat_k=dict(hat_k),
        claims=len(claims), false_pass=sum(bool(c.get("false_pass")) for c in claims),
        false_fail=sum(bool(c.get("false_fail")) for c in claims),
        claims_invalid=sum(bool(c.get("invalid")) or c.get("status") == "invalid" for c in claims),
        models=tuple(sorted({m for o in runs for m in (o.usage.model or o.model,) if m})),
        cli_versions=tuple(sorted({o.usage.cli_version for o in runs if o.usage.cli_version})),
    )


def summarize(outcomes: Iterable[Outcome], seed: int = 0, resamples: int = stats.DEFAULT_RESAMPLES, confidence: float = 0.95) -> list[CellSummary]:
    """One ``CellSummary`` per cell, sorted by (kind, source, case, arm, agent)."""
    return stats.parallel_map(lambda runs: summarize_cell(runs, seed, resamples, confidence),
                              [runs for _, runs in sorted(_group(outcomes).items())])


@dataclass(frozen=True)
class ArmTokens:
    """Tokens per run of one arm over several cases (``kind, source, agent, arm``): ``mean`` is the mean over its
    ``cases`` of each case's mean tokens per run, ``ci`` the clustered-t interval over the case means (``K - 1`` df;
    ``stats.cluster_contrast``, as for relative cost under the new-cases target), cut at 0 tokens, so it says how
    much the figure would move with another draw of cases as well as of runs (with 2 cases, 1 df: very wide)."""

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
        ci = c.interval
        if ci.defined:
            ci = dataclasses.replace(ci, lo=max(0.0, ci.lo))
        out.append(ArmTokens(*key, cases=len(per_case), mean=c.estimate, ci=ci))
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
    arm (per case, over the agent's ``cases``, for the inference ``target``) to detect a relative change of
    ``effect`` with ``power`` at two-sided ``alpha`` (``power.runs_needed``, one formula for any number of cases).
    """

    kind: str
    agent: str
    cv: float | None
    cells: int
    runs_needed: int | None
    effect: float = 0.2
    alpha: float = 0.05
    power: float = 0.8
    cases: int = 1
    target: str = FIXED

    def sentence(self) -> str:
        if self.cv is None:
            return f"{self.agent}: not enough runs with tokens to estimate the spread (need 2 per cell)."
        many = self.cases > 1
        if self.runs_needed is not None:
            need = f"{self.runs_needed}"
        elif many and self.target == CASES:
            need = f"none (with {self.cases} cases the verdict needs more cases, not more runs)"
        else:
            need = "more than 100,000"
        where = f" per case over {self.cases} cases ({'fixed' if self.target == FIXED else 'new'} cases)" if many else ""
        test = ("stratified t test on log cost" if self.target == FIXED else "t test over the per-case log ratios") if many else "two-sample t test on log cost"
        return (f"{self.agent}: CV of relative cost {self.cv:.2f} (pooled over {self.cells} cells); runs per arm{where} to detect a "
                f"{self.effect:.0%} difference with {self.power:.0%} power at alpha {self.alpha:g}: {need} "
                f"({test}, sigma^2 = ln(1 + CV^2), at the exact test's attainable level).")

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


def spread(cells: Iterable[CellSummary], effect: float = 0.2, alpha: float = 0.05, power: float = 0.8, target: str = FIXED) -> list[Spread]:
    """One ``Spread`` per (kind, agent); ``cases``: the fewest cases of any of the agent's source files."""
    groups: dict[tuple[str, str], list[CellSummary]] = defaultdict(list)
    for c in cells:
        groups[(c.kind, c.agent)].append(c)
    out = []
    for (kind, agent), cs in sorted(groups.items()):
        value, used = pooled_cv(cs)
        per_source: dict[str, set[str]] = defaultdict(set)
        for c in cs:
            per_source[c.source].add(c.case)
        k = min(len(v) for v in per_source.values())
        need = None if value is None else pw.runs_needed(value, effect, alpha, power, k, target)
        out.append(Spread(kind, agent, value, used, need, effect, alpha, power, k, target))
    return out
