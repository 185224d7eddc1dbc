"""coderace's composite score, with its edge cases defined. Pure functions, no pytest import.

Weights (points of 100), from coderace's scorer: without a verify command ``tests 40, exit 20, lint 15,
time 15, lines 10``; with one ``tests 25, verify 30, exit 20, lint 15, time 5, lines 5``. A task's
``scoring:`` mapping replaces them; weights are normalised to sum 1 and the score is ``100 * sum(w_i * c_i)``.

Components (each 0..1) of one run:
- ``tests`` / ``verify``: 1 when the command exited 0 (verify counts only when the task has one; a task with a
  verify command and no test command, such as a Harbor task, counts its verify check for both);
- ``exit``: 1 when the agent exited 0 and its own output did not report a failure (claude ``is_error``); ``lint``: 1 when lint exited 0, or when the task has no lint command;
- ``time`` / ``lines``: min-max normalised (lower is better) over the *passing* runs (status ``passed``) of the
  same task and rep. Edge cases, chosen so that a do-nothing agent can never outrank one that passed:
  * a run that did not pass gets 0 for time and lines (so noop's speed and empty diff earn nothing);
  * a single passing run, or passing runs whose values are all within the tie band, get 1;
  * tie band: values are grouped ascending, a value joining the current group when it is within 5% of itself
    above the previous value (single linkage, so the grouping is transitive); each value counts as its group's
    smallest, so two values less than 5% of the larger apart are always in one group and never change ranks
    (a chain of small steps can tie values further apart: 100, 104, 108 are one group);
  * time resolution: for ``time`` a step also joins the group when it is at most ``TIME_RESOLUTION`` (2 s): the
    harness's own timing noise (process start, sandbox set-up, scheduling on a shared machine) moves a run by tenths
    of a second, and min-max normalisation would turn such a step into the whole time weight (two agents running
    the identical command once scored 96.2 and 89.8). Time differences up to max(2 s, 5% of the run) are ties: with
    timing noise of sd 0.3 s plus 1% of the run, identical agents are named winner of a race in under 5% of races
    (``tests/test_sim_honest.py``; a 1 s resolution let 10.6% through);
  * zero lines everywhere -> 1 for all passing runs;
  * ``error`` runs (infrastructure) are not scored (score None) and not ranked.
A passing run scores at least ``tests`` (+ ``verify``) weight (40 / 55 by default) while a failing one
scores at most ``exit + lint`` (35): passing always ranks above failing under the default weights.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from pytest_agentrace.record.model import AgentStatus, Outcome, Status

DEFAULT_WEIGHTS = {"tests": 40.0, "exit": 20.0, "lint": 15.0, "time": 15.0, "lines": 10.0}
VERIFY_WEIGHTS = {"tests": 25.0, "verify": 30.0, "exit": 20.0, "lint": 15.0, "time": 5.0, "lines": 5.0}
TIE_BAND = 0.05
TIME_RESOLUTION = 2.0  # seconds: time differences up to this are ties (the harness's timing noise; module docstring)


def weights(has_verify: bool, scoring: Mapping[str, float] | None = None) -> dict[str, float]:
    """Normalised weights (sum 1). ``scoring`` (a task's raw weights) replaces the defaults when given."""
    raw = dict(scoring) if scoring else dict(VERIFY_WEIGHTS if has_verify else DEFAULT_WEIGHTS)
    if not has_verify:
        raw.pop("verify", None)
    total = sum(raw.values())
    return {k: v / total for k, v in raw.items()} if total > 0 else {}


def _tie_floor(values: Sequence[float], resolution: float = 0.0) -> dict[float, float]:
    """Map each value to the smallest value of its tie group (see module docstring); a step of at most
    ``resolution`` (same unit as the values) also ties."""
    floor: dict[float, float] = {}
    group_min = previous = None
    for v in sorted(set(values)):
        if previous is None or (v - previous) > max(TIE_BAND * v, resolution):
            group_min = v
        floor[v] = group_min
        previous = v
    return floor


def normalised(values: Mapping[str, float], resolution: float = 0.0) -> dict[str, float]:
    """Min-max normalise ``{run_id: value}`` to 1 (best, lowest) .. 0 (worst), with the tie band (and steps up to
    ``resolution``) applied."""
    if not values:
        return {}
    floor = _tie_floor(list(values.values()), resolution)
    snapped = {k: floor[v] for k, v in values.items()}
    lo, hi = min(snapped.values()), max(snapped.values())
    if hi == lo:
        return dict.fromkeys(snapped, 1.0)
    return {k: (hi - v) / (hi - lo) for k, v in snapped.items()}


def components(o: Outcome, has_verify: bool, has_lint: bool) -> dict[str, float]:
    """The run's own components (tests, verify, exit, lint); time and lines are filled by ``score_group``."""
    def ok(name: str) -> float:
        c = o.checks.get(name)
        return 1.0 if c is not None and c.passed else 0.0

    clean_exit = o.exit_code == 0 and not o.timed_out and o.usage.status != AgentStatus.FAILED
    # a task with a verify command and no test command (a Harbor task: its tests/test.sh is the verifier) has no
    # tests check: its verify check is its tests too, so a perfect run scores 100, as a task without lint does
    tests = ok("verify") if has_verify and "tests" not in o.checks and "verify" in o.checks else ok("tests")
    comp = {"tests": tests, "exit": 1.0 if clean_exit else 0.0}
    comp["lint"] = ok("lint") if has_lint else 1.0
    if has_verify:
        comp["verify"] = ok("verify")
    return comp


def score_group(outcomes: Iterable[Outcome], has_verify: bool, has_lint: bool, scoring: Mapping[str, float] | None = None) -> dict[str, float | None]:
    """Composite scores (0..100, 2 decimals) for the runs of one task and rep, keyed by run id.

    ``error`` and ``stopped`` runs (not samples) map to None.
    """
    runs = list(outcomes)
    w = weights(has_verify, scoring)
    passing = [o for o in runs if o.status == Status.PASSED]
    time_n = normalised({o.run_id: o.seconds for o in passing}, TIME_RESOLUTION)
    lines_n = normalised({o.run_id: float(o.lines_changed) for o in passing})
    out: dict[str, float | None] = {}
    for o in runs:
        if not o.is_sample:
            out[o.run_id] = None
            continue
        comp = components(o, has_verify, has_lint)
        comp["time"] = time_n.get(o.run_id, 0.0)
        comp["lines"] = lines_n.get(o.run_id, 0.0)
        out[o.run_id] = round(100.0 * sum(w.get(k, 0.0) * comp.get(k, 0.0) for k in w), 2)
    return out


def solo_score(o: Outcome) -> float | None:
    """The run's score as if it were the only agent (time and lines full credit when it passed)."""
    return score_group([o], o.has_verify, o.has_lint, o.scoring)[o.run_id]


def score_outcomes(outcomes: Iterable[Outcome], per_session: bool = True) -> list[Outcome]:
    """``outcomes`` with every task run's composite ``score`` set, computed per task file, task and rep
    (``score_group``), and per session unless ``per_session`` is False (one session's runs, resumed ones
    included, race each other); trial runs and ``error`` runs unchanged.

    Returns a new list sorted by (kind, source, case, arm, rep, agent). A run whose score is already set keeps it.
    """
    groups: dict[tuple, list[Outcome]] = defaultdict(list)
    result: list[Outcome] = []
    for o in outcomes:
        if o.kind == "task" and o.score is None and o.is_sample:
            groups[(o.session_id if per_session else "", o.source, o.case, o.rep)].append(o)
        else:
            result.append(o)
    for runs in groups.values():
        first = runs[0]
        scores = score_group(runs, first.has_verify, first.has_lint, first.scoring)
        result.extend(o.replace(score=scores[o.run_id]) for o in runs)
    return sorted(result, key=lambda o: (o.kind, o.source, o.case, o.arm, o.rep, o.agent))


class UnscoredError(ValueError):
    """Task runs given to a function that takes scored outcomes without their composite score."""


def require_scored(outcomes: Iterable[Outcome], where: str) -> list[Outcome]:
    """``outcomes`` as a list, after checking that every task run that is a sample has its composite score (set once
    per session by ``score_outcomes``; the statistics, ratings, leaderboard and reports never score again).

    Raises ``UnscoredError`` naming ``where`` and the first unscored run id.
    """
    runs = list(outcomes)
    for o in runs:
        if o.kind == "task" and o.score is None and o.is_sample:
            raise UnscoredError(f"{where}: task run {o.run_id} has no composite score; score the outcomes once with "
                                "stats.score.score_outcomes before")
    return runs


def rank(scores: Mapping[str, float | None]) -> dict[str, int | None]:
    """Competition ranks ("1224") by score, highest first; None scores get no rank."""
    ordered = sorted((s for s in scores.values() if s is not None), reverse=True)
    return {k: (ordered.index(s) + 1 if s is not None else None) for k, s in scores.items()}
