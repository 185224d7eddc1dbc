"""Shared helpers of the project's tests, imported as ``helpers`` (``tests/`` is on ``sys.path`` through its
conftest): real git repos, executable fake CLIs, the serial/xdist parameters, and in submodules the kits of the
adapter (``helpers.adapters``), ATIF (``helpers.atif``), model double (``helpers.double``), real CLI
(``helpers.realcli``), report (``helpers.report``) and trial (``helpers.trial``) tests. Fixtures stay in
``tests/conftest.py``."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

# Session-level tests run each case serially and with pytest-xdist (2 workers): the ``xdist`` fixture of
# tests/conftest.py is parametrised with these; a test takes ``xdist`` (a list of extra pytest arguments).
XDIST = [pytest.param([], id="serial"), pytest.param(["-p", "xdist", "-n", "2"], id="xdist")]

GIT_ENV = {
    "GIT_AUTHOR_NAME": "test", "GIT_AUTHOR_EMAIL": "test@localhost",
    "GIT_COMMITTER_NAME": "test", "GIT_COMMITTER_EMAIL": "test@localhost",
}


def git(cwd: Path, *args: str) -> str:
    """Run git in ``cwd`` with a fixed identity; return stdout (raises on failure)."""
    return subprocess.run(["git", *args], cwd=cwd, env={**os.environ, **GIT_ENV}, check=True, capture_output=True, text=True).stdout


def make_repo(path: Path, files: dict[str, str], commit: bool = True) -> Path:
    """Create a real git repository at ``path`` holding ``files`` (one commit on branch main)."""
    path.mkdir(parents=True, exist_ok=True)
    for rel, content in files.items():
        p = path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(content))
    if commit:
        git(path, "init", "-q", "-b", "main")
        git(path, "add", "-A")
        git(path, "commit", "-q", "-m", "start")
    return path


def write_script(path: Path, body: str) -> Path:
    """Write an executable Python script (shebang = this interpreter)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    path.chmod(path.stat().st_mode | stat.S_IEXEC | stat.S_IXGRP | stat.S_IXOTH)
    return path


BUGGY_REPO = {
    "calc.py": "def add(a, b):\n    return a - b\n",
    "test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
    "pytest.ini": "[pytest]\naddopts = -p no:cacheprovider\n",
}
# a task ``t`` on a repo made from BUGGY_REPO (``repo``), judged by its own test; add ``agents:`` (and more keys)
BUGGY_TASK = "name: t\ndescription: fix add\nrepo: repo\ntest_command: python -m pytest -q test_calc.py\n"
FIXER = """\
import pathlib
p = pathlib.Path("calc.py")
p.write_text(p.read_text().replace("a - b", "a + b"))
print("fixed calc.py")
"""


WAIT_SECONDS = 120  # upper bound for a state to appear on a loaded machine (not a timing assertion)


def wait_for(predicate: Callable[[], object], what: str, step: float = 0.05) -> None:
    """Poll ``predicate`` every ``step`` seconds until it is true; ``AssertionError`` naming ``what`` after
    ``WAIT_SECONDS``."""
    deadline = time.monotonic() + WAIT_SECONDS
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        time.sleep(step)

