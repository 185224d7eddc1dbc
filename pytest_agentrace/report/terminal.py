"""The ``agentrace`` section of pytest's terminal summary, from the session result: the per-task and per-trial tables
(``summary_lines``), the statistics (``report.stats_text``), the snapshot comparison, the validation table, the
notes and the gate failures; under ``-q`` without the runs' notes and the method footer, under ``-qq`` only the
counts line, the winner line of a task matrix, skips, warnings and failures.

Unlike the other formats it depends on how it is shown (``Shown``: pytest's terminal width and verbosity, and what
only the running session knows: its skips, agent overrides, snapshot name and the outputs it wrote), so the session
calls ``section(result, shown)`` and writes each line with its markup; ``render(result)`` is the same section at
the default verbosity and no width limit (``agentrace render OUT --format terminal``). Pure.

``summary_lines``: what to show for how many tasks, at what width. With up to ``DETAIL_TASKS`` tasks, or when asked
(``verbose``, pytest's ``-v``), one ranked table per task (``report.text``); with two tasks or more, the task x agent
matrix with per-agent totals and the overall winner (``report.matrix``), so a session of many tasks prints one table,
not one per task; then one table per trial file (``report.trials``); then, when runs were stopped at a resource
limit, their count by limit (``report.limits``). Every line fits ``width`` characters (``report.fit``; None: no
limit).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_agentrace.record.model import Outcome
from pytest_agentrace.report.fit import fit_lines
from pytest_agentrace.report.limits import hits_line
from pytest_agentrace.report.matrix import matrix_lines
from pytest_agentrace.report.result import SessionResult
from pytest_agentrace.report.stats_text import compare_lines, report_lines
from pytest_agentrace.report.text import task_tables
from pytest_agentrace.report.trials import trial_tables
from pytest_agentrace.report.view import expected_failure

DETAIL_TASKS = 3  # up to this many tasks, the per-task tables are shown without -v
# the line under a task matrix that says how to see the per-task tables it stands for: pytest's -v in a session;
# the agentrace commands have no -v, and `agentrace report --case` narrows the folder to the tasks it shows in full
SESSION_HINT = f"(one table per task with -v; shown without it up to {DETAIL_TASKS} tasks)"
CLI_HINT = f"(one table per task for up to {DETAIL_TASKS} tasks: choose them with `agentrace report OUT --case ID`)"


def summary_lines(
    outcomes: Iterable[Outcome], show_cost: bool = True, verbose: int | bool = False, width: int | None = None,
    hint: str = SESSION_HINT,
) -> list[str]:
    """Lines of the session summary for scored ``outcomes`` (``Aggregator.scored``). ``verbose`` > 0 shows the
    per-task tables whatever the number of tasks, < 0 (``-q``) leaves out the runs' notes; ``width`` is the
    terminal width in characters; ``hint``: the line under a matrix that stands for more than ``DETAIL_TASKS``
    per-task tables, saying how to see them where the lines are printed (``SESSION_HINT``, ``CLI_HINT``)."""
    outcomes = list(outcomes)
    tasks = {(o.source, o.case) for o in outcomes if o.kind == "task"}
    detail = bool(verbose and verbose > 0) or len(tasks) <= DETAIL_TASKS
    lines: list[str] = []
    if detail:
        lines += task_tables(outcomes, show_cost=show_cost, width=width, notes=not (verbose and verbose < 0))
    if len(tasks) >= 2:
        lines += matrix_lines(outcomes, show_cost=show_cost, width=width, notes=not detail)
        if not detail:
            lines += [hint, ""]
    lines += trial_tables(outcomes, show_cost=show_cost, width=width)
    hits = hits_line(outcomes)  # runs stopped at a resource limit, by limit (their reasons are in the tables)
    return fit_lines(lines + ([hits, ""] if hits else []), width)


WARN = {"yellow": True}
FAIL = {"red": True, "bold": True}


@dataclass(frozen=True)
class Shown:
    """How the section is shown: ``width`` (characters; None: no limit), ``verbosity`` (pytest's: -2 for ``-qq``,
    -1 ``-q``, 1 ``-v``), ``show_cost`` (False under ``--agentrace-no-cost``); what the session adds: ``skips``
    (its skipped runs summed up, ``text.skip_lines``), ``overrides`` (``--agentrace-agent`` lines), ``snapshot``
    (the ``--agentrace-snapshot`` name the comparison is with), ``written`` ((line, is_warning) per output
    written); ``hint``: how to see the per-task tables a task matrix stands for (``summary_lines``)."""

    width: int | None = None
    verbosity: int = 0
    show_cost: bool = True
    skips: tuple[str, ...] = ()
    overrides: tuple[str, ...] = ()
    snapshot: str | None = None
    written: tuple[tuple[str, bool], ...] = ()
    hint: str = SESSION_HINT


def count_line(outcomes: Sequence[Outcome]) -> str:
    """``agentrace: 12 runs: 9 passed, 2 failed, 1 error`` (statuses in order of first appearance; ``-qq``), a
    baseline's failed runs counted apart as ``expected failures`` (pytest's xfailed), as every format counts them."""
    counts: dict[str, int] = {}
    for o in outcomes:
        status = "expected failure" if expected_failure(o) else str(o.status)
        counts[status] = counts.get(status, 0) + 1
    parts = ", ".join(f"{n} {status}{'s' if status == 'expected failure' and n != 1 else ''}" for status, n in counts.items())
    return f"agentrace: {len(outcomes)} run{'s' if len(outcomes) != 1 else ''}" + (f": {parts}" if parts else "")


def validation_lines(rows: Sequence[Sequence[str]], invalid: int) -> list[str]:
    """The ``--agentrace-validate`` table (task, oracle, noop, verdict) and its closing count line."""
    from tabulate import tabulate  # third-party, loaded only when a validation table is printed

    table = tabulate([list(r) for r in rows], headers=["Task", "Oracle", "Noop", "Verdict"], tablefmt="github")
    valid = sum(row[3] == "valid" for row in rows)
    here = sum(row[3].startswith("cannot validate here") for row in rows)
    return [*table.splitlines(), f"{valid} of {len(rows)} task(s) valid, {invalid} invalid"
            + (f", {here} cannot be validated here (a tool is missing)" if here else "")]


def section(result: SessionResult, shown: Shown = Shown()) -> list[tuple[str, dict[str, Any]]]:
    """The section's lines, each with its terminal markup (``{}``, ``WARN`` or ``FAIL``; pytest's
    ``TerminalReporter.write_line`` keywords); empty when the session has nothing to say (no run, note or skip)."""
    if not result.outcomes and not result.notes and not shown.skips:
        return []
    tables = summary_lines(result.outcomes, show_cost=shown.show_cost, verbose=shown.verbosity, width=shown.width,
                           hint=shown.hint)
    # a note is one line however long; wrapped here to the width like the tables' lines (none: a log keeps it whole)
    notes = [(part, warning) for line, warning in (*result.notes, *shown.written) for part in fit_lines([line], shown.width)]
    failures = [(f"agentrace: FAILED {line}", FAIL) for line in result.failures]
    if shown.verbosity <= -2:
        lines = [count_line(result.outcomes), *[t for t in tables if t.startswith("winner:")], *shown.skips]
        return [(line, {}) for line in lines] + [(line, WARN) for line, warning in notes if warning] + failures
    lines = [*tables, *shown.skips, *shown.overrides]
    stats = report_lines(result.report, width=shown.width, footer=shown.verbosity >= 0) if result.report is not None else []
    if stats:
        lines += ["--- agentrace statistics ---", *stats]
    if result.snapshot_rows is not None:
        lines += ["", f"compared with snapshot {shown.snapshot}:",
                  *compare_lines(list(result.snapshot_rows), width=shown.width, family=result.gate)]
    if result.validation is not None:
        lines += ["--- agentrace validate ---", *validation_lines(*result.validation)]
    return [(line, {}) for line in lines] + [(line, WARN if warning else {}) for line, warning in notes] + failures


def render(result: SessionResult) -> str:
    """The section as plain text (``section`` at the default verbosity, no width limit, without the session's own
    lines), for ``agentrace render OUT --format terminal`` (which has no ``-v``: the matrix's hint is ``CLI_HINT``)."""
    return "".join(line + "\n" for line, _ in section(result, Shown(hint=CLI_HINT)))
