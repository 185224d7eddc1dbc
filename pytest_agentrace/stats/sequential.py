"""Stop when decided: skip the remaining reps of a cell once its comparison is clear or futile, without
letting repeated looks inflate the false-positive rate. No pytest import.

Method: a two-sided group-sequential test with **Lan-DeMets alpha spending and an O'Brien-Fleming-type spending
function** ``alpha(t) = 2 - 2 Phi(z_{1-alpha/2} / sqrt(t))`` (K. K. G. Lan and D. L. DeMets, "Discrete sequential
boundaries for clinical trials", Biometrika 70(3):659-663, 1983; C. Jennison and B. W. Turnbull, "Group
Sequential Methods with Applications to Clinical Trials", 2000, ch. 7). A *look* happens at every ``n`` from
``min_runs`` to the cap (``--agentrace-reps``), with information fraction ``t = n / cap``; the boundary ``c_n`` of
each look is found by recursive numerical integration (Armitage, McPherson & Rowe, JRSS A 132, 1969) so that
the probability of first crossing at that look under no difference is exactly the alpha spent there; the
total over all looks is ``alpha``. Looks that never happen (a cell that ran fewer reps) only spend less.

Look statistic: Welch's t on log tokens (arm vs baseline, the first ``n`` valid runs of each in rep order,
so every look is a deterministic function of the data, whichever xdist worker makes it), mapped to the normal
scale with the same tail probability. ``clear`` when ``|z| >= c_n`` (``cheaper`` for z < 0, ``dearer`` for z > 0).
``futile`` (non-binding, so it cannot raise the false-positive rate) when even the upper one-sided 90% bound
of the observed log-ratio would need more runs per arm than the cap (runs-needed formula, Guenther's
normal approximation ``n = 2 (z_{1-alpha/2} + z_{0.8})^2 s^2 / d^2 + z_{1-alpha/2}^2 / 4``; W. C. Guenther,
The American Statistician 35, 1981). Under stop-when-decided the report's relative-cost verdict *is* this
decision; the interval shown beside it describes the runs made and, after an early stop, is not a
fixed-sample confidence interval.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pytest_agentrace.record.runfile import RUN_FILE, read_run
from pytest_agentrace.stats import numerics as stats
from pytest_agentrace.stats.cells import (
    compare_arms,
    pooled_cv,
    resolve_baseline,
    summarize,
)
from pytest_agentrace.stats.verdict import Verdict

METHOD = "group-sequential Welch t on log tokens, Lan-DeMets O'Brien-Fleming-type alpha spending"
MIN_RUNS = 4
CLEAR, FUTILE, CONTINUE, CAPPED = "clear", "futile", "continue", "capped"


def spent(t: float, alpha: float = 0.05) -> float:
    """Cumulative alpha spent at information fraction ``t`` (O'Brien-Fleming-type Lan-DeMets function)."""
    from statistics import NormalDist

    nd = NormalDist()
    if t <= 0:
        return 0.0
    return min(alpha, 2.0 - 2.0 * nd.cdf(nd.inv_cdf(1.0 - alpha / 2.0) / math.sqrt(min(t, 1.0))))


@functools.lru_cache(maxsize=256)
def boundaries(fractions: tuple[float, ...], alpha: float = 0.05, grid: int = 801) -> tuple[float, ...]:
    """Two-sided z boundaries for looks at increasing information ``fractions`` (each in (0, 1]).

    ``P(first |Z_k| >= c_k at look k | no difference) = spent(t_k) - spent(t_{k-1})``, computed by recursive
    integration of the continuation density of the score process ``S_k = Z_k sqrt(t_k)`` (independent normal
    increments) on a ``grid``-point Simpson grid. A look with (numerically) nothing to spend gets ``inf``.
    The first boundary is ``z_{1 - spent(t_1)/2}`` (= 1.96 / sqrt(t_1)); looks at 4..12 of 12 runs give 3.395,
    3.068, 2.827, 2.644, 2.500, 2.383, 2.286, 2.205, 2.135 (checked by simulation in the tests).
    """
    import numpy as np
    from scipy.optimize import brentq
    from scipy.special import ndtr, ndtri

    if any(b <= a for a, b in itertools.pairwise(fractions)) or not fractions or fractions[0] <= 0:
        raise ValueError(f"boundaries: fractions must increase from above 0, got {fractions}")
    out: list[float] = []
    prev_t, prev_spent = 0.0, 0.0
    xs = w = f = None
    for t in fractions:
        inc = spent(t, alpha) - prev_spent
        if xs is None:  # first look: S ~ N(0, t)
            c = float(-ndtri(inc / 2.0)) if inc > 1e-15 else math.inf
        elif inc <= 1e-15:
            c = math.inf
        else:
            sd = math.sqrt(t - prev_t)
            mass = w * f

            def cross(c_: float, mass=mass, sd=sd, t=t, xs=xs, inc=inc) -> float:
                b = c_ * math.sqrt(t)
                return float(np.sum(mass * (ndtr((-b - xs) / sd) + ndtr((xs - b) / sd)))) - inc

            c = brentq(cross, 1e-6, 40.0, xtol=1e-10) if cross(1e-6) > 0 else 1e-6
        out.append(c)
        # continuation density on (-b, b)
        b = (c if math.isfinite(c) else 12.0) * math.sqrt(t)
        ys = np.linspace(-b, b, grid)
        h = ys[1] - ys[0]
        wy = np.ones(grid)
        wy[1:-1:2], wy[2:-1:2] = 4.0, 2.0
        wy *= h / 3.0
        if xs is None:
            fy = np.exp(-ys * ys / (2 * t)) / math.sqrt(2 * math.pi * t)
        else:
            sd = math.sqrt(t - prev_t)
            kern = np.exp(-((ys[:, None] - xs[None, :]) ** 2) / (2 * sd * sd)) / (sd * math.sqrt(2 * math.pi))
            fy = kern @ (w * f)
        xs, w, f = ys, wy, fy
        prev_t, prev_spent = t, prev_spent + (inc if math.isfinite(c) else 0.0)
    return tuple(out)


def look_boundaries(cap: int, min_runs: int = MIN_RUNS, alpha: float = 0.05) -> dict[int, float]:
    """``{n: c_n}`` for looks at ``n = min_runs .. cap`` runs per arm."""
    ns = list(range(min(min_runs, cap), cap + 1))
    return dict(zip(ns, boundaries(tuple(n / cap for n in ns), alpha), strict=True))


def welch_z(a, b):
    """Welch's t of ``mean(a) - mean(b)`` along the last axis, as a normal-scale z with the same tail probability.

    Arrays of shape (..., n) (n >= 2 each); 0 where both samples have no spread."""
    import numpy as np
    from scipy.special import ndtri, stdtr

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    na, nb = a.shape[-1], b.shape[-1]
    va, vb = a.var(axis=-1, ddof=1) / na, b.var(axis=-1, ddof=1) / nb
    se2 = va + vb
    diff = a.mean(axis=-1) - b.mean(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(se2 > 0, diff / np.sqrt(se2), 0.0)
        df = np.where(se2 > 0, se2 * se2 / (va * va / (na - 1) + vb * vb / (nb - 1)), 1.0)
        tail = stdtr(df, -np.abs(t))
        z = np.sign(t) * -ndtri(np.clip(tail, 1e-300, 0.5))
    return np.where(se2 > 0, z, 0.0)


def futile(a, b, cap: int, alpha: float = 0.05):
    """True where even the upper one-sided 90% bound of ``|mean(a) - mean(b)|`` (log scale) would need more than
    ``cap`` runs per arm at ``alpha`` and 80% power (Guenther's approximation). Arrays of shape (..., n)."""
    import numpy as np
    from scipy.special import ndtri, stdtrit

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    na, nb = a.shape[-1], b.shape[-1]
    s2 = ((na - 1) * a.var(axis=-1, ddof=1) + (nb - 1) * b.var(axis=-1, ddof=1)) / (na + nb - 2)
    se = np.sqrt(s2 * (1.0 / na + 1.0 / nb))
    optimistic = np.abs(a.mean(axis=-1) - b.mean(axis=-1)) + stdtrit(na + nb - 2, 0.9) * se
    za, zb = -ndtri(alpha / 2.0), -ndtri(0.2)
    with np.errstate(divide="ignore", invalid="ignore"):
        need = 2.0 * (za + zb) ** 2 * s2 / optimistic**2 + za * za / 4.0
    return (s2 > 0) & (need > cap)


def decide_batch(arm_logs, base_logs, cap: int, min_runs: int = MIN_RUNS, alpha: float = 0.05):
    """Vectorised decisions for many comparisons at once (used by ``decide`` and by the simulation tests).

    ``arm_logs``, ``base_logs``: arrays (T, N) of log tokens in rep order, N <= cap runs available per arm.
    Returns ``(state, sign, n)`` arrays of length T: state 1 clear, 2 futile, 0 undecided; ``sign`` -1 cheaper,
    +1 dearer; ``n`` the look (runs per arm) at which it was decided (or the last look made).
    """
    import numpy as np

    a, b = np.atleast_2d(np.asarray(arm_logs, dtype=float)), np.atleast_2d(np.asarray(base_logs, dtype=float))
    t_count, n_avail = a.shape[0], min(a.shape[1], b.shape[1], cap)
    state = np.zeros(t_count, dtype=np.int8)
    sign = np.zeros(t_count, dtype=np.int8)
    look = np.full(t_count, min(n_avail, max(min_runs, 2)) if n_avail else 0, dtype=np.int64)
    bounds = look_boundaries(cap, max(min_runs, 2), alpha)
    for n in range(max(min_runs, 2), n_avail + 1):
        open_ = state == 0
        if not open_.any():
            break
        z = welch_z(a[:, :n], b[:, :n])
        hit = open_ & (np.abs(z) >= bounds[n])
        state[hit], sign[hit] = 1, np.where(z[hit] < 0, -1, 1)
        if n < cap:
            stop = (state == 0) & futile(a[:, :n], b[:, :n], cap, alpha)
            state[stop] = 2
        look[open_] = n
    return state, sign, look


@dataclass(frozen=True)
class Decision:
    """Stop-when-decided state of one arm vs its baseline for one (case, agent).

    ``state``: ``clear`` (boundary crossed), ``futile``, ``continue`` (undecided, reps left) or ``capped`` (undecided
    at the cap). ``verdict``: cheaper / dearer when clear, else no clear difference. ``n``: runs per arm at the
    deciding (or latest) look; ``rep``: the highest rep number used by that look (later reps are skippable);
    ``z`` and ``boundary`` of that look.
    """

    state: str
    verdict: str
    n: int
    rep: int | None
    z: float | None
    boundary: float | None
    cap: int
    method: str = METHOD

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("z", "boundary"):
            if d[k] is not None and not math.isfinite(d[k]):
                d[k] = None
        return d


def decide(arm: Sequence[tuple[int, float]], base: Sequence[tuple[int, float]], cap: int, min_runs: int = MIN_RUNS, alpha: float = 0.05) -> Decision:
    """Decision for one comparison from ``(rep, tokens)`` pairs of valid runs in rep order (a contiguous prefix
    of reps; runs without tokens left out). Tokens <= 0 make log cost undefined: such comparisons stay undecided."""
    import numpy as np

    n_avail = min(len(arm), len(base), cap)
    if n_avail < max(min_runs, 2) or any(t <= 0 for _, t in [*arm[:n_avail], *base[:n_avail]]):
        return Decision(CONTINUE if n_avail < cap else CAPPED, Verdict.NO_CLEAR.value, n_avail, None, None, None, cap)
    a = np.log([[t for _, t in arm[:n_avail]]])
    b = np.log([[t for _, t in base[:n_avail]]])
    state, sign, look = decide_batch(a, b, cap, min_runs, alpha)
    n = int(look[0])
    z = float(welch_z(a[:, :n], b[:, :n])[0])
    bound = look_boundaries(cap, max(min_runs, 2), alpha)[n]
    rep = max(arm[n - 1][0], base[n - 1][0])
    if state[0] == 1:
        return Decision(CLEAR, Verdict.CHEAPER.value if sign[0] < 0 else Verdict.DEARER.value, n, rep, z, bound, cap)
    if state[0] == 2:
        return Decision(FUTILE, Verdict.NO_CLEAR.value, n, rep, z, bound, cap)
    return Decision(CAPPED if n >= cap else CONTINUE, Verdict.NO_CLEAR.value, n, rep, z, bound, cap)


def prefix_tokens(records: dict[int, Any]) -> list[tuple[int, float]]:
    """``(rep, tokens)`` of the valid runs with known tokens among the contiguous reps 1, 2, ... of ``records``
    (``{rep: Outcome}``); stops at the first missing rep."""
    out = []
    rep = 1
    while rep in records:
        o = records[rep]
        if o.is_sample and o.usage.total_tokens is not None:
            out.append((rep, float(o.usage.total_tokens)))
        rep += 1
    return out


def decisions(outcomes, cap: int, baseline: str | None = None, min_runs: int = MIN_RUNS, alpha: float = 0.05) -> dict[tuple[str, str, str, str, str], Decision]:
    """Decisions for every (kind, source, case, agent, arm) that has a baseline to compare with."""
    from collections import defaultdict

    groups: dict[tuple[str, str, str, str], dict[str, dict[int, Any]]] = defaultdict(lambda: defaultdict(dict))
    by_group: dict[tuple[str, str, str], list] = defaultdict(list)
    for o in outcomes:
        groups[(o.kind, o.source, o.case, o.agent)][o.arm][o.rep] = o
        by_group[(o.kind, o.source, o.agent)].append(o)
    out = {}
    for (kind, source, case, agent), arms in sorted(groups.items()):
        base = resolve_baseline(by_group[(kind, source, agent)], baseline)
        if base not in arms:
            continue
        base_tok = prefix_tokens(arms[base])
        for arm, records in sorted(arms.items()):
            if arm != base:
                out[(kind, source, case, agent, arm)] = decide(prefix_tokens(records), base_tok, cap, min_runs, alpha)
    return out


def skip_reason(spec: Any, out: Path, session_id: str, cap: int, arms: Sequence[str], baseline: str, min_runs: int = MIN_RUNS, alpha: float = 0.05) -> str | None:
    """Why the run ``spec`` (a RunSpec) need not run, or None. Reads this session's ``run.json`` records of the
    same case and agent for every arm in ``arms`` under a file lock (``<out>/.sequential.lock``), so pytest-xdist
    workers see consistent data. The baseline's reps are skipped only once every other arm is decided. Records of
    other sessions (also those reused by ``--agentrace-resume``) end the prefix: nothing is skipped on their strength."""
    from filelock import FileLock

    if spec.rep <= min_runs or baseline not in arms or len(arms) < 2:
        return None
    records: dict[str, dict[int, Any]] = {}
    out.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out / ".sequential.lock"), timeout=120):
        for arm in arms:
            recs: dict[int, Any] = {}
            for rep in range(1, spec.rep):
                path = out / "runs" / spec.case / arm / spec.agent.id / str(rep) / RUN_FILE
                try:
                    o = read_run(path)
                except ValueError:
                    break
                if o.session_id != session_id:
                    break
                recs[rep] = o
            records[arm] = recs
    base_tok = prefix_tokens(records[baseline])
    targets = [spec.arm] if spec.arm != baseline else [a for a in arms if a != baseline]
    found = []
    for arm in targets:
        d = decide(prefix_tokens(records[arm]), base_tok, cap, min_runs, alpha)
        if not (d.state in (CLEAR, FUTILE) and d.rep is not None and spec.rep > d.rep):
            return None
        found.append((arm, d))
    if spec.arm != baseline:
        arm, d = found[0]
        what = f"{d.verdict}, z={d.z:.2f} beyond {d.boundary:.2f}" if d.state == CLEAR else "the difference cannot be shown within the reps"
        return f"stop-when-decided: arm {arm} vs {baseline} is {d.state} after {d.n} runs per arm ({what})"
    return f"stop-when-decided: every arm vs baseline {baseline} is decided (" + ", ".join(f"{a} {d.state}" for a, d in found) + ")"


