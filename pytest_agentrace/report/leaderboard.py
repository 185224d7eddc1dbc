"""Races, the leaderboard, history and trend: pure functions over run rows (no pytest, no SQLite).

A *row* is a mapping with at least ``session_id``, ``session_started`` (ISO-8601), ``kind``, ``source``,
``case_name``, ``rep``, ``agent``, ``status``, ``score`` (0..100 or None), ``seconds`` and ``cost_usd`` (USD or
None) — what ``store.Store.runs`` returns; ``rows_from_outcomes`` makes the same from a session's outcomes.

Definitions (coderace's leaderboard, with its edge cases pinned down):
- a **race** is one task and rep of one session: the task runs sharing ``(session_id, source, case_name, rep)``.
  Only runs with a score take part (``error`` runs are not scored). A race needs at least two agents.
- the **winner** of a race is the agent whose score is strictly highest; when two or more share the top score
  nobody wins (**ties are not wins**), though every participant is counted as having raced.
- per agent: ``runs`` (scored task runs), ``races``, ``wins``, ``win_rate`` (wins / races, 0..1), and the means
  of score, cost (USD, over runs whose cost is known) and agent seconds over its scored runs.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ..model import Outcome

SPARK = "▁▂▃▄▅▆▇█"


@dataclass(frozen=True)
class Race:
    """One race: its key, start time, ``scores`` ``{agent: score}`` and ``winner`` (None: tie or single agent)."""

    session_id: str
    started: str
    source: str
    task: str
    rep: int
    scores: dict[str, float]

    @property
    def is_race(self) -> bool:
        return len(self.scores) >= 2

    @property
    def top(self) -> float | None:
        return max(self.scores.values()) if self.scores else None

    @property
    def leaders(self) -> list[str]:
        top = self.top
        return sorted(a for a, s in self.scores.items() if s == top)

    @property
    def winner(self) -> str | None:
        """The single agent with the highest score; None for a tie at the top or a race of one."""
        leaders = self.leaders
        return leaders[0] if self.is_race and len(leaders) == 1 else None

    def rank(self, agent: str) -> int | None:
        """Competition rank ("1224") of ``agent`` in this race."""
        if agent not in self.scores:
            return None
        return 1 + sum(1 for s in self.scores.values() if s > self.scores[agent])


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


def rows_from_outcomes(outcomes: Iterable[Outcome], session_id: str = "", started: str = "") -> list[dict[str, Any]]:
    """Store-shaped rows for ``outcomes`` (so a live session's leaderboard uses the same code as the store's)."""
    return [
        {
            "session_id": o.session_id or session_id, "session_started": started or o.started, "kind": o.kind,
            "source": o.source, "case_name": o.case, "arm": o.arm, "rep": o.rep, "agent": o.agent, "status": str(o.status),
            "score": o.score, "seconds": o.seconds, "cost_usd": o.usage.cost_usd,
        }
        for o in outcomes
    ]


def races(rows: Iterable[Mapping[str, Any]]) -> list[Race]:
    """Group task rows into races (including one-agent groups; check ``is_race``), oldest first."""
    groups: dict[tuple, dict[str, float]] = defaultdict(dict)
    started: dict[tuple, str] = {}
    for r in rows:
        if r["kind"] != "task" or r["score"] is None:
            continue
        key = (r["session_id"], r["source"] or "", r["case_name"], int(r["rep"]))
        groups[key][r["agent"]] = float(r["score"])
        started.setdefault(key, r["session_started"] or "")
    out = [Race(k[0], started[k], k[1], k[2], k[3], scores) for k, scores in groups.items()]
    return sorted(out, key=lambda x: (x.started, x.session_id, x.task, x.source, x.rep))


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def leaderboard(rows: Iterable[Mapping[str, Any]], min_runs: int = 0) -> list[Standing]:
    """Standings over task rows, best first: wins, then win rate, then mean score, then agent name.

    ``min_runs`` drops agents with fewer scored runs.
    """
    rows = [r for r in rows if r["kind"] == "task" and r["score"] is not None]
    by_agent: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for r in rows:
        by_agent[r["agent"]].append(r)
    raced: dict[str, int] = defaultdict(int)
    wins: dict[str, int] = defaultdict(int)
    for race in races(rows):
        if not race.is_race:
            continue
        for agent in race.scores:
            raced[agent] += 1
        if race.winner:
            wins[race.winner] += 1
    table = []
    for agent, runs in by_agent.items():
        if len(runs) < min_runs:
            continue
        costs = [float(r["cost_usd"]) for r in runs if r.get("cost_usd") is not None]
        table.append(Standing(
            agent=agent, runs=len(runs), races=raced[agent], wins=wins[agent],
            win_rate=wins[agent] / raced[agent] if raced[agent] else None,
            mean_score=_mean([float(r["score"]) for r in runs]), mean_cost=_mean(costs),
            mean_seconds=_mean([float(r["seconds"] or 0.0) for r in runs]),
            passed=sum(1 for r in runs if r["status"] == "passed"),
        ))
    return sorted(table, key=lambda s: (-s.wins, -(s.win_rate or 0.0), -(s.mean_score or 0.0), s.agent))


def history(rows: Iterable[Mapping[str, Any]], agent: str | None = None, limit: int | None = 20) -> list[dict[str, Any]]:
    """Past races, newest first, as dicts: ``started``, ``session_id``, ``task``, ``rep``, ``agents`` (list),
    ``winner`` (agent, ``"tie"`` for a shared top score, None for a single agent), ``top_score``, and with
    ``agent``: only its races plus ``score`` and ``rank`` (competition rank) of that agent. ``limit`` None: all."""
    out = []
    for race in reversed(races(rows)):
        if agent is not None and agent not in race.scores:
            continue
        entry = {
            "started": race.started, "session_id": race.session_id, "task": race.task, "source": race.source,
            "rep": race.rep, "agents": sorted(race.scores), "winner": race.winner or ("tie" if race.is_race else None),
            "top_score": race.top,
        }
        if agent is not None:
            entry.update(score=race.scores[agent], rank=race.rank(agent))
        out.append(entry)
    return out if limit is None else out[:limit]


def trend(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per agent x task: the mean score of each session (oldest first) as ``points`` ``[(started, score)]``,
    with ``first``, ``last`` and ``change`` (last - first, score points)."""
    series: dict[tuple[str, str], dict[tuple[str, str], list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r["kind"] == "task" and r["score"] is not None:
            series[(r["agent"], r["case_name"])][(r["session_started"] or "", r["session_id"])].append(float(r["score"]))
    out = []
    for (agent, task), sessions in sorted(series.items()):
        points = [(started, sum(v) / len(v)) for (started, _sid), v in sorted(sessions.items())]
        out.append({"agent": agent, "task": task, "points": points, "first": points[0][1], "last": points[-1][1],
                    "change": points[-1][1] - points[0][1]})
    return out


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
