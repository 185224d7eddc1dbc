"""GitHub-flavoured Markdown of the session result (``--agentrace-md``, ``$GITHUB_STEP_SUMMARY``, ``agentrace comment``).

Reads the result's typed fields (outcomes, the statistics report's cells and comparisons, the leaderboard, the Elo
series) through ``report.view.shown`` (redacted and finite, as the JSON export's document is), so the figures are
the same in every format without going through the export's dict. ``comment_body`` starts with ``COMMENT_MARKER``
(an HTML comment GitHub does not show) so a CI job can find its earlier comment and update it instead of adding a
new one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_agentrace import __version__
from pytest_agentrace.record.model import Outcome
from pytest_agentrace.report.leaderboard import RACE_NOTE, standing_ranks
from pytest_agentrace.report.limits import hits_line
from pytest_agentrace.report.numbers import grouped, pct, span, tokens, usd
from pytest_agentrace.report.numbers import grouped as num
from pytest_agentrace.report.result import SessionResult
from pytest_agentrace.report.stats_text import ratio_text
from pytest_agentrace.report.view import expected_failure, generated, session_field, shown, target_text
from pytest_agentrace.stats.cells import CellSummary
from pytest_agentrace.stats.compare import ArmComparison

COMMENT_MARKER = "<!-- agentrace-report -->"
MAX_NOT_PASSED = 20
COMMENT_LIMIT = 65_536  # GitHub's largest issue / pull-request comment body, in characters


def _cell_text(value: Any) -> str:
    """A table cell's or list line's text as text: ``|``, backslashes and newlines escaped, and what GitHub would
    render as markup (HTML: ``<``, ``>``, ``&``; a link or image: ``[``, ``]``) escaped too (reasons hold the agents'
    own error text: an ``<img>`` or ``![](url)`` there would be fetched by every reader, a ``</details>`` would end
    the summary's block)."""
    text = "-" if value is None or value == "" else str(value)
    text = text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("[", "\\[").replace("]", "\\]")


def md_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GFM pipe table; cell text is escaped (``|``, backslashes, newlines). Empty ``rows`` give a note."""
    if not rows:
        return "_(nothing recorded)_"
    from tabulate import tabulate

    return tabulate([[_cell_text(c) for c in row] for row in rows], headers=[_cell_text(h) for h in headers],
                    tablefmt="github", disable_numparse=True)


# -- number formatting shared with the HTML report --------------------------------------------------------


def interval(value: Any) -> tuple[float | None, float | None]:
    """``(lo, hi)`` from an interval given as a ``stats.numerics.Interval`` (``lo``, ``hi``), a ``(lo, hi)`` pair,
    ``{"lo", "hi"}`` or None."""
    if value is None:
        return None, None
    if isinstance(value, Mapping):
        return value.get("lo"), value.get("hi")
    if isinstance(value, (list, tuple)):
        return (value[0], value[1]) if len(value) == 2 else (None, None)
    return getattr(value, "lo", None), getattr(value, "hi", None)


def with_ci(x: Any, ci: Any, fmt=grouped, **kw: Any) -> str:
    """``"x (lo–hi)"``, or ``x`` alone when the interval is undefined."""
    lo, hi = interval(ci)
    if x is None:
        return "-"
    return fmt(x, **kw) + span(lo, hi, fmt, dash="–", **kw)


def used_tool(cell: CellSummary) -> str:
    """``k/n`` runs whose tool calls matched the arm's ``uses`` regex; ``-`` when no run could tell."""
    if not cell.used_tool_known:
        return "-"
    return f"{cell.used_tool}/{cell.used_tool_known}"


@dataclass(frozen=True)
class ComparisonFields:
    """The figures of one ``compare.ArmComparison`` under the reports' short names: ``case`` (the cases compared,
    joined; ``N cases`` over 3), ``ratio`` (relative cost) and its ``ci``, ``verdict`` (the relative-cost verdict),
    ``provisional``, ``runs`` / ``baseline_runs`` (valid runs), ``pass_arm`` / ``pass_base`` (pass rates),
    ``pass_verdict``."""

    agent: str
    case: str
    arm: str
    baseline: str
    ratio: float | None
    ci: Any
    verdict: str | None
    provisional: bool
    runs: int
    baseline_runs: int
    pass_arm: float | None
    pass_base: float | None
    pass_verdict: str | None

    @classmethod
    def of(cls, c: ArmComparison) -> ComparisonFields:
        cases = list(c.cases or ())
        return cls(c.agent, ", ".join(cases) if len(cases) <= 3 else f"{len(cases)} cases", c.arm, c.baseline,
                   c.relative_cost, c.relative_cost_ci, c.cost_verdict, bool(c.provisional), c.runs_arm, c.runs_base,
                   c.pass_rate_arm, c.pass_rate_base, c.pass_verdict)


def verdict_text(f: ComparisonFields) -> str:
    v = f.verdict or "-"
    return f"{v} (provisional)" if f.provisional else v


# -- the report ---------------------------------------------------------------------------------------------


def cells_of(result: SessionResult, kind: str) -> list[CellSummary]:
    """The statistics report's cells of ``kind`` (``task`` or ``trial``), in the report's order."""
    return [c for c in result.report.cells if c.kind == kind] if result.report is not None else []


def leaderboard_rows(result: SessionResult) -> list[list[Any]]:
    return [[i, s.agent, s.wins, s.races, pct(s.win_rate), num(s.mean_score), f"{s.passed}/{s.runs}",
             usd(s.mean_cost), num(s.mean_seconds)]
            for i, s in zip(standing_ranks(result.leaderboard), result.leaderboard, strict=True)]


LEADERBOARD_HEADERS = ["Rank", "Agent", "Wins", "Races", "Win %", "Mean score", "Passed", "Mean cost", "Mean time (s)"]
TASK_HEADERS = ["Task", "Agent", "Runs", "Passed", "Pass rate (95% CI)", "Score (mean ± sd)", "Tokens/run", "Cost/run", "Time (s)"]
TRIAL_HEADERS = ["Question", "Arm", "Agent", "Runs", "Passed", "Pass rate (95% CI)", "Tokens/run (95% CI)", "Turns", "Used tool", "Errors", "Time (s)"]
COMPARISON_HEADERS = ["Agent", "Cases", "Arm", "Baseline", "Runs", "Relative cost (95% CI)", "Cost verdict", "Pass rate", "Pass verdict"]


def task_rows(result: SessionResult) -> list[list[Any]]:
    rows = []
    for c in cells_of(result, "task"):
        score = "-" if c.score_mean is None else num(c.score_mean) + ("" if c.score_sd is None else f" ± {num(c.score_sd)}")
        rows.append([c.case, c.agent, c.runs, f"{c.passed}/{c.valid}", with_ci(c.pass_rate, c.pass_ci, pct),
                     score, tokens(c.tokens_mean), usd(c.cost_mean), num(c.seconds_mean)])
    return rows


def trial_rows(result: SessionResult) -> list[list[Any]]:
    return [[c.case, c.arm, c.agent, c.runs, f"{c.passed}/{c.valid}", with_ci(c.pass_rate, c.pass_ci, pct),
             with_ci(c.tokens_mean, c.tokens_ci, tokens), num(c.turns_mean), used_tool(c), c.errors, num(c.seconds_mean)]
            for c in cells_of(result, "trial")]


def comparison_rows(result: SessionResult) -> list[list[Any]]:
    rows = []
    for c in result.report.comparisons if result.report is not None else ():
        f = ComparisonFields.of(c)
        rows.append([f.agent, f.case or "-", f.arm, f.baseline, f"{f.runs} vs {f.baseline_runs}",
                     with_ci(f.ratio, f.ci, ratio_text), verdict_text(f), f"{pct(f.pass_arm)} vs {pct(f.pass_base)}",
                     f.pass_verdict or "-"])
    return rows


def not_passed(runs: Sequence[Outcome]) -> list[str]:
    """One line per run that did not pass: ``run id: status: reason``."""
    return [f"{r.run_id}: {r.status}" + (f": {r.reason}" if r.reason else "") for r in runs if r.status != "passed"]


def elo_title(result: SessionResult) -> str:
    """The Elo table's title with its scope: ``history-wide`` when its races include sessions other than the runs of
    this report (the result's Elo comes from the history store when one is given), else the runs shown here; with
    the number of races and sessions it rates (``elo.steps``)."""
    steps = result.elo.steps if result.elo is not None else []
    sessions = {s.get("session_id") for s in steps}
    here = {r.session_id for r in result.outcomes}
    n_races, n_sessions = len(steps), len(sessions)
    counts = f"{n_races} race{'s' if n_races != 1 else ''} in {n_sessions} session{'s' if n_sessions != 1 else ''}"
    if sessions - here:
        return f"Elo, history-wide ({counts} of the history store, not only these runs)"
    return f"Elo over these runs ({counts})"


def elo_rows(result: SessionResult) -> list[tuple[str, float]]:
    """``(agent, rating)`` best first (ties by name)."""
    ratings = result.elo.ratings if result.elo is not None else {}
    return sorted(ratings.items(), key=lambda kv: (-kv[1], kv[0]))


def headline(result: SessionResult) -> str:
    """``N runs: P passed, F failed, X expected failures, T timed out, E errors`` (expected failures: baselines'
    failed runs, ``expected_failure``, left out of ``failed``; said only when there are some), limit hits, session,
    commit and version, joined by `` · ``; first, when the folder holds part of a sharded session's runs
    (``Context.partial``), ``partial results: <why>``."""
    runs = result.outcomes
    t = Counter(str(o.status) for o in runs)
    xfailed = sum(expected_failure(r) for r in runs)
    failed = f"{t['failed'] - xfailed} failed" + (f", {xfailed} expected failure{'s' if xfailed != 1 else ''} (baselines)" if xfailed else "")
    parts = [f"{len(runs)} runs: {t['passed']} passed, {failed}, {t['timeout']} timed out, {t['error']} errors"]
    hits = hits_line(runs)
    if hits:  # failed runs stopped at a resource limit
        parts.append(hits)
    if sid := session_field(result, "id"):
        parts.append(f"session {sid}")
    if sha := session_field(result, "git_sha"):
        parts.append(f"commit {sha[:10]}")
    parts.append(f"pytest-agentrace {__version__}")
    if result.context.partial:
        parts.insert(0, f"partial results: {result.context.partial}")
    return " · ".join(parts)


def footer(result: SessionResult) -> str:
    """The methods line under the report, with the bootstrap seed and the time the report was made."""
    return (f"<sub>Pass-rate intervals: Wilson 95%. Token intervals: bootstrap 95% (seed {result.context.seed}). "
            f"Generated {generated(result)}.</sub>")


def render(result: SessionResult) -> str:
    """The session's Markdown report (``--agentrace-md``, ``$GITHUB_STEP_SUMMARY``): ``render_result``."""
    return render_result(result)


def render_result(result: SessionResult, title: str = "agentrace report", level: int = 2) -> str:
    """The whole report as Markdown: headline, leaderboard, tasks, trials, arm comparisons, Elo, runs that did
    not pass, and a footer naming the methods. Read from ``view.shown(result)`` (redacted, finite)."""
    result = shown(result)
    h = "#" * level
    out = [f"{h} {title}", "", headline(result), ""]
    if result.leaderboard:
        out += [f"{h}# Leaderboard", "", md_table(LEADERBOARD_HEADERS, leaderboard_rows(result)), "",
                f"_{RACE_NOTE}_", ""]
    rows = task_rows(result)
    if rows:
        out += [f"{h}# Tasks", "", md_table(TASK_HEADERS, rows), ""]
    rows = trial_rows(result)
    if rows:
        out += [f"{h}# Trials", "", md_table(TRIAL_HEADERS, rows), ""]
    rows = comparison_rows(result)
    if rows:
        out += [f"{h}# Arms vs baseline", "", md_table(COMPARISON_HEADERS, rows), "",
                ("_Relative cost: tokens per run divided by the baseline arm's mean for the same case and agent; "
                 "`cheaper`/`dearer` only when the 95% interval excludes 1.00 and the exact permutation / sign-flip test agrees "
                 f"(p < 0.05). Target: {target_text(result)}._"), ""]
    ratings = elo_rows(result)
    if ratings:
        out += [f"{h}# {elo_title(result)}", "", md_table(["Agent", "Rating"], [[a, num(r, 0)] for a, r in ratings]), ""]
    bad = not_passed(result.outcomes)
    if bad:
        out += [f"<details><summary>{len(bad)} run(s) did not pass</summary>", ""]
        out += [f"- {_cell_text(line)}" for line in bad[:MAX_NOT_PASSED]]
        if len(bad) > MAX_NOT_PASSED:
            out.append(f"- … and {len(bad) - MAX_NOT_PASSED} more (see the JSON export or run.json files)")
        out += ["", "</details>", ""]
    out.append(footer(result))
    return "\n".join(out) + "\n"


def comment_body(result: SessionResult, limit: int = COMMENT_LIMIT, full_report: str | None = None) -> str:
    """A PR-comment body: ``COMMENT_MARKER`` on the first line, then the report (``render_result``), at most ``limit``
    characters (GitHub refuses a comment over 65,536). A larger report becomes ``compact``: the headline, then
    each table cut to the rows that fit its share, and a pointer to the full report (``full_report``: a URL or a
    path; else the commands that write it). Raises ``ValueError`` when ``limit`` cannot hold even the headline."""
    body = COMMENT_MARKER + "\n" + render_result(result, title="agentrace results")
    if len(body) <= limit:
        return body
    body = COMMENT_MARKER + "\n" + compact(result, limit - len(COMMENT_MARKER) - 1, full_report)
    if len(body) > limit:
        raise ValueError(f"a comment of at most {limit:,} characters cannot hold this report's headline")
    return body


def _rows_that_fit(headers: Sequence[str], rows: Sequence[Sequence[Any]], budget: int) -> tuple[str, int]:
    """The table of the first rows of ``rows`` whose Markdown is at most ``budget`` characters (binary search on the
    row count: a GFM table's columns are as wide as their widest cell) and how many rows it holds (0: "")."""
    lo, hi = 0, len(rows)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(md_table(headers, rows[:mid])) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return (md_table(headers, rows[:lo]) if lo else ""), lo


def _verdict_first(rows: list[list[Any]]) -> list[list[Any]]:
    """Comparison rows with a cost or pass verdict other than ``same`` first (``comparison_rows`` order kept)."""
    def decided(r: list[Any]) -> bool:
        return str(r[6]).split(" ")[0] not in ("same", "-") or str(r[8]) not in ("same", "-")
    return sorted(rows, key=lambda r: not decided(r))


def compact(result: SessionResult, limit: int, full_report: str | None = None, title: str = "agentrace results") -> str:
    """The report in at most ``limit`` characters: title, headline and a pointer to the full report, then the
    leaderboard, arms vs baseline (rows with a verdict first), tasks, trials and Elo, each table given an equal share
    of what is left (a share a table does not use passes to the next ones) and cut to the rows that fit, with a line
    saying how many rows are left out; the runs that did not pass (first ``MAX_NOT_PASSED``, lines cut at 300
    characters) and the method footer when they fit."""
    where = f"[the full report]({full_report})" if full_report and full_report.startswith(("http://", "https://")) else (
        f"the full report at `{full_report}`" if full_report else
        "the full report: `agentrace html OUT -o report.html` (or `agentrace report OUT`) on the results folder")
    result = shown(result)
    head = [f"## {title}", "", headline(result), "",
            f"> This session is too large for one comment: the tables below are cut to their first rows. See {where}.", ""]
    tail = [footer(result)]
    bad = not_passed(result.outcomes)
    details: list[str] = []
    if bad:
        details = [f"<details><summary>{len(bad)} run(s) did not pass</summary>", ""]
        details += [f"- {_cell_text(line if len(line) <= 300 else line[:299] + '…')}" for line in bad[:MAX_NOT_PASSED]]
        if len(bad) > MAX_NOT_PASSED:
            details.append(f"- … and {len(bad) - MAX_NOT_PASSED} more (see the full report)")
        details += ["", "</details>", ""]
    tables = [
        ("Leaderboard", LEADERBOARD_HEADERS, leaderboard_rows(result)),
        ("Arms vs baseline", COMPARISON_HEADERS, _verdict_first(comparison_rows(result))),
        ("Tasks", TASK_HEADERS, task_rows(result)),
        ("Trials", TRIAL_HEADERS, trial_rows(result)),
        (elo_title(result), ["Agent", "Rating"], [[a, num(r, 0)] for a, r in elo_rows(result)]),
    ]
    tables = [t for t in tables if t[2]]

    def size(lines: list[str]) -> int:
        return len("\n".join(lines)) + 1

    fixed = size(head) + size(tail)
    left = limit - fixed - (size(details) if size(details) + fixed < limit // 2 else 0)
    if left < 0:
        raise ValueError(f"a comment of at most {limit:,} characters cannot hold this report's headline")
    out = list(head)
    for i, (name, headers, rows) in enumerate(tables):
        share = left // (len(tables) - i)
        section = [f"### {name}", ""]
        more = "\n_… and {n} more rows: see the full report._"
        budget = share - size(section) - len(more.format(n=len(rows))) - 2
        text, kept = _rows_that_fit(headers, rows, budget)
        if not kept:
            continue
        section += [text + ("" if kept == len(rows) else more.format(n=f"{len(rows) - kept:,}")), ""]
        out += section
        left -= size(section)
    if size(out) + size(details) + size(tail) <= limit:
        out += details
    out += tail
    return "\n".join(out) + "\n"
