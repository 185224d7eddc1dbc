"""The task x agent matrix of a session with several tasks: coderace's benchmark table, one line per task.

Rows are tasks, columns agents (best total first). A cell is the agent's mean composite score on the task over its
valid runs and its mean agent time, e.g. ``87.5 (31s)``; a single run that did not pass adds its status
(``35.0 (3s) failed``), several reps add how many passed (``67.3 (30s) 2/3``), a cell whose runs were all
infrastructure errors reads ``error``, one whose runs a race stopped ``stopped`` (``-``: the agent did not run the
task, e.g. it is not installed). Below the
tasks, per agent: ``Total score`` (sum of the cells, coderace's TOTAL), ``Win rate`` (tasks won / tasks raced
against at least one other agent; a win needs a mean score more than 1 point above every other agent's, so ties
are not wins, as in ``stats.ratings``), ``Mean time (s)`` (agent seconds over its valid runs) and
``Total cost (USD)`` (every run with a known cost, marked ``(priced)`` / ``(est.)`` as in the task tables, and
``k of n runs`` when only some runs have one). One line then names the overall winner: the highest total score
(the highest mean score a task when the agents have scores on different numbers of tasks), or a tie when the best
two are within 1 point; a baseline expected to fail (``noop``) is never winner or runner-up (beside one agent, it is
named as the baseline). Pure functions over scored outcomes; tabulate imported lazily.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_agentrace.record.model import Outcome, Status
from pytest_agentrace.report import numbers
from pytest_agentrace.report.fit import fit, fit_lines
from pytest_agentrace.report.text import COST_MARKS
from pytest_agentrace.report.view import expects_failure
from pytest_agentrace.stats.ratings import DRAW_MARGIN

ROW_LABELS = ("Total score", "Win rate", "Mean time (s)", "Total cost (USD)")
MAX_NOTES = 20
Cells = dict[tuple[str, str], list[Outcome]]  # (task label, agent) -> runs


@dataclass(frozen=True)
class AgentTotals:
    """One agent's column footer: ``total`` score (sum over its scored tasks), ``tasks`` scored, ``wins`` and
    ``races`` (tasks with another agent scored), ``seconds`` (mean agent seconds over valid runs, None: none),
    ``cost`` (USD summed over runs with a known cost, None: none), ``costed`` / ``runs`` (runs with a cost / all);
    ``baseline``: every run of the agent's is a baseline's expected to fail (``noop``, ``expect: fail``)."""

    agent: str
    total: float
    tasks: int
    wins: int
    races: int
    seconds: float | None
    cost: float | None
    costed: int
    runs: int
    cost_mark: str = ""
    baseline: bool = False

    @property
    def mean(self) -> float:
        """The mean score over the tasks the agent has a score on (0 when none)."""
        return self.total / self.tasks if self.tasks else 0.0


def _cell(runs: list[Outcome]) -> str:
    if not runs:
        return "-"
    valid = [o for o in runs if o.is_sample]
    scores = [float(o.score) for o in valid if o.score is not None]
    if not valid or not scores:  # no sample: every run an infrastructure error, or stopped in a race
        return "stopped" if runs and all(o.status == Status.STOPPED for o in runs) else "error"
    text = f"{sum(scores) / len(scores):.1f} ({numbers.seconds(sum(o.seconds for o in valid) / len(valid))})"
    passed = sum(o.status == Status.PASSED for o in valid)
    if len(runs) == 1:
        return text if passed else f"{text} {valid[0].status}"
    return f"{text} {passed}/{len(valid)}"


def _mean_scores(by_cell: Cells, task: str) -> dict[str, float]:
    """``{agent: mean score}`` over the valid scored runs of ``task``."""
    out = {}
    for (t, agent), runs in by_cell.items():
        scores = [float(o.score) for o in runs if t == task and o.is_sample and o.score is not None]
        if scores:
            out[agent] = sum(scores) / len(scores)
    return out


def totals(outcomes: Iterable[Outcome]) -> tuple[list[str], list[str], Cells, list[AgentTotals]]:
    """``(tasks, agents, runs by (task, agent), AgentTotals per agent)`` of the task outcomes (scored), agents
    ordered by total score (best first, then name). A task is named by its case, with its file when two files
    share a name."""
    runs = [o for o in outcomes if o.kind == "task"]
    names: dict[str, set[str]] = defaultdict(set)
    for o in runs:
        names[o.case].add(o.source)
    label = {(o.source, o.case): (o.case if len(names[o.case]) == 1 else f"{o.case} [{o.source}]") for o in runs}
    by_cell: Cells = defaultdict(list)
    for o in runs:
        by_cell[(label[(o.source, o.case)], o.agent)].append(o)
    tasks = sorted({label[k] for k in label})
    means = {t: _mean_scores(by_cell, t) for t in tasks}
    stats = []
    for agent in sorted({o.agent for o in runs}):
        mine = [o for o in runs if o.agent == agent]
        valid = [o for o in mine if o.is_sample]
        raced = [t for t in tasks if agent in means[t] and len(means[t]) > 1]
        wins = sum(all(means[t][agent] - s > DRAW_MARGIN for b, s in means[t].items() if b != agent) for t in raced)
        costs = [o.usage for o in mine if o.usage.cost_usd is not None]
        sources = {u.cost_source for u in costs}
        stats.append(
            AgentTotals(
                agent,
                sum(means[t][agent] for t in tasks if agent in means[t]),
                sum(agent in means[t] for t in tasks),
                wins,
                len(raced),
                sum(o.seconds for o in valid) / len(valid) if valid else None,
                sum(u.cost_usd for u in costs) if costs else None,
                len(costs),
                len(mine),
                next((COST_MARKS[s] for s in ("estimated", "priced") if s in sources), ""),
                all(expects_failure(o) for o in mine),
            )
        )
    stats.sort(key=lambda s: (-s.total, s.agent))
    return tasks, [s.agent for s in stats], by_cell, stats


def _footer(s: AgentTotals, n_tasks: int, show_cost: bool) -> list[str]:
    rows = [
        f"{s.total:.1f}" + (f" ({s.tasks}/{n_tasks} tasks)" if s.tasks < n_tasks else ""),
        f"{100 * s.wins / s.races:.0f}% ({s.wins}/{s.races})" if s.races else "-",
        "-" if s.seconds is None else f"{s.seconds:.1f}",
    ]
    if show_cost:
        cost = "-" if s.cost is None else f"{s.cost:.4f}{s.cost_mark}"
        rows.append(cost + (f" ({s.costed} of {s.runs} runs)" if s.cost is not None and s.costed < s.runs else ""))
    return rows


def _over(s: AgentTotals, n_tasks: int, short: bool = False) -> str:
    """`` over 23 of 24 tasks`` when the agent has a score on only some of the tasks (its total is out of those)."""
    if s.tasks == n_tasks:
        return ""
    return f" of {100 * s.tasks}" if short else f" over {s.tasks} of {n_tasks} tasks"


def winner_line(stats: Sequence[AgentTotals], n_tasks: int) -> str | None:
    """``winner: A (total score 412.0 of 500, 4/5 tasks won; runner-up B 375.0)``, or the tie of the best two
    (within 1 point). A baseline expected to fail (``noop``, ``expect: fail``) is never winner or runner-up: beside
    one agent it is named as the baseline (``...; baseline noop 70.0``). Totals over different numbers of tasks are
    not compared: when the agents have scores on different numbers of tasks, they are ranked by their mean score a
    task (``winner: A (mean score 95.0 a task over 2 of 3 tasks, ...)``). None with fewer than two agents."""
    if len(stats) < 2:
        return None
    contenders = [s for s in stats if not s.baseline]
    if not contenders:
        return None
    even = len({s.tasks for s in stats}) == 1
    figure = (lambda s: s.total) if even else (lambda s: s.mean)
    contenders.sort(key=lambda s: (-figure(s), s.agent))
    best = contenders[0]
    second = contenders[1] if len(contenders) > 1 else min(
        (s for s in stats if s.baseline), key=lambda s: (-figure(s), s.agent))
    role = "runner-up" if not second.baseline else "baseline"
    if figure(best) - figure(second) <= DRAW_MARGIN:
        tied = [s.agent for s in (*contenders, second) if figure(best) - figure(s) <= DRAW_MARGIN]
        tied = list(dict.fromkeys(tied))
        what = f"total score ({best.total:.1f} of {100 * n_tasks}" if even else f"mean score a task ({best.mean:.1f}"
        return f"no overall winner: {', '.join(tied)} tie on {what}; within {DRAW_MARGIN:g} point)"
    won = f", {best.wins}/{best.races} tasks won" if best.races else ""
    if even:
        return (f"winner: {best.agent} (total score {best.total:.1f} of {100 * best.tasks}{_over(best, n_tasks)}{won}; "
                f"{role} {second.agent} {second.total:.1f}{_over(second, n_tasks, short=True)})")
    return (f"winner: {best.agent} (mean score {best.mean:.1f} a task over {best.tasks} of {n_tasks} tasks{won}; "
            f"{role} {second.agent} {second.mean:.1f} over {second.tasks})")


def matrix_lines(
    outcomes: Iterable[Outcome], show_cost: bool = True, width: int | None = None, notes: bool = False
) -> list[str]:
    """The matrix, its footer rows and the winner line, as lines no wider than ``width`` (module docstring).

    When the agent columns do not fit even with wrapped cells, they are split over several tables (each with the
    task column and the footer rows). ``notes``: list the runs that did not pass with their reasons (up to
    ``MAX_NOTES``), for when the per-task tables are not shown. Returns no lines without task outcomes."""
    from tabulate import SEPARATING_LINE

    outcomes = list(outcomes)
    tasks, agents, by_cell, stats = totals(outcomes)
    if not tasks:
        return []
    footer = {s.agent: _footer(s, len(tasks), show_cost) for s in stats}
    labels = list(ROW_LABELS if show_cost else ROW_LABELS[:-1])

    @functools.cache
    def table(group: tuple[str, ...]) -> Any:
        rows: list = [[t, *(_cell(by_cell.get((t, a), [])) for a in group)] for t in tasks]
        rows.append(SEPARATING_LINE)
        rows += [[label, *(footer[a][i] for a in group)] for i, label in enumerate(labels)]
        return fit(rows, ["Task", *group], width, numparse=False)

    def split(size: int) -> list[tuple[str, ...]]:
        return [tuple(agents[i : i + size]) for i in range(0, len(agents), size)]

    # the agent columns side by side when they fit with whole words, else in as few tables as fit that way
    sizes = range(len(agents), 0, -1)
    size = next((n for n in sizes if all(table(g).fits and not table(g).broken for g in split(n))), None) or next(
        (n for n in sizes if all(table(g).fits for g in split(n))), 1
    )
    groups = split(size)
    lines = [f"tasks x agents: mean score (agent time) over {len(tasks)} tasks"]
    for k, group in enumerate(groups, 1):
        if len(groups) > 1:
            lines.append(f"agents {k} of {len(groups)}: {', '.join(group)}")
        lines += table(group).lines
    line = winner_line(stats, len(tasks))
    if line:
        lines.append(line)
    if notes:
        bad = sorted(
            (o for o in outcomes if o.kind == "task" and o.status != Status.PASSED and o.reason),
            key=lambda o: (o.case, o.agent, o.rep),
        )
        if bad:
            lines.append("not passed:")
            lines += [f"  {o.case}[{o.agent}-r{o.rep}]: {o.status}: {o.reason}" for o in bad[:MAX_NOTES]]
            if len(bad) > MAX_NOTES:
                lines.append(f"  ... and {len(bad) - MAX_NOTES} more (-v shows the per-task tables)")
    lines.append("")
    return fit_lines(lines, width)
