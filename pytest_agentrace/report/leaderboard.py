"""The leaderboard, race history and score trend: pure functions over outcomes (no pytest, no SQLite).

Races come from ``ratings.races`` so the leaderboard, the Elo ratings and the race statistics share one
definition: a **race** is one task (source and case) in one session, each agent scored by its mean composite
score over its valid reps (``error`` runs are not scored); it takes at least two agents. The **winner** is the
agent whose score beats every other agent's by more than ``ratings.DRAW_MARGIN`` (1 point); otherwise the race is
a tie and nobody wins (**ties are not wins**), though every participant has raced.

Per agent: ``runs`` (scored task runs), ``races``, ``wins``, ``win_rate`` (wins / races, 0..1; None without a
race), ``passed`` (runs with status passed), and the means of score (0..100), cost (USD, over runs whose cost is
known) and agent seconds, over its scored runs. Every function takes scored outcomes (``score.score_outcomes``) and
raises ``score.UnscoredError`` for a task run without its score.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from pytest_agentrace.record.model import Outcome
from pytest_agentrace.stats.ratings import DRAW_MARGIN, races
from pytest_agentrace.stats.score import require_scored

SPARK = "▁▂▃▄▅▆▇█"
RACE_NOTE = ("A race is one task in one session (each agent's mean score over its reps) with two or more agents; "
             "a win needs a score more than 1 point above every other agent's, so ties are not wins.")


@dataclass(frozen=True)
class Standing:
    """One leaderboard row (see the module docstring for the definitions; cost in USD, time in seconds)."""

    agent: str
    runs: int
    races: int
    wins: int
    win_rate: float | None
    mean_score: float | None
    mean_cost: float | None
    mean_seconds: float | None
    passed: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def winner(scores: dict[str, float]) -> str | None:
    """The agent beating every other by more than the draw margin; None for a tie or a race of one."""
    if len(scores) < 2:
        return None
    best = max(scores, key=lambda a: scores[a])
    return best if all(scores[best] - s > DRAW_MARGIN for a, s in scores.items() if a != best) else None


def rank(scores: dict[str, float], agent: str) -> int | None:
    """Competition rank ("1224") of ``agent`` by score in one race."""
    if agent not in scores:
        return None
    return 1 + sum(1 for s in scores.values() if s > scores[agent])


def _task_runs(outcomes: Iterable[Outcome]) -> list[Outcome]:
    return [o for o in require_scored(outcomes, "leaderboard") if o.kind == "task" and o.is_sample and o.score is not None]


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def leaderboard(outcomes: Iterable[Outcome], min_runs: int = 0) -> list[Standing]:
    """Standings over task outcomes, best first: wins, then win rate, then mean score, then agent name.

    ``min_runs`` drops agents with fewer scored runs.
    """
    runs = _task_runs(outcomes)
    by_agent: dict[str, list[Outcome]] = defaultdict(list)
    for o in runs:
        by_agent[o.agent].append(o)
    raced: dict[str, int] = defaultdict(int)
    wins: dict[str, int] = defaultdict(int)
    for race in races(runs):
        if len(race.scores) < 2:
            continue
        for agent in race.scores:
            raced[agent] += 1
        w = winner(race.scores)
        if w:
            wins[w] += 1
    table = []
    for agent, mine in by_agent.items():
        if len(mine) < min_runs:
            continue
        costs = [o.usage.cost_usd for o in mine if o.usage.cost_usd is not None]
        table.append(Standing(
            agent=agent, runs=len(mine), races=raced[agent], wins=wins[agent],
            win_rate=wins[agent] / raced[agent] if raced[agent] else None,
            mean_score=_mean([float(o.score) for o in mine]), mean_cost=_mean(costs),  # type: ignore[arg-type]
            mean_seconds=_mean([o.seconds for o in mine]), passed=sum(o.status == "passed" for o in mine),
        ))
    return sorted(table, key=lambda s: (*_standing_key(s), s.agent))


def _standing_key(s: Standing) -> tuple[float, float, float]:
    return (-s.wins, -(s.win_rate or 0.0), -(s.mean_score or 0.0))


def standing_ranks(table: Sequence[Standing]) -> list[int]:
    """Competition ranks ("1224") of a sorted leaderboard: agents equal in wins, win rate and mean score share a
    rank (the name only orders them), as the task tables rank agents of equal score."""
    ranks: list[int] = []
    for i, s in enumerate(table):
        ranks.append(ranks[-1] if i and _standing_key(s) == _standing_key(table[i - 1]) else i + 1)
    return ranks


def history(outcomes: Iterable[Outcome], agent: str | None = None, limit: int | None = 20) -> list[dict[str, Any]]:
    """Past races, newest first, as dicts: ``started``, ``session_id``, ``task``, ``source``, ``agents`` (list),
    ``scores`` ({agent: mean score}), ``winner`` (agent; ``"tie"`` when nobody beat every other agent by more than
    the draw margin; None for a single agent), ``top_score``; with ``agent``: only its races, plus its ``score``
    and ``rank`` (competition rank). ``limit`` None: all."""
    out = []
    for race in reversed(races(_task_runs(outcomes))):
        if agent is not None and agent not in race.scores:
            continue
        entry = {
            "started": race.started, "session_id": race.session_id, "task": race.case, "source": race.source,
            "agents": sorted(race.scores), "scores": dict(sorted(race.scores.items())),
            "winner": winner(race.scores) or ("tie" if len(race.scores) > 1 else None), "top_score": max(race.scores.values()),
        }
        if agent is not None:
            entry.update(score=race.scores[agent], rank=rank(race.scores, agent))
        out.append(entry)
    return out if limit is None else out[:limit]


def trend(outcomes: Iterable[Outcome]) -> list[dict[str, Any]]:
    """Per agent x task: its race score in each session (oldest first) as ``points`` ``[(started, score)]``, with
    ``first``, ``last`` and ``change`` (last - first, score points)."""
    series: dict[tuple[str, str], list[tuple[str, float]]] = defaultdict(list)
    for race in races(_task_runs(outcomes)):
        for agent, score in race.scores.items():
            series[(agent, race.case)].append((race.started, score))
    return [{"agent": agent, "task": task, "points": points, "first": points[0][1], "last": points[-1][1],
             "change": points[-1][1] - points[0][1]} for (agent, task), points in sorted(series.items())]


def sparkline(values: Sequence[float], lo: float = 0.0, hi: float = 100.0) -> str:
    """One block character per value on the fixed scale ``lo..hi`` (scores: 0..100), so lines compare."""
    if hi <= lo:
        return SPARK[0] * len(values)
    top = len(SPARK) - 1
    return "".join(SPARK[max(0, min(top, round((v - lo) / (hi - lo) * top)))] for v in values)


_AGO = re.compile(r"^(\d+)\s*([dhw])$")


def parse_since(text: str | None, now: _dt.datetime | None = None) -> str | None:
    """``7d`` / ``12h`` / ``2w`` (before ``now``) or an ISO date/time -> ISO-8601 UTC lower bound (None: no bound).

    Raises ``ValueError`` with the accepted forms for anything else.
    """
    if not text:
        return None
    now = now or _dt.datetime.now(_dt.UTC)
    m = _AGO.match(text.strip())
    if m:
        n, unit = int(m.group(1)), m.group(2)
        delta = {"d": _dt.timedelta(days=n), "h": _dt.timedelta(hours=n), "w": _dt.timedelta(weeks=n)}[unit]
        return (now - delta).isoformat(timespec="seconds")
    try:
        when = _dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"--since {text!r}: expected a span like 7d, 12h, 2w or a date like 2026-01-31") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=_dt.UTC)
    return when.astimezone(_dt.UTC).isoformat(timespec="seconds")
