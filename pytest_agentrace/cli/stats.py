"""``agentrace`` subcommands of the statistics: plan, report, snapshot, compare, ratings, rescore, regress.

They read ``run.json`` records from a results folder (``outcome.iter_runs``) and call the same pure modules as
the session summary (``cells``, ``snapshot``, ``sequential``, ``ratings``). Exit status: 0 ok, 1 a ``--fail-on``
verdict occurred (compare, regress), 2 bad input (one line on stderr naming the file or option and the fix).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tabulate import tabulate

from pytest_agentrace.argtypes import non_negative_float, positive_int
from pytest_agentrace.cli import output_options
from pytest_agentrace.cli.verify import refuse_gate, warn_unverifiable
from pytest_agentrace.errors import SpecError
from pytest_agentrace.fstree import rmtree
from pytest_agentrace.options import add_cli_options
from pytest_agentrace.record.index import iter_outcomes, iter_runs
from pytest_agentrace.record.manifest import digest_run, verify, write_manifest
from pytest_agentrace.record.model import Status
from pytest_agentrace.record.runfile import last_session_ids, missing_shards, scan_runs, write_run
from pytest_agentrace.record.store import Store, StoreError
from pytest_agentrace.record.storepath import default_path, default_results
from pytest_agentrace.record.trajectory import write_trajectory
from pytest_agentrace.report.fit import stdout_width
from pytest_agentrace.report.stats_text import (
    PLAN_NOTE,
    compare_lines,
    plan_lines,
    render,
)
from pytest_agentrace.report.terminal import CLI_HINT, summary_lines
from pytest_agentrace.report.view import baseline_agents
from pytest_agentrace.spec.trial import load_trial
from pytest_agentrace.stats import numerics as stats
from pytest_agentrace.stats import planning
from pytest_agentrace.stats.answers import score_answer
from pytest_agentrace.stats.ratings import elo, elo_history, races
from pytest_agentrace.stats.report import build_report
from pytest_agentrace.stats.score import score_outcomes
from pytest_agentrace.stats.snapshot import (
    SnapshotError,
    compare,
    make_snapshot,
    read_snapshot,
    write_snapshot,
)
from pytest_agentrace.stats.verdict import (
    FIXED,
    HOLM,
    SNAPSHOT_GATES,
    gate_failures,
    gate_family,
    parse_fail_on,
    unanswered_gates,
)

REGRESS_FAIL_ON = "regressed"  # what `agentrace regress` fails on when --fail-on is not given


class CliError(Exception):
    """Bad input to a subcommand: printed as ``agentrace <cmd>: <message>`` with exit status 2."""


def register(sub: Any) -> None:
    """Add the statistics subcommands to the ``agentrace`` parser."""
    p = sub.add_parser("plan", help="runs per arm needed to detect a difference (formula), or the state of a results folder")
    p.add_argument("--cv", type=float, help="coefficient of variation of cost per run (e.g. 0.3)")
    p.add_argument("--effect", type=float, default=0.2, help="relative cost change to detect (default 0.2 = 20%%)")
    p.add_argument("--alpha", type=float, default=0.05, help="two-sided significance level (default 0.05)")
    p.add_argument("--power", type=float, default=0.8, help="power (default 0.8)")
    p.add_argument("--cases", type=positive_int, default=1, help="cases (tasks or trial questions) the verdict is taken over (default 1)")
    p.add_argument("--case-sd", type=non_negative_float, default=0.0, metavar="SD",
                   help="--generalize cases: sd of the true per-case log cost ratios (default 0: every case has the same effect)")
    p.add_argument("--results", metavar="OUT", help="results folder: state per agent and arm over its cases")
    p.add_argument("--min-runs", type=int, default=4, help="fewest runs per arm and case to plan for, and the first look of --stop-when-decided (default 4)")
    p.add_argument("--max-reps", type=int, default=12, help="runs per arm and case you are willing to spend (default 12)")
    p.add_argument("--price-per-mtok", type=float, help="USD per million tokens, to price the further spend")
    p.add_argument("--stop-when-decided", type=int, metavar="CAP", help="the session stopped reps early with this cap: use its decisions")
    add_cli_options(p, "generalize")
    _common(p, fmt=True)
    p.set_defaults(func=cmd_plan)

    p = sub.add_parser("report", help="the statistics report of a results folder")
    p.add_argument("out", metavar="OUT", nargs="?", help=OUT_HELP)
    p.add_argument("--case", action="append", default=[], metavar="ID", help="only these cases (task names / question ids); repeatable or comma-separated")
    p.add_argument("--stop-when-decided", type=int, metavar="CAP", help="the session stopped reps early with this cap: use the sequential verdicts")
    add_cli_options(p, "generalize")
    _common(p, fmt=True)
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("snapshot", help="save per-cell pass counts and tokens of a results folder as a baseline snapshot")
    p.add_argument("out", metavar="OUT", nargs="?", help=OUT_HELP)
    p.add_argument("-o", "--output", "--to", dest="to", required=True, metavar="FILE",
                   help="snapshot file to write (JSON); --to is an alias")
    p.add_argument("--name", help="a name stored in the snapshot")
    add_cli_options(p, "last_session")
    p.set_defaults(func=cmd_snapshot)

    p = sub.add_parser("compare", help="compare a results folder with a snapshot (regressed / dearer / improved / same)")
    p.add_argument("out", metavar="OUT", nargs="?", help=OUT_HELP)
    _compare_options(p)
    add_cli_options(p, "generalize")
    _common(p, fmt=True)
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("ratings", help="Elo ratings of the agents racing in the history store")
    add_cli_options(p, "db")
    p.add_argument("--reset", action="store_true", help="forget the ratings (everyone back to 1500; later sessions count)")
    output_options(p, json_alias=True)  # --json: alias of --format json (ratings and history)
    p.set_defaults(func=cmd_ratings)

    p = sub.add_parser("rescore", help="re-score stored trial answers after the answer key was edited")
    p.add_argument("trial", metavar="TRIAL", help="the trial file (TOML) with the edited answer key")
    p.add_argument("out", metavar="OUT", help="results folder holding its runs")
    p.set_defaults(func=cmd_rescore)

    p = sub.add_parser("regress", help="run a trial (or task) with pytest, then compare it with a snapshot", **REGRESS_TEXT)
    _regress_options(p)
    p.set_defaults(func=cmd_regress)


def _common(p: argparse.ArgumentParser, fmt: bool = False, suppress: bool = False, short: bool = True) -> None:
    add_cli_options(p, "baseline", "seed", "resamples", "last_session", suppress=suppress)
    if fmt:
        output_options(p, ("text", "markdown", "json"), short=short, suppress=suppress)


REGRESS_TEXT = {"usage": "agentrace regress FILE --snapshot SNAPSHOT [options] [pytest args ...] [-- more pytest args]",
                "description": "Run FILE with pytest --agentrace into a results folder, then compare that session's cells "
                               "with the snapshot (exit 1 when a --fail-on verdict occurs). Arguments this command does not "
                               "know are passed to pytest, as is everything after --."}


def _regress_options(p: argparse.ArgumentParser, suppress: bool = False) -> None:
    """The options of ``regress`` (also parsed from the arguments after FILE, where argparse leaves them)."""
    if not suppress:
        p.add_argument("spec", metavar="FILE", help="trial or task file")
        p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    kw = {"default": argparse.SUPPRESS} if suppress else {}
    p.add_argument("--out", metavar="DIR", help="results folder for this run, kept (default: a new temporary folder, removed at the end)", **kw)
    add_cli_options(p, "generalize", suppress=suppress)
    _compare_options(p, required=False, suppress=suppress)
    _common(p, fmt=True, suppress=suppress, short=False)  # -o is pytest's --override-ini here


def _compare_options(p: argparse.ArgumentParser, required: bool = True, suppress: bool = False) -> None:
    kw: dict[str, Any] = {"default": argparse.SUPPRESS} if suppress else {}
    p.add_argument("--snapshot", required=required, metavar="FILE", help="snapshot file (agentrace snapshot / --agentrace-snapshot-update)", **kw)
    p.add_argument("--old-arm", metavar="A", help="compare the snapshot's arm A ...", **kw)
    p.add_argument("--new-arm", metavar="B", help="... with this run's arm B", **kw)
    add_cli_options(p, "tolerance", "regression_alpha", "fail_on", "gate_cells", suppress=suppress)


def run(func, args: argparse.Namespace) -> int:
    try:
        return func(args)
    except CliError as exc:
        print(f"agentrace {args.command}: {exc}", file=sys.stderr)
        return 2


OUT_HELP = ("results folder (--agentrace-out of the session; default: the nearest .agentrace/ with runs from here up to "
            "the project's top)")


@dataclass(frozen=True)
class Loaded:
    """What ``load_results`` read: the run records (``Outcome``), the results folder they came from (resolved) and
    why they are part of a sharded session's runs (``record.runfile.missing_shards``; None: whole)."""

    outcomes: list[Any]
    folder: Path
    partial: str | None


