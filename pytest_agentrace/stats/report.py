"""The statistics report: every figure of issue 5 for a set of outcomes, as one object (``StatsReport``) that the
session summary, ``agentrace report`` and the JSON export render. Pure functions; no pytest import."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_agentrace.record.model import Outcome, Status
from pytest_agentrace.stats import numerics as stats
from pytest_agentrace.stats import ratings
from pytest_agentrace.stats import sequential as seq
from pytest_agentrace.stats.cells import (
    ArmTokens,
    CellSummary,
    Reliability,
    Spread,
    arm_tokens,
    reliability,
    spread,
)
from pytest_agentrace.stats.compare import ArmComparison, with_sequential
from pytest_agentrace.stats.figures import report_figures
from pytest_agentrace.stats.score import require_scored
from pytest_agentrace.stats.verdict import CASES, FIXED, TARGET_TEXT, check_target


@dataclass(frozen=True)
class StatsReport:
    """Everything the statistics report shows (rendered by ``report.stats_text``; ``to_dict`` for JSON).

    ``comparisons``: per (kind, source, agent, arm) over shared cases; ``case_comparisons``: the same per case.
    ``races``: ``ratings.RaceStats`` for task files; ``footer``: method, seed, counts of cases, reps and errors;
    ``arm_tokens``: tokens per run of arms with several cases, with a clustered-t interval over the case means.
    """

    settings: dict[str, Any]
    cells: list[CellSummary]
    comparisons: list[ArmComparison]
    case_comparisons: list[ArmComparison]
    spread: list[Spread]
    reliability: list[Reliability]
    races: list[Any]
    footer: dict[str, Any]
    arm_tokens: list[ArmTokens] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": "agentrace-stats", "version": 1, "settings": self.settings,
            "cells": [c.to_dict() for c in self.cells], "comparisons": [c.to_dict() for c in self.comparisons],
            "case_comparisons": [c.to_dict() for c in self.case_comparisons], "spread": [s.to_dict() for s in self.spread],
            "reliability": [r.to_dict() for r in self.reliability], "races": [r.to_dict() for r in self.races], "footer": self.footer,
            "arm_tokens": [t.to_dict() for t in self.arm_tokens],
        }


METHODS = {
    FIXED: ("pass rates: Wilson 95% intervals (errors excluded; bracket with errors as failures); tokens per run: bootstrap "
            "(BCa with small-sample expansion) in a case, an arm's over several cases a clustered-t interval over the "
            "case means (K-1 df); target: the cases that ran (fixed cases); relative cost: geometric mean of the "
            "case ratios, bootstrap stratified by case (runs resampled within their case, cases weighted equally; symmetric "
            "bootstrap-t on the log scale from "
            "14 degrees of freedom in the runs, else BCa) with an exact permutation test (arm labels permuted within each "
            "case; Monte Carlo with its error when there are too many relabellings); pass-rate difference: Newcombe interval "
            "and Boschloo exact test (one case) or MOVER-Wilson interval and stratified exact test; per-case verdicts on "
            "Holm adjusted p (family-wise); arm p-values also Benjamini-Hochberg adjusted"),
    CASES: ("pass rates: Wilson 95% intervals (errors excluded; bracket with errors as failures); tokens per run: bootstrap "
            "(BCa with small-sample expansion) in a case, an arm's over several cases a clustered-t interval over the "
            "case means (K-1 df); target: new cases like these (--agentrace-generalize cases); relative cost: "
            "geometric mean of the case ratios with a clustered-t interval (K-1 df) and a sign-flip test over cases (one case: "
            "bootstrap and exact permutation test); "
            "pass-rate difference: Newcombe interval, Boschloo exact test (one case) or paired case bootstrap with "
            "sign-flip test; per-case verdicts on Holm adjusted p (family-wise); arm p-values also Benjamini-Hochberg adjusted"),
}


def build_report(outcomes: Iterable[Outcome], baseline: str | None = None, seed: int = 0, resamples: int = stats.DEFAULT_RESAMPLES,
                 cases: Sequence[str] | None = None, sequential: dict[str, Any] | None = None, alpha: float = 0.05,
                 confidence: float = 0.95, target: str = FIXED) -> StatsReport:
    """Build the statistics report over scored ``outcomes`` (task runs with their composite score:
    ``score.score_outcomes``; raises ``score.UnscoredError`` otherwise), optionally only ``cases``, for the inference ``target``
    (``fixed``: the cases that ran, the default; ``cases``: new cases like these; see ``compare``).

    ``sequential``: ``{"cap": int}`` or ``{"caps": {source: int}}`` (+ optional ``min_runs``) when the session
    stopped reps early (``--agentrace-stop-when-decided``): cost verdicts then come from ``sequential.decisions``
    with that cap (the planned reps per arm): for ``fixed`` the arm's verdict over its cases (and a one-case
    comparison's), for ``cases`` each case's verdict (and a one-case arm's).
    """
    check_target(target)
    outcomes = [o for o in require_scored(outcomes, "build_report") if not cases or o.case in set(cases)]
    cells, comps, by_case = report_figures(outcomes, baseline, seed, resamples, confidence, alpha, target)  # summarize, compare_arms
    method = METHODS[target]
    if sequential:
        min_runs = int(sequential.get("min_runs", seq.MIN_RUNS))
        caps = {src: int(c) for src, c in (sequential.get("caps") or {}).items()}
        found: dict[Any, Any] = {}
        for src in sorted({o.source for o in outcomes}):
            cap = caps.get(src, sequential.get("cap"))
            if cap:
                caps[src] = int(cap)
                found.update(seq.decisions([o for o in outcomes if o.source == src], int(cap), baseline, min_runs, alpha, target,
                                           seed, resamples, confidence))
        pooled = {(k[0], k[1], k[3], k[4]): d for k, d in found.items()}

        def apply(c: ArmComparison, per_case: bool) -> ArmComparison:
            if target == FIXED:
                d = pooled.get((c.kind, c.source, c.agent, c.arm))
                d = d if d is not None and (not per_case or len(d.cases) == 1) else None
            else:
                d = found.get((c.kind, c.source, c.cases, c.agent, c.arm)) if len(c.cases) == 1 else None
            return with_sequential(c, d.to_dict()) if d is not None else c

        comps, by_case = [apply(c, False) for c in comps], [apply(c, True) for c in by_case]
        cap_text = ", ".join(sorted({str(c) for c in caps.values()})) or "-"
        over = "one decision per arm over its cases" if target == FIXED else "one decision per case at alpha / cases"
        method += f"; stop-when-decided: {seq.METHOD} (cap {cap_text} runs per arm, first look at {min_runs}; {over})"
    samples = [o for o in outcomes if o.is_sample]
    footer = {
        "method": method, "seed": seed, "resamples": resamples, "alpha": alpha, "target": target, "target_text": TARGET_TEXT[target],
        "cases": len({(o.kind, o.source, o.case) for o in outcomes}), "reps": max((o.rep for o in outcomes), default=0),
        "runs": len(outcomes), "errors": sum(o.status == Status.ERROR for o in outcomes),
        "stopped": sum(o.status == Status.STOPPED for o in outcomes),  # race mode: neither samples nor errors
        "tokens_unknown": sum(o.usage.total_tokens is None for o in samples),
    }
    settings = {"baseline": baseline, "seed": seed, "resamples": resamples, "alpha": alpha, "confidence": confidence,
                "cases": list(cases) if cases else None, "sequential": sequential, "target": target}
    races = ratings.race_stats(outcomes) if any(o.kind == "task" for o in outcomes) else []
    return StatsReport(settings, cells, comps, by_case, spread(cells, alpha=alpha, target=target), reliability(cells), races, footer,
                       arm_tokens(outcomes, seed, resamples, confidence))
