"""``agentrace`` subcommands over the history store and results folders (issue 8).

Store commands (read ``--db``, default ``$AGENTRACE_DB`` or ``./.agentrace/history.db``):
``leaderboard [--task] [--since 7d|DATE] [--min-runs N]``, ``history [--task] [--agent] [--limit N]``,
``trend [--agent] [--task] [--days 30]``; each takes ``--format terminal|markdown|json|html`` and ``-o FILE``.
Results-folder commands (read ``OUT/runs/**/run.json``): ``html OUT -o report.html``, ``export OUT [-o FILE]``
(the JSON export, ``schemas/report.schema.json``), ``comment OUT [--full-report URL]`` (a PR-comment body with a
hidden marker, at most 65,536 characters: a larger report is cut to its headline tables and points to the full one)
and ``render OUT --format NAME [-o FILE]`` (any format of ``report.formats.FORMATS``). Each builds the folder's
``SessionResult`` once (``result_for``) and renders it through the format table.
Definitions of races, wins and trend points are in ``report.leaderboard``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_agentrace.argtypes import positive_float
from pytest_agentrace.cli.verify import warn_unverifiable
from pytest_agentrace.options import add_cli_options
from pytest_agentrace.record.index import iter_outcomes
from pytest_agentrace.record.manifest import MANIFEST_DIR, results_digest
from pytest_agentrace.record.runfile import RUN_FILE, missing_shards, scan_runs, session_rootdir, write_atomic
from pytest_agentrace.record.store import Store, StoreError
from pytest_agentrace.record.storepath import default_path
from pytest_agentrace.record.trajectory import iter_trajectories, load_trajectory
from pytest_agentrace.report import formats, numbers
from pytest_agentrace.report.html import table_page
from pytest_agentrace.report.leaderboard import (
    RACE_NOTE,
    history,
    leaderboard,
    parse_since,
    sparkline,
    trend,
)
from pytest_agentrace.report.markdown import md_table
from pytest_agentrace.report.result import Context, SessionResult, build_result
from pytest_agentrace.stats.score import score_outcomes


def _days(value: str) -> float:
    """argparse ``type`` for ``--days``: a number of days > 0 and at most 100 years."""
    days = positive_float(value)
    if days > 36500:
        raise argparse.ArgumentTypeError(f"at most 36500 days, not {value}")
    return days

# the styles of the store commands' tables ("text" is read as "terminal" (_format), the other commands' word); the
# report formats of a session or results folder are report.formats.FORMATS (`agentrace render`)
TABLE_STYLES = ("terminal", "markdown", "json", "html")


def _format(value: str) -> str:
    return "terminal" if value == "text" else value


def _db_path(value: str | None) -> Path:
    return Path(value).expanduser().resolve() if value else default_path()


def _store_args(p: argparse.ArgumentParser) -> None:
    add_cli_options(p, "db")
    p.add_argument("--format", type=_format, choices=TABLE_STYLES, default="terminal", metavar="text|markdown|json|html",
                   help="output format (default: text; terminal is an alias)")
    p.add_argument("-o", "--output", default=None, metavar="FILE", help="write to FILE instead of standard output")


def register(sub: Any) -> None:
    """Add ``leaderboard``, ``history``, ``trend``, ``html``, ``export`` and ``comment`` to the ``agentrace`` parser."""
    p = sub.add_parser("leaderboard", help="wins, races and mean score/cost/time per agent from the history store")
    _store_args(p)
    p.add_argument("--task", default=None, help="only this task")
    p.add_argument("--since", default=None, metavar="7d|DATE", help="only sessions started since (7d, 12h, 2w or an ISO date)")
    p.add_argument("--min-runs", type=int, default=1, metavar="N", help="hide agents with fewer scored runs (default 1)")
    p.set_defaults(func=cmd_leaderboard)

    p = sub.add_parser("history", help="past races (newest first) from the history store")
    _store_args(p)
    p.add_argument("--task", default=None, help="only this task")
    p.add_argument("--agent", default=None, help="only races this agent ran in (adds its score and rank)")
    p.add_argument("--since", default=None, metavar="7d|DATE", help="only sessions started since")
    p.add_argument("--limit", type=int, default=20, metavar="N", help="at most N races (default 20; 0 = all)")
    p.set_defaults(func=cmd_history)

    p = sub.add_parser("trend", help="per agent x task the mean score of each session over time, with a sparkline")
    _store_args(p)
    p.add_argument("--agent", default=None, help="only this agent")
    p.add_argument("--task", default=None, help="only this task")
    p.add_argument("--days", type=_days, default=30, metavar="N", help="sessions of the last N days (default 30)")
    p.set_defaults(func=cmd_trend)

    for name, helptext, func in (
        ("html", "self-contained HTML report of a results folder", cmd_html),
        ("export", "JSON export of a results folder (schemas/report.schema.json)", cmd_export),
        ("comment", "Markdown PR-comment body (with a hidden marker line) for a results folder", cmd_comment),
    ):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("out", metavar="OUT", help="results folder (--agentrace-out of the session)")
        p.add_argument("-o", "--output", default=None, metavar="FILE", help="write to FILE" + (" (default: report.html)" if name == "html" else " instead of standard output"))
        add_cli_options(p, "baseline", "seed", "resamples", "db", "generalize")
        if name == "comment":
            p.add_argument("--full-report", default=None, metavar="URL|PATH",
                           help="where the full report is (e.g. the CI run's artifact URL): named in the comment when the "
                                "report is cut to fit GitHub's 65,536-character limit")
        if name == "export":
            p.add_argument("--format", choices=("json", "atif"), default="json",
                           help="json: the report document (default); atif: ATIF-v1.8 trajectories, one JSON object for "
                                "a run's folder (OUT/runs/CASE/ARM/AGENT/REP), one JSON line per run for a results "
                                "folder")
        p.set_defaults(func=func)

    p = sub.add_parser("render", help="any report format of a results folder (report.formats: "
                                      + ", ".join(f.name for f in formats.FORMATS) + ")")
    p.add_argument("out", metavar="OUT", help="results folder (--agentrace-out of the session)")
    p.add_argument("--format", required=True, choices=[f.name for f in formats.FORMATS], help="the format to render")
    p.add_argument("-o", "--output", default=None, metavar="FILE", help="write to FILE instead of standard output")
    p.add_argument("--full-report", default=None, metavar="URL|PATH", help="comment: where the full report is")
    add_cli_options(p, "baseline", "seed", "resamples", "db", "generalize")
    p.set_defaults(func=cmd_render)


def _emit(text: str, output: str | None) -> None:
    if output:
        write_atomic(Path(output), text)  # the one writer of -o files (``cli`` docstring): makes missing folders
        print(f"agentrace: wrote {output}", file=sys.stderr)
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")


def _load(args: argparse.Namespace, **filters: Any) -> list | None:
    """Task outcomes from the store (``filters`` as ``Store.runs``); None after printing why there are none."""
    path = _db_path(args.db)
    if not path.exists():
        print(f"agentrace: no history store at {path}; run `pytest --agentrace` first or pass --db PATH", file=sys.stderr)
        return None
    try:
        since = parse_since(getattr(args, "since", None))
    except ValueError as exc:
        print(f"agentrace: {exc}", file=sys.stderr)
        return None
    if since and filters.get("since"):
        since = max(since, filters["since"])
    filters["since"] = since or filters.get("since")
    try:
        with Store(path) as store:
            return score_outcomes(store.outcomes(kind="task", **filters))  # stored runs keep their session's score
    except StoreError as exc:
        print(f"agentrace: {exc}", file=sys.stderr)
        return None


NO_RACES = ("(no task races recorded: leaderboard, history and trend rank agents on task files; "
            "trial runs are compared by arm with `agentrace report OUT`)")


def _render(title: str, headers: list[str], rows: list[list[Any]], data: Any, fmt: str, note: str = "") -> str:
    if fmt == "json":
        return json.dumps(data, indent=2, sort_keys=True) + "\n"
    if fmt == "html":
        return table_page(title, headers, rows, note)
    if fmt == "markdown":
        return f"### {title}\n\n" + md_table(headers, rows) + (f"\n\n{note}" if note else "") + "\n"
    from tabulate import tabulate

    body = tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True) if rows else NO_RACES
    return f"{title}\n{body}\n" + (f"{note}\n" if note else "")


def _when(iso: str) -> str:
    """``2026-02-10T09:00:00+00:00`` -> ``2026-02-10 09:00`` (UTC) for tables."""
    return iso[:16].replace("T", " ") if iso else "-"


def cmd_leaderboard(args: argparse.Namespace) -> int:
    found = _load(args, case=args.task)
    if found is None:
        return 2
    table = leaderboard(found, min_runs=args.min_runs)
    headers = ["Rank", "Agent", "Wins", "Races", "Win %", "Mean score", "Passed", "Runs", "Mean cost (USD)", "Mean time (s)"]
    body = [[i, s.agent, s.wins, s.races, numbers.pct(s.win_rate, 1), numbers.fixed(s.mean_score, 1), s.passed, s.runs,
             numbers.cost(s.mean_cost), numbers.fixed(s.mean_seconds, 1)] for i, s in enumerate(table, 1)]
    title = "agentrace leaderboard" + (f" — task {args.task}" if args.task else "")
    _emit(_render(title, headers, body, [s.to_dict() for s in table], args.format, RACE_NOTE), args.output)
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    found = _load(args, case=args.task)
    if found is None:
        return 2
    entries = history(found, agent=args.agent, limit=args.limit or None)
    headers = ["Started", "Session", "Task", "Agents", "Winner", "Top score"] + (["Score", "Rank"] if args.agent else [])
    body = []
    for e in entries:
        row = [_when(e["started"]), e["session_id"], e["task"], ", ".join(e["agents"]), e["winner"] or "-", numbers.fixed(e["top_score"], 1)]
        if args.agent:
            row += [numbers.fixed(e["score"], 1), e["rank"]]
        body.append(row)
    title = "agentrace history" + (f" — agent {args.agent}" if args.agent else "") + (f" — task {args.task}" if args.task else "")
    _emit(_render(title, headers, body, entries, args.format), args.output)
    return 0


def cmd_trend(args: argparse.Namespace) -> int:
    import datetime as _dt

    since = (_dt.datetime.now(_dt.UTC) - _dt.timedelta(days=args.days)).isoformat(timespec="seconds")
    found = _load(args, case=args.task, agent=args.agent, since=since)
    if found is None:
        return 2
    series = trend(found)
    headers = ["Agent", "Task", "Sessions", "First", "Last", "Change", "Score over time (0..100)"]
    body = [[s["agent"], s["task"], len(s["points"]), numbers.fixed(s["first"], 1), numbers.fixed(s["last"], 1), f"{s['change']:+.1f}",
             sparkline([v for _, v in s["points"]])] for s in series]
    _emit(_render(f"agentrace trend — last {args.days:g} days", headers, body, series, args.format), args.output)
    return 0


def load_results(out: Path, files: list | None = None, verified: Mapping[str, Any] | None = None) -> list:
    """Every readable ``run.json`` under ``out`` with the composite score filled in (the runs of one task and rep
    race each other, whichever session made them; ``score.score_outcomes``). ``files``: the record files of a walk
    the caller has just made (``runfile.scan_runs``), else the folder is walked here. ``verified``: the outcomes
    the manifest check parsed from the bytes it hashed (``manifest.Verification.records``), used instead of the
    index's (``index.iter_outcomes``)."""
    return score_outcomes(iter_outcomes(out, files, verified), per_session=False)


