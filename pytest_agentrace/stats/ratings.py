"""Races between agents on task files: coderace's statistics done right, and Elo ratings. No pytest import.

A *race* is one task file's task in one session: every agent's mean composite score over its valid reps.

Elo (as coderace: initial 1500, K 32, a draw when two scores are within 1 point; expected score
``1 / (1 + 10^((Rb - Ra) / 400))``), with one change: coderace updates pair by pair, so its result depends on
the order of the pairs. Here every pair of a race is scored against the ratings from *before* the race and the
changes are added at once, ``R_i += K * sum_j (S_ij - E_ij)`` - one simultaneous update per race, independent of
pair order, and zero-sum. Races are applied in time order (earliest ``started`` of their runs, then session id,
source and case).

The ratings are not stored: they are computed from the history store's task runs (``record.store``,
``Store.rating_outcomes``: the sessions since the last ``agentrace ratings --reset``), so they always agree with
the history they come from.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from pytest_agentrace.record.model import Outcome, Status
from pytest_agentrace.stats.numerics import _var, z_value
from pytest_agentrace.stats.score import require_scored

INITIAL = 1500.0
K_FACTOR = 32.0
DRAW_MARGIN = 1.0


@dataclass(frozen=True)
class Race:
    """One race: ``scores`` maps agent -> mean score (0..100) over its valid reps."""

    race_id: str
    session_id: str
    started: str
    source: str
    case: str
    scores: dict[str, float]


def one_session(outcomes: Iterable[Outcome]) -> list[Outcome]:
    """``outcomes`` with every task run's ``session_id`` one id (the sessions' ids, sorted, joined by ``+``): the runs
    of one results folder - shards merged into it, runs a resumed session reused - race as one session, as they were
    scored (``score.score_outcomes(per_session=False)``). The history store's sessions stay apart."""
    outcomes = list(outcomes)
    ids = sorted({o.session_id for o in outcomes if o.kind == "task"})
    if len(ids) < 2:
        return outcomes
    joined = "+".join(ids)
    return [o.replace(session_id=joined) if o.kind == "task" else o for o in outcomes]


def races(outcomes: Iterable[Outcome]) -> list[Race]:
    """Races (task outcomes with a score, grouped by session, source and case) in time order; single-agent groups
    are included (they change no rating). Task runs must be scored (``score.score_outcomes``; raises
    ``score.UnscoredError``)."""
    groups: dict[tuple[str, str, str], list[Outcome]] = defaultdict(list)
    for o in require_scored(outcomes, "races"):
        if o.kind == "task" and o.is_sample and o.score is not None:
            groups[(o.session_id, o.source, o.case)].append(o)
    out = []
    for (sid, source, case), runs in groups.items():
        by_agent: dict[str, list[float]] = defaultdict(list)
        for o in runs:
            by_agent[o.agent].append(float(o.score))  # type: ignore[arg-type]
        started = min((o.started for o in runs if o.started), default="")
        out.append(Race(f"{sid}:{source}:{case}", sid, started, source, case, {a: sum(v) / len(v) for a, v in sorted(by_agent.items())}))
    return sorted(out, key=lambda r: (r.started, r.session_id, r.source, r.case))


def expected(ra: float, rb: float) -> float:
    """Expected score of a player rated ``ra`` against one rated ``rb``."""
    return 1.0 / (1.0 + 10.0 ** ((rb - ra) / 400.0))


def result(sa: float, sb: float, draw: float = DRAW_MARGIN) -> float:
    """1 (a wins), 0.5 (draw: scores within ``draw`` points) or 0."""
    return 0.5 if abs(sa - sb) <= draw else (1.0 if sa > sb else 0.0)


def apply_race(ratings: dict[str, float], scores: dict[str, float], k: float = K_FACTOR, draw: float = DRAW_MARGIN) -> dict[str, float]:
    """New ratings after one race (simultaneous update; see module docstring). Unrated agents start at 1500."""
    before = {a: ratings.get(a, INITIAL) for a in scores}
    new = dict(ratings)
    for a, sa in scores.items():
        delta = sum(result(sa, scores[b], draw) - expected(before[a], before[b]) for b in scores if b != a)
        new[a] = before[a] + k * delta
    return new


def elo(outcomes: Iterable[Outcome]) -> dict[str, float]:
    """Elo ratings of every agent that raced in ``outcomes``, computed from scratch (1500 each)."""
    ratings: dict[str, float] = {}
    for race in races(outcomes):
        ratings = apply_race(ratings, race.scores)
    return dict(sorted(ratings.items()))


