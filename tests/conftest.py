"""Shared fixtures for the project's tests: real git repos, fake agent CLIs on PATH, pytester helpers."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

# numpy/scipy C extensions cannot be loaded twice in one process, and pytester's in-process runs drop the modules
# a run imported; every agentrace session ends with the statistics (numpy/scipy), so load them once here.
import numpy  # noqa: F401
import pytest
import scipy.stats  # noqa: F401

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


@pytest.fixture(autouse=True)
def _no_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sessions run by these tests print full-width tables: output that is not a terminal is narrowed only to a
    ``$COLUMNS`` that is set, and some runners set it (pytest-xdist workers here get COLUMNS=80). A test of the
    narrowing sets it itself."""
    monkeypatch.delenv("COLUMNS", raising=False)


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder put first on PATH for fake agent CLIs (``write_script(bin_dir / 'claude', ...)``)."""
    d = tmp_path / "fakebin"
    d.mkdir()
    monkeypatch.setenv("PATH", f"{d}{os.pathsep}{os.environ['PATH']}")
    return d


BUGGY_REPO = {
    "calc.py": "def add(a, b):\n    return a - b\n",
    "test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
    "pytest.ini": "[pytest]\naddopts = -p no:cacheprovider\n",
}
FIXER = """\
import pathlib
p = pathlib.Path("calc.py")
p.write_text(p.read_text().replace("a - b", "a + b"))
print("fixed calc.py")
"""
