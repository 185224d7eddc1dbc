"""The statistics report's cells and comparisons in one pass over the cases, each cell and case drawn once.

``report_figures`` gives what ``cells.summarize`` and ``compare.compare_arms`` (over all cases, and per case) give,
to the bit: those draw from the cells and cases they resample (``draws``), so a cell's resamples serve its token
interval, each comparison over its case and the arm's figures over all cases. Here each case is taken once: its
cells are drawn once (``draws.Memo``), its per-case comparisons and cell summaries computed from them, and the
arm's stratified figures over all cases (``fixed`` target) summed as the cases go, in case order - the very sums
``resample`` would make case by case - and handed to ``compare._compare`` (``draws.Streams.sums``). Memory holds
one batch of cases' draws, not every cell's. Cases run on threads (``numerics.parallel_map``); the sums are added in
case order, so the figures do not depend on the threads.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pytest_agentrace.record.model import Outcome
from pytest_agentrace.stats import numerics as stats
from pytest_agentrace.stats import permutation, resample
from pytest_agentrace.stats.cells import CellSummary, _group, summarize_cell
from pytest_agentrace.stats.compare import ArmComparison, _compare, comparison_data, comparison_groups, with_bh
from pytest_agentrace.stats.draws import Memo
from pytest_agentrace.stats.verdict import FIXED, check_target

BATCH = 16  # cases per thread whose draws are in memory at once


class _Sums:
    """The arm's stratified figures over its cases, summed case by case (``fixed`` target, two or more cases)."""

    def __init__(self, kind: str, source: str, agent: str, arm: str, base: str, by_cell, shared: list[str]) -> None:
        import numpy as np

        self.key = (kind, source, agent, arm, base)
        _, tok, sc = comparison_data(by_cell, shared, arm, base)
        self.tok = {c: (np.asarray([a], dtype=float), np.asarray([b], dtype=float))
                    for c, (a, b) in zip(shared, tok, strict=True) if len(a) and len(b) and sum(b) > 0}
        self.sc = {c: (np.asarray([a], dtype=float), np.asarray([b], dtype=float)) for c, (a, b) in zip(shared, sc, strict=True)}
        self.index = {"cost": {c: j for j, c in enumerate(self.tok)}, "score": {c: j for j, c in enumerate(self.sc)}}
        self.plans = {"cost": permutation.Relabelling(list(self.tok.values()), "ratio") if self.tok else None,
                      "score": permutation.Relabelling(list(self.sc.values()), "difference")}
        self.t_sums: Any = None
        self.sums: dict[str, Any] = {}

    def terms(self, case: str, memo: Memo) -> dict[str, Any]:
        """Case ``case``'s terms of every sum (computed on a worker thread from the case's draws)."""
        import numpy as np

        kind, source, agent, arm, base = self.key
        cells = ((kind, source, case, arm, agent), (kind, source, case, base, agent))
        labels = (kind, source, case, agent, arm, base)
        out: dict[str, Any] = {}
        if case in self.tok and len(self.tok) > 1:
            a, b = self.tok[case]
            (ma, va), (mb, vb) = memo.counted(cells[0], a, True), memo.counted(cells[1], b, True)
            out["cost"] = resample.log_ratio_terms(ma, mb, va, vb, a.shape[1], b.shape[1])
        if case in self.sc:
            a, b = self.sc[case]
            out["score"] = resample.contrast_value(memo.counted(cells[0], a), memo.counted(cells[1], b), "difference")
        for what, data in (("cost", self.tok), ("score", self.sc)):
            plan = self.plans[what]
            if case in data and plan is not None and plan.total > resample.EXACT_PERMUTATIONS:
                a, b = data[case]
                j = self.index[what][case]
                sa = memo.summed(labels, a.shape[1], b.shape[1], plan.pooled[j][:1])
                out[what + "-p"] = plan.contribution(j, sa, np.arange(1))
        return out

    def add(self, terms: dict[str, Any]) -> None:
        """Add one case's ``terms`` (cases in order: the sums ``resample`` makes, to the bit)."""
        import numpy as np

        if "cost" in terms:
            log, var = terms["cost"]
            self.t_sums = (0 + log, 0 + var) if self.t_sums is None else (self.t_sums[0] + log, self.t_sums[1] + var)
        if "score" in terms:
            if "score" not in self.sums:
                self.sums["score"] = np.zeros_like(terms["score"])
            self.sums["score"] += terms["score"]
        for what in ("cost-p", "score-p"):
            if what in terms:
                self.sums[what] = 0.0 + terms[what] if what not in self.sums else self.sums[what] + terms[what]

    def finished(self) -> dict[str, Any]:
        """The sums for ``compare._compare`` (``draws.Streams.sums``)."""
        return {**self.sums, **({"cost": self.t_sums} if self.t_sums is not None else {})}


