"""A task or trial file that cannot be loaded is one collection error, and the other files' runs still go ahead.

pytest stops a session before its first test when collection had errors ("Interrupted: 1 error during
collection"), unless ``--continue-on-collection-errors`` is given. For agentrace files continuing is the default:
when every collection error of the session comes from a task or trial file (a ``collect.SpecFile``: a bad key, a
file that is not valid YAML/TOML, an unknown agent), the test loop runs as under ``--continue-on-collection-errors``.
The errors are still reported one line each, and the session still fails (exit status 1). A collection error in
any other file (a Python test module) keeps pytest's rule, so a broken test suite stops as it always did; ``-x``
/ ``--maxfail`` still stop collection at the first error. Under pytest-xdist the controller runs what the workers
collected whatever the collection errors, so a session ends the same way with and without ``-n``.
"""

from __future__ import annotations

from typing import Any

import pytest


class CollectErrorsPlugin:
    """Counts the collection errors of task and trial files and lets the test loop go ahead when they are the
    only collection errors (module docstring)."""

    def __init__(self) -> None:
        self.spec_errors: set[str] = set()  # node ids of task/trial files whose collection failed

    @pytest.hookimpl(wrapper=True)
    def pytest_make_collect_report(self, collector: pytest.Collector) -> Any:
        # imported here, as the hooks that build the nodes import it: the same class even when a test harness
        # (pytester) drops and re-imports the package's modules between sessions
        from pytest_agentrace.plugin.collect import SpecFile

        report = yield
        if report.failed and isinstance(collector, SpecFile):
            self.spec_errors.add(report.nodeid)
        return report

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> Any:
        option = session.config.option
        before = option.continue_on_collection_errors
        if session.testsfailed and not before and session.testsfailed <= len(self.spec_errors):
            option.continue_on_collection_errors = True
        try:
            return (yield)
        finally:
            option.continue_on_collection_errors = before