def result_for(args: argparse.Namespace, paths: dict[str, Path] | None = None, digest: bool = False) -> SessionResult | None:
    """The session result of the results folder ``args.out`` (its runs scored once, the history store's for the Elo
    chart; with ``digest``, the folder's results digest when it has manifests: ``formats.Format.digest``), for any
    format's ``render``; None after printing why there is none."""
    out = Path(args.out).resolve()
    scan = scan_runs(out)  # one walk of the folder: the records checked against the manifests are those read
    verified = warn_unverifiable(out, scan.folders, keep=True).records if (out / "runs").is_dir() else None
    outcomes = load_results(out, scan.files, verified)
    if not outcomes:
        print(f"agentrace: no run records under {out / 'runs'}", file=sys.stderr)
        return None
    history_rows, db = None, _db_path(args.db)
    if args.db or db.is_file():  # the history, for the Elo-over-time chart
        try:
            with Store(db) as store:
                history_rows = score_outcomes(store.rating_outcomes())
        except StoreError as exc:
            print(f"agentrace: {exc}", file=sys.stderr)
            return None
    shown_digest = None  # as the session printed it (JUnit's suite property): the manifests read again, only when shown
    if digest and (out / MANIFEST_DIR).is_dir():
        shown_digest = results_digest(out)
    context = Context(out=out, baseline=args.baseline, seed=args.seed, resamples=args.resamples, target=args.generalize,
                      paths=paths or {}, full_report=getattr(args, "full_report", None), digest=shown_digest,
                      rootdir=session_rootdir(out), partial=missing_shards(out))
    return build_result(outcomes, context, history=history_rows)