def elo_history(outcomes: Iterable[Outcome]) -> list[dict[str, Any]]:
    """Ratings after each session, for charts over time: ``[{"session_id", "started", "races", "ratings"}]`` in
    time order (``started``: the earliest run of the session, ISO-8601)."""
    ratings: dict[str, float] = {}
    history: list[dict[str, Any]] = []
    for race in races(outcomes):
        ratings = apply_race(ratings, race.scores)
        if history and history[-1]["session_id"] == race.session_id:
            history[-1]["races"] += 1
            history[-1]["ratings"] = dict(sorted(ratings.items()))
        else:
            history.append({"session_id": race.session_id, "started": race.started, "races": 1, "ratings": dict(sorted(ratings.items()))})
    return history


# ---------------------------------------------------------------------------------------------- race statistics


@dataclass(frozen=True)
class RaceStats:
    """coderace's per-agent statistics over task runs, done right.

    ``runs``: valid runs (errors excluded); ``score_mean`` / ``score_sd`` over them; ``score_ci``: ``score_interval``
    (95%; the runs are those of these tasks, so it says how sure the mean is for these tasks, not for tasks in
    general); ``consistency = max(0, 1 - CV of score)`` (coderace's definition);
    ``reliability``: share of valid runs that neither timed out nor had a non-zero agent exit code; ``races``:
    tasks where at least one other agent raced; ``wins``: races where the agent's mean score beat every other
    agent's by more than the draw margin (1 point) - ties are not wins; ``win_rate = wins / races``.
    """

    agent: str
    tasks: int
    runs: int
    score_mean: float | None
    score_sd: float | None
    score_ci: tuple[float, float] | None
    consistency: float | None
    reliability: float | None
    races: int
    wins: int
    win_rate: float | None
    elo: float | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["score_ci"] = list(self.score_ci) if self.score_ci else None
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in d.items()}


def score_interval(scores: Sequence[float], confidence: float = 0.95) -> tuple[float, float] | None:
    """Interval (0-100) for the mean of composite ``scores`` (each 0-100): Wilson's interval of ``mean / 100`` with
    ``n`` runs, times 100. A score in [0, 100] with mean ``m`` has variance at most ``m (100 - m)`` (the variance of a
    run that scores 0 or 100), so the Wilson pivot, which assumes that largest variance, is conservative for any
    score distribution; unlike a t interval it keeps its width when every run scored the same (all passed: 5 runs at
    100 give 57-100, not a zero-width 100-100) and when mostly-passing scores hide rare failures (a t interval covered
    34-72% there; ``tests/test_sim_honest.py``). None for no scores. Wilson, JASA 22, 1927."""
    if not scores:
        return None
    n = len(scores)
    m = min(1.0, max(0.0, sum(scores) / n / 100.0))
    lo, hi = _wilson_fraction(m, n, confidence)
    return (100.0 * lo, 100.0 * hi)


def _wilson_fraction(p: float, n: int, confidence: float) -> tuple[float, float]:
    """``wilson_interval`` for an observed fraction ``p`` (not necessarily k/n) of ``n``."""
    z = z_value(confidence)
    denom = 1.0 + z * z / n
    center = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return (max(0.0, center - half) if p > 0 else 0.0, min(1.0, center + half) if p < 1 else 1.0)


def race_stats(outcomes: Sequence[Outcome]) -> list[RaceStats]:
    """``RaceStats`` per agent over the scored task outcomes of one results folder or session (sorted by mean score,
    best first); they race as one session (``one_session``)."""
    outcomes = one_session(require_scored(outcomes, "race_stats"))
    ratings = elo(outcomes)
    all_races = races(outcomes)
    by_agent: dict[str, list[Outcome]] = defaultdict(list)
    for o in outcomes:
        if o.kind == "task":
            by_agent[o.agent].append(o)
    out = []
    for agent, runs in by_agent.items():
        valid = [o for o in runs if o.is_sample]
        scores = [float(o.score) for o in valid if o.score is not None]
        mean = sum(scores) / len(scores) if scores else None
        sd = math.sqrt(_var(scores)) if len(scores) >= 2 else None
        consistency = None
        if mean is not None and sd is not None:
            consistency = (1.0 if sd == 0 else 0.0) if mean == 0 else max(0.0, 1.0 - sd / abs(mean))
        ok = [o for o in valid if o.status != Status.TIMEOUT and o.exit_code == 0]
        mine = [r for r in all_races if agent in r.scores and len(r.scores) > 1]
        wins = sum(all(r.scores[agent] - s > DRAW_MARGIN for b, s in r.scores.items() if b != agent) for r in mine)
        out.append(RaceStats(
            agent, len({(o.source, o.case) for o in runs}), len(valid), mean, sd, score_interval(scores), consistency,
            len(ok) / len(valid) if valid else None, len(mine), wins, wins / len(mine) if mine else None, ratings.get(agent),
        ))
    return sorted(out, key=lambda s: (-(s.score_mean if s.score_mean is not None else -1), s.agent))