def load_outcomes(out: str | Path | None, last_session: bool = False, gate: bool = False, whole: bool = False) -> list[Any]:
    """``load_results(...).outcomes``: the run records alone."""
    return load_results(out, last_session, gate, whole).outcomes


def load_results(out: str | Path | None, last_session: bool = False, gate: bool = False, whole: bool = False) -> Loaded:
    """Every readable run record under ``out/runs`` (``out`` None: ``record.storepath.default_results``; ``last_session``: only those of ``last-session.json``), after a
    warning about unverifiable records (``cli.verify``). A record whose folder a manifest names is read from the
    bytes the manifest check hashed; the index (``record.index``) serves only the others. Raises ``CliError`` when there is none, and with ``gate``
    when a record it returns is unverifiable (a gate never decides on those); with ``gate`` or ``whole`` (a
    snapshot, the baseline of later gates) when the folder holds part of a sharded session (``missing_shards``)."""
    if out is None:  # the default results folder of the project the command runs in
        found = default_results()
        if found is None:
            raise CliError("no results folder given (OUT) and no .agentrace/ with runs from here up to the project's top; "
                           "run `pytest --agentrace` first, or name the folder of --agentrace-out")
        out = found
    path = Path(out)
    if not path.is_dir():
        raise CliError(f"{path}: no such results folder; run `pytest --agentrace --agentrace-out {path}` first")
    if not (path / "runs").is_dir() and (path / ".agentrace" / "runs").is_dir():
        raise CliError(f"{path}: not a results folder (no runs/); did you mean {path / '.agentrace'}, the session's default?")
    scan = scan_runs(path)  # one walk of the folder: the records checked against the manifests are those read
    found = warn_unverifiable(path, scan.folders, keep=True)  # the manifested records' outcomes: from hashed bytes
    paths = gate and last_session  # the gate names the last session's run folders
    runs = (list(iter_runs(path, scan.files, found.records)) if paths
            else [(None, o) for o in iter_outcomes(path, scan.files, found.records)])
    if last_session:
        try:
            ids = last_session_ids(path)
        except ValueError as exc:
            raise CliError(str(exc)) from None
        runs = [(p, o) for p, o in runs if o.run_id in ids]
    if gate and (why := refuse_gate(found, path, None if not paths else
                                    [p.parent.relative_to(path).as_posix() for p, _ in runs])):
        raise CliError(why)
    if why := missing_shards(path):  # part of a sharded session: figures of part of its runs
        if gate or whole:
            raise CliError(f"refusing to {'gate' if gate else 'write a snapshot'}: {why}")
        print(f"agentrace: warning: {why}", file=sys.stderr)
    outcomes = [o for _, o in runs]
    if not outcomes:
        raise CliError(f"{path}: no run.json records under {path / 'runs'}; run `pytest --agentrace --agentrace-out {path}` first")
    return Loaded(outcomes, path, why)