def report_figures(outcomes: Iterable[Outcome], baseline: str | None = None, seed: int = 0, resamples: int = stats.DEFAULT_RESAMPLES,
                   confidence: float = 0.95, alpha: float = 0.05,
                   target: str = FIXED) -> tuple[list[CellSummary], list[ArmComparison], list[ArmComparison]]:
    """``(cells.summarize(...), compare.compare_arms(...), compare.compare_arms(..., by_case=True))`` of ``outcomes``
    with these settings, the same figures in one pass (module docstring)."""
    check_target(target)
    outcomes = list(outcomes)
    cell_runs = _group(outcomes)
    cells: dict[Any, CellSummary] = {}
    arms_out: list[ArmComparison] = []
    per_case: list[ArmComparison] = []
    for kind, source, agent, base, by_cell, arms in comparison_groups(outcomes, baseline):
        sums = {arm: _Sums(kind, source, agent, arm, base, by_cell, shared) for arm, shared in arms.items() if target == FIXED and len(shared) > 1}
        group_cases = sorted({c for shared in arms.values() for c in shared})
        group_arms = sorted({a for _, a in by_cell} | {base})

        def one_case(case: str, kind=kind, source=source, agent=agent, base=base, by_cell=by_cell, arms=arms, sums=sums, group_arms=group_arms):
            memo = Memo(seed, resamples)
            comps = {arm: _compare(kind, source, agent, arm, base, [case], by_cell, seed, resamples, confidence, alpha, target, memo)
                     for arm, shared in arms.items() if case in shared}
            terms = {arm: s.terms(case, memo) for arm, s in sums.items() if case in arms[arm]}
            summaries = {(kind, source, case, a, agent): summarize_cell(cell_runs[(kind, source, case, a, agent)], seed, resamples, confidence, memo)
                         for a in group_arms if (kind, source, case, a, agent) in cell_runs}
            return comps, terms, summaries

        found: dict[tuple[str, str], ArmComparison] = {}
        step = BATCH * stats.workers()
        for start in range(0, len(group_cases), step):
            batch = group_cases[start:start + step]
            for case, (comps, terms, summaries) in zip(batch, stats.parallel_map(one_case, batch, least=2), strict=True):
                found.update({(arm, case): c for arm, c in comps.items()})
                for arm, t in terms.items():
                    sums[arm].add(t)
                cells.update(summaries)
        for arm, shared in arms.items():
            per_case += [found[(arm, c)] for c in shared]
            if arm in sums:
                arms_out.append(_compare(kind, source, agent, arm, base, shared, by_cell, seed, resamples, confidence, alpha, target,
                                         sums=sums[arm].finished()))
            elif len(shared) == 1:
                arms_out.append(found[(arm, shared[0])])  # the same comparison
            else:
                arms_out.append(_compare(kind, source, agent, arm, base, shared, by_cell, seed, resamples, confidence, alpha, target))
    rest = [(key, runs) for key, runs in sorted(cell_runs.items()) if key not in cells]
    cells.update(zip([k for k, _ in rest], stats.parallel_map(lambda item: summarize_cell(item[1], seed, resamples, confidence), rest), strict=True))
    return ([cells[k] for k in sorted(cells)], with_bh(arms_out, decide=False, alpha=alpha), with_bh(per_case, decide=True, alpha=alpha))
