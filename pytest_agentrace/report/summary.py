"""The terminal summary of a session (the ``agentrace`` section): what to show for how many tasks, at what width.

With up to ``DETAIL_TASKS`` tasks, or when asked (``verbose``, pytest's ``-v``), one ranked table per task
(``report.text``); with two tasks or more, the task x agent matrix with per-agent totals and the overall winner
(``report.matrix``) — so a session of many tasks prints one table, not one per task; then one table per trial file
(``report.trials``); then, when runs were stopped at a resource limit, their count by limit (``report.limits``).
Every line fits ``width`` characters (``report.fit``; None: no limit). Pure function.
"""

from __future__ import annotations

from collections.abc import Iterable

from pytest_agentrace.record.model import Outcome
from pytest_agentrace.report.fit import fit_lines
from pytest_agentrace.report.limits import hits_line
from pytest_agentrace.report.matrix import matrix_lines
from pytest_agentrace.report.text import task_tables
from pytest_agentrace.report.trials import trial_tables

DETAIL_TASKS = 3  # up to this many tasks, the per-task tables are shown without -v


def summary_lines(
    outcomes: Iterable[Outcome], show_cost: bool = True, verbose: int | bool = False, width: int | None = None
) -> list[str]:
    """Lines of the session summary for scored ``outcomes`` (``Aggregator.scored``). ``verbose`` > 0 shows the
    per-task tables whatever the number of tasks, < 0 (``-q``) leaves out the runs' notes; ``width`` is the
    terminal width in characters."""
    outcomes = list(outcomes)
    tasks = {(o.source, o.case) for o in outcomes if o.kind == "task"}
    detail = bool(verbose and verbose > 0) or len(tasks) <= DETAIL_TASKS
    lines: list[str] = []
    if detail:
        lines += task_tables(outcomes, show_cost=show_cost, width=width, notes=not (verbose and verbose < 0))
    if len(tasks) >= 2:
        lines += matrix_lines(outcomes, show_cost=show_cost, width=width, notes=not detail)
        if not detail:
            lines += [f"(one table per task with -v; shown without it up to {DETAIL_TASKS} tasks)", ""]
    lines += trial_tables(outcomes, show_cost=show_cost, width=width)
    hits = hits_line(outcomes)  # runs stopped at a resource limit, by limit (their reasons are in the tables)
    return fit_lines(lines + ([hits, ""] if hits else []), width)