def _cases(values: list[str]) -> list[str] | None:
    cases = [c.strip() for v in values for c in v.split(",") if c.strip()]
    return cases or None


def cmd_plan(args: argparse.Namespace) -> int:
    return run(_plan, args)


def _plan(args: argparse.Namespace) -> int:
    if args.results is None and args.cv is None:
        raise CliError("give --cv (with --effect) for the formula, or --results OUT for the state of a results folder")
    doc: dict[str, Any] = {}
    lines: list[str] = []
    if args.cv is not None:
        if args.cv < 0 or not 0 < args.effect < 1 or not 0 < args.alpha < 1 or not 0 < args.power < 1:
            raise CliError("--cv must be >= 0 and --effect, --alpha, --power between 0 and 1")
        doc["formula"] = f = planning.formula(args.cv, args.effect, args.alpha, args.power, args.cases, args.generalize, args.case_sd)
        lines += formula_lines(f)
    if args.results is not None:
        rows = planning.plan_rows(load_outcomes(args.results, args.last_session), args.min_runs, args.max_reps, args.price_per_mtok,
                                  args.baseline, args.seed, args.resamples, args.alpha, args.generalize, args.stop_when_decided)
        if not rows:
            raise CliError(f"{args.results}: no arm comparisons (a plan needs trials with at least two arms)")
        doc.update(rows=[r.to_dict() for r in rows], note=PLAN_NOTE, generalize=args.generalize)
        lines += plan_lines(rows, "text" if args.format == "json" else args.format, args.price_per_mtok is not None,
                            width=stdout_width())
    print(json.dumps(doc, indent=2, sort_keys=True) if args.format == "json" else "\n".join(lines))
    return 0