# ---------------------------------------------------------------------------------------------- planning


@dataclass(frozen=True)
class PlanRow:
    """``agentrace plan --results``: one arm vs the baseline for one (agent, case).

    ``runs``: runs per arm so far (the fewer of arm and baseline, valid with tokens); ``state``: ``clear`` (the
    relative-cost verdict is cheaper/dearer with at least ``min_runs`` runs), ``futile`` (the observed difference
    would need more than ``max_reps`` runs per arm, or the reps are used up), ``continue``; ``needed``: runs per
    arm the observed difference needs (``stats.runs_needed`` with the observed CV); ``more_runs`` the further runs
    per arm, ``further_tokens`` = ``more_runs`` x (arm mean + baseline mean tokens per run), ``further_usd`` at the
    given price per million tokens.
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

    def state_text(self) -> str:
        if self.state == CLEAR:
            return f"clear ({self.verdict})"
        if self.state == CONTINUE and self.more_runs:
            return f"continue (about {self.more_runs} more runs per arm)"
        return self.state

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["relative_cost_ci"] = self.relative_cost_ci.to_dict() if self.relative_cost_ci is not None else None
        return d


def plan_rows(outcomes, min_runs: int = MIN_RUNS, max_reps: int = 12, price_per_mtok: float | None = None, baseline: str | None = None,
              seed: int = 0, resamples: int = 10_000, alpha: float = 0.05) -> list[PlanRow]:
    """Plan rows for every (agent, case, arm != baseline) in ``outcomes`` (see ``PlanRow``)."""
    outcomes = list(outcomes)
    cells = {(c.kind, c.source, c.case, c.arm, c.agent): c for c in summarize(outcomes, seed, 200)}
    rows = []
    for comp in compare_arms(outcomes, baseline, seed, resamples, alpha=alpha, by_case=True):
        case = comp.cases[0]
        a = cells[(comp.kind, comp.source, case, comp.arm, comp.agent)]
        b = cells[(comp.kind, comp.source, case, comp.baseline, comp.agent)]
        n = min(a.tokens_n, b.tokens_n)
        cv, _ = pooled_cv([a, b])
        effect = stats.effect_for_ratio(comp.relative_cost) if comp.relative_cost is not None else None
        needed = stats.runs_needed(cv, effect, alpha) if cv is not None and effect else None
        if n >= min_runs and comp.cost_verdict in (Verdict.CHEAPER.value, Verdict.DEARER.value):
            state, more = CLEAR, 0
        elif needed is None or needed > max_reps or n >= max_reps:
            state, more = FUTILE, None
        else:
            state, more = CONTINUE, max(needed, min_runs) - n
        tokens = more * ((a.tokens_mean or 0) + (b.tokens_mean or 0)) if more else (0.0 if more == 0 else None)
        usd = tokens * price_per_mtok / 1e6 if tokens is not None and price_per_mtok is not None else None
        rows.append(PlanRow(comp.agent, case, comp.arm, comp.baseline, n, comp.relative_cost, comp.relative_cost_ci, comp.cost_verdict,
                            state, needed, more, tokens, usd))
    return sorted(rows, key=lambda r: (r.agent, r.case, r.arm))
