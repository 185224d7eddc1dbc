"""The example task files in ``example_suites/tasks`` (what the README's main job runs): each task's reference
solution (the ``oracle`` agent) passes its tests, hidden verify and lint, and ``noop`` fails as expected (xfail)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers.atif import check_folder

EXAMPLES = Path(__file__).parents[1] / "example_suites" / "tasks"


def test_example_tasks_oracle_passes_and_noop_fails(pytester: pytest.Pytester, xdist: list[str]) -> None:
    shutil.copytree(EXAMPLES, pytester.path / "tasks")
    res = pytester.runpytest("--agentrace", "--agentrace-out", "out", "tasks", *xdist)
    res.assert_outcomes(passed=2, xfailed=2)
    assert check_folder(pytester.path / "out") == 4  # trajectory.json of oracle and noop runs: valid ATIF
    runs = {(d["case"], d["agent"]): d for d in (json.loads(p.read_text()) for p in (pytester.path / "out").glob("runs/**/run.json"))}
    assert sorted(runs) == [("median-bug", "noop"), ("median-bug", "oracle"), ("slugify", "noop"), ("slugify", "oracle")]
    for case in ("median-bug", "slugify"):
        oracle, noop = runs[(case, "oracle")], runs[(case, "noop")]
        assert oracle["status"] == "passed" and {k: c["exit_code"] for k, c in oracle["checks"].items()} == {"tests": 0, "lint": 0, "verify": 0}
        assert noop["status"] == "failed" and noop["lines_changed"] == 0