def formula_lines(f: dict[str, Any]) -> list[str]:
    """The text of ``agentrace plan --cv`` (``planning.formula``'s dict)."""
    n = f["runs_needed"]
    cases, target = f["cases"], f["target"]
    many = cases > 1
    per = " per case" if many else ""
    over = f" over {cases} cases ({'fixed cases' if target == FIXED else 'new cases'})" if many else ""
    if n is not None:
        need = str(n)
    elif target != FIXED and many and f["level"] <= 0:
        need = f"no number of runs: with {cases} cases a sign-flip p cannot go below {2 / 2**cases:.2g}; a verdict needs 6 or more cases"
    elif target != FIXED and many:
        need = "no number of runs: the spread between cases (--case-sd) needs more cases, not more runs"
    else:
        need = "more than 100,000"
    lines = [(f"runs per arm{per} to detect a {f['effect']:.0%} cost difference with {f['power']:.0%} power at alpha {f['alpha']:g} "
              f"(CV {f['cv']:g}){over}: {need}")]
    if not many:
        approx = 2 * (stats.z_value(1 - f["alpha"]) + stats.z_value(2 * f["power"] - 1)) ** 2 * stats.log_sd(f["cv"]) ** 2 / math.log(1 - f["effect"]) ** 2
        lines.append("formula: smallest n with P(|T| > t_{1-a/2, 2n-2}) >= power, T non-central t with lambda = |ln(1 - effect)| / "
                     "(sigma sqrt(2/n)), sigma^2 = ln(1 + CV^2) (two-sample t test on log cost; Julious 2004), a = the level the "
                     "exact permutation test can reach with n runs per arm (2 floor(alpha C(2n,n) / 2) / C(2n,n); alpha from 6 runs on); "
                     f"to first order 2 (z_(1-alpha/2) + z_power)^2 sigma^2 / ln(1 - effect)^2 = {approx:.1f}; or, when smaller, the "
                     "power of the interval, a t test at alpha with lambda = |ln(1 - effect)| / (CV sqrt(2/n)) (the same formula as "
                     "for several cases with K = 1)")
    elif target == FIXED:
        lines.append("formula: the stratified permutation test as a t test on the mean over cases of the per-case log differences: "
                     "lambda = |ln(1 - effect)| / (sigma sqrt(2/(n K))), 2K(n-1) df, at the level a test with C(2n,n)^K relabellings "
                     "can reach (K cases, sigma^2 = ln(1 + CV^2)); or, when smaller, the power of the interval of the geometric "
                     "mean of the case ratios, a t test at alpha with lambda = |ln(1 - effect)| / (CV sqrt(2/(n K))))")
    else:
        lines.append("formula: the sign-flip test over the K per-case log ratios as a one-sample t test with K-1 df on values of sd "
                     "sqrt(case_sd^2 + 2 sigma^2 / n), at the level a test with 2^K sign patterns can reach (sigma^2 = ln(1 + CV^2)); "
                     "or, when smaller, the power of the clustered-t interval (K-1 df, per-case sd sqrt(case_sd^2 + 2 CV^2 / n))")
    lines.append("power by runs per arm" + per + ": " + ", ".join(f"{r}: {p:.0%}" for r, p in f["power_by_runs"].items()))
    return lines


