"""Stop when decided: skip the remaining reps of a comparison once it is clear or futile, without letting
repeated looks inflate the false-positive rate. No pytest import.

What is decided follows the inference target (``verdict.TARGETS``): for ``fixed`` (the default) one decision per
arm and agent over all the trial's cases (the arm's verdict; once it is decided the remaining reps of every case
of that arm are skipped); for ``cases`` one decision per case, each at ``alpha / C`` for ``C`` cases (Bonferroni,
so the per-case verdicts of an arm stay at ``alpha`` together, as the adjusted per-case verdicts of a fixed-sample
report do), while the arm's verdict is the fixed-sample sign-flip test over the cases on the runs made (stopping a
case on a rule that is symmetric in the sign of its difference keeps that test exact). With one case the two
coincide.

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
scale with the same tail probability; over several cases the stratified form ``sum_c d_c / sqrt(sum_c v_c)``
(``d_c`` the case's mean log difference, ``v_c`` its Welch variance, Welch-Satterthwaite df over all groups), a
look at ``n`` needing ``n`` runs on both sides of every case. Constant tokens (as the model double serves
them) give ``|z| = inf`` for any difference and a difference of exactly 0 is futile at once. ``clear`` when
``|z| >= c_n`` (``cheaper`` for z < 0, ``dearer`` for z > 0) *and* the fixed-sample verdict of the report on the
same runs (``compare.cost_result``, same seed) is that verdict: so stop-when-decided never calls clear what the
report on its runs would not, and the extra condition only lowers the false-positive rate. ``futile``
(non-binding, so it cannot raise the false-positive rate) when even the upper one-sided 90% bound of the
observed log-ratio would need more runs per arm than the cap (runs-needed formula, Guenther's normal
approximation ``n = 2 (z_{1-alpha/2} + z_{0.8})^2 s^2 / d^2 + z_{1-alpha/2}^2 / 4``; W. C. Guenther, The
American Statistician 35, 1981) and the fixed-sample verdict on the runs made is no clear difference. Under
stop-when-decided the report's relative-cost verdict *is* this decision; the interval shown beside it describes
the runs made and, after an early stop, is not a fixed-sample confidence interval. At the cap an undecided
comparison reads ``capped``: the boundary of the last look is stricter than a single test's (the earlier looks
spent part of alpha), so a fixed-sample test of the same runs may still call it.
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
from pytest_agentrace.stats.compare import cost_result, resolve_baseline
from pytest_agentrace.stats.verdict import FIXED, Verdict, check_target

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


def _as_cases(x):
    """A list of per-case arrays from one (T, n) array or a list of them."""
    import numpy as np

    if isinstance(x, (list, tuple)):
        return [np.atleast_2d(np.asarray(c, dtype=float)) for c in x]
    return [np.atleast_2d(np.asarray(x, dtype=float))]


def welch_z(a, b):
    """Welch's t of ``mean(a) - mean(b)`` along the last axis, as a normal-scale z with the same tail probability.

    Arrays of shape (..., n) (n >= 2 each), or lists of them (one per case: the stratified statistic ``sum_c d_c /
    sqrt(sum_c v_c)``). Where no group has spread: 0 for a difference of exactly 0, else +/- inf."""
    import numpy as np
    from scipy.special import ndtri, stdtr

    cases_a = a if isinstance(a, (list, tuple)) else [a]
    cases_b = b if isinstance(b, (list, tuple)) else [b]
    diff = se2 = denom = 0.0
    for x, y in zip(cases_a, cases_b, strict=True):
        x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
        na, nb = x.shape[-1], y.shape[-1]
        va, vb = x.var(axis=-1, ddof=1) / na, y.var(axis=-1, ddof=1) / nb
        diff = diff + x.mean(axis=-1) - y.mean(axis=-1)
        se2 = se2 + va + vb
        denom = denom + va * va / (na - 1) + vb * vb / (nb - 1)
    diff, se2 = np.asarray(diff), np.asarray(se2)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(se2 > 0, diff / np.sqrt(se2), 0.0)
        df = np.where(se2 > 0, se2 * se2 / np.where(denom > 0, denom, 1.0), 1.0)
        tail = stdtr(df, -np.abs(t))
        z = np.sign(t) * -ndtri(np.clip(tail, 1e-300, 0.5))
    exact = np.abs(diff) <= 1e-12
    return np.where(se2 > 0, z, np.where(exact, 0.0, np.where(diff > 0, np.inf, -np.inf)))


def futile(a, b, cap: int, alpha: float = 0.05):
    """True where even the upper one-sided 90% bound of ``|mean over cases of (mean(a) - mean(b))|`` (log scale)
    would need more than ``cap`` runs per arm per case at ``alpha`` and 80% power (Guenther's approximation), or
    where nothing varies and the difference is exactly 0. Arrays of shape (..., n), or lists of them per case."""
    import numpy as np
    from scipy.special import ndtri, stdtrit

    cases_a = a if isinstance(a, (list, tuple)) else [a]
    cases_b = b if isinstance(b, (list, tuple)) else [b]
    k = len(cases_a)
    diff = s2 = 0.0
    df = 0
    for x, y in zip(cases_a, cases_b, strict=True):
        x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
        na, nb = x.shape[-1], y.shape[-1]
        s2 = s2 + ((na - 1) * x.var(axis=-1, ddof=1) + (nb - 1) * y.var(axis=-1, ddof=1)) / (na + nb - 2) * (1.0 / na + 1.0 / nb) / 2.0
        diff = diff + (x.mean(axis=-1) - y.mean(axis=-1)) / k
        df += na + nb - 2
    n = np.asarray(cases_a[0]).shape[-1]
    s2 = np.asarray(s2) * n / (k * k)  # variance of one run pair's log difference, as seen by the mean over cases
    se = np.sqrt(s2 * 2.0 / n)
    optimistic = np.abs(diff) + stdtrit(df, 0.9) * se
    za, zb = -ndtri(alpha / 2.0), -ndtri(0.2)
    with np.errstate(divide="ignore", invalid="ignore"):
        need = 2.0 * (za + zb) ** 2 * s2 / optimistic**2 + za * za / 4.0
    return ((s2 > 0) & (need > cap)) | ((s2 == 0) & (np.abs(diff) <= 1e-12))


def decide_batch(arm_logs, base_logs, cap: int, min_runs: int = MIN_RUNS, alpha: float = 0.05, confirm=None):
    """Vectorised decisions for many comparisons at once (used by ``decide`` and by the simulation tests).

    ``arm_logs``, ``base_logs``: arrays (T, N) of log tokens in rep order (one case), or lists of such arrays, one
    per case (the stratified look); N <= cap runs available per arm. ``confirm(rows, n)``: the fixed-sample signs
    (-1 cheaper, +1 dearer, 0 none) of the data sets ``rows`` on their first ``n`` runs; a boundary crossing is
    clear only where it agrees, and futility only where it is 0 (None: no such check). Returns ``(state, sign, n)``
    arrays of length T: state 1 clear, 2 futile, 0 undecided; ``sign`` -1 cheaper, +1 dearer; ``n`` the look (runs
    per arm) at which it was decided (or the last look made).
    """
    import numpy as np

    a, b = _as_cases(arm_logs), _as_cases(base_logs)
    t_count = a[0].shape[0]
    n_avail = min(min(x.shape[1] for x in a), min(x.shape[1] for x in b), cap)
    first = max(min(min_runs, cap), 2)
    state = np.zeros(t_count, dtype=np.int8)
    sign = np.zeros(t_count, dtype=np.int8)
    look = np.full(t_count, min(n_avail, first) if n_avail else 0, dtype=np.int64)
    bounds = look_boundaries(cap, first, alpha)
    for n in range(first, n_avail + 1):
        open_ = state == 0
        if not open_.any():
            break
        head_a, head_b = [x[:, :n] for x in a], [x[:, :n] for x in b]
        z = welch_z(head_a, head_b)
        hit = open_ & (np.abs(z) >= bounds[n])
        zs = np.where(z < 0, -1, 1)
        checked = np.zeros(t_count, dtype=np.int8)
        stop = np.zeros(t_count, dtype=bool)
        if n < cap:
            stop = open_ & ~hit & futile(head_a, head_b, cap, alpha)
        if confirm is not None and (hit | stop).any():
            rows = np.nonzero(hit | stop)[0]
            checked[rows] = np.asarray(confirm(rows, n), dtype=np.int8)
            hit &= checked == zs
            stop &= checked == 0
        state[hit], sign[hit] = 1, zs[hit]
        state[stop] = 2
        look[open_] = n
    return state, sign, look


@dataclass(frozen=True)
class Decision:
    """Stop-when-decided state of one arm vs its baseline for one agent, over ``cases`` (all the group's cases for
    the ``fixed`` target, one case for ``cases``).

    ``state``: ``clear`` (boundary crossed and the fixed-sample verdict agrees), ``futile``, ``continue``
    (undecided, reps left) or ``capped`` (undecided at the cap). ``verdict``: cheaper / dearer when clear, else no
    clear difference. ``n``: runs per arm (per case) at the deciding (or latest) look; ``rep``: the highest rep
    number used by that look (later reps are skippable); ``z`` and ``boundary`` of that look; ``alpha`` its level.
    """

    state: str
    verdict: str
    n: int
    rep: int | None
    z: float | None
    boundary: float | None
    cap: int
    method: str = METHOD
    cases: tuple[str, ...] = ()
    target: str = FIXED
    alpha: float = 0.05

    @property
    def decided(self) -> bool:
        return self.state in (CLEAR, FUTILE, CAPPED)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["cases"] = list(self.cases)
        for k in ("z", "boundary"):
            if d[k] is not None and not math.isfinite(d[k]):
                d[k] = None
        return d


def _per_case(x) -> list[list[tuple[int, float]]]:
    """``[pairs]`` for one case's ``(rep, tokens)`` pairs, the lists as they are for per-case lists of them."""
    if not x or (isinstance(x[0], tuple) and not isinstance(x[0][0], (list, tuple))):
        return [list(x)]
    return [list(c) for c in x]


def decide(arm, base, cap: int, min_runs: int = MIN_RUNS, alpha: float = 0.05, confirm=None, cases: Sequence[str] = (),
           target: str = FIXED) -> Decision:
    """Decision for one comparison from ``(rep, tokens)`` pairs of valid runs in rep order (a contiguous prefix
    of reps; runs without tokens left out): ``arm`` and ``base`` are such lists (one case) or lists of them (one
    per case, in the same order). ``confirm(tokens, n)``: the fixed-sample sign of the first ``n`` runs, given per
    case ``(arm tokens, baseline tokens)`` (see ``decide_batch``). Tokens <= 0 make log cost undefined: such
    comparisons stay undecided."""
    import numpy as np

    arm_cases, base_cases = _per_case(arm), _per_case(base)
    n_avail = min([len(x) for x in arm_cases] + [len(x) for x in base_cases] + [cap])
    first = max(min(min_runs, cap), 2)
    every = [t for x in (*arm_cases, *base_cases) for _, t in x[:n_avail]]
    info = {"cap": cap, "cases": tuple(cases), "target": target, "alpha": alpha}
    if n_avail < first or any(t <= 0 for t in every):
        return Decision(CONTINUE if n_avail < cap else CAPPED, Verdict.NO_CLEAR.value, n_avail, None, None, None, **info)
    a = [np.log([[t for _, t in x[:n_avail]]]) for x in arm_cases]
    b = [np.log([[t for _, t in x[:n_avail]]]) for x in base_cases]

    def check(rows, n):
        tokens = [([t for _, t in x[:n]], [t for _, t in y[:n]]) for x, y in zip(arm_cases, base_cases, strict=True)]
        return [confirm(tokens, n)]

    state, sign, look = decide_batch(a, b, cap, min_runs, alpha, check if confirm is not None else None)
    n = int(look[0])
    z = float(welch_z([x[:, :n] for x in a], [x[:, :n] for x in b])[0])
    bound = look_boundaries(cap, first, alpha)[n]
    rep = max(x[n - 1][0] for x in (*arm_cases, *base_cases))
    if state[0] == 1:
        return Decision(CLEAR, Verdict.CHEAPER.value if sign[0] < 0 else Verdict.DEARER.value, n, rep, z, bound, **info)
    if state[0] == 2:
        return Decision(FUTILE, Verdict.NO_CLEAR.value, n, rep, z, bound, **info)
    return Decision(CAPPED if n >= cap else CONTINUE, Verdict.NO_CLEAR.value, n, rep, z, bound, **info)


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


def confirmer(key: tuple, seed: int = 0, resamples: int = 10_000, alpha: float = 0.05, confidence: float = 0.95, target: str = FIXED):
    """The ``confirm`` of ``decide`` for the comparison ``key`` = ``(kind, source, agent, arm, baseline, cases)``:
    the sign of ``compare.cost_result`` on the runs, seeded as the report seeds that comparison."""
    def rng(what: str):
        return stats.rng_for(seed, what, *key)

    def confirm(tokens, _n: int) -> int:
        r = cost_result(tokens, confidence, resamples, alpha, rng("cost"), rng("cost-p"), rng("log-ratio"), target)
        return -1 if r.verdict == Verdict.CHEAPER.value else 1 if r.verdict == Verdict.DEARER.value else 0

    return confirm


def decisions(outcomes, cap: int, baseline: str | None = None, min_runs: int = MIN_RUNS, alpha: float = 0.05, target: str = FIXED,
              seed: int = 0, resamples: int = 10_000, confidence: float = 0.95) -> dict[tuple[str, str, tuple[str, ...], str, str], Decision]:
    """Decisions keyed ``(kind, source, cases, agent, arm)`` for every arm with a baseline to compare with: one per
    arm and agent over its cases with tokens (``fixed``), or one per case (``cases``, each at ``alpha / C``)."""
    from collections import defaultdict

    check_target(target)
    groups: dict[tuple[str, str, str], dict[str, dict[str, dict[int, Any]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(dict)))
    by_group: dict[tuple[str, str, str], list] = defaultdict(list)
    for o in outcomes:
        groups[(o.kind, o.source, o.agent)][o.arm][o.case][o.rep] = o
        by_group[(o.kind, o.source, o.agent)].append(o)
    out = {}
    for (kind, source, agent), arms in sorted(groups.items()):
        base = resolve_baseline(by_group[(kind, source, agent)], baseline)
        if base not in arms:
            continue
        for arm, per_case in sorted(arms.items()):
            if arm == base:
                continue
            cases = sorted(c for c in per_case if c in arms[base])
            pairs = {c: (prefix_tokens(per_case[c]), prefix_tokens(arms[base][c])) for c in cases}
            cases = [c for c in cases if pairs[c][0] and pairs[c][1]] or cases
            if not cases:
                continue
            if target == FIXED:
                conf = confirmer((kind, source, agent, arm, base, tuple(cases)), seed, resamples, alpha, confidence, target)
                d = decide([pairs[c][0] for c in cases], [pairs[c][1] for c in cases], cap, min_runs, alpha, conf, cases, target)
                out[(kind, source, tuple(cases), agent, arm)] = d
                continue
            level = alpha / len(cases)
            for c in cases:
                conf = confirmer((kind, source, agent, arm, base, (c,)), seed, resamples, level, confidence, target)
                out[(kind, source, (c,), agent, arm)] = decide([pairs[c][0]], [pairs[c][1]], cap, min_runs, level, conf, (c,), target)
    return out


def skip_reason(spec: Any, out: Path, session_id: str, cap: int, arms: Sequence[str], baseline: str, min_runs: int = MIN_RUNS,
                alpha: float = 0.05, target: str = FIXED, cases: Sequence[str] = (), seed: int = 0, resamples: int = 10_000) -> str | None:
    """Why the run ``spec`` (a RunSpec) need not run, or None. Reads this session's ``run.json`` records of the
    same agent for every arm in ``arms`` and every case in ``cases`` (the trial's cases collected in this session)
    under a file lock (``<out>/.sequential.lock``), so pytest-xdist workers see consistent data. Nothing is skipped
    while a case of the look has no record yet; cases whose runs report no tokens are left out, as ``decisions``
    does. ``fixed``: one decision over the cases; ``cases``: the spec's case at ``alpha / C``. The baseline's
    reps are skipped only once every other arm is decided. Records of other sessions (also those reused by
    ``--agentrace-resume``) end the prefix: nothing is skipped on their strength."""
    from filelock import FileLock

    if spec.rep <= min(min_runs, cap) or baseline not in arms or len(arms) < 2:
        return None
    looked = sorted(set(cases) | {spec.case})
    records: dict[str, dict[str, dict[int, Any]]] = {}
    out.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out / ".sequential.lock"), timeout=120):
        for arm in arms:
            for case in looked:
                recs: dict[int, Any] = {}
                for rep in range(1, spec.rep):
                    path = out / "runs" / case / arm / spec.agent.id / str(rep) / RUN_FILE
                    try:
                        o = read_run(path)
                    except ValueError:
                        break
                    if o.session_id != session_id:
                        break
                    recs[rep] = o
                records.setdefault(arm, {})[case] = recs
    targets = [spec.arm] if spec.arm != baseline else [a for a in arms if a != baseline]
    if any(not records[a][c] for a in (*targets, baseline) for c in looked):
        return None  # a case of the look has not run yet: wait for it

    def usable(arm: str, c: str) -> bool:
        return bool(prefix_tokens(records[arm][c]) and prefix_tokens(records[baseline][c]))

    found = []
    for arm in targets:
        with_tokens = [c for c in looked if usable(arm, c)] or looked
        level = alpha if target == FIXED else alpha / len(with_tokens)
        used = with_tokens if target == FIXED else [spec.case]
        key = (spec.kind, str(spec.source), spec.agent.id, arm, baseline, tuple(used))
        conf = confirmer(key, seed, resamples, level, 0.95, target)
        d = decide([prefix_tokens(records[arm][c]) for c in used], [prefix_tokens(records[baseline][c]) for c in used], cap,
                   min_runs, level, conf, used, target)
        if not (d.state in (CLEAR, FUTILE) and d.rep is not None and spec.rep > d.rep):
            return None
        found.append((arm, d))
    over = f" over {len(found[0][1].cases)} cases" if len(found[0][1].cases) > 1 else ""
    if spec.arm != baseline:
        arm, d = found[0]
        what = f"{d.verdict}, z={d.z:.2f} beyond {d.boundary:.2f}" if d.state == CLEAR else "the difference cannot be shown within the reps"
        return f"stop-when-decided: arm {arm} vs {baseline} is {d.state}{over} after {d.n} runs per arm ({what})"
    return f"stop-when-decided: every arm vs baseline {baseline} is decided{over} (" + ", ".join(f"{a} {d.state}" for a, d in found) + ")"
