"""Terminal tables (tabulate) for the session summary and the CLI: the ranked table of each task."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from pytest_agentrace.record.model import Outcome, Status
from pytest_agentrace.report.fit import dropped_note, fit, fit_lines, shorten

TASK_HEADERS = ["Rank", "Agent", "Score", "Status", "Tests", "Verify", "Exit", "Lint", "Time (s)", "Lines"]
COST_HEADERS = ["Tokens", "Cost (USD)"]
TASK_OPTIONAL = ("Lines", "Exit", "Lint", "Tokens", "Rank", "Verify", "Tests")  # dropped in this order to fit a width


def _check(o: Outcome, name: str) -> str:
    c = o.checks.get(name)
    if c is None:
        return "-"
    return "pass" if c.passed else ("timeout" if c.timed_out else "fail")


def fmt_tokens(n: int | None) -> str:
    return "-" if n is None else f"{n:,}"


COST_MARKS = {"priced": " (priced)", "estimated": " (est.)"}  # by cost_source; a reported cost has none


def fmt_cost(o: Outcome) -> str:
    u = o.usage
    if u.cost_usd is None:
        return "-"
    return f"{u.cost_usd:.4f}{COST_MARKS.get(u.cost_source, '')}"


def _display_path(path: str) -> str:
    """``path`` relative to the current directory when it lies below it."""
    import os

    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def title_line(head: str, source: str, width: int | None = None) -> str:
    """``task NAME  [path]``, the path shortened in its middle (``…``) when the line would be wider than ``width``."""
    room = None if width is None else max(8, width - len(head) - 4)
    return f"{head}  [{shorten(_display_path(source), room)}]"


def task_tables(outcomes: Iterable[Outcome], show_cost: bool = True, width: int | None = None) -> list[str]:
    """One ranked table per task (per rep when a task has several), as lines of text no wider than ``width``
    (``report.fit``: cells wrap, then ``TASK_OPTIONAL`` columns drop; None: no limit).

    Rows are ranked by score (competition ranking, ties share a rank); ``error`` runs come last with rank ``-``.
    """
    from pytest_agentrace.stats.score import rank

    by_case: dict[tuple[str, str], dict[int, list[Outcome]]] = defaultdict(lambda: defaultdict(list))
    for o in outcomes:
        if o.kind == "task":
            by_case[(o.case, o.source)][o.rep].append(o)
    lines: list[str] = []
    for (case, source), reps in sorted(by_case.items()):
        for rep, runs in sorted(reps.items()):
            ranks = rank({o.run_id: o.score for o in runs})
            runs = sorted(runs, key=lambda o: (ranks[o.run_id] is None, ranks[o.run_id] or 0, o.agent))
            rows = []
            for o in runs:
                row = [
                    ranks[o.run_id] or "-", o.agent, "-" if o.score is None else f"{o.score:.1f}",
                    o.status + (" (reused)" if o.reused else ""), _check(o, "tests"), _check(o, "verify"),
                    "-" if o.exit_code is None else o.exit_code, _check(o, "lint"), f"{o.seconds:.1f}", o.lines_changed,
                ]
                if show_cost:
                    row += [fmt_tokens(o.usage.total_tokens), fmt_cost(o)]
                rows.append(row)
            lines.append(title_line(f"task {case}" + (f" (rep {rep})" if len(reps) > 1 else ""), source, width))
            fitted = fit(rows, TASK_HEADERS + (COST_HEADERS if show_cost else []), width, TASK_OPTIONAL)
            lines += fitted.lines + dropped_note(fitted.dropped, width)
            notes = [f"  {o.agent}: {o.reason}" for o in runs if o.status != Status.PASSED and o.reason]
            if notes:
                lines.append("not passed:")
                lines.extend(notes)
            lines.append("")
    return fit_lines(lines, width)
