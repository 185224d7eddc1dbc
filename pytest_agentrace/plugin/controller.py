"""The session's one controller: it takes every run's payload, builds the session result once, sets the exit
status, writes every output and prints the ``agentrace`` section.

It is registered by ``plugin.pytest_configure`` on the controller process only (on a pytest-xdist worker nothing
is registered; the worker's items still send their payloads in ``report.user_properties``, which xdist relays),
the way pytest-cov picks ``Central`` or ``DistWorker`` once per process.

Order of work:

- ``pytest_runtest_logreport``: each run's payload (``agentrace.outcome``, on its call report) once, the same with
  or without xdist;
  a malformed payload is an error line in the summary, never silence;
- after the test loop (``pytest_runtestloop`` wrapper): ``finish`` builds the frozen ``SessionResult`` (scored
  outcomes, statistics report, snapshot rows, gate decisions, validation verdicts), records the session
  (``last-session.json``, the results index, the snapshot under ``--agentrace-snapshot-update``, the SQLite
  history); a failing gate adds to ``session.testsfailed`` (exit status 1, as
  pytest-cov's ``--cov-fail-under``). An interrupted loop gets the same, without gates, in ``pytest_sessionfinish``;
- ``pytest_sessionfinish`` (trylast, after junitxml wrote its file): each run's properties with its final score, the
  error kinds and the results digest into the JUnit XML (``report.junit.patch_junit``), the HTML / Markdown / JSON reports and ``$GITHUB_STEP_SUMMARY``;
- ``pytest_terminal_summary``: one ``agentrace`` section (``report.terminal.section``: tables, statistics,
  validation, what was written, warnings, gate failures), at pytest's width and verbosity.

A failure to write one output is a warning line and never loses the others or changes the exit status.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime as _dt
import json
import os
import traceback
from collections.abc import Iterable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_agentrace.errors import SpecError
from pytest_agentrace.options import setting_path
from pytest_agentrace.plugin import validate
from pytest_agentrace.plugin.collect import override_lines, planned_reps
from pytest_agentrace.plugin.failure import printable
from pytest_agentrace.plugin.progress import Progress, is_run_item
from pytest_agentrace.record import index
from pytest_agentrace.record.manifest import MANIFEST_DIR, results_digest, seal_session
from pytest_agentrace.record.model import Outcome
from pytest_agentrace.record.runfile import write_last_session
from pytest_agentrace.record.store import SessionInfo, Store, StoreError
from pytest_agentrace.record.storepath import default_path
from pytest_agentrace.report import formats
from pytest_agentrace.report.fit import terminal_width
from pytest_agentrace.report.formats import Format
from pytest_agentrace.report.junit import OUTCOME_PROPERTY, patch_junit
from pytest_agentrace.report.result import Context, SessionResult, build_result
from pytest_agentrace.report.terminal import Shown, section
from pytest_agentrace.report.text import skip_lines
from pytest_agentrace.report.view import baseline_agents, expects_failure
from pytest_agentrace.spec.trial import load_trial
from pytest_agentrace.stats.report import StatsReport, build_report
from pytest_agentrace.stats.score import score_outcomes
from pytest_agentrace.stats.snapshot import (
    SnapshotRow,
    compare,
    make_snapshot,
    read_snapshot,
    updated_snapshot,
    write_snapshot,
)
from pytest_agentrace.stats.verdict import gate_failures, gate_family, parse_fail_on, unanswered_gates

if TYPE_CHECKING:
    from pytest_agentrace.plugin.session import AgentraceSession

def harbor_notes(outcomes) -> list[tuple[str, bool]]:
    """One summary line per Harbor task that ran: its environment was not built (the host's toolchain ran it, inside
    the sandbox), marked as a warning when its Dockerfile does more than pick a base image (``extra.harbor``)."""
    seen: dict[str, tuple[str, bool]] = {}
    for o in outcomes:
        info = o.extra.get("harbor") if isinstance(o.extra, dict) else None
        if isinstance(info, dict) and o.source not in seen:
            differs = info.get("differs")
            line = (f"agentrace: Harbor task {o.case}: environment/Dockerfile not built; its runs used this host's "
                    "toolchain")
            seen[o.source] = (line + (f"; {differs}" if differs else ""), bool(differs))
    return [seen[k] for k in sorted(seen)]


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")


def network_line(outcomes: Iterable[Outcome]) -> str | None:
    """One summary line: how many runs had each network mode (``run.network``), how many of the ``provider`` ones
    had a contact refused; None when no run started a command."""
    modes: dict[str, int] = {}
    blocked = 0
    for o in outcomes:
        mode = o.extra.get("network_mode")
        if mode:
            modes[mode] = modes.get(mode, 0) + 1
            blocked += bool(o.extra.get("network_blocked"))
    if not modes:
        return None
    what = {"provider": "its provider's hosts only, none for a plain command", "host": "the host's network, unfiltered", "none": "loopback only"}
    parts = [f"{mode} ({n} run{'s' if n != 1 else ''}: {what.get(mode, mode)})" for mode, n in sorted(modes.items())]
    tail = f"; {blocked} run{'s' if blocked != 1 else ''} had a contact refused (run.json extra.network)" if blocked else ""
    return "agentrace: network: " + ", ".join(parts) + tail


def sandbox_line(outcomes: Iterable[Outcome]) -> str | None:
    """The sandbox the runs had (``run.json`` ``extra.sandbox``), one line: on or off, which bwrap (path and version)
    and uid, and what was shown beyond the default; None when no run recorded it. Like every note it is wrapped only
    where it is shown, to the terminal's width (``report.terminal.section``); a log that is no terminal keeps it whole."""
    boxes = [o.extra.get("sandbox") for o in outcomes if isinstance(o.extra.get("sandbox"), dict)]
    if not boxes:
        return None
    on = [b for b in boxes if b.get("on")]
    if not on:
        return f"agentrace: sandbox off ({len(boxes)} run{'s' if len(boxes) != 1 else ''} unsandboxed)"
    first = on[0]
    head = f"agentrace: sandbox on: bwrap {first.get('bwrap')} {first.get('version')}, uid {first.get('uid')}"
    if len(on) < len(boxes):
        head += f"; {len(boxes) - len(on)} runs unsandboxed"
    read = sorted({p for b in on for p in b.get("read") or ()})
    write = sorted({p for b in on for p in b.get("write") or ()})
    extra = "; ".join(part for part in (f"read {', '.join(read)}" if read else "",
                                         f"write {', '.join(write)}" if write else "") if part)
    text = head + (f"; also shown: {extra}" if extra else "; nothing shown beyond the default")
    return text


