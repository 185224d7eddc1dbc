"""pytest hooks and wiring only. Nothing happens without ``--agentrace``.

Data flow: ``pytest_collect_file`` claims task/trial files -> run items execute in ``setup`` ->
their outcome travels in ``report.user_properties`` (one JSON string; the same with pytest-xdist) ->
the controller's ``session.Aggregator`` gathers them in ``pytest_runtest_logreport`` -> the summary is
printed in ``pytest_terminal_summary``.
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

from pytest_agentrace.options import add_pytest_options, in_package, out_dir

AGGREGATOR_KEY = pytest.StashKey["object"]()
SESSION_ID_KEY = pytest.StashKey[str]()


def pytest_addoption(parser: pytest.Parser) -> None:
    add_pytest_options(parser)


def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """``--agentrace-builtin NAME``: add the built-in tasks' paths to the command line (``builtin.extend_args``)."""
    from pytest_agentrace.spec.builtin import extend_args

    extend_args(early_config.known_args_namespace, args)


def _enabled(config: pytest.Config) -> bool:
    return bool(config.getoption("agentrace", default=False))


def is_worker(config: pytest.Config) -> bool:
    """True inside a pytest-xdist worker (which must never aggregate or set the exit status)."""
    return hasattr(config, "workerinput")


def pytest_configure(config: pytest.Config) -> None:
    if not _enabled(config):
        return
    from pytest_agentrace.plugin.controller import Aggregator

    sid = config.workerinput.get("agentrace_session") if is_worker(config) else None
    config.stash[SESSION_ID_KEY] = sid or uuid.uuid4().hex[:12]
    if not is_worker(config):
        out = out_dir(config)
        if in_package(out):
            raise pytest.UsageError(f"the results folder would be {out}, inside the installed pytest-agentrace package; "
                                    "run pytest from another folder or pass --agentrace-out DIR")
        _check_out_dir(out)
        _check_report_paths(config)
    config.stash[AGGREGATOR_KEY] = Aggregator()
    config.pluginmanager.register(SessionPlugin(config), "agentrace-session")
    from pytest_agentrace.plugin.collect_errors import CollectErrorsPlugin

    # a bad task/trial file is one collection error; the other files still run
    config.pluginmanager.register(CollectErrorsPlugin(), "agentrace-collect-errors")
    from pytest_agentrace.plugin.stats import (
        StatsPlugin,  # issue 5: statistics, snapshots, gates
    )
    from pytest_agentrace.plugin.stats import validate as validate_stats

    validate_stats(config)
    config.pluginmanager.register(StatsPlugin(config, AGGREGATOR_KEY), "agentrace-stats")
    from pytest_agentrace.plugin.validate import configure as configure_validation

    configure_validation(config)
    if not is_worker(config):
        from pytest_agentrace.run.resume import install_sigterm

        install_sigterm(config)
        from pytest_agentrace.plugin.outputs import (
            ReportPlugin,  # issue 8: store, HTML/Markdown/JSON at session end
        )

        config.pluginmanager.register(ReportPlugin(config, AGGREGATOR_KEY, SESSION_ID_KEY), "agentrace-report")
        from pytest_agentrace.plugin.progress import register as register_progress

        register_progress(config)  # issue 8: live status / plain lines under -v


def _check_out_dir(out: Path) -> None:
    """Fail early (one usage error, not one traceback per run) when the results folder cannot be written."""
    import os
    import tempfile

    try:
        out.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".write-test.", dir=out)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise pytest.UsageError(f"--agentrace-out {out}: cannot write the results folder there ({exc.strerror or exc})") from None


def _check_report_paths(config: pytest.Config) -> None:
    """Usage error before any run (and its cost) when a ``--agentrace-html/md/json`` file could not be written at
    the end: its folder cannot be made or written, or the path is a folder or a read-only file."""
    import os

    for option in ("html", "md", "json"):
        value = config.getoption(f"agentrace_{option}", default=None)
        if not value:
            continue
        path = Path(value)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise pytest.UsageError(f"--agentrace-{option} {value}: cannot make its folder ({exc.strerror or exc})") from None
        if path.is_dir():
            raise pytest.UsageError(f"--agentrace-{option} {value}: is a folder; give a file name, e.g. {path / ('report.' + option)}")
        if not os.access(path if path.exists() else path.parent, os.W_OK):
            raise pytest.UsageError(f"--agentrace-{option} {value}: not writable")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """pytest-xdist: give workers the controller's session id."""
    if _enabled(node.config):
        node.workerinput["agentrace_session"] = node.config.stash[SESSION_ID_KEY]


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under --agentrace, a task's starter ``repo`` folder is input, not tests: do not collect it."""
    if not _enabled(config) or not collection_path.is_dir():
        return None
    from pytest_agentrace.plugin.collect import task_repo_dirs, trial_input_dirs

    if collection_path.resolve() in task_repo_dirs(collection_path.parent, config) | trial_input_dirs(collection_path.parent, config):
        return True
    return None


