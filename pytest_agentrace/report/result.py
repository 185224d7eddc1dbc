"""The session result: everything the outputs are made from, built once (by the session's controller, or by the
``agentrace`` CLI from a results folder) and read by every output's ``render(result)`` (``report.formats``).

The outcomes in a result are scored once (``stats.score.score_outcomes``) before it is built; the statistics
report, the leaderboard and the Elo series are computed from them here and carried on the result, so no output
scores, ranks or rates again. Pure: no pytest import, no file written.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_agentrace.record.model import Outcome
from pytest_agentrace.report.leaderboard import Standing, leaderboard
from pytest_agentrace.spec.task import Task, load_task
from pytest_agentrace.stats.numerics import DEFAULT_RESAMPLES
from pytest_agentrace.stats.ratings import apply_race, elo, elo_history, one_session, races
from pytest_agentrace.stats.report import StatsReport, build_report
from pytest_agentrace.stats.score import require_scored
from pytest_agentrace.stats.snapshot import SnapshotRow
from pytest_agentrace.stats.verdict import FIXED, GateFamily


def elo_steps(outcomes: Sequence[Outcome]) -> list[dict[str, Any]]:
    """Ratings after each race (``ratings.races`` in time order, races of two or more agents), for the Elo
    chart: ``[{race (1-based), session_id, case, started, ratings {agent: rating}}]`` (``ratings.apply_race``)."""
    ratings: dict[str, float] = {}
    steps = []
    for race in races(outcomes):
        if len(race.scores) < 2:
            continue
        ratings = apply_race(ratings, race.scores)
        steps.append({"race": len(steps) + 1, "session_id": race.session_id, "case": race.case, "started": race.started,
                      "ratings": dict(sorted(ratings.items()))})
    return steps


@dataclass(frozen=True)
class EloSeries:
    """Elo over scored task outcomes (``stats.ratings``): ``ratings`` {agent: rating} after every race,
    ``history`` one entry per session (``ratings.elo_history``), ``steps`` one per race of two or more agents
    (``elo_steps``)."""

    ratings: dict[str, float]
    history: list[dict[str, Any]]
    steps: list[dict[str, Any]]

    @classmethod
    def of(cls, outcomes: Sequence[Outcome]) -> EloSeries:
        """The series over ``outcomes`` (scored; raises ``score.UnscoredError`` otherwise)."""
        return cls(dict(elo(outcomes)), list(elo_history(outcomes)), elo_steps(outcomes))


@dataclass(frozen=True)
class Context:
    """Where a result comes from and how its statistics were asked for.

    ``out``: the results folder (run files, for links) or None; ``session``: the session row (``store.SessionInfo``
    fields) or None for a results folder; ``options``: ``{reps, timeout}`` the session overrode (timeout in seconds);
    ``baseline``, ``seed``, ``resamples``, ``target``: the statistics' settings; ``paths``: format name -> the file
    it is written to (the HTML report links run files relative to its own place); ``full_report``: where the full
    report is, for the PR comment; ``digest``: the results digest of ``out`` (``record.manifest.results_digest``: the
session's at its end, the CLI's when it reads the folder), None when unknown; ``load_task``: how the export reads a task file's settings (a session passes its
    collection's, so the file is parsed once per process; raises what ``spec.task.load_task`` raises); ``rootdir``:
    the session's pytest rootdir for a results folder read without its session row (JUnit's classnames);
    ``partial``: why the folder holds part of a sharded session's runs (``record.runfile.missing_shards``), said at
    the top of every report made from it.
    """

    out: Path | None = None
    session: Mapping[str, Any] | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    baseline: str | None = None
    seed: int = 0
    resamples: int = DEFAULT_RESAMPLES
    target: str = FIXED
    paths: Mapping[str, Path] = field(default_factory=dict)
    full_report: str | None = None
    digest: str | None = None
    load_task: Callable[[Path], Task] = field(default=load_task, compare=False, repr=False)
    rootdir: Path | None = None  # the session's pytest rootdir when no session row says it (``last-session.json``)
    partial: str | None = None  # why the results folder holds part of a session's runs (a missing or stopped shard)


@dataclass(frozen=True)
class SessionResult:
    """Everything the outputs are made from (see the module docstring).

    ``outcomes``: every run, task runs with their composite score, sorted; ``report``: the statistics report (None
    when it could not be computed; the reason is in ``failures``); ``leaderboard``: standings over ``outcomes``;
    ``elo``: the Elo series over the history store's task runs when given, else over ``outcomes`` (None when not
    computed); ``snapshot_rows``: the comparison with ``--agentrace-snapshot`` (None when
    none was compared); ``failures``: gate failures, one line each (the session fails when there is one); ``notes``:
    (line, is_warning) of what was recorded, and warnings; ``validation``: the rows and invalid count of
    ``--agentrace-validate``; ``gate``: the tests the verdict gates looked at (None: no verdict gate); ``context``:
    ``Context``. ``cache`` holds what outputs derive from the result once (the export document), keyed by name.
    """

    outcomes: tuple[Outcome, ...]
    report: StatsReport | None = None
    leaderboard: tuple[Standing, ...] = ()
    elo: EloSeries | None = None
    snapshot_rows: tuple[SnapshotRow, ...] | None = None
    failures: tuple[str, ...] = ()
    notes: tuple[tuple[str, bool], ...] = ()
    validation: tuple[tuple[tuple[str, ...], ...], int] | None = None
    gate: GateFamily | None = None
    context: Context = field(default_factory=Context)
    cache: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


def build_result(outcomes: Sequence[Outcome], context: Context | None = None, *, report: StatsReport | None = None,
                 history: Sequence[Outcome] | None = None, **fields: Any) -> SessionResult:
    """A result over scored ``outcomes`` (raises ``score.UnscoredError`` for an unscored task run): the statistics
    report (``report`` when given, e.g. the session's with its stop-when-decided verdicts; else ``build_report``
    with ``context``'s settings), the leaderboard, and the Elo series over ``history`` (scored outcomes of the
    history store, this session's included) or else ``outcomes``; ``outcomes`` race as one session
    (``ratings.one_session``: merged shards, resumed runs). ``fields``: the other ``SessionResult`` fields."""
    context = context or Context()
    runs = tuple(require_scored(outcomes, "build_result"))
    if report is None and runs:
        report = build_report(runs, context.baseline, context.seed, context.resamples, target=context.target)
    raced = one_session(runs)  # a folder's runs race as one session, whichever session (shard) made them
    return SessionResult(runs, report, tuple(leaderboard(raced)), EloSeries.of(list(history) if history else raced),
                         context=context, **fields)
