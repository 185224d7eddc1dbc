"""How a run that did not pass is reported, shaped by pytest's ``--tb`` style.

A failed run is no Python traceback: its report is a head line (``<run id>: <status>: <reason>``), the failing
check's command and the last lines of its log, and notes (what an answer missed). It is handed to pytest as the
same representation objects pytest builds for a traceback (``_pytest._code.code``: a one-entry native traceback and
a crash location), so every ``--tb`` style, the short summary, JUnit XML and pytest-xdist (which serializes exactly
these objects) treat it as they treat an assertion:

- ``--tb=long`` / ``auto`` / ``native`` (default): everything, with ``LONG_TAIL`` log lines;
- ``--tb=short``: the head line, the check's line and its last ``SHORT_TAIL`` log lines;
- ``--tb=line``: one line, ``path:line: head`` (pytest prints the crash location);
- ``--tb=no``: nothing (pytest prints no failure section).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from _pytest._code.code import ExceptionChainRepr, ReprFileLocation, ReprTracebackNative

from pytest_agentrace.record.redact import printable as printable  # kept where the plugin's modules name it

LONG_TAIL = 20  # log lines under --tb=long
SHORT_TAIL = 5  # log lines under --tb=short
class RunFailed(AssertionError):
    """The agent's run did not pass (a sample, not our fault).

    ``head``: the one-line verdict; ``check``: the failing check's line (``--- tests: `cmd` exit 1; last lines of
    PATH:``) or None; ``log``: that check's last log lines (at most ``LONG_TAIL``); ``notes``: lines shown after it.
    Each is kept ``printable``. ``str()`` is the long report.
    """

    def __init__(self, head: str, check: str | None = None, log: Sequence[str] = (), notes: Sequence[str] = ()):
        self.head, self.check = printable(head), printable(check) if check is not None else None
        self.log, self.notes = [printable(line) for line in list(log)[-LONG_TAIL:]], [printable(n) for n in notes]
        super().__init__(self.text("long"))

    def lines(self, style: str) -> list[str]:
        """The report's lines under ``--tb=style`` (``line``: none, pytest prints the crash line with the head)."""
        if style == "line":
            return []
        out = [self.head]
        if self.check is not None:
            out += [self.check, *(self.log[-SHORT_TAIL:] if style == "short" else self.log)]
        return out + self.notes

    def text(self, style: str) -> str:
        return "\n".join(self.lines(style))


def case_line(path: Path, case: str) -> int:
    """The 1-based line of ``path`` that names ``case`` (``name: case`` in a task file, ``id = "case"`` in a trial
    file); 1 when no line does or the file cannot be read."""
    pattern = re.compile(rf"""^\s*-?\s*(name|id)\s*[:=]\s*["']?{re.escape(case)}["']?\s*(#.*)?$""")
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return 1
    return next((n for n, line in enumerate(text.splitlines(), 1) if pattern.match(line)), 1)


def failure_repr(failed: RunFailed, location: str, lineno: int, style: str) -> ExceptionChainRepr:
    """pytest's representation of ``failed`` under ``--tb=style``: the report lines as one native traceback entry
    and the crash location ``location:lineno`` with the head line (the short summary's and ``--tb=line``'s text)."""
    tb = ReprTracebackNative([line + "\n" for line in failed.lines(style)])
    return ExceptionChainRepr([(tb, ReprFileLocation(location, lineno, failed.head), None)])
