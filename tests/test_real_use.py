"""Sessions as users run them: under ``-W error``, ... (serial and ``-n 2``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import BUGGY_REPO, FIXER, make_repo, write_script

XDIST = [pytest.param([], id="serial"), pytest.param(["-p", "xdist", "-n", "2"], id="xdist")]
TASK = "name: {name}\ndescription: fix add\nrepo: repo\ntest_command: python -m pytest -q test_calc.py\n"


@pytest.mark.parametrize("xdist", XDIST)
def test_runs_pass_under_warnings_as_errors(pytester: pytest.Pytester, bin_dir: Path, xdist: list[str]) -> None:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "fixer", FIXER)
    (pytester.path / "task.yaml").write_text(TASK.format(name="t") + "agents: [{name: fixer, command: [fixer]}, noop]\n")
    res = pytester.runpytest_subprocess("--agentrace", "--agentrace-out", "o", "-W", "error", "-p", "no:cacheprovider", "-p", "no:benchmark",
                                        "--agentrace-reps", "2", *xdist)
    res.assert_outcomes(passed=2, xfailed=2)
    assert "ResourceWarning" not in res.stdout.str() + res.stderr.str()
