"""pytest hooks only: each calls the session object (``plugin.session.AgentraceSession``), as syrupy's hooks call
its ``SnapshotSession``. Nothing happens without ``--agentrace``: this module imports only ``options`` and
``plugin.switch`` (small, standard library), and ``pytest_configure`` imports the session module by name under
``--agentrace`` only (``switch.session_module``), as pytest-xdist's plugin imports its ``DSession``.

Data flow: ``pytest_configure`` builds the session object on every process (``AgentraceSession.start``) ->
``pytest_collect_file`` claims task/trial files (``plugin.collect`` nodes) -> ``pytest_collection_modifyitems``
keeps the runs ``spec.select`` selects -> each run item executes its RunSpec through ``run.pipeline`` -> its outcome
travels in ``report.user_properties`` (one JSON string; the same with pytest-xdist) -> the one ``Controller``
(``plugin.controller``, registered on the controller process only; an xdist worker registers nothing) takes each
payload once, builds the session result once after the test loop, sets the exit status, writes every output and
prints the ``agentrace`` section.
"""

from __future__ import annotations

import contextlib
import gc
import sys
from pathlib import Path

import pytest

from pytest_agentrace import options as _options
from pytest_agentrace.plugin.switch import (
    MARKERS,
    builtin_args,
    enabled,
    forgotten_flag,
    probe_ahead,
    session_module,
    session_of,
)


def pytest_addoption(parser: pytest.Parser) -> None:
    _options.add_pytest_options(parser)


def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """``--agentrace-builtin NAME``: the built-in tasks' paths join the command line before pytest parses it, so
    pytest-xdist workers and ``--collect-only`` see them as if typed (``switch.builtin_args``)."""
    args.extend(builtin_args(early_config))


def pytest_configure(config: pytest.Config) -> None:
    """Register the run items' markers (in any session, so ``--strict-markers`` with ``-m agentrace`` is clean with or
    without ``--agentrace``); under ``--agentrace`` build the session object (and on the controller its ``Controller``)."""
    for name, text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {text}")
    if enabled(config):
        probe_ahead(config)  # bwrap's test boxes start beside the session's imports
        session_module().AgentraceSession.start(config)
        if not gc.get_freeze_count():  # once per process (pytester's in-process sessions configure again)
            # what lives now (modules, classes, pytest's and this session's objects) lives as long as the process:
            # collected once, then out of the cycle collector's way (gc.freeze), so its later collections - pytest's
            # five at the end, to report unraisable exceptions - look only at what the session makes from here on
            gc.collect()
            gc.freeze()


def pytest_report_header(config: pytest.Config) -> list[str]:
    return agentrace.header() if (agentrace := session_of(config)) else []


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    """pytest-xdist: give workers the controller's session id."""
    if agentrace := session_of(node.config):
        agentrace.configure_node(node)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    return agentrace.ignore(collection_path) if (agentrace := session_of(config)) else None


def pytest_collect_file(file_path: Path, parent: pytest.Collector):
    return agentrace.collect_file(file_path, parent) if (agentrace := session_of(parent.config)) else None


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector):
    report = yield
    if agentrace := session_of(collector.config):
        agentrace.note_collect_report(collector, report)
    return report


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    if agentrace := session_of(config):
        agentrace.select(items)


@pytest.hookimpl(trylast=True)
def pytest_deselected(items: list[pytest.Item]) -> None:
    if items and (agentrace := session_of(items[0].config)):
        agentrace.count_deselected(items)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    if agentrace := session_of(node.config):
        agentrace.worker_down(node)


def pytest_collection_finish(session: pytest.Session) -> None:
    if agentrace := session_of(session.config):
        agentrace.collected(session.items)


@pytest.hookimpl(tryfirst=True)
def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config):
    return agentrace.report_status(report) if (agentrace := session_of(config)) else None


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtestloop(session: pytest.Session):
    agentrace = session_of(session.config)
    with agentrace.tolerate_spec_errors(session) if agentrace else contextlib.nullcontext():
        return (yield)


@pytest.hookimpl(trylast=True)
def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    if agentrace := session_of(config):
        agentrace.terminal_summary(terminalreporter, exitstatus)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if agentrace := session_of(session.config):
        agentrace.finish()
    elif exitstatus in (pytest.ExitCode.USAGE_ERROR, pytest.ExitCode.NO_TESTS_COLLECTED) and \
            (missed := forgotten_flag(session.config)):  # ``pytest task.yaml``: pytest alone says only "not found"
        files = " ".join(missed)
        line = (f"agentrace: {files}: task or trial files of pytest-agentrace, which pytest collects only with its "
                f"flag; run `pytest --agentrace {files}`")
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(line, yellow=True)
        else:
            print(line, file=sys.stderr)