def empty_session_line(skipped: dict[str, str], baselines: int = 0) -> str:
    """The one line of a session in which no run could start (``baselines``: or only that many runs of baselines
    expected to fail, ``noop``): how many run items were skipped and why, the commonest ``SHOWN_REASONS`` reasons with
    their counts (``skipped``: node id -> skip reason)."""
    reasons = collections.Counter(skipped.values()).most_common()
    shown = "; ".join(f"{count}: {reason}" for reason, count in reasons[:SHOWN_REASONS])
    more = f"; {len(reasons) - SHOWN_REASONS} other reason(s)" if len(reasons) > SHOWN_REASONS else ""
    what = (f"no run of an agent under test could start, only {baselines} run(s) of baselines expected to fail: the other"
            if baselines else "no run could start: all")
    return f"{what} {len(skipped)} run items were skipped ({shown}{more}); --agentrace-allow-empty accepts this"


SHOWN_REASONS = 3  # skip reasons named by ``empty_session_line``


class Controller:
    """The pytest plugin object of the session's end (see the module docstring)."""

    NAME = "agentrace-controller"

    def __init__(self, agentrace: AgentraceSession):
        config = agentrace.config
        self.config, self.settings, self.session_id, self.out = config, agentrace.settings, agentrace.id, agentrace.out
        self.agentrace = agentrace  # its --agentrace-agent specs, parsed once, and what they did to the files' lists
        self.sandbox_why = agentrace.sandbox_why  # why the runs have no sandbox (--agentrace-sandbox auto), or None
        self.files = agentrace.files  # the session's collection cache: a task file is parsed once per process
        self.started = _now()
        self.digest: str | None = None  # of the results folder at the session's end (record.manifest)
        self.outcomes: dict[str, Outcome] = {}  # by run id
        self.records: dict[str, dict[str, Any]] = {}  # by run id: the payload's dict each outcome was made from
        self.by_node: dict[str, Outcome] = {}  # by pytest node id, for the progress lines
        self.bad_payloads: list[str] = []
        self.skipped: dict[str, str] = {}  # node id -> skip reason of a run item skipped in its setup
        self.result: SessionResult | None = None
        self.cut_short = False  # the run loop stopped early (-x, --maxfail; an interrupt never reaches its end)
        self.whole = False  # the run loop ran every run (set at its end; an interrupted session never sets it)
        self.written: list[tuple[str, bool]] = []
        self.errors: list[str] = []  # internal errors' lines (``_internal_error``)
        self.session: pytest.Session | None = None
        self.progress = Progress(config, agentrace)

    # -- gathering ---------------------------------------------------------------------------------------------

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.progress.start()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):
        with self.progress.running(item):
            return (yield)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.progress.collected([item.nodeid for item in session.items])

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        self.progress.collected(ids)

    # pytest's own writes of a test's start, report and end happen inside these wrappers, under the progress lock

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logstart(self, nodeid: str, location: tuple):
        with self.progress.lock:
            self.progress.started(nodeid, location)
            return (yield)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logfinish(self, nodeid: str, location: tuple):
        with self.progress.lock:
            self.progress.finished(nodeid)
            return (yield)

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport):
        with self.progress.lock:
            self._take(report)
            self.progress.before_report(report)
            result = yield
            self.progress.reported(report, self.by_node.get(report.nodeid))
            return result

    def _take(self, report: pytest.TestReport) -> None:
        """Take a run's payload (on the controller these include every xdist worker's); the last one per run id
        wins. A payload that does not parse is kept as an error line for the summary."""
        if report.when == "call":  # the item's agent runs in its call phase; the teardown report repeats the payload
            for name, value in getattr(report, "user_properties", ()):
                if name != OUTCOME_PROPERTY:
                    continue
                try:
                    record = json.loads(value)
                    outcome = Outcome.from_dict(record)  # the one read of the record in the controller
                except (ValueError, TypeError, KeyError, AttributeError) as exc:
                    self.bad_payloads.append(f"{report.nodeid}: {type(exc).__name__}: {exc}")
                    break
                self.outcomes[outcome.run_id] = outcome
                self.records[outcome.run_id] = record
                self.by_node[report.nodeid] = outcome
                break
        if report.when == "setup" and report.skipped and is_run_item(report.nodeid):
            longrepr = report.longrepr
            reason = str(longrepr[2]) if isinstance(longrepr, tuple | list) and len(longrepr) == 3 else str(longrepr)
            self.skipped[report.nodeid] = reason.removeprefix("Skipped: ")

    # -- the session's end -------------------------------------------------------------------------------------

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session):
        result = yield
        self.cut_short = bool(session.shouldstop or session.shouldfail)  # -x, --maxfail: not every run ran
        self.whole = not self.cut_short  # an interrupt never gets here: the session ends with whole False
        if self.finish(gates=True).failures:
            session.testsfailed += 1
        return result

    def finish(self, gates: bool = False) -> SessionResult:
        """Build the session result (once) and record the session; see the module docstring."""
        if self.result is not None:
            return self.result
        outcomes = tuple(score_outcomes(self.outcomes.values(), per_session=False))
        notes: list[tuple[str, bool]] = [(f"agentrace: malformed run payload ignored: {p}", True) for p in self.bad_payloads]
        if why := self.sandbox_why:
            notes.append((f"agentrace: runs were not sandboxed: {why} (--agentrace-sandbox off hides this line)", True))
        notes += harbor_notes(self.outcomes.values())
        if line := network_line(outcomes):
            notes.append((line, False))
        if line := sandbox_line(outcomes):
            notes.append((line, False))
        failures: list[str] = []
        report = rows = family = None
        validation = validate.verdict_rows(outcomes) if self.settings.validate and outcomes else None
        if outcomes:
            try:
                report, rows, snap_notes = self._statistics(list(outcomes), whole=gates and not self.cut_short)
                notes += [(n, False) for n in snap_notes]
                if gates:
                    parsed = parse_fail_on(self.settings.fail_on)
                    if any(g.verdict for g in parsed):
                        family = gate_family(parsed, report.comparisons, rows, self.settings.gate_cells, self.settings.regression_alpha)
                    failures += gate_failures(parsed, report.cells, report.comparisons, rows, report.reliability, family=family,
                                              baselines=baseline_agents(outcomes))
                    failures += unanswered_gates(parsed, report.comparisons, rows, (o.arm for o in outcomes),
                                                 snapshot_written=bool(self.settings.snapshot and self.settings.snapshot_update))
                    if family is not None:
                        notes.append((f"agentrace: {family.summary(len(failures))}", False))
            except Exception as exc:  # noqa: BLE001 - a bug in the statistics must not lose the session's results; it fails the session visibly
                failures.append(f"the statistics could not be computed: {type(exc).__name__}: {exc}")
            notes += self._record(outcomes)
        if gates and self.skipped and not self.settings.allow_empty and all(expects_failure(o) for o in outcomes):
            failures.append(empty_session_line(self.skipped, len(outcomes)))  # none ran, or only the noop baselines
        fields = {"snapshot_rows": tuple(rows) if rows is not None else None, "failures": tuple(failures),
                  "validation": validation, "gate": family}
        try:  # the leaderboard and Elo series (over the history store when an output shows its chart)
            result = build_result(outcomes, self._context(), report=report,
                                  history=self._history() if self._report_targets() else None, **fields)
        except Exception as exc:  # noqa: BLE001 - a report bug must not lose the session's results
            notes.append((f"agentrace: could not build the report: {type(exc).__name__}: {exc}", True))
            result = SessionResult(outcomes, report, context=self._context(), **fields)
        self.result = dataclasses.replace(result, notes=tuple(notes))
        return self.result

    def _statistics(self, outcomes: list[Outcome], whole: bool = True) -> tuple[StatsReport, list[SnapshotRow] | None, list[str]]:
        """The statistics report, the snapshot comparison (or the snapshot written), and notes. ``whole``: the run
        loop ran to its end (not interrupted, not stopped by ``-x``/``--maxfail``); else no snapshot is written, as
        its cells would be cut short; nor under a shard of N > 1, whose cells hold part of the runs."""
        s = self.settings
        seq = {"caps": self._caps(outcomes)} if s.stop_when_decided else None
        report = build_report(outcomes, s.baseline, s.seed, s.resamples, sequential=seq, target=s.generalize)
        rows, notes = None, []
        shard = self.agentrace.shard
        if s.snapshot and s.snapshot_update and shard is not None and shard.total > 1:
            notes.append(f"snapshot not written: shard {shard.index} of {shard.total} holds only part of each cell's "
                         f"runs; {setting_path(self.config, 'snapshot', s.snapshot)} is as it was: write it from the "
                         "merged folder (agentrace merge, then agentrace snapshot MERGED -o FILE)")
        elif s.snapshot and s.snapshot_update and not whole:
            notes.append(f"snapshot not written: the session stopped before every run ran (its cells would be cut "
                         f"short); {setting_path(self.config, 'snapshot', s.snapshot)} is as it was")
        elif s.snapshot and s.snapshot_update:
            path = setting_path(self.config, "snapshot", s.snapshot)
            snap, kept = updated_snapshot(path, make_snapshot(outcomes))
            write_snapshot(path, snap)
            notes.append(f"snapshot written: {path} ({len(snap['cells']) - kept} cells of this session"
                         + (f"; {kept} other cells kept from the file, not run in this session: delete it to start again)" if kept else ")"))
        elif s.snapshot:
            rows = compare(read_snapshot(setting_path(self.config, "snapshot", s.snapshot)), outcomes, tolerance=s.tolerance, seed=s.seed,
                           resamples=s.resamples, alpha=s.regression_alpha, target=s.generalize)
        return report, rows, notes

    def _caps(self, outcomes: list[Outcome]) -> dict[str, int]:
        """Planned reps per trial source (loads each trial file; falls back to the highest rep seen)."""
        caps = {}
        for source in sorted({o.source for o in outcomes if o.kind == "trial"}):
            try:
                caps[source] = planned_reps(self.settings.reps, load_trial(Path(source)))
            except (SpecError, OSError):
                caps[source] = max(o.rep for o in outcomes if o.source == source)
        return caps

    def store_path(self) -> Path | None:
        """The history file (None under ``--agentrace-no-save``, and under ``--agentrace-validate``: oracle and noop
        runs check tasks, they are no race between agents)."""
        if self.settings.no_save or self.settings.validate:
            return None
        return Path(self.settings.db).expanduser().resolve() if self.settings.db else default_path(self.config.rootpath)

    def session_info(self) -> SessionInfo:
        info = SessionInfo.collect(self.session_id, self.config.rootpath, out=self.out, started=self.started,
                                   args=[str(a) for a in self.config.invocation_params.args])
        info.finished = _now()
        info.digest = self.digest
        return info

    def _record(self, outcomes: tuple[Outcome, ...]) -> list[tuple[str, bool]]:
        """``last-session.json`` and the history store; returns note lines."""
        notes: list[tuple[str, bool]] = []
        if (self.out / MANIFEST_DIR).is_dir():  # every process has written its manifest lines by now
            try:
                seal_session(self.out, self.session_id)  # with $AGENTRACE_MANIFEST_KEY only
                self.digest = results_digest(self.out)
                # two short lines (the digest alone is 64 characters): they fit an 80-column log
                notes.append(("agentrace: results digest (agentrace verify OUT --digest D):", False))
                notes.append((f"  {self.digest}", False))
            except OSError as exc:
                notes.append((f"agentrace: manifests not sealed: {exc}", True))
        try:
            shard = self.agentrace.shard
            sharded = shard is not None and shard.total > 1
            write_last_session(self.out, self.session_id, [o.run_id for o in outcomes],
                               (shard.total, [shard.index]) if sharded else None,
                               [shard.index] if sharded and not self.whole else [], rootdir=self.config.rootpath,
                               splits={shard.index: self.agentrace.split} if sharded and self.agentrace.split else None)
        except OSError as exc:
            notes.append((f"agentrace: last-session record not written: {exc}", True))
        try:  # the results-folder index, so that reports read one file instead of every run.json
            # a run.json equal to the payload its item sent is checked against that outcome, not parsed again
            index.refresh(self.out, {rid: (self.records[rid], o) for rid, o in self.outcomes.items()})
        except OSError as exc:
            notes.append((f"agentrace: results index not written: {exc}", True))
        path = self.store_path()
        fresh = [o for o in outcomes if not o.reused]  # a resumed run is in the history of the session that ran it
        if path is None or not fresh:
            return notes
        try:
            with Store(path) as store:
                n = store.save_session(self.session_info(), fresh)
        except (StoreError, OSError) as exc:
            return [*notes, (f"agentrace: history not saved: {exc}", True)]
        reused = len(outcomes) - len(fresh)
        note = f" ({reused} reused runs are saved with the session that ran them)" if reused else ""
        return [*notes, (f"agentrace: saved {n} runs of session {self.session_id} to {path}{note}", False)]

    def _report_targets(self) -> dict[Format, Path]:
        """The outputs this session writes (``report.formats.FORMATS``): each file format whose option is set (its
        path), and each ``env:VAR`` format whose variable is set (the file it names)."""
        targets: dict[Format, Path] = {}
        for fmt in formats.FORMATS:
            if fmt.to == "file" and (value := getattr(self.settings, fmt.name, None)):
                targets[fmt] = setting_path(self.config, fmt.name, value)
            elif fmt.env and os.environ.get(fmt.env):
                targets[fmt] = Path(os.environ[fmt.env])
        return targets

    def _context(self) -> Context:
        """The result's context; the session row (git commit, times: ``SessionInfo.collect``) only when an output is
        written, so a session without one runs no git command for it."""
        s, targets = self.settings, self._report_targets()
        return Context(out=self.out, session=asdict(self.session_info()) if targets else None,
                       options={"reps": s.reps, "timeout": s.timeout}, baseline=s.baseline, seed=s.seed,
                       resamples=s.resamples, target=s.generalize, paths={fmt.name: path for fmt, path in targets.items()},
                       digest=self.digest, load_task=self.files.task)  # parsed once per process

    def _history(self) -> list[Outcome] | None:
        """The store's task outcomes (this session's included) for the Elo-over-time chart."""
        path = self.store_path()
        if path is None or not path.exists():
            return None
        try:
            with Store(path) as store:
                rows = store.rating_outcomes()
        except StoreError:
            return None
        return score_outcomes(rows) if rows else None  # stored runs keep their session's score: a no-op for those

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.session = session
        try:
            result = self.finish()
            xml = self.config.getoption("xmlpath", default=None)
            if xml and result.outcomes:
                patch_junit(Path(xml), result)
            if result.outcomes:
                self.written = self._write(result)
        except Exception:  # noqa: BLE001 - the runs are recorded already; the bug is shown and fails the session
            self._internal_error("writing the session's outputs")

    def _write(self, result: SessionResult) -> list[tuple[str, bool]]:
        """Render ``result`` to each requested output (``_report_targets``; a format's ``render(result)``); returns
        note lines. A file format is written to its path, an ``env:VAR`` one appended to the file ``$VAR`` names."""
        lines: list[tuple[str, bool]] = []
        for fmt, path in self._report_targets().items():
            try:
                text = fmt.render(result)
                if fmt.env:
                    with open(path, "a", encoding="utf-8") as fh:
                        fh.write(text + "\n")
                    lines.append((f"agentrace: appended {fmt.title} to ${fmt.env}", False))
                    continue
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text, encoding="utf-8")
                lines.append((f"agentrace: wrote {fmt.name} report {path}", False))
            except Exception as exc:  # noqa: BLE001 - one broken output must not stop the others
                where = f"${fmt.env} ({path})" if fmt.env else str(path)
                lines.append((f"agentrace: could not write {where}: {type(exc).__name__}: {exc}", True))
        return lines

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        """The one ``agentrace`` section (``report.terminal.section``), at pytest's width and verbosity; under it,
        in red, any internal error of the session's end (``_internal_error``)."""
        lines: list[tuple[str, dict[str, Any]]] = []
        try:
            if self.result is not None or not self.errors:  # else finish() failed already, its traceback is kept
                result = self.finish()
                shown = Shown(width=terminal_width(terminalreporter), verbosity=config.get_verbosity(),
                              show_cost=not self.settings.no_cost, skips=tuple(skip_lines(self.skipped.values())),
                              overrides=tuple(override_lines(self.agentrace.wanted, {o.agent for o in result.outcomes},
                                                             self.agentrace.overrides)),
                              snapshot=self.settings.snapshot, written=tuple(self.written))
                lines = section(result, shown)
        except Exception:  # noqa: BLE001 - as in pytest_sessionfinish: shown, never a crash that hides pytest's summary
            self._internal_error("the terminal summary")
        lines += [(line, {"red": True}) for line in self.errors]
        if lines:
            terminalreporter.section("agentrace")
        for line, markup in lines:
            terminalreporter.write_line(printable(line), **markup)  # what agents wrote: shown, never acted on

    def _internal_error(self, where: str) -> None:
        """An exception of the harness's own while ``where`` (called in its ``except``): its traceback is kept for
        the summary's last lines and the session's exit status becomes pytest's ``INTERNAL_ERROR`` (3). Every
        run is in the results folder already (``agentrace report OUT`` renders them again)."""
        self.errors += [f"agentrace: internal error in {where} (a bug of pytest-agentrace; the runs are kept in "
                        f"{self.out}, `agentrace report {self.out}` renders them):",
                        *traceback.format_exc().rstrip().splitlines()]
        if self.session is not None:
            self.session.exitstatus = pytest.ExitCode.INTERNAL_ERROR

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.progress.close()
