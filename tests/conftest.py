"""Shared fixtures for the project's tests: fake agent CLIs on PATH, full-width output, the ``xdist``
parametrisation. Shared helpers (git repos, scripts, kits) are the ``helpers`` package beside this file."""

from __future__ import annotations

import os
from pathlib import Path

# numpy/scipy C extensions cannot be loaded twice in one process, and pytester's in-process runs drop the modules
# a run imported; every agentrace session ends with the statistics (numpy/scipy), so load them once here.
import numpy  # noqa: F401
import pytest
import scipy.stats  # noqa: F401
from helpers import XDIST


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


@pytest.fixture(params=XDIST)
def xdist(request: pytest.FixtureRequest) -> list[str]:
    """The one serial/xdist parametrisation: ``[]`` (serial) or ``["-p", "xdist", "-n", "2"]``, extra pytest
    arguments for a pytester session whose behaviour may change under xdist (a test takes ``xdist``)."""
    return request.param
