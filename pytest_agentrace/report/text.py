"""Terminal tables (tabulate) for the session summary and the CLI: the ranked table of each task."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable

from pytest_agentrace.agents.pricing import NO_PRICE_PREFIXES
from pytest_agentrace.record.model import Outcome, Status
from pytest_agentrace.report import numbers
from pytest_agentrace.report.fit import dropped_note, fit, fit_lines, shorten
from pytest_agentrace.report.limits import status_text
from pytest_agentrace.run.process import CUT_NOTE_PREFIX
from pytest_agentrace.stats.score import rank

TASK_HEADERS = ["Rank", "Agent", "Score", "Status", "Tests", "Verify", "Exit", "Lint", "Time (s)", "Lines"]
COST_HEADERS = ["Tokens", "Cost (USD)"]
TASK_OPTIONAL = ("Lines", "Exit", "Lint", "Tokens", "Rank", "Verify", "Tests")  # dropped in this order to fit a width
# a task with several reps: one row per agent over its reps
REPS_HEADERS = ["Rank", "Agent", "Runs", "Passed", "Score", "Tests", "Verify", "Lint", "Time (s)", "Lines"]
REPS_COST_HEADERS = ["Tokens/run", "Cost/run (USD)"]
REPS_OPTIONAL = ("Lines", "Lint", "Verify", "Rank", "Tests", "Cost/run (USD)")
MAX_FAILED = 20  # "not passed" lines per task table with reps


NOT_RUN = "not run"  # a check cell of a run stopped in a race: its checks never ran


def _check(o: Outcome, name: str) -> str:
    c = o.checks.get(name)
    if o.status == Status.STOPPED and (c is not None or name == "tests" or (name == "verify" and o.has_verify)
                                       or (name == "lint" and o.has_lint)):
        return NOT_RUN
    if c is None:
        return "-"
    return "pass" if c.passed else ("timeout" if c.timed_out else "fail")


def fmt_tokens(n: int | None) -> str:
    """A run's token count: ``12,345`` (``report.numbers.tokens``)."""
    return numbers.tokens(n)


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
    found = [w for w in o.usage.parse_warnings if w not in cut and not w.startswith(NO_PRICE_PREFIXES)]
    if not found:
        return None
    more = f" (+{len(found) - limit} more in run.json)" if len(found) > limit else ""
    return "parse warnings: " + "; ".join(found[:limit]) + more


def price_notes(o: Outcome) -> list[str]:
    """The run's notes on a cost left unknown (``no price for model 'x'``, with ``; add it to the task's pricing:``
    where the file has that key: ``agents.pricing.apply_pricing``)."""
    return [w for w in o.usage.parse_warnings if w.startswith(NO_PRICE_PREFIXES)]


def run_notes(o: Outcome) -> list[str]:
    """Everything the summary should say about how a run's figures were read: cut output, parse warnings,
    why tokens or cost are unknown, and the run's own ``extra.notes`` (a tool call that met ``command not found``)."""
    notes = [n for n in (o.extra.get("notes") or ()) if isinstance(n, str)]
    return [n for n in (*cut_notes(o), warning_note(o), tokens_reason(o), *price_notes(o), *notes) if n]


MAX_LABELS = 3  # run labels named on a note many runs share


