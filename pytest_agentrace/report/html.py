"""The self-contained HTML report (``--agentrace-html``, ``agentrace html OUT``).

One file, no network fetch when opened: CSS and JS from ``report/assets`` are inlined, charts are inline SVG
(``report.charts``), and a Content-Security-Policy forbids loading anything else. Rendered from the session
result's typed fields (``report.view.shown``: redacted and finite, as the JSON export is) plus the run files in the
results folder (prompt, diff, check logs); every text from a run is HTML-escaped, and files longer than ``MAX_FILE_CHARS`` are cut with a note saying so.

Sections: headline and theme toggle; charts (score vs cost per agent, pass rate with Wilson 95% intervals,
relative cost with 95% intervals per arm, Elo over time; an empty one says why); sortable tables (leaderboard,
tasks, trials, arms vs baseline, Elo with its scope: these runs or the whole history store); and the runs table,
whose rows expand to the run's transcript turn by turn (from its ATIF ``trajectory.json``: the prompt, then the
agent's tool calls in order and its final answer), diff, check logs and links to the run folder's files (relative
to the page when its path is known; the files the agent left in its outbox listed apart, as the agent's), with a
filter box (every word typed must appear in a run's case, kind, arm, agent, rep or status) and one toggle per
outcome with its count (as pytest-html's outcome filters), which show or hide the runs of that status. A baseline's failed run (``markdown.expected_failure``: ``noop``'s) is ``xfailed``,
an expected failure, as pytest counts it. Wide tables scroll inside their own box, so the page fits a 390 px screen.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import quote

from pytest_agentrace import __version__
from pytest_agentrace.record.model import Outcome
from pytest_agentrace.record.redact import printable, redact, redact_data, secret_values
from pytest_agentrace.record.runfile import OUTBOX_DIR
from pytest_agentrace.record.safefile import read_text, regular_files
from pytest_agentrace.record.trajectory import build_trajectory, load_trajectory, read_prompt
from pytest_agentrace.report import charts
from pytest_agentrace.report.json_export import system_info
from pytest_agentrace.report.leaderboard import RACE_NOTE, standing_ranks
from pytest_agentrace.report.limits import status_text
from pytest_agentrace.report.markdown import (
    COMPARISON_HEADERS,
    LEADERBOARD_HEADERS,
    ComparisonFields,
    cells_of,
    elo_rows,
    elo_title,
    expected_failure,
    headline,
    interval,
    not_passed,
    num,
    pct,
    tokens,
    usd,
    used_tool,
    with_ci,
)
from pytest_agentrace.report.result import SessionResult
from pytest_agentrace.report.text import cut_notes, tokens_reason
from pytest_agentrace.report.view import generated, shown, target_text
from pytest_agentrace.stats.ratings import INITIAL

MAX_FILE_CHARS = 20_000
MAX_FILE_BYTES = 16 << 20  # read at most this much of a run's file (its length in a truncation note is exact below)
CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
LOG_FILES = (("stderr", "raw.err"),)
GOOD_VERDICTS = {"cheaper", "better", "improved"}
XFAILED = "xfailed"  # a baseline's expected failure (markdown.expected_failure): pytest's word for it
STATUS_ORDER = ("passed", "failed", XFAILED, "timeout", "error")  # the outcome toggles, in this order (others after)
STATUS_LABELS = {XFAILED: "expected failures"}  # a toggle's words where they are not the status itself
MAX_LINKED_FILES = 60  # a run folder's files linked in its details, at most
BAD_VERDICTS = {"dearer", "worse", "regressed"}


@dataclass(frozen=True)
class Cell:
    """A table cell: shown ``text`` (escaped), optional numeric ``sort`` key, CSS ``cls``, or trusted ``html``."""

    text: Any = ""
    sort: float | None = None
    cls: str = ""
    html: str | None = None

    def render(self) -> str:
        attrs = ""
        if self.sort is not None:
            attrs += f' data-sort="{self.sort!r}"'
        if self.cls:
            attrs += f' class="{escape(self.cls)}"'
        body = self.html if self.html is not None else escape("-" if self.text is None else str(self.text))
        return f"<td{attrs}>{body}</td>"


def _cell(value: Any) -> Cell:
    if isinstance(value, Cell):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return Cell(value, sort=float(value), cls="num")
    return Cell(value)


def _asset(name: str) -> str:
    return resources.files("pytest_agentrace.report").joinpath("assets", name).read_text(encoding="utf-8")


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], table_id: str, numeric: Sequence[int] = ()) -> str:
    """A sortable table; ``numeric`` column indexes sort as numbers (by each cell's ``data-sort``)."""
    if not rows:
        return '<p class="note">Nothing recorded.</p>'
    ths = "".join(f'<th scope="col" data-type="{"num" if i in numeric else "text"}"{" class=num" if i in numeric else ""}>{escape(h)}</th>'
                  for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(_cell(c).render() for c in row) + "</tr>" for row in rows)
    return (f'<div class="table-wrap"><table class="sortable" id="{escape(table_id)}"><thead><tr>{ths}</tr></thead>'
            f'<tbody>{body}</tbody></table></div>')


def page(title: str, subtitle: str, body: str, footer: str = "") -> str:
    """The HTML document: inline CSS/JS, theme toggle, CSP that forbids any network fetch. ``footer`` is trusted HTML.
    No control character (but tab and newline) or bidirectional override reaches the page (``printable``: shown as
    its escape), whatever the text came from."""
    title, subtitle, body, footer = (printable(t) for t in (title, subtitle, body, footer))
    return (
        "<!DOCTYPE html>\n<html lang=\"en\" data-theme=\"light\"><head><meta charset=\"utf-8\">"
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1"><link rel="icon" href="data:,">'
        f"<title>{escape(title)}</title><style>{_asset('report.css')}</style></head><body>"
        f'<header><div><h1>{escape(title)}</h1><div class="headline">{escape(subtitle)}</div></div>'
        '<button type="button" id="theme-toggle" aria-pressed="false">Dark theme</button></header>'
        f"<main>{body}</main>{footer}<script>{_asset('report.js')}</script></body></html>\n"
    )


def table_page(title: str, headers: Sequence[str], rows: Sequence[Sequence[Any]], note: str = "") -> str:
    """A page holding one sortable table (the CLI's ``--format html``); columns of numbers sort numerically."""
    numeric = [i for i in range(len(headers)) if rows and all(_is_number(r[i]) for r in rows)]
    cells = [[_number_cell(v) if i in numeric else v for i, v in enumerate(r)] for r in rows]
    body = f"<section>{table(headers, cells, 'table', numeric)}" + (f'<p class="note">{escape(note)}</p>' if note else "") + "</section>"
    return page(title, "", body)


def _is_number(v: Any) -> bool:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return True
    try:
        float(str(v).rstrip("%").replace(",", ""))
        return True
    except ValueError:
        return str(v) == "-"


def _number_cell(v: Any) -> Cell:
    try:
        return Cell(v, sort=float(str(v).rstrip("%").replace(",", "")), cls="num")
    except ValueError:
        return Cell(v, cls="num")


# -- charts -------------------------------------------------------------------------------------------------


def scatter_empty(result: SessionResult) -> str:
    """Why the score-vs-cost chart has no point: no task runs (trials have no score), no scored task run, or no
    run that reported tokens or cost."""
    cells = result.report.cells if result.report is not None else []
    task = [c for c in cells if c.kind == "task"]
    if not task:
        if cells:
            return ("No task runs: score vs cost compares agents on task files, and this report holds only trials "
                    "(answers are not scored 0-100; see the pass-rate and relative-cost charts).")
        return "No runs to plot."
    if all(c.score_mean is None for c in task):
        return "No task run was scored: every one was an infrastructure error (see the runs table for the reasons)."
    return ("No task run reported its tokens or cost: the agents' output gave no usage to read "
            "(expand a run for the notes on its figures).")


def _charts(result: SessionResult) -> str:
    cells = result.report.cells if result.report is not None else []
    task_cells = [c for c in cells if c.kind == "task"]
    use_cost = any(c.cost_mean is not None for c in task_cells)
    points = [{"x": c.cost_mean if use_cost else c.tokens_mean, "y": c.score_mean, "series": c.agent,
               "label": f"{c.agent} on {c.case}"} for c in task_cells]
    figures = [("Score vs cost per agent", charts.scatter(points, "Score vs cost per agent", "cost per run (USD)" if use_cost else "tokens per run",
                                                          "mean score", y_range=(0, 100), empty=scatter_empty(result)))]
    rows = []
    for c in cells:
        lo, hi = interval(c.pass_ci)
        rows.append({"label": f"{c.agent} · {c.case}" + ("" if c.kind == "task" else f" · {c.arm}"),
                     "value": c.pass_rate, "lo": lo, "hi": hi})
    figures.append(("Pass rate with Wilson 95% intervals", charts.intervals(
        rows, "Pass rate with Wilson 95% intervals", "pass rate", x_range=(0.0, 1.0),
        empty="No cell has a valid run: every run was an infrastructure error." if cells else "No runs to plot.")))
    rows = []
    for c in result.report.comparisons if result.report is not None else ():
        f = ComparisonFields.of(c)
        lo, hi = interval(f.ci)
        tone = "good" if f.verdict in GOOD_VERDICTS else "bad" if f.verdict in BAD_VERDICTS else ""
        rows.append({"label": f"{f.agent} · {f.arm} vs {f.baseline}", "value": f.ratio, "lo": lo, "hi": hi, "tone": tone})
    figures.append(("Relative cost vs baseline arm (95% intervals)", charts.intervals(
        rows, "Relative cost vs baseline arm", "tokens relative to baseline (1.00 = same)", reference=1.0,
        empty=("No arm comparison: relative cost compares the arms of a trial file with its baseline arm, and no trial "
               "here ran two or more arms with known tokens."))))
    figures.append((f"Elo over time: {elo_title(result)}", charts.lines(
        elo_series(result.elo.steps if result.elo is not None else []), "Elo over time", "race (in time order)", "rating",
        empty="No race yet: Elo rates agents from races, the runs of two or more agents on one task and rep.")))
    return '<div class="charts">' + "".join(f"<figure><figcaption>{escape(t)}</figcaption>{svg}</figure>" for t, svg in figures) + "</div>"


def elo_series(steps: Sequence[Mapping[str, Any]]) -> dict[str, list[tuple[float, float]]]:
    """``{agent: [(race, rating)]}`` from ``EloSeries.steps``; each agent starts at 1500 just before its
    first race, so a line shows every change."""
    series: dict[str, list[tuple[float, float]]] = {}
    for step in steps:
        for agent, rating in (step.get("ratings") or {}).items():
            if agent not in series:
                series[agent] = [(float(step["race"]) - 1, INITIAL)]
            series[agent].append((float(step["race"]), float(rating)))
    return series


# -- tables -------------------------------------------------------------------------------------------------


def _status(status: str, text: str | None = None) -> Cell:
    return Cell(text or status, cls=f"status-{status}")


def _ci_cell(x: Any, ci: Any, fmt, **kw: Any) -> Cell:
    return Cell(with_ci(x, ci, fmt, **kw), sort=None if x is None else float(x), cls="num")


def _tables(result: SessionResult) -> str:
    out = []
    if result.leaderboard:
        rows = [[i, s.agent, s.wins, s.races, Cell(pct(s.win_rate), s.win_rate, "num"),
                 Cell(num(s.mean_score), s.mean_score, "num"), Cell(f"{s.passed}/{s.runs}", s.passed, "num"),
                 Cell(usd(s.mean_cost), s.mean_cost, "num"), Cell(num(s.mean_seconds), s.mean_seconds, "num")]
                for i, s in zip(standing_ranks(result.leaderboard), result.leaderboard, strict=True)]
        out.append(_section("Leaderboard", table(LEADERBOARD_HEADERS, rows, "leaderboard", numeric=[0, 2, 3, 4, 5, 6, 7, 8]),
                            RACE_NOTE))
    task = cells_of(result, "task")
    if task:
        headers = ["Task", "Agent", "Runs", "Passed", "Pass rate (95% CI)", "Score mean", "Score sd", "Tokens/run", "Cost/run", "Time (s)"]
        rows = [[c.case, c.agent, c.runs, Cell(f"{c.passed}/{c.valid}", c.passed, "num"),
                 _ci_cell(c.pass_rate, c.pass_ci, pct), Cell(num(c.score_mean), c.score_mean, "num"),
                 Cell(num(c.score_sd), c.score_sd, "num"), Cell(tokens(c.tokens_mean), c.tokens_mean, "num"),
                 Cell(usd(c.cost_mean), c.cost_mean, "num"), Cell(num(c.seconds_mean), c.seconds_mean, "num")]
                for c in task]
        out.append(_section("Tasks", table(headers, rows, "tasks", numeric=range(2, 10))))
    trial = cells_of(result, "trial")
    if trial:
        headers = ["Question", "Arm", "Agent", "Runs", "Passed", "Pass rate (95% CI)", "Tokens/run (95% CI)", "Turns", "Used tool", "Errors", "Time (s)"]
        rows = [[c.case, c.arm, c.agent, c.runs, Cell(f"{c.passed}/{c.valid}", c.passed, "num"),
                 _ci_cell(c.pass_rate, c.pass_ci, pct), _ci_cell(c.tokens_mean, c.tokens_ci, tokens),
                 Cell(num(c.turns_mean), c.turns_mean, "num"), used_tool(c),
                 c.errors, Cell(num(c.seconds_mean), c.seconds_mean, "num")] for c in trial]
        out.append(_section("Trials", table(headers, rows, "trials", numeric=[3, 4, 5, 6, 7, 9, 10])))
    comps = result.report.comparisons if result.report is not None else []
    if comps:
        rows = []
        for c in comps:
            f = ComparisonFields.of(c)
            verdict = str(f.verdict or "-")
            pv = str(f.pass_verdict or "-")
            rows.append([f.agent, f.case or "-", f.arm, f.baseline, Cell(f"{f.runs} vs {f.baseline_runs}", f.runs, "num"),
                         _ci_cell(f.ratio, f.ci, num, digits=2),
                         Cell(verdict + (" (provisional)" if f.provisional else ""), cls=f"verdict-{verdict.replace(' ', '-')}"),
                         Cell(f"{pct(f.pass_arm)} vs {pct(f.pass_base)}", f.pass_arm, "num"), Cell(pv, cls=f"verdict-{pv.replace(' ', '-')}")])
        out.append(_section("Arms vs baseline", table(COMPARISON_HEADERS, rows, "comparisons", numeric=[4, 5, 7]),
                            "Relative cost: each run's tokens divided by the baseline arm's mean for the same case and agent. "
                            "cheaper/dearer only when the 95% interval excludes 1.00 and the exact permutation / sign-flip test agrees (p < 0.05). "
                            f"Target: {target_text(result)}."))
    ratings = elo_rows(result)
    if ratings:
        rows = [[a, Cell(num(r, 0), r, "num")] for a, r in ratings]
        out.append(_section(elo_title(result), table(["Agent", "Rating"], rows, "elo", numeric=[1]), anchor="elo"))
    return "".join(out)


def _section(title: str, body: str, note: str = "", anchor: str | None = None) -> str:
    anchor = anchor or title.lower().replace(" ", "-")
    return f'<section id="section-{escape(anchor)}"><h2>{escape(title)}</h2>{body}' + (f'<p class="note">{escape(note)}</p>' if note else "") + "</section>"


# -- runs with details --------------------------------------------------------------------------------------


def clip(text: str, where: str, keep: str = "head", limit: int = MAX_FILE_CHARS) -> tuple[str, str | None]:
    """``text`` cut to ``limit`` characters (its head or tail) and a note saying what was cut (None: whole)."""
    if len(text) <= limit:
        return text, None
    part = text[:limit] if keep == "head" else text[-limit:]
    which = "first" if keep == "head" else "last"
    return part, f"truncated: showing the {which} {limit:,} of {len(text):,} characters; the whole file is {where}"


def _file_block(title: str, path: Path | None, text: str | None = None, keep: str = "tail", diff: bool = False) -> str:
    if text is None:
        # a regular file of the run folder only, never through a link (safefile), and redacted as it is read
        text = read_text(path, MAX_FILE_BYTES) if path is not None else None
        if text is None:
            return ""
        text = redact(text, secret_values())
    if not text.strip():
        return ""
    shown, note = clip(printable(text), str(path) if path else "in the run record", keep)  # no escape sequence reaches the page
    if diff:
        lines = []
        for line in shown.splitlines():
            cls = "diff-add" if line.startswith("+") and not line.startswith("+++") else \
                "diff-del" if line.startswith("-") and not line.startswith("---") else "diff-hunk" if line.startswith("@@") else ""
            lines.append(f'<span class="{cls}">{escape(line)}</span>' if cls else escape(line))
        body = "\n".join(lines)
    else:
        body = escape(shown)
    return f"<h4>{escape(title)}</h4>" + (f'<p class="truncated">{escape(note)}</p>' if note else "") + f"<pre>{body}</pre>"


def figure_notes(o: Outcome) -> str:
    """How the run's figures were read, as a list: cut output files, parse warnings (all of them), why tokens
    are unknown (``report.text.run_notes``); empty when there is nothing to say."""
    items = [*cut_notes(o), *(f"parse warning: {w}" for w in o.usage.parse_warnings if w not in cut_notes(o))]
    if reason := tokens_reason(o):
        items.append(reason)
    if not items:
        return ""
    return '<h4>Notes on the figures</h4><ul class="notes">' + "".join(f"<li>{escape(i)}</li>" for i in items) + "</ul>"


def run_trajectory(run: Outcome, run_dir: Path | None) -> dict[str, Any]:
    """The run's ATIF trajectory (``record.trajectory.load_trajectory``: its ``trajectory.json``, a regular file read
    through no link, else, or when it is unreadable, one built from the record and its ``prompt.txt``); every string
    redacted."""
    if run_dir is not None:
        try:
            return load_trajectory(run_dir, run)
        except (OSError, ValueError):  # unreadable: the one its record gives
            return redact_data(build_trajectory(run, read_prompt(run_dir)))
    return redact_data(build_trajectory(run, None))


def _turn_head(step: Mapping[str, Any], number: int) -> str:
    who = {"user": "user (prompt)", "agent": "agent"}.get(str(step.get("source")), str(step.get("source") or "?"))
    bits = [f"Turn {step.get('step_id', number)}: {who}"]
    if step.get("model_name"):
        bits.append(str(step["model_name"]))
    if step.get("llm_call_count") is not None:
        n = step["llm_call_count"]
        bits.append(f"{n} model call{'s' if n != 1 else ''}")
    metrics = step.get("metrics") or {}
    if metrics.get("prompt_tokens") is not None or metrics.get("completion_tokens") is not None:
        bits.append(f"{tokens(metrics.get('prompt_tokens'))} in / {tokens(metrics.get('completion_tokens'))} out tokens")
    if (step.get("extra") or {}).get("seconds") is not None:
        bits.append(f"{num(step['extra']['seconds'])} s")
    return " · ".join(bits)


def transcript(run: Outcome, run_dir: Path | None) -> str:
    """The run turn by turn, from its trajectory (``run_trajectory``): an ordered list with one item per step: the
    user's prompt, then the agent's tool calls in order (name and one-line summary) and its final answer; each text
    cut at ``MAX_FILE_CHARS``. The trajectory's own notes (what a record does not hold) follow the list."""
    traj = run_trajectory(run, run_dir)
    steps = [st for st in traj.get("steps") or [] if isinstance(st, Mapping)]
    if not steps:
        return ""
    items = []
    for i, st in enumerate(steps, 1):
        parts = [f'<div class="turn-head">{escape(_turn_head(st, i))}</div>']
        message = str(st.get("message") or "")
        if st.get("source") == "user":
            parts.append(_file_block("Prompt", None, text=message, keep="head") or '<p class="note">prompt not recorded</p>')
            items.append('<li class="turn turn-user">' + "".join(parts) + "</li>")
            continue
        calls = [c for c in st.get("tool_calls") or [] if isinstance(c, Mapping)]
        if calls:
            lis = "".join(f'<li><code>{escape(str(c.get("function_name") or "?"))}</code>'
                          + (f" {escape(str((c.get('extra') or {}).get('summary')))}" if (c.get("extra") or {}).get("summary") else "")
                          + "</li>" for c in calls[:500])
            more = f'<p class="note">… and {len(calls) - 500} more tool calls</p>' if len(calls) > 500 else ""
            parts.append(f"<h4>Tool calls ({len(calls)})</h4><ol class=\"tool-calls\">{lis}</ol>{more}")
        parts.append(_file_block("Final answer", None, text=message, keep="tail") or '<p class="note">no final answer</p>')
        items.append(f'<li class="turn turn-{escape(str(st.get("source") or "other"))}">' + "".join(parts) + "</li>")
    notes = f'<p class="note">{escape(str(traj["notes"]))}</p>' if traj.get("notes") else ""
    return f'<h4>Transcript ({len(steps)} turns)</h4><ol class="transcript">{"".join(items)}</ol>{notes}'


def file_href(path: Path, html_dir: Path | None) -> str:
    """A link to ``path`` from a page in ``html_dir``: relative (``../runs/...``, each part percent-encoded) so the
    links still work when the page and the results folder are copied together; an absolute ``file:`` URL when the
    page's folder is unknown."""
    if html_dir is None:
        return path.resolve().as_uri()
    rel = os.path.relpath(path, html_dir)
    return "/".join(quote(os.fsencode(part)) for part in Path(rel).parts)  # a name's bytes, as the file has them


def run_files(run_dir: Path | None, html_dir: Path | None) -> str:
    """Links to the run folder's regular files (``safefile.regular_files``: no link is listed or followed), with
    their sizes, at most ``MAX_LINKED_FILES`` a list: the harness's files under "Run files", and the files the agent
    left in its outbox (the record's ``outbox/``, ``runfile.OUTBOX_DIR``) apart, under a heading that says they are
    the agent's, so that none of them passes for a record of the harness's."""
    if run_dir is None or not run_dir.is_dir() or run_dir.is_symlink():
        return ""
    files = list(regular_files(run_dir))
    agents = [f for f in files if f.relative_to(run_dir).parts[0] == OUTBOX_DIR]
    own = [f for f in files if f.relative_to(run_dir).parts[0] != OUTBOX_DIR]
    parts = []
    if own:
        parts.append(f"<h4>Run files ({len(own)})</h4>" + _linked(own, run_dir, html_dir))
    if agents:
        parts.append(f"<h4>The agent's outbox files ({len(agents)})</h4><p class=\"note\">written by the agent (its "
                     f"{{run_dir}} or $TRIAL_OUT), not by the harness; copied into {OUTBOX_DIR}/ after the run</p>"
                     + _linked(agents, run_dir, html_dir, "run-files agent-files"))
    return "".join(parts)


def _linked(files: list[Path], run_dir: Path, html_dir: Path | None, cls: str = "run-files") -> str:
    """A list of links to ``files`` (named relative to ``run_dir``) with their sizes, at most ``MAX_LINKED_FILES``."""
    items = []
    for f in files[:MAX_LINKED_FILES]:
        try:
            size = f.stat().st_size
        except OSError:
            continue
        name = os.fsencode(f.relative_to(run_dir).as_posix()).decode("utf-8", "backslashreplace")  # bad\xffname
        items.append(f'<li><a href="{escape(file_href(f, html_dir))}">{escape(name)}</a> <span class="note">{size:,} bytes</span></li>')
    more = f'<p class="note">… and {len(files) - MAX_LINKED_FILES} more in {escape(str(run_dir))}</p>' if len(files) > MAX_LINKED_FILES else ""
    return f'<ul class="{cls}">{"".join(items)}</ul>{more}'


def run_details(run: Outcome, run_dir: Path | None, html_dir: Path | None = None) -> str:
    """The expanded part of a run row: reason, notes on the figures, the transcript (prompt, tool calls, final
    answer, turn by turn), diff, check logs, stderr, and links to the run folder's files (relative to ``html_dir``,
    the page's folder)."""
    parts = []
    if expected_failure(run):
        parts.append("<p><strong>expected failure:</strong> a baseline expected to fail (pytest counts it as xfailed, "
                     "not as a failure)" + (f": {escape(str(run.reason))}" if run.reason else "") + "</p>")
    elif run.reason:
        parts.append(f"<p><strong>{escape(str(run.status))}:</strong> {escape(str(run.reason))}</p>")
    parts.append(figure_notes(run))
    parts.append(transcript(run, run_dir))
    parts.append(_file_block("Diff", run_dir / "diff.patch" if run_dir else None, keep="head", diff=True))
    for name, check in sorted((run.checks or {}).items()):
        title = f"{name} check: `{check.command}` exit {check.exit_code}" + (" (timed out)" if check.timed_out else "")
        log = str(check.log or "")
        plain = bool(log) and "/" not in log and log not in (".", "..")  # a name in the run folder, nothing else
        block = _file_block(title, run_dir / log if run_dir and plain else None)
        parts.append(block or f"<h4>{escape(title)}</h4><p class=\"note\">no log</p>")
    for title, name in LOG_FILES:
        parts.append(_file_block(title, run_dir / name if run_dir else None))
    parts.append(run_files(run_dir, html_dir))
    body = "".join(p for p in parts if p)
    return f'<div class="detail">{body or "<p class=note>No run files found.</p>"}</div>'


def run_status(run: Outcome) -> str:
    """The run's status in the report: ``xfailed`` for a baseline's expected failure, else its recorded status."""
    return XFAILED if expected_failure(run) else str(run.status)


def _runs(result: SessionResult, html_dir: Path | None = None) -> str:
    runs = result.outcomes
    if not runs:
        return ""
    base = result.context.out
    headers = ["", "Case", "Kind", "Arm", "Agent", "Rep", "Status", "Score", "Tokens", "Cost", "Tool calls", "Time (s)"]
    numeric = {5, 7, 8, 9, 10, 11}
    ths = '<th scope="col" class="nosort"><span class="visually-hidden">details</span></th>' + "".join(
        f'<th scope="col" data-type="{"num" if i in numeric else "text"}">{escape(h)}</th>' for i, h in enumerate(headers) if i)
    groups = []
    for i, r in enumerate(runs):
        u = r.usage
        run_dir = base / "runs" / r.case / r.arm / r.agent / str(r.rep) if base else None
        if run_dir is not None and any(part in ("", ".", "..") or "/" in part for part in
                                       (str(r.case), str(r.arm), str(r.agent), str(r.rep))):
            run_dir = None  # a record naming a folder outside the results folder: its files are not read
        did = f"run-{i}"
        status = run_status(r)
        shown = "failed (expected)" if status == XFAILED else status_text(r)
        cells = [
            Cell(html=f'<button type="button" class="expand" aria-expanded="false" aria-controls="{did}" title="show the transcript, diff, logs and run files">▸</button>'),
            Cell(r.case), Cell(r.kind), Cell(r.arm), Cell(r.agent), _cell(r.rep),
            _status(status, shown),
            Cell(num(r.score), r.score, "num"), Cell(tokens(u.total_tokens), u.total_tokens, "num"),
            Cell(usd(u.cost_usd), u.cost_usd, "num"), _cell(len(u.tool_calls)),
            Cell(num(r.seconds), r.seconds, "num"),
        ]
        search = " ".join(str(x) for x in (r.case, r.kind, r.arm, r.agent, f"r{r.rep}", shown, status))
        groups.append(f'<tbody class="run" data-run-id="{escape(r.run_id)}" data-status="{escape(status)}"'
                      f' data-search="{escape(search.lower())}"><tr>' + "".join(c.render() for c in cells) + "</tr>"
                      f'<tr class="details" id="{did}" hidden><td colspan="{len(headers)}">{run_details(r, run_dir, html_dir)}</td></tr></tbody>')
    bad = not_passed(runs)
    xfailed = sum(expected_failure(r) for r in runs)
    note = (f"{len(bad)} of {len(runs)} runs did not pass" + (f" ({xfailed} of them baselines' expected failures)" if xfailed else "")
            + ". ") if bad else ""
    table_html = f'<div class="table-wrap"><table class="sortable" id="runs"><thead><tr>{ths}</tr></thead>{"".join(groups)}</table></div>'
    return _section("Runs", _run_filter(runs) + table_html,
                    note + "Expand a row for its transcript turn by turn (prompt, tool calls, final answer), diff, check logs and "
                    f"links to the run folder's files (texts over {MAX_FILE_CHARS:,} characters are cut).")


def _run_filter(runs: Sequence[Outcome]) -> str:
    """The filter box and the outcome toggles above the runs table (wired by ``report.js``): one checkbox per
    status present (``run_status``: baselines' expected failures apart from failures), labelled with its count, all
    checked at first."""
    counts: dict[str, int] = {}
    for r in runs:
        counts[run_status(r)] = counts.get(run_status(r), 0) + 1
    order = [s for s in STATUS_ORDER if s in counts] + sorted(set(counts) - set(STATUS_ORDER))
    toggles = "".join(
        f'<label class="outcome"><input type="checkbox" class="outcome-toggle" value="{escape(status)}" checked> '
        f'<span class="status-{escape(status)}">{counts[status]} {escape(STATUS_LABELS.get(status, status))}</span></label>'
        for status in order)
    return ('<div class="run-filter" role="search">'
            '<label for="run-filter-text">Filter runs</label> '
            '<input type="search" id="run-filter-text" placeholder="case, agent, arm, status ..." autocomplete="off"> '
            f'<fieldset class="outcomes"><legend class="visually-hidden">Show outcomes</legend>{toggles}</fieldset> '
            f'<span id="run-filter-count" class="note" aria-live="polite">{len(runs)} of {len(runs)} runs shown</span>'
            '</div>')


def render(result: SessionResult) -> str:
    """The session's HTML report (``--agentrace-html``, ``agentrace html``): ``render_report``, its links relative to
    ``result.context.paths["html"]`` when the result names where it is written."""
    return render_report(result, html_path=result.context.paths.get("html"))


def render_report(result: SessionResult, html_path: Path | None = None) -> str:
    """The whole report page for ``result`` (read from ``view.shown(result)``: redacted, finite), its run files read
    from ``result.context.out``. ``html_path``: where the page will be written, so links to run files are relative
    to its folder (None: absolute ``file:`` links)."""
    result = shown(result)
    system = system_info()
    footer = (f"<footer>pytest-agentrace {escape(str(__version__))} · generated {escape(str(generated(result)))} · "
              f"Python {escape(str(system.get('python')))} on {escape(str(system.get('platform')))} · "
              f"pass-rate intervals: Wilson 95%; token intervals: bootstrap 95% (seed {escape(str(result.context.seed))})</footer>")
    html_dir = Path(os.path.abspath(html_path)).parent if html_path is not None else None
    body = f'<section id="section-charts"><h2>Charts</h2>{_charts(result)}</section>' + _tables(result) + _runs(result, html_dir)
    return page("agentrace report", headline(result), body, footer)
