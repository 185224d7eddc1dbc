"""The pytest side of the statistics: options, stop-when-decided skips, and the end-of-session work on the
controller (statistics report, snapshot compare/update, Elo ratings, ``--agentrace-fail-on`` gates).

``StatsPlugin`` is registered by ``plugin.pytest_configure`` on the controller and on xdist workers; everything
that aggregates or touches the exit status checks ``is_worker`` first. A failing gate is applied like
pytest-cov's ``--cov-fail-under``: a ``pytest_runtestloop`` wrapper adds to ``session.testsfailed`` after the
test loop (exit status 1), and the summary prints one red reason line per failing cell.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

RESULT_KEY = pytest.StashKey[dict]()


def _worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def validate(config: pytest.Config) -> None:
    """Check the statistics options early; raises ``pytest.UsageError`` with the option and the fix."""
    from pytest_agentrace.stats.verdict import parse_fail_on

    try:
        parse_fail_on(config.getoption("agentrace_fail_on"))
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    snap = config.getoption("agentrace_snapshot")
    if config.getoption("agentrace_snapshot_update") and not snap:
        raise pytest.UsageError("--agentrace-snapshot-update needs --agentrace-snapshot PATH (the file to write)")
    if snap and not config.getoption("agentrace_snapshot_update") and not _worker(config):
        from pytest_agentrace.stats.snapshot import SnapshotError, read_snapshot

        try:
            read_snapshot(Path(snap))
        except SnapshotError as exc:
            raise pytest.UsageError(f"--agentrace-snapshot: {exc}") from None
    if config.getoption("agentrace_resamples") < 100:
        raise pytest.UsageError("--agentrace-resamples must be at least 100")


def planned_reps(config: pytest.Config, spec: Any) -> int:
    """The cap of a cell's reps: ``--agentrace-reps`` or the file's ``reps`` (1 when it has none)."""
    return int(config.getoption("agentrace_reps") or getattr(spec, "reps", None) or 1)


def should_skip(config: pytest.Config, spec: Any) -> str | None:
    """Skip reason for a run under ``--agentrace-stop-when-decided`` (None: run it). Trials only: a task file
    has a single arm, so nothing is compared and every rep runs."""
    if not config.getoption("agentrace_stop_when_decided", default=False) or spec.kind != "trial":
        return None
    from pytest_agentrace.options import out_dir
    from pytest_agentrace.plugin import SESSION_ID_KEY
    from pytest_agentrace.stats.sequential import skip_reason

    trial = spec.spec
    arms = [a.name for a in trial.arms]
    wanted = config.getoption("agentrace_arm", default=None)
    if wanted:
        arms = [a for a in arms if a in wanted]
    base = config.getoption("agentrace_baseline")
    base = base if base in arms else trial.baseline
    return skip_reason(spec, out_dir(config), config.stash[SESSION_ID_KEY], planned_reps(config, trial), arms, base)


def _caps(config: pytest.Config, outcomes: list[Any]) -> dict[str, int]:
    """Planned reps per trial source (loads each trial file; falls back to the highest rep seen)."""
    from pytest_agentrace.errors import SpecError
    from pytest_agentrace.spec.trial import load_trial

    caps = {}
    for source in sorted({o.source for o in outcomes if o.kind == "trial"}):
        try:
            caps[source] = planned_reps(config, load_trial(Path(source)))
        except (SpecError, OSError):
            caps[source] = max(o.rep for o in outcomes if o.source == source)
    return caps


def finish(config: pytest.Config, outcomes: list[Any]) -> dict[str, Any]:
    """End-of-session statistics on the controller. Returns ``{"lines", "failures", "notes", "report"}`` (the
    ``StatsReport``, which the session's exports reuse: ``session_report``)."""
    from pytest_agentrace.options import out_dir
    from pytest_agentrace.record.store import config_path
    from pytest_agentrace.report.stats_text import compare_lines, report_lines
    from pytest_agentrace.stats import ratings
    from pytest_agentrace.stats.report import build_report
    from pytest_agentrace.stats.snapshot import (
        compare,
        make_snapshot,
        read_snapshot,
        write_snapshot,
    )
    from pytest_agentrace.stats.verdict import gate_failures, parse_fail_on

    seed, resamples = config.getoption("agentrace_seed"), config.getoption("agentrace_resamples")
    seq = {"caps": _caps(config, outcomes)} if config.getoption("agentrace_stop_when_decided") else None
    report = build_report(outcomes, config.getoption("agentrace_baseline"), seed, resamples, sequential=seq)
    from pytest_agentrace.report.fit import terminal_width

    width = terminal_width(config.pluginmanager.get_plugin("terminalreporter"))
    lines, notes = report_lines(report, width=width), []
    rows: list[Any] | None = None  # None: no snapshot compared (verdict gates then apply to arm comparisons)
    snap = config.getoption("agentrace_snapshot")
    if snap and config.getoption("agentrace_snapshot_update"):
        path = write_snapshot(Path(snap), make_snapshot(outcomes))
        notes.append(f"snapshot written: {path} ({len({(o.kind, o.case, o.arm, o.agent) for o in outcomes})} cells)")
    elif snap:
        rows = compare(read_snapshot(Path(snap)), outcomes, tolerance=config.getoption("agentrace_tolerance"), seed=seed, resamples=resamples,
                       alpha=config.getoption("agentrace_regression_alpha"))
        lines += ["", f"compared with snapshot {snap}:", *compare_lines(rows, width=width)]
    if any(o.kind == "task" for o in outcomes) and config_path(config) is not None:  # saving: not --no-save, not --validate
        try:
            ratings.update_store(out_dir(config), outcomes)
        except (OSError, ValueError) as exc:
            notes.append(f"Elo ratings not saved: {exc}")
    gates = parse_fail_on(config.getoption("agentrace_fail_on"))
    failures = gate_failures(gates, report.cells, report.comparisons, rows, report.reliability)
    return {"lines": lines, "failures": failures, "notes": notes, "report": report}


def session_report(config: pytest.Config) -> Any:
    """The ``StatsReport`` this session's statistics were built from (after the test loop), or None."""
    found = config.stash.get(RESULT_KEY, None)
    return found.get("report") if found else None


class StatsPlugin:
    """Hooks of the statistics (registered on the controller and on xdist workers)."""

    def __init__(self, config: pytest.Config, aggregator_key: Any):
        self.config = config
        self.aggregator_key = aggregator_key

    def pytest_collection_modifyitems(self, session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
        """Under ``--agentrace-stop-when-decided`` run reps in order (rep-major, stable), so every arm's early
        reps come first and later reps can be skipped once decided. Workers sort the same way as the controller."""
        if config.getoption("agentrace_stop_when_decided"):
            from pytest_agentrace.plugin.collect import RUNSPEC_KEY

            items.sort(key=lambda it: spec.rep if (spec := it.stash.get(RUNSPEC_KEY, None)) is not None else 0)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtestloop(self, session: pytest.Session):
        result = yield
        if _worker(self.config):
            return result
        outcomes = self.config.stash[self.aggregator_key].scored()
        if not outcomes:
            return result
        try:
            found = finish(self.config, outcomes)
        except Exception as exc:  # noqa: BLE001 - a bug in the statistics must not lose the session's results; it fails the session visibly
            found = {"lines": [], "failures": [f"the statistics could not be computed: {type(exc).__name__}: {exc}"], "notes": []}
        self.config.stash[RESULT_KEY] = found
        if found["failures"]:
            session.testsfailed += 1
        return result

    @pytest.hookimpl(trylast=True)
    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        found = config.stash.get(RESULT_KEY, None)
        if _worker(config) or not found:
            return
        terminalreporter.section("agentrace statistics")
        for line in found["lines"]:
            terminalreporter.write_line(line)
        for line in found["notes"]:
            terminalreporter.write_line(line)
        for line in found["failures"]:
            terminalreporter.write_line(f"agentrace: FAILED {line}", red=True, bold=True)