def pytest_collect_file(file_path: Path, parent: pytest.Collector):
    if not _enabled(parent.config):
        return None
    from pytest_agentrace.plugin.collect import (
        TaskFile,
        TrialFile,
        named_on_command_line,
        sniff_task,
        sniff_trial,
    )

    named = named_on_command_line(file_path, parent.config)  # claimed even when it does not look like one
    if file_path.suffix in (".yaml", ".yml") and (named or sniff_task(file_path, parent.config)):
        if parent.config.getoption("agentrace_validate"):
            from pytest_agentrace.plugin.validate import ValidationTaskFile

            return ValidationTaskFile.from_parent(parent, path=file_path)
        return TaskFile.from_parent(parent, path=file_path)
    if file_path.suffix == ".toml" and ((named and file_path.name != "pyproject.toml") or sniff_trial(file_path, parent.config)):
        return TrialFile.from_parent(parent, path=file_path)
    return None


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """``--agentrace-difficulty``: deselect task runs of other difficulties (``builtin.deselect_by_difficulty``);
    runs of different files that would share a results folder become errors (``collect.mark_collisions``)."""
    if _enabled(config):
        from pytest_agentrace.plugin.collect import mark_collisions
        from pytest_agentrace.spec.builtin import deselect_by_difficulty

        deselect_by_difficulty(config, items)
        mark_collisions(items)


def execute(config: pytest.Config, spec, tmp_path: Path):
    """Run one RunSpec in ``tmp_path`` and return its Outcome (called from the item's setup)."""
    from pytest_agentrace.run.pipeline import run_task
    from pytest_agentrace.run.resume import reused_outcome

    out = out_dir(config)
    reused = reused_outcome(config, spec, out)
    if reused is not None:
        return reused
    options = {"cache_dir": out / ".cache" / "repos", "agent_home": config.getoption("agentrace_agent_home")}
    from pytest_agentrace.plugin.progress import stdout_feed

    options["on_stdout"] = stdout_feed(config, spec)  # issue 8: the live progress display reads the agent's output
    from pytest_agentrace.model_double.opts import run_options

    options.update(run_options(config))  # issue 7: --agentrace-offline, --agentrace-model-double
    try:
        if spec.kind == "trial":
            from pytest_agentrace.run.trial import run_trial

            return run_trial(spec, tmp_path, out, options, config.stash[SESSION_ID_KEY])
        return run_task(spec, tmp_path, out, options, config.stash[SESSION_ID_KEY])
    except Exception as exc:  # a fault of ours must not lose the run: record it as an infrastructure error
        from pytest_agentrace.run.pipeline import error_outcome

        return error_outcome(spec, out, config.stash[SESSION_ID_KEY], f"harness fault: {type(exc).__name__}: {exc}")


class SessionPlugin:
    """Per-session hooks registered by ``pytest_configure`` (holds the config, like pytest-cov's plugin)."""

    def __init__(self, config: pytest.Config):
        self.config = config

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Gather outcomes from reports (on the controller these include every xdist worker's)."""
        for name, value in getattr(report, "user_properties", ()):
            if name == "agentrace.outcome":
                self.config.stash[AGGREGATOR_KEY].add_json(value)
                return

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """After junitxml wrote its file (trylast), put the final composite scores into it; record the session's
        run ids in ``<out>/last-session.json`` (``outcome.write_last_session``)."""
        if is_worker(self.config):
            return
        outcomes = self.config.stash[AGGREGATOR_KEY].outcomes
        if outcomes:
            from pytest_agentrace.record.runfile import write_last_session

            try:
                write_last_session(out_dir(self.config), self.config.stash[SESSION_ID_KEY], list(outcomes))
            except OSError as exc:
                print(f"agentrace: last-session record not written: {exc}", file=sys.stderr)
        xml = self.config.getoption("xmlpath", default=None)
        if not xml:
            return
        from pytest_agentrace.report.junit import patch_scores

        scored = self.config.stash[AGGREGATOR_KEY].scored()
        patch_scores(Path(xml), {o.run_id: o.score for o in scored if o.kind == "task"})

    def pytest_terminal_summary(self, terminalreporter, exitstatus: int, config: pytest.Config) -> None:
        if is_worker(config):
            return
        agg = config.stash[AGGREGATOR_KEY]
        if not agg.outcomes:
            return
        terminalreporter.section("agentrace")
        from pytest_agentrace.report.fit import terminal_width

        show_cost, width = not config.getoption("agentrace_no_cost"), terminal_width(terminalreporter)
        for line in agg.summary_lines(show_cost=show_cost, verbose=config.getoption("verbose"), width=width):
            terminalreporter.write_line(line)
