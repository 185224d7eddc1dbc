"""Counted checks: a check command that runs pytest is judged by a test report the harness asks for, not by its
exit code alone.

``pytest_argv`` tells a pytest command (``pytest ...``, ``py.test ...``, ``python[3[.N]] [-flags] -m pytest ...``,
with leading ``VAR=value`` words and any path before the program; one simple command: no shell operators,
command substitution or comment, so the harness's options can be appended at its end). ``counted_command`` appends the harness's own reporting:
``--junitxml=<path> -o junit_family=xunit2 -p no:cacheprovider`` (the last ``--junitxml`` wins in pytest's option
parser, so a ``--junitxml`` of the command itself is overridden; pytest's cache is neither read nor written).
``read_report`` parses that JUnit XML (pytest's ``junitxml`` plugin; format:
https://github.com/testmoapp/junitxml) into a ``Count``. A command of any other shape keeps the exit-code rule.

``hidden_tests`` lists the test functions a verify file defines, by reading its syntax tree (``ast``) with pytest's
default collection rules (``test*`` functions, ``Test*`` classes without ``__init__``; ``@pytest.mark.skip``,
``skipif`` and ``xfail`` tests left out): no process, no import of the graded code, the same answer for every run
of a task. A task whose own configuration collects other names (``python_functions``) needs its verify tests named
the default way; ``--agentrace-validate`` shows the mismatch as a failing oracle.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import stat
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

REPORT_NAME = "junit.xml"
REPORT_MAX_BYTES = 32 * 1024 * 1024  # a larger report is not read (no test report)
_PYTHON = re.compile(r"(?:.*/)?python(?:\d+(?:\.\d+)?)?")
_ASSIGN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=\S*")
_UNSAFE = re.compile(r"[;&|<>()`#\n]|\$\(")  # operators, substitutions, comments: not one simple command
_PY_VALUE_FLAGS = {"-W", "-X"}


def pytest_argv(command: str) -> bool:
    """True when ``command`` is one simple command that runs pytest (see the module docstring).

    >>> pytest_argv("python -m pytest -q test_fib.py"), pytest_argv("make test"), pytest_argv("pytest && ruff .")
    (True, False, False)
    """
    if _UNSAFE.search(command) or command.rstrip().endswith("\\"):
        return False
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    while words and _ASSIGN.fullmatch(words[0]):
        words = words[1:]
    if not words:
        return False
    if words[0].rsplit("/", 1)[-1] in ("pytest", "py.test"):
        return True
    if not _PYTHON.fullmatch(words[0]):
        return False
    i = 1
    while i < len(words):
        word = words[i]
        if word == "-m":
            return words[i + 1:i + 2] == ["pytest"]
        if word in _PY_VALUE_FLAGS:
            i += 2
        elif word.startswith("-") and not word.startswith(("-c", "-m")):
            i += 1
        else:
            return False  # a script or -c code: not pytest
    return False


def counted_command(command: str, report: Path) -> str:
    """``command`` with the harness's reporting appended (``command`` must satisfy ``pytest_argv``)."""
    return f"{command} {shlex.quote('--junitxml=' + str(report))} -o junit_family=xunit2 -p no:cacheprovider"


@dataclass(frozen=True)
class Case:
    """One ``<testcase>`` of a report: ``key`` is its classname and name joined by ``.`` with a parameter suffix
    (``[...]``) removed; ``outcome`` is ``passed`` / ``failed`` / ``error`` / ``skipped``."""

    key: str
    outcome: str


@dataclass(frozen=True)
class Count:
    """What a test report says: tests ``ran`` (not skipped), ``passed``, ``failed``, ``errors`` and ``skipped``
    (xfail included), and the cases themselves."""

    ran: int = 0
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    cases: tuple[Case, ...] = field(default=(), repr=False)

    def to_dict(self) -> dict[str, int]:
        return {"ran": self.ran, "passed": self.passed, "failed": self.failed, "errors": self.errors,
                "skipped": self.skipped}