def notes_lines(labelled: Iterable[tuple[str, Outcome]]) -> list[str]:
    """A ``notes:`` block, one line per distinct note: led by its run's label when one run has it, else once with
    the count of runs, their labels in natural order (``no price for model 'x' (24 runs: a-r1, a-r2, a-r3, ...)``); empty when no run has a
    note."""
    by_note: dict[str, list[str]] = {}
    for label, o in labelled:
        for note in run_notes(o):
            by_note.setdefault(note, []).append(label)
    lines = []
    for note, labels in by_note.items():
        if len(labels) == 1:
            lines.append(f"  {labels[0]}: {note}")
        else:
            labels = sorted(labels, key=lambda x: [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", x)])
            named = ", ".join(labels[:MAX_LABELS]) + (", ..." if len(labels) > MAX_LABELS else "")
            lines.append(f"  {note} ({len(labels)} runs: {named})")
    return ["notes:", *lines] if lines else []


COST_MARKS = {"priced": " (priced)", "estimated": " (est.)", "harness-priced": " (harness price)"}  # by cost_source; a reported cost has none


def fmt_cost(o: Outcome) -> str:
    u = o.usage
    if u.cost_usd is None:
        return "-"
    return numbers.cost(u.cost_usd) + COST_MARKS.get(u.cost_source, "")


def _display_path(path: str) -> str:
    """``path`` relative to the current directory when it lies below it."""
    import os

    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def title_line(head: str, source: str, width: int | None = None) -> str:
    """``task NAME  [path]``, the path shortened in its middle (``…``) when the line would be wider than ``width``."""
    room = None if width is None else max(8, width - len(head) - 4)
    return f"{head}  [{shorten(_display_path(source), room)}]"


def _ranked(runs: list[Outcome], scores: dict[str, float | None]) -> tuple[list[Outcome], dict[str, int | None]]:
    """``runs`` sorted by ``scores`` (by run id; competition ranking, ties share a rank; None last), and the ranks."""
    ranks = rank(scores)
    return sorted(runs, key=lambda o: (ranks[o.run_id] is None, ranks[o.run_id] or 0, o.agent)), ranks


def _single_rep_table(runs: list[Outcome], show_cost: bool) -> tuple[list[list], list[str], list[Outcome]]:
    runs, ranks = _ranked(runs, {o.run_id: o.score for o in runs})
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
    return rows, TASK_HEADERS + (COST_HEADERS if show_cost else []), runs


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def mean_cost(runs: list[Outcome]) -> str:
    """Mean cost per run in USD over the runs that have one: ``0.0123``, ``0.0123 (priced)``, ``0.0123 of 3``
    (only 3 of the runs have one), ``-`` for none."""
    known = [o.usage for o in runs if o.usage.cost_usd is not None]
    if not known:
        return "-"
    sources = {u.cost_source for u in known}
    mark = next((COST_MARKS[s] for s in ("estimated", "priced") if s in sources), "")
    part = f" of {len(known)}" if len(known) < len(runs) else ""
    return f"{sum(u.cost_usd for u in known) / len(known):.4f}{mark}{part}"


def mean_tokens(runs: list[Outcome]) -> str:
    """Mean total tokens per run over the runs with a count; ``unknown`` when agents ran but none gave one."""
    known = [o.usage.total_tokens for o in runs if o.usage.total_tokens is not None]
    if known:
        return fmt_tokens(round(sum(known) / len(known)))
    return TOKENS_UNKNOWN if any(agent_ran(o) for o in runs) else "-"


def _reps_table(runs: list[Outcome], show_cost: bool) -> tuple[list[list], list[str], list[Outcome]]:
    """One row per agent over its reps: runs (errors), passed / samples, mean score, checks passed / runs with
    the check, mean agent seconds and lines changed, mean tokens and cost per run; ranked by mean score."""
    by_agent: dict[str, list[Outcome]] = defaultdict(list)
    for o in runs:
        by_agent[o.agent].append(o)
    means = {agent: _mean([float(o.score) for o in rs if o.is_sample and o.score is not None])
             for agent, rs in by_agent.items()}
    ranks = rank(means)
    agents = sorted(by_agent, key=lambda a: (ranks[a] is None, ranks[a] or 0, a))
    rows = []
    for agent in agents:
        rs = sorted(by_agent[agent], key=lambda o: o.rep)
        samples = [o for o in rs if o.is_sample]
        errors, reused = sum(o.status == Status.ERROR for o in rs), sum(o.reused for o in rs)
        stopped = sum(o.status == Status.STOPPED for o in rs)  # race mode: neither samples nor errors
        extra = [f"{errors} error" + ("s" if errors != 1 else "")] if errors else []
        extra += [f"{stopped} stopped"] if stopped else []
        extra += [f"{reused} reused"] if reused else []
        score, seconds = means[agent], _mean([o.seconds for o in samples])
        lines = _mean([float(o.lines_changed) for o in samples if o.lines_changed is not None])

        def checks(name: str, samples: list[Outcome] = samples) -> str:
            return numbers.count_ratio([o.checks[name].passed for o in samples if name in o.checks])

        row = [
            ranks[agent] or "-", agent, f"{len(rs)}" + (f" ({', '.join(extra)})" if extra else ""),
            numbers.count_ratio([o.status == Status.PASSED for o in samples]), "-" if score is None else f"{score:.1f}",
            checks("tests"), checks("verify"), checks("lint"), "-" if seconds is None else f"{seconds:.1f}",
            "-" if lines is None else f"{lines:.1f}",
        ]
        if show_cost:
            row += [mean_tokens(samples or rs), mean_cost(samples)]
        rows.append(row)
    ordered = [o for agent in agents for o in sorted(by_agent[agent], key=lambda o: o.rep)]
    return rows, REPS_HEADERS + (REPS_COST_HEADERS if show_cost else []), ordered


def task_tables(outcomes: Iterable[Outcome], show_cost: bool = True, width: int | None = None,
                notes: bool = True) -> list[str]:
    """One ranked table per task, as lines of text no wider than ``width`` (``report.fit``: cells wrap, then
    optional columns drop; None: no limit). ``notes``: the runs' notes (unknown tokens, cut output, warnings) after
    each table (``-q`` leaves them out).

    A task with one rep per agent gets a row per run (``TASK_HEADERS``), ranked by score (competition ranking,
    ties share a rank; ``error`` runs last with rank ``-``). A task with several reps gets a row per agent over its
    reps (``REPS_HEADERS``: runs, passed / samples, mean score, checks passed / runs with that check, mean seconds,
    lines, tokens and USD per run), ranked by mean score: one table per task, however many reps.
    """

    by_case: dict[tuple[str, str], list[Outcome]] = defaultdict(list)
    for o in outcomes:
        if o.kind == "task":
            by_case[(o.case, o.source)].append(o)
    lines: list[str] = []
    for (case, source), runs in sorted(by_case.items()):
        reps = {o.rep for o in runs}
        several = len(reps) > 1 or len(runs) > len({o.agent for o in runs})
        rows, headers, ordered = (_reps_table if several else _single_rep_table)(runs, show_cost)
        head = f"task {case}" + (f" ({len(reps)} reps)" if several else "")
        lines.append(title_line(head, source, width))
        fitted = fit(rows, headers, width, REPS_OPTIONAL if several else TASK_OPTIONAL, numparse=not several)
        lines += fitted.lines + dropped_note(fitted.dropped, width)

        def label(o: Outcome, several: bool = several) -> str:
            return f"{o.agent}-r{o.rep}" if several else o.agent

        failed = [f"  {label(o)}: {o.status}: {o.reason}" if several else f"  {o.agent}: {o.reason}"
                  for o in ordered if o.status != Status.PASSED and o.reason]
        if failed:
            lines.append("not passed:")
            lines.extend(failed[:MAX_FAILED] if several else failed)
            if several and len(failed) > MAX_FAILED:
                lines.append(f"  ... and {len(failed) - MAX_FAILED} more (see the run.json files)")
        if notes:
            lines.extend(notes_lines((label(o), o) for o in ordered))
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