def cmd_report(args: argparse.Namespace) -> int:
    return run(_report, args)


def scored(outcomes: list[Any]) -> list[Any]:
    """``outcomes`` with the task runs scored (``score.score_outcomes``), once per command: a task's runs of one rep
    race, whichever session made them."""
    if any(o.kind == "task" and o.score is None and o.is_sample for o in outcomes):
        return score_outcomes(outcomes, per_session=False)
    return outcomes


def _report(args: argparse.Namespace) -> int:
    loaded = load_results(args.out, args.last_session)
    outcomes = scored(loaded.outcomes)
    cases = _cases(args.case)
    if cases and not any(o.case in cases for o in outcomes):
        raise CliError(f"--case {', '.join(cases)}: no such case in {loaded.folder} (cases: {', '.join(sorted({o.case for o in outcomes}))})")
    seq = {"cap": args.stop_when_decided} if args.stop_when_decided else None
    report = build_report(outcomes, args.baseline, args.seed, args.resamples, cases, seq, target=args.generalize)
    width = stdout_width()
    if args.format != "json" and (why := loaded.partial):  # said in the body too
        sys.stdout.write(f"> **Partial results:** {why}\n\n" if args.format == "markdown" else f"partial results: {why}\n\n")
    if args.format != "json":
        sys.stdout.write(summary_tables([o for o in outcomes if not cases or o.case in cases], args.format, width))
    sys.stdout.write(render(report, args.format, width=width))
    return 0


def summary_tables(outcomes: list[Any], fmt: str, width: int | None) -> str:
    """The session summary's tables over scored ``outcomes`` (``report.terminal.summary_lines``: a ranked run table
    per task, one row per agent over its reps, the task x agent matrix from two tasks, a table per trial) for
    ``agentrace report`` in ``text`` or ``markdown`` (there in a ``text`` code block); "" when ``outcomes`` hold no
    run. The statistics report follows it and adds only what these tables do not show (``stats_text.report_lines``)."""
    if not outcomes:
        return ""
    lines = summary_lines(outcomes, width=width if fmt == "text" else None, hint=CLI_HINT)
    while lines and not lines[-1].strip():
        lines.pop()
    if fmt == "markdown":
        return "```text\n" + "\n".join(lines) + "\n```\n\n"
    return "\n".join(lines) + "\n\n"


def cmd_snapshot(args: argparse.Namespace) -> int:
    return run(_snapshot, args)


def _snapshot(args: argparse.Namespace) -> int:
    snap = make_snapshot(load_outcomes(args.out, getattr(args, "last_session", False), whole=True), args.name)
    path = write_snapshot(Path(args.to), snap)
    print(f"wrote {path}: {len(snap['cells'])} cells")
    return 0


def _gates(values: list[str] | None):
    try:
        return parse_fail_on(values)
    except ValueError as exc:
        raise CliError(str(exc).replace("--agentrace-fail-on", "--fail-on")) from None


def compare_and_gate(outcomes: list[Any], args: argparse.Namespace) -> int:
    """Print the snapshot comparison; 1 when a ``--fail-on`` verdict occurs, else 0."""
    gates = _gates(args.fail_on)
    outcomes = scored(outcomes)
    if (args.old_arm is None) != (args.new_arm is None):
        raise CliError("give both --old-arm and --new-arm, or neither")
    try:
        snap = read_snapshot(Path(args.snapshot))
    except SnapshotError as exc:
        raise CliError(str(exc)) from None
    target = getattr(args, "generalize", FIXED)
    rows = compare(snap, outcomes, args.old_arm, args.new_arm, args.tolerance, args.seed, args.resamples, args.regression_alpha,
                   target=target)
    # every gate the session's --agentrace-fail-on takes, decided as the session decides it: thresholds read the
    # cells, verdicts other than the snapshot's (worse, cheaper, ...) the arm-vs-baseline comparisons
    report = (build_report(outcomes, getattr(args, "baseline", None), args.seed, args.resamples, target=target)
              if any(not g.verdict or g.verdict not in SNAPSHOT_GATES for g in gates) else None)
    cells, comparisons, flips = (report.cells, report.comparisons, report.reliability) if report is not None else ((), (), ())
    family = (gate_family(gates, comparisons, rows, getattr(args, "gate_cells", HOLM), args.regression_alpha)
              if any(g.verdict for g in gates) else None)
    failures = gate_failures(gates, cells, comparisons, rows, flips, family=family, baselines=baseline_agents(outcomes))
    failures += unanswered_gates(gates, comparisons, rows, (o.arm for o in outcomes)) if report is not None else []
    print("\n".join(compare_lines(rows, args.format, width=stdout_width(), family=family, failed=len(failures))))
    for line in failures:
        print(f"FAIL {line}", file=sys.stderr)
    return 1 if failures else 0


