"""Terminal tables (tabulate) for the session summary and the CLI: the ranked table of each task."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable

from pytest_agentrace.record.model import Outcome, Status
from pytest_agentrace.report.fit import dropped_note, fit, fit_lines, shorten
from pytest_agentrace.report.limits import status_text
from pytest_agentrace.run.process import CUT_NOTE_PREFIX
from pytest_agentrace.stats.score import rank

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


TOKENS_UNKNOWN = "unknown"
MAX_WARNINGS = 3  # parse warnings shown per run in the terminal (all are in run.json)


def tokens_cell(o: Outcome) -> str:
    """The Tokens column: the count, ``unknown`` when the agent ran but its output gave none, ``-`` when no agent
    ran (an ``error`` before the agent started)."""
    if o.usage.total_tokens is not None:
        return fmt_tokens(o.usage.total_tokens)
    return TOKENS_UNKNOWN if agent_ran(o) else "-"


def agent_ran(o: Outcome) -> bool:
    """Whether the run got as far as starting its agent (an exit code, a timeout, or agent seconds)."""
    return o.exit_code is not None or o.timed_out or o.seconds > 0 or o.usage.tokens_note is not None


def tokens_reason(o: Outcome) -> str | None:
    """Why a run that started its agent has no token count (None when it has one, or never started it)."""
    if o.usage.total_tokens is not None or not agent_ran(o):
        return None
    return f"tokens unknown: {o.usage.tokens_note or 'the agent output reported no token counts'}"


def cut_notes(o: Outcome) -> list[str]:
    """The run's notes on cut output files (``raw.out cut: N of T bytes dropped ...``)."""
    return [w for w in o.usage.parse_warnings if w.startswith(tuple(CUT_NOTE_PREFIX.values()))]


def warning_note(o: Outcome, limit: int = MAX_WARNINGS) -> str | None:
    """``parse warnings: a; b; c (+N more in run.json)`` for the run's parse warnings (cut notes aside), or None."""
    cut = set(cut_notes(o))
    found = [w for w in o.usage.parse_warnings if w not in cut]
    if not found:
        return None
    more = f" (+{len(found) - limit} more in run.json)" if len(found) > limit else ""
    return "parse warnings: " + "; ".join(found[:limit]) + more


def run_notes(o: Outcome) -> list[str]:
    """Everything the summary should say about how a run's figures were read: cut output, parse warnings,
    why tokens are unknown, and the run's own ``extra.notes`` (a tool call that met ``command not found``)."""
    notes = [n for n in (o.extra.get("notes") or ()) if isinstance(n, str)]
    return [n for n in (*cut_notes(o), warning_note(o), tokens_reason(o), *notes) if n]


def notes_lines(labelled: Iterable[tuple[str, Outcome]]) -> list[str]:
    """A ``notes:`` block, one line per note, each led by its run's label; empty when no run has a note."""
    lines = [f"  {label}: {note}" for label, o in labelled for note in run_notes(o)]
    return ["notes:", *lines] if lines else []


COST_MARKS = {"priced": " (priced)", "estimated": " (est.)", "harness-priced": " (harness price)"}  # by cost_source; a reported cost has none


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


def task_tables(outcomes: Iterable[Outcome], show_cost: bool = True, width: int | None = None,
                notes: bool = True) -> list[str]:
    """One ranked table per task (per rep when a task has several), as lines of text no wider than ``width``
    (``report.fit``: cells wrap, then ``TASK_OPTIONAL`` columns drop; None: no limit). ``notes``: the runs' notes
    (unknown tokens, cut output, warnings) after each table (``-q`` leaves them out).

    Rows are ranked by score (competition ranking, ties share a rank); ``error`` runs come last with rank ``-``.
    """

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
                    status_text(o) + (" (reused)" if o.reused else ""), _check(o, "tests"), _check(o, "verify"),
                    "-" if o.exit_code is None else o.exit_code, _check(o, "lint"), f"{o.seconds:.1f}", o.lines_changed,
                ]
                if show_cost:
                    row += [tokens_cell(o), fmt_cost(o)]
                rows.append(row)
            lines.append(title_line(f"task {case}" + (f" (rep {rep})" if len(reps) > 1 else ""), source, width))
            fitted = fit(rows, TASK_HEADERS + (COST_HEADERS if show_cost else []), width, TASK_OPTIONAL)
            lines += fitted.lines + dropped_note(fitted.dropped, width)
            failed = [f"  {o.agent}: {o.reason}" for o in runs if o.status != Status.PASSED and o.reason]
            if failed:
                lines.append("not passed:")
                lines.extend(failed)
            if notes:
                lines.extend(notes_lines((o.agent, o) for o in runs))
            lines.append("")
    return fit_lines(lines, width)


SKIP_NOT_INSTALLED = re.compile(r"^agent '(?P<agent>[^']+)' (not found on PATH|executable .* not found or not executable)")


def skip_lines(reasons: Iterable[str]) -> list[str]:
    """One line summing up why runs were skipped: ``skipped 12 runs: not installed: claude, codex (12 runs);
    stop-when-decided (2 runs)``. ``reasons`` are the skip reasons, one per skipped run (``run.agent
    .missing_executable``: agents not installed; ``stats.sequential.skip_reason``: decided arms; other reasons
    verbatim). No line when nothing was skipped."""
    reasons = list(reasons)
    if not reasons:
        return []
    missing: dict[str, int] = {}
    other: dict[str, int] = {}
    for reason in reasons:
        if m := SKIP_NOT_INSTALLED.match(reason):
            missing[m["agent"]] = missing.get(m["agent"], 0) + 1
        else:
            key = "stop-when-decided" if reason.startswith("stop-when-decided") else reason
            other[key] = other.get(key, 0) + 1

    def runs(n: int) -> str:
        return f"{n} run{'s' if n != 1 else ''}"

    parts = [f"not installed: {', '.join(sorted(missing))} ({runs(sum(missing.values()))})"] if missing else []
    parts += [f"{reason} ({runs(n)})" for reason, n in sorted(other.items())]
    return [f"skipped {runs(len(reasons))}: " + "; ".join(parts)]
