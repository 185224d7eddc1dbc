"""The statistics report: every figure of issue 5 for a set of outcomes, as one object (``StatsReport``) that the
session summary, ``agentrace report`` and the JSON export render. Pure functions; no pytest import."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_agentrace.record.model import Outcome
from pytest_agentrace.stats import numerics as stats
from pytest_agentrace.stats import ratings
from pytest_agentrace.stats import sequential as seq
from pytest_agentrace.stats.cells import (
    ArmComparison,
    ArmTokens,
    CellSummary,
    Reliability,
    Spread,
    arm_tokens,
    compare_arms,
    reliability,
    spread,
    summarize,
    with_sequential,
)
from pytest_agentrace.stats.score import score_outcomes


@dataclass(frozen=True)
class StatsReport:
    """Everything the statistics report shows (rendered by ``report.stats_text``; ``to_dict`` for JSON).

    ``comparisons``: per (kind, source, agent, arm) over shared cases; ``case_comparisons``: the same per case.
    ``races``: ``ratings.RaceStats`` for task files; ``footer``: method, seed, counts of cases, reps and errors;
    ``arm_tokens``: tokens per run of arms with several cases, with a cluster bootstrap interval.
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


METHODS = ("pass rates: Wilson 95% intervals (errors excluded; bracket with errors as failures); tokens per run: bootstrap "
           "(BCa with small-sample expansion); relative cost: cluster bootstrap (cases, then runs) with an exact permutation "
           "test (one case) or sign-flip test (several cases); pass-rate difference: Newcombe interval, Boschloo exact test "
           "(one case) or paired case bootstrap with sign-flip test; p-values also Benjamini-Hochberg adjusted")


def build_report(outcomes: Iterable[Outcome], baseline: str | None = None, seed: int = 0, resamples: int = stats.DEFAULT_RESAMPLES,
                 cases: Sequence[str] | None = None, sequential: dict[str, Any] | None = None, alpha: float = 0.05,
                 confidence: float = 0.95) -> StatsReport:
    """Build the statistics report over ``outcomes`` (optionally only ``cases``).

    ``sequential``: ``{"cap": int}`` or ``{"caps": {source: int}}`` (+ optional ``min_runs``) when the session
    stopped reps early (``--agentrace-stop-when-decided``): single-case cost verdicts then come from
    ``sequential.decide`` with that cap (the planned reps per arm).
    """
    outcomes = [o for o in outcomes if not cases or o.case in set(cases)]
    if any(o.kind == "task" and o.score is None and o.is_sample for o in outcomes):
        outcomes = score_outcomes(outcomes)
    cells = summarize(outcomes, seed, resamples, confidence)
    comps = compare_arms(outcomes, baseline, seed, resamples, confidence, alpha)
    by_case = compare_arms(outcomes, baseline, seed, resamples, confidence, alpha, by_case=True)
    method = METHODS
    if sequential:
        min_runs = int(sequential.get("min_runs", seq.MIN_RUNS))
        caps = {src: int(c) for src, c in (sequential.get("caps") or {}).items()}
        found: dict[Any, Any] = {}
        for src in sorted({o.source for o in outcomes}):
            cap = caps.get(src, sequential.get("cap"))
            if cap:
                caps[src] = int(cap)
                found.update(seq.decisions([o for o in outcomes if o.source == src], int(cap), baseline, min_runs, alpha))

        def apply(c: ArmComparison) -> ArmComparison:
            d = found.get((c.kind, c.source, c.cases[0], c.agent, c.arm)) if len(c.cases) == 1 else None
            return with_sequential(c, d.to_dict()) if d is not None else c

        comps, by_case = [apply(c) for c in comps], [apply(c) for c in by_case]
        cap_text = ", ".join(sorted({str(c) for c in caps.values()})) or "-"
        method += f"; stop-when-decided: {seq.METHOD} (cap {cap_text} runs per arm, first look at {min_runs})"
    samples = [o for o in outcomes if o.is_sample]
    footer = {
        "method": method, "seed": seed, "resamples": resamples, "alpha": alpha,
        "cases": len({(o.kind, o.source, o.case) for o in outcomes}), "reps": max((o.rep for o in outcomes), default=0),
        "runs": len(outcomes), "errors": len(outcomes) - len(samples),
        "tokens_unknown": sum(o.usage.total_tokens is None for o in samples),
    }
    settings = {"baseline": baseline, "seed": seed, "resamples": resamples, "alpha": alpha, "confidence": confidence,
                "cases": list(cases) if cases else None, "sequential": sequential}
    races = ratings.race_stats(outcomes) if any(o.kind == "task" for o in outcomes) else []
    return StatsReport(settings, cells, comps, by_case, spread(cells, alpha=alpha), reliability(cells), races, footer,
                       arm_tokens(outcomes, seed, resamples, confidence))