def cmd_compare(args: argparse.Namespace) -> int:
    return run(lambda a: compare_and_gate(load_outcomes(a.out, getattr(a, "last_session", False), gate=bool(a.fail_on)), a), args)


def cmd_ratings(args: argparse.Namespace) -> int:
    return run(_ratings, args)


def _ratings(args: argparse.Namespace) -> int:
    path = Path(args.db).expanduser().resolve() if args.db else default_path()
    if not path.is_file():
        raise CliError(f"{path}: no history store; run `pytest --agentrace` first or pass --db PATH")
    try:
        with Store(path) as store:
            if args.reset:
                print(f"ratings reset in {path}: sessions started from {store.reset_ratings()} on count")
                return 0
            outcomes = score_outcomes(store.rating_outcomes())  # stored runs keep the score of their session
    except StoreError as exc:
        raise CliError(str(exc)) from None
    ratings, history, n = elo(outcomes), elo_history(outcomes), len(races(outcomes))
    if args.format == "json":
        print(json.dumps({"ratings": ratings, "history": history}, indent=2, sort_keys=True))
        return 0
    if not ratings:
        print(f"no ratings yet in {path} (they come from task files raced by at least two agents)")
        return 0
    rows = [[i, a, f"{r:.0f}"] for i, (a, r) in enumerate(sorted(ratings.items(), key=lambda kv: (-kv[1], kv[0])), 1)]
    print(tabulate(rows, headers=["Rank", "Agent", "Elo"], tablefmt="github", disable_numparse=True))
    print(f"{n} race{'' if n == 1 else 's'}; Elo 1500 start, K 32, draw within 1 point, one simultaneous update per race.")
    return 0


def cmd_rescore(args: argparse.Namespace) -> int:
    return run(_rescore, args)


def rescore_outcome(o: Any, question: Any, max_chars: int | None = None) -> Any:
    """``o`` re-scored against ``question``'s answer key (an answer over ``question.max_answer_chars``, else
    ``max_chars``, is incorrect). Status changes only for runs that reached answer scoring (passed/failed, not timed
    out, agent exit 0): passed when correct and the verify check passed."""
    limit = getattr(question, "max_answer_chars", None) or max_chars
    score = score_answer(o.usage.answer, question.expect, question.forbid, question.min_recall, limit,
                         o.usage.answer_chars)
    changes: dict[str, Any] = {"answer_score": score}
    scorable = o.status in (Status.PASSED, Status.FAILED) and not o.timed_out and o.exit_code in (0, None)
    if scorable:
        verify = o.checks.get("verify")
        if not score["correct"]:
            reasons = []
            if score["missing"]:
                reasons.append(f"recall {score['recall']:.2f} < min_recall {question.min_recall:.2f}")
            if score["forbidden"]:
                reasons.append("forbidden pattern matched: " + ", ".join(score["forbidden"]))
            changes.update(status=str(Status.FAILED), reason="answer incorrect: " + "; ".join(reasons))
        elif verify is not None and not verify.passed:
            changes.update(status=str(Status.FAILED), reason=o.reason if o.status == Status.FAILED else "verify failed")
        else:
            changes.update(status=str(Status.PASSED), reason=None)
    return o.replace(**changes)