def read_report(path: Path) -> Count | None:
    """The ``Count`` of the JUnit XML at ``path``, or None when there is no readable report (missing, not a regular
    file, a link, over ``REPORT_MAX_BYTES`` or not XML). The file is opened without following a link and without
    blocking (a FIFO the check's code left there has no writer)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > REPORT_MAX_BYTES:
            return None
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read(REPORT_MAX_BYTES + 1)
    finally:
        os.close(fd)
    try:
        root = ET.fromstring(data)
    except ET.ParseError:
        return None
    if root.tag not in ("testsuites", "testsuite"):
        return None
    cases = []
    for case in root.iter("testcase"):
        name = re.sub(r"\[.*\]$", "", case.get("name", ""), flags=re.S)
        key = ".".join(p for p in (case.get("classname", ""), name) if p)
        kinds = {child.tag for child in case}
        outcome = ("error" if "error" in kinds else "failed" if "failure" in kinds
                   else "skipped" if "skipped" in kinds else "passed")
        cases.append(Case(key, outcome))
    n = {k: sum(c.outcome == k for c in cases) for k in ("passed", "failed", "error", "skipped")}
    return Count(ran=len(cases) - n["skipped"], passed=n["passed"], failed=n["failed"], errors=n["error"],
                 skipped=n["skipped"], cases=tuple(cases))


def verdict(count: Count | None, hidden: Iterable[str] = ()) -> str | None:
    """Why a counted check fails although its command exited 0, or None when its report says it passed:
    ``no test report``, ``N of M hidden tests ran`` (``hidden``: the keys from ``hidden_tests``; a hidden test ran
    when a non-skipped case's key equals it or one ends with the other on a ``.`` boundary, as pytest's rootdir
    may sit above or below the tree's root), ``no test ran``, ``N of M tests failed``."""
    if count is None:
        return "no test report"
    hidden = list(hidden)
    if hidden:
        ran = sum(any(_same(c.key, h) and c.outcome != "skipped" for c in count.cases) for h in hidden)
        if ran < len(hidden):
            return f"{ran} of {len(hidden)} hidden tests ran"
    if count.ran == 0:
        return "no test ran"
    bad = count.failed + count.errors
    if bad:
        return f"{bad} of {count.ran} tests failed"
    return None


def _same(case: str, hidden: str) -> bool:
    return case == hidden or case.endswith("." + hidden) or hidden.endswith("." + case)


_SKIP_MARKS = {"skip", "skipif", "xfail"}


def _skipped(node: ast.AST) -> bool:
    for dec in getattr(node, "decorator_list", ()):
        target = dec.func if isinstance(dec, ast.Call) else dec
        if isinstance(target, ast.Attribute) and target.attr in _SKIP_MARKS:
            return True
    return False


def hidden_tests(files: Mapping[str, str]) -> list[str]:
    """The test keys (``pkg.test_mod.TestClass.test_name``: the path without ``.py``, ``/`` as ``.``) of every
    ``test_*.py`` / ``*_test.py`` file in ``files`` ({relative path: source}) that pytest's default rules collect;
    a file that does not parse gives none (its collection error fails the check anyway)."""
    keys: list[str] = []
    for rel, source in files.items():
        name = rel.rsplit("/", 1)[-1]
        if not (name.endswith(".py") and (name.startswith("test_") or name.endswith("_test.py"))):
            continue
        try:
            tree = ast.parse(source)
        except (SyntaxError, ValueError):
            continue
        if _not_collected(tree.body):
            continue
        keys += _tests(tree.body, rel[:-3].replace("/", "."))
    return keys


def _not_collected(body: list[ast.stmt]) -> bool:
    for stmt in body:  # ``__test__ = False`` at module level
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__test__" for t in stmt.targets):
            return isinstance(stmt.value, ast.Constant) and stmt.value.value is False
    return False


def _tests(body: list[ast.stmt], prefix: str) -> list[str]:
    found: list[str] = []
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name.startswith("test"):
            if not _skipped(stmt):
                found.append(f"{prefix}.{stmt.name}")
        elif isinstance(stmt, ast.ClassDef) and stmt.name.startswith("Test") and not _skipped(stmt):
            if any(isinstance(s, ast.FunctionDef) and s.name == "__init__" for s in stmt.body) or _not_collected(stmt.body):
                continue
            found += _tests(stmt.body, f"{prefix}.{stmt.name}")
    return found