def render_to(args: argparse.Namespace, name: str, target: str | None) -> int:
    """Render the results folder's session result through the format ``name`` of ``report.formats`` to ``target``
    (a file; None: standard output). Exit 2 when the folder holds no run."""
    result = result_for(args, {name: Path(target)} if target else None, digest=formats.by_name(name).digest)
    if result is None:
        return 2
    _emit(formats.by_name(name).render(result), target)
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    if getattr(args, "format", "json") == "atif":
        return export_atif(Path(args.out), args.output)
    return render_to(args, "json", args.output)


def cmd_html(args: argparse.Namespace) -> int:
    return render_to(args, "html", args.output or "report.html")


def cmd_comment(args: argparse.Namespace) -> int:
    return render_to(args, "comment", args.output)


def cmd_render(args: argparse.Namespace) -> int:
    """``agentrace render OUT --format NAME``: the format's ``render`` of the folder's result (``report.formats``)."""
    return render_to(args, args.format, args.output)


def export_atif(out: Path, output: str | None) -> int:
    """``agentrace export OUT --format atif``: a run's folder gives its trajectory (one JSON object), a results folder
    every run's, one per line (JSONL), in run-folder order (``record.trajectory.load_trajectory``: its
    ``trajectory.json``, or one built from ``run.json`` for older runs). Exit 2 when there is no run."""
    if (out / RUN_FILE).is_file():
        try:
            doc = load_trajectory(out)
        except (ValueError, OSError) as exc:
            print(f"agentrace: {exc}", file=sys.stderr)
            return 2
        _emit(json.dumps(doc, indent=2) + "\n", output)
        return 0
    lines = [json.dumps(doc, sort_keys=True) for _run, doc in iter_trajectories(out)]
    if not lines:
        print(f"agentrace: no run records under {out / 'runs'}", file=sys.stderr)
        return 2
    _emit("\n".join(lines) + "\n", output)
    return 0