def _rescore(args: argparse.Namespace) -> int:
    import datetime as _dt

    try:
        trial = load_trial(Path(args.trial))
    except (SpecError, OSError) as exc:
        raise CliError(str(exc)) from None
    questions = {q.id: q for q in trial.questions}
    out = Path(args.out)
    load_outcomes(out)
    unverifiable = verify(out).problems
    seen = changed = 0
    unknown: set[str] = set()
    digests: dict[str, dict] = {}
    others: set[str] = set()  # existing files whose records share the trial's name: theirs, never re-graded here
    for path, o in iter_runs(out):
        if o.kind != "trial" or (o.extra.get("trial") != trial.name and Path(o.source).resolve() != trial.path.resolve()):
            continue
        if Path(o.source).resolve() != trial.path.resolve() and Path(o.source).is_file():
            others.add(o.source)
            continue
        if (where := path.parent.relative_to(out).as_posix()) in unverifiable:  # never re-bless a forged record
            print(f"{o.run_id}: not rescored, unverifiable: {unverifiable[where]}", file=sys.stderr)
            continue
        q = questions.get(o.case)
        if q is None:
            unknown.add(o.case)
            continue
        new = rescore_outcome(o, q, trial.max_answer_chars)
        seen += 1
        if new.answer_score != o.answer_score or new.status != o.status:
            extra = {**new.extra, "rescored": {"at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"), "content_hash": trial.content_hash}}
            if new.status != o.status:
                print(f"{o.run_id}: {o.status} -> {new.status}")
                changed += 1
            write_trajectory(path.parent, new.replace(extra=extra))
            write_run(path.parent, new.replace(extra=extra))
            digests[o.run_id] = digest_run(out, path.parent)
    if digests:  # the rescored records are verified by a manifest of their own
        write_manifest(out, "rescore-" + _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%S%fZ"), digests)
    if others:
        print(f"agentrace rescore: left the runs of {', '.join(sorted(others))} as they are: another trial file of the "
              f"name {trial.name!r}", file=sys.stderr)
    if not seen:
        raise CliError(f"{out}: no runs of trial {trial.name!r} ({args.trial})")
    print(f"rescored {seen} runs of trial {trial.name!r}: {changed} changed status" + (f"; questions no longer in the file: {', '.join(sorted(unknown))}" if unknown else ""))
    return 0


def cmd_regress(args: argparse.Namespace) -> int:
    return run(_regress, args)


def _regress(args: argparse.Namespace) -> int:
    import datetime as _dt
    import subprocess
    import tempfile

    rest = list(args.rest)
    cut = rest.index("--") if "--" in rest else len(rest)
    if {"-h", "--help"} & set(rest[:cut]):  # this command's help, not pytest's (pytest's: after --)
        helper = argparse.ArgumentParser(prog="agentrace regress", **REGRESS_TEXT)
        _regress_options(helper)
        helper.print_help()
        return 0
    later = argparse.ArgumentParser(prog="agentrace regress", add_help=False, allow_abbrev=False)
    _regress_options(later, suppress=True)
    known, unknown = later.parse_known_args(rest[:cut])
    vars(args).update(vars(known))
    pytest_args = unknown + rest[cut + 1:]
    if not args.snapshot:
        raise CliError("--snapshot FILE is required (the snapshot to compare with)")
    args.fail_on = args.fail_on or [REGRESS_FAIL_ON]
    _gates(args.fail_on)
    if not Path(args.snapshot).is_file():
        raise CliError(f"{args.snapshot}: snapshot file not found; write one with `agentrace snapshot OUT --to {args.snapshot}`")
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="agentrace-regress-"))
    started = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    # one word (``--opt=value``): an existing path given as its own argument would count as a test path for
    # pytest and move the session's rootdir (and its history and cache) to the common folder of the two
    cmd = [sys.executable, "-m", "pytest", args.spec, "--agentrace", f"--agentrace-out={out}", *pytest_args]
    print("running: " + " ".join(cmd), flush=True)
    try:
        code = subprocess.call(cmd)
        if code not in (0, 1):  # interrupted, internal error, usage error, no tests
            print(f"agentrace regress: pytest exited with status {code}; no comparison made", file=sys.stderr)
            return code if code else 2
        outcomes = [o for o in load_outcomes(out, gate=True) if (o.started or "") >= started or o.reused]
        return compare_and_gate(outcomes, args)
    finally:
        if not args.out:  # a results folder of its own (--out DIR keeps the runs)
            rmtree(out)
