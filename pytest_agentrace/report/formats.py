"""Every report format, listed once: ``FORMATS``. The pytest options (``--agentrace-<name> PATH`` and the ini key
``agentrace_<name>``, ``options.py``), the controller's writing of the session's outputs and ``agentrace render OUT
--format NAME`` (``cli.reports``) all read this table.

A format is one module with ``render(result) -> str`` (``result``: a ``report.result.SessionResult``, made once
per session by the controller or by the CLI from a results folder) and one line here. ``to`` says where it goes:

- ``"file"``: the option ``--agentrace-<name> PATH`` (ini ``agentrace_<name>``) asks for it; written to PATH;
- ``"env:VAR"``: appended to the file named by the environment variable ``VAR`` when it is set (GitHub Actions'
  step summary), with no option;
- ``"cli"``: only ``agentrace render OUT --format <name>`` (the PR comment, JUnit XML);
- ``"terminal"``: the ``agentrace`` section of pytest's terminal summary. The session prints it itself, through
  ``report.terminal.section(result, shown)``, because what it shows depends on pytest's terminal width and
  verbosity and on lines only the running session has (skips, agent overrides, the outputs it wrote); the table's
  ``render(result)`` is the same section at the default verbosity with no width limit.

Every format can also be rendered from a results folder with ``agentrace render OUT --format <name>``. Modules are
imported by name when a format is rendered, so this table costs no import at start-up.

JUnit XML (``junit``) is ``"cli"``: in a session the JUnit file is pytest's own ``--junitxml`` (its junitxml plugin
writes each run item's ``user_properties``, ``report.junit.run_properties``), and a second option writing a second
JUnit file would only repeat it. The controller finishes pytest's file at the session's end with
``report.junit.patch_junit`` (every run's properties again with its final score, error kinds, the results digest:
the same property functions as ``render``); ``agentrace render OUT --format junit`` makes the whole document from a
results folder (e.g. shards merged with ``agentrace merge``), for a CI system's test report.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pytest_agentrace.report.result import SessionResult

STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"  # GitHub Actions' job summary file: the Markdown summary is appended


@dataclass(frozen=True)
class Format:
    """One output: ``name`` (the option's and ``--format``'s word), ``module`` (dotted name of the module whose
    ``render(result) -> str`` makes it), ``help`` (the option's help, or the CLI's), ``to`` (see the module
    docstring), ``title`` (what the session's summary line calls it)."""

    name: str
    module: str
    help: str
    to: str = "file"
    title: str = ""
    digest: bool = False  # render reads the results folder's digest (``result.context.digest``)

    @property
    def env(self) -> str | None:
        """The environment variable naming the file it is appended to (``to="env:VAR"``), else None."""
        return self.to.removeprefix("env:") if self.to.startswith("env:") else None

    def render(self, result: SessionResult) -> str:
        """The format's text for ``result`` (imports its module; errors of ``render`` propagate)."""
        fn: Callable[[SessionResult], str] = importlib.import_module(self.module).render
        return fn(result)


FORMATS: tuple[Format, ...] = (
    Format("html", "pytest_agentrace.report.html", "write a self-contained HTML report (charts, sortable tables, run "
           "details)"),
    Format("md", "pytest_agentrace.report.markdown", "write the summary as GitHub-flavoured Markdown (also appended to "
           f"${STEP_SUMMARY_ENV} when set)"),
    Format("json", "pytest_agentrace.report.json_export", "write the JSON export (schemas/report.schema.json)"),
    Format("step_summary", "pytest_agentrace.report.markdown", "the Markdown summary, appended to the GitHub Actions "
           "job summary", to=f"env:{STEP_SUMMARY_ENV}", title="the Markdown summary"),
    Format("comment", "pytest_agentrace.report.comment", "Markdown PR-comment body (with a hidden marker line)",
           to="cli"),
    Format("junit", "pytest_agentrace.report.junit", "JUnit XML, one test case per run with its agentrace.* properties "
           "(in a session: pytest's --junitxml file, finished by the controller)", to="cli", digest=True),
    Format("terminal", "pytest_agentrace.report.terminal", "the agentrace section of pytest's terminal summary",
           to="terminal"),
)


def by_name(name: str) -> Format:
    """The format called ``name`` in ``FORMATS``; raises ``KeyError`` naming the known ones."""
    for fmt in FORMATS:
        if fmt.name == name:
            return fmt
    raise KeyError(f"no report format {name!r} (formats: {', '.join(f.name for f in FORMATS)})")
