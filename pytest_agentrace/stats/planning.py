"""``agentrace plan --results``: the state of every arm comparison of a results folder and what more runs would
cost, for either inference target. Pure functions; no pytest import.

A plan row answers the question the report's verdict answers, on the same data with the same methods and seed:
its ``clear`` is the report's cheaper/dearer (``compare.compare_arms``, or under stop-when-decided the
report's sequential decision), so the plan, the report and stop-when-decided never contradict each other.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from pytest_agentrace.record.model import Outcome
from pytest_agentrace.stats import numerics as stats
from pytest_agentrace.stats import power as pw
from pytest_agentrace.stats.cells import pooled_cv, summarize
from pytest_agentrace.stats.compare import compare_arms, resolve_baseline
from pytest_agentrace.stats.sequential import (
    CAPPED,
    CLEAR,
    CONTINUE,
    FUTILE,
    MIN_RUNS,
    decisions,
)
from pytest_agentrace.stats.verdict import CASES, FIXED, Verdict, check_target

NO_TOKENS = "no token data"
SPREAD_UNKNOWN = "spread unknown"
ADD_CASES = "add cases"
NO_VALID = "no valid runs"  # every run of the arm or of its baseline (in every case) was an infrastructure error


@dataclass(frozen=True)
class PlanRow:
    """One arm vs the baseline for one agent over ``cases`` (the cases both arms ran).

    ``runs``: runs per arm per case so far (the fewest of any case and side, valid with tokens); ``state``:
    ``clear`` (the report's relative-cost verdict is cheaper/dearer with at least ``min_runs`` runs per case),
    ``continue`` (more runs per case can decide it; ``spread unknown`` after one run per arm: no spread to plan
    with yet), ``futile`` (the observed difference would need more than ``max_reps`` runs per case, or the reps are
    used up), ``add cases`` (target ``cases`` with too few cases: a sign-flip test over 5 or fewer cases cannot
    reach p < 0.05, whatever the runs), ``no token data`` (the agent reports no tokens), ``no valid runs`` (no case where both the arm and the
    baseline have a run that is not an infrastructure error: nothing to compare yet), and under stop-when-decided
    the decision's ``capped``. ``needed``: runs per arm per case the observed difference needs (``power.runs_needed``
    with the observed CV, effect and, for ``cases``, spread of the per-case log ratios); ``more_runs`` the further
    runs per arm per case, ``further_tokens`` = ``more_runs`` x the sum over cases of (arm mean + baseline mean tokens
    per run), ``further_usd`` at the given price per million tokens. ``note``: the reason in words.
    """

    agent: str
    case: str
    arm: str
    baseline: str
    runs: int
    relative_cost: float | None
    relative_cost_ci: Any
    verdict: str
    state: str
    needed: int | None
    more_runs: int | None
    further_tokens: float | None
    further_usd: float | None
    cases: tuple[str, ...] = ()
    target: str = FIXED
    provisional: bool = False
    note: str = ""

    def state_text(self) -> str:
        if self.state == CLEAR:
            return f"clear ({self.verdict}" + (", provisional)" if self.provisional else ")")
        if self.state == CONTINUE and self.note == SPREAD_UNKNOWN:
            return f"continue ({SPREAD_UNKNOWN})"
        if self.state == CONTINUE and self.more_runs:
            return f"continue (about {self.more_runs} more runs per arm" + (" per case)" if len(self.cases) > 1 else ")")
        return self.state + (f" ({self.note})" if self.note and self.state not in (NO_TOKENS,) else "")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["cases"] = list(self.cases)
        d["state_text"] = self.state_text()
        d["relative_cost_ci"] = self.relative_cost_ci.to_dict() if self.relative_cost_ci is not None else None
        return d


def case_sd(log_ratios: Sequence[float], within: float) -> float:
    """Spread of the true per-case log ratios: ``sqrt(max(0, var(log ratios) - within))`` (method of moments;
    ``within`` is the part of their variance the runs' noise explains). 0 for fewer than 2 cases."""
    if len(log_ratios) < 2:
        return 0.0
    return math.sqrt(max(0.0, stats._var(list(log_ratios)) - within))


def plan_rows(outcomes: Iterable[Outcome], min_runs: int = MIN_RUNS, max_reps: int = 12, price_per_mtok: float | None = None,
              baseline: str | None = None, seed: int = 0, resamples: int = stats.DEFAULT_RESAMPLES, alpha: float = 0.05,
              target: str = FIXED, sequential: int | None = None) -> list[PlanRow]:
    """Plan rows for every (agent, arm != baseline) in ``outcomes`` over its cases (see ``PlanRow``), from the same
    comparisons as the report (``compare_arms`` with this ``seed`` and ``resamples``); ``sequential``: the cap of a
    stop-when-decided session, whose decisions (``sequential.decisions``) then give the states."""
    check_target(target)
    outcomes = list(outcomes)
    cells = {(c.kind, c.source, c.case, c.arm, c.agent): c for c in summarize(outcomes, seed, 200)}
    found = decisions(outcomes, sequential, baseline, min(min_runs, sequential), alpha, target, seed, resamples) if sequential else {}
    by_arm: dict[tuple[str, str, str, str], list[Any]] = defaultdict(list)
    for key, d in found.items():
        by_arm[(key[0], key[1], key[3], key[4])].append(d)
    rows = []
    compared: set[tuple[str, str, str, str]] = set()
    for comp in compare_arms(outcomes, baseline, seed, resamples, alpha=alpha, target=target):
        compared.add((comp.kind, comp.source, comp.agent, comp.arm))
        pairs = [(cells[(comp.kind, comp.source, c, comp.arm, comp.agent)], cells[(comp.kind, comp.source, c, comp.baseline, comp.agent)])
                 for c in comp.cases]
        with_tokens = [(a, b) for a, b in pairs if a.tokens_n and b.tokens_n]
        n = comp.runs_per_case
        label = comp.cases[0] if len(comp.cases) == 1 else ", ".join(comp.cases) if len(comp.cases) <= 3 else f"{len(comp.cases)} cases"
        k = len(with_tokens)
        needed = more = None
        note = ""
        cv, _ = pooled_cv([c for pair in with_tokens for c in pair])
        effect = stats.effect_for_ratio(comp.relative_cost) if comp.relative_cost is not None else None
        tau = 0.0
        if target == CASES and k > 1 and cv is not None:
            logs = [math.log(a.tokens_mean / b.tokens_mean) for a, b in with_tokens if a.tokens_mean and b.tokens_mean]
            tau = case_sd(logs, 2 * stats.log_sd(cv) ** 2 / max(n, 1))
        if cv is not None and effect:
            needed = pw.runs_needed(cv, effect, alpha, 0.8, max(k, 1), target, tau)
        decided = comp.cost_verdict in (Verdict.CHEAPER.value, Verdict.DEARER.value)
        seq = by_arm.get((comp.kind, comp.source, comp.agent, comp.arm))
        if not with_tokens:
            state, note = NO_TOKENS, "the agent reports no tokens"
        elif seq and target == FIXED:  # the arm's decision is the report's verdict
            state, note, more = seq[0].state, "stop-when-decided", (None if seq[0].state == CONTINUE else 0)
            comp = dataclasses.replace(comp, cost_verdict=seq[0].verdict)
        elif seq:  # one decision per case; the arm's verdict is the sign-flip test over the cases
            note, more = "stop-when-decided", 0
            if any(x.state == CONTINUE for x in seq):
                state, more = CONTINUE, None
            elif decided:
                state = CLEAR
            elif k > 1 and pw.sign_flip_level(k, alpha) <= 0:
                state = ADD_CASES
            else:
                state = CAPPED if any(x.state == CAPPED for x in seq) else FUTILE
        elif decided:  # the report's verdict, whatever the runs (provisional says when more runs could change it)
            state, more = CLEAR, 0
        elif n < 2:
            state, note, more = CONTINUE, SPREAD_UNKNOWN, max(2, min_runs) - n
        elif target == CASES and k > 1 and pw.sign_flip_level(k, alpha) <= 0:
            state, note = ADD_CASES, f"with {k} cases a sign-flip p cannot go below {2 / 2**k:.2g}; a verdict needs 6 or more cases"
        elif needed is None or needed > max_reps or n >= max_reps:
            state = FUTILE
            note = "more runs per case cannot show it; add cases" if target == CASES and needed is None else ""
        else:
            state, more = CONTINUE, max(needed, min_runs) - n
        per_run = sum((a.tokens_mean or 0) + (b.tokens_mean or 0) for a, b in with_tokens)
        tokens = more * per_run if more else (0.0 if more == 0 else None)
        usd = tokens * price_per_mtok / 1e6 if tokens is not None and price_per_mtok is not None else None
        rows.append(PlanRow(comp.agent, label, comp.arm, comp.baseline, n, comp.relative_cost, comp.relative_cost_ci, comp.cost_verdict,
                            state, needed, more, tokens, usd, comp.cases, target, comp.provisional, note))
    rows += uncompared_rows(outcomes, compared, baseline, target)
    return sorted(rows, key=lambda r: (r.agent, r.case, r.arm))


def uncompared_rows(outcomes: Sequence[Outcome], compared: set[tuple[str, str, str, str]], baseline: str | None,
                    target: str) -> list[PlanRow]:
    """A ``no valid runs`` row for every arm of a group with two or more arms that ``compare_arms`` could not
    compare (``compared``: its ``(kind, source, agent, arm)``s), so the plan lists every agent; the note says
    which side had only infrastructure errors."""
    groups: dict[tuple[str, str, str], list[Outcome]] = defaultdict(list)
    for o in outcomes:
        groups[(o.kind, o.source, o.agent)].append(o)
    rows = []
    for (kind, source, agent), runs in sorted(groups.items()):
        arms = sorted({o.arm for o in runs})
        if len(arms) < 2:
            continue
        base = resolve_baseline(runs, baseline)
        for arm in arms:
            if arm == base or (kind, source, agent, arm) in compared:
                continue
            mine = [o for o in runs if o.arm in (arm, base)]
            cases = tuple(sorted({o.case for o in mine}))
            empty = [a for a in (arm, base) if not any(o.is_sample for o in mine if o.arm == a)]
            why = (f"every run of {' and '.join(empty)} was an infrastructure error" if empty
                   else f"no case where both {arm} and {base} have a run that is not an infrastructure error")
            label = cases[0] if len(cases) == 1 else ", ".join(cases) if len(cases) <= 3 else f"{len(cases)} cases"
            rows.append(PlanRow(agent, label, arm, base, 0, None, None, Verdict.ERRORS.value, NO_VALID, None, None, None,
                                None, cases, target, False, why))
    return rows


def formula(cv: float, effect: float = 0.2, alpha: float = 0.05, power_wanted: float = 0.8, cases: int = 1, target: str = FIXED,
            case_sd_value: float = 0.0) -> dict[str, Any]:
    """``agentrace plan --cv``: runs per arm per case needed (``power.runs_needed``), the power it gives, and the
    power at a few run counts, as a JSON-ready dict (``runs_needed`` None: no number of runs suffices)."""
    n = pw.runs_needed(cv, effect, alpha, power_wanted, cases, target, case_sd_value)
    grid = [4, 8, 12, 16, 24, 32]
    return {
        "cv": cv, "effect": effect, "alpha": alpha, "power": power_wanted, "cases": cases, "target": target, "case_sd": case_sd_value,
        "runs_needed": n, "power_at_runs_needed": pw.power(n, cv, effect, cases, target, alpha, case_sd_value) if n else None,
        "power_by_runs": {str(r): pw.power(r, cv, effect, cases, target, alpha, case_sd_value) for r in grid},
        "level": pw.stratified_level(n or 4, cases, alpha) if target == FIXED or cases <= 1 else pw.sign_flip_level(cases, alpha),
    }
