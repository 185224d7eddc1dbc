"""Run items round-trip through pytest's own caches: ``--lf`` re-runs only the failed run, ``--ff`` runs it first,
``--sw`` resumes at it, on the installed pytest and (``.ci/run``) on pytest 8.x and the newest 9.x, whose node ids
are structured (path, names, params) and were compared against ids read back from ``.pytest_cache``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from helpers import BUGGY_REPO, FIXER, make_repo, write_script
from helpers.trial import make_project, trial_toml

# fails unless the file FIXED_FLAG exists beside the script's folder (so a later session can make it pass)
LAZY = FIXER.replace("import pathlib\n", "import pathlib, sys\nif not (pathlib.Path(sys.argv[0]).parent / 'FIXED').exists():\n"
                     "    sys.exit(0)\n", 1)
TASK = ("name: fix-add\ndescription: Fix add().\nrepo: repo\ntest_command: python -m pytest -q -p no:cacheprovider test_calc.py\n"
        "timeout: 60\nagents:\n  - {name: fixer, command: fixer}\n  - {name: lazy, command: lazy}\n"
        "  - {name: second, command: fixer}\n")


def task_project(root: Path, bin_dir: Path) -> None:
    make_repo(root / "repo", BUGGY_REPO)
    write_script(bin_dir / "fixer", FIXER)
    write_script(bin_dir / "lazy", LAZY)
    (root / "task.yaml").write_text(TASK)
    # LAZY reads a flag beside its script, outside its workspace: no sandbox here (test_sandbox_attacks.py has it)
    (root / "pytest.ini").write_text("[pytest]\nagentrace_sandbox = off\n")


def ran(res: pytest.RunResult) -> list[str]:
    """The items a ``-v`` session ran, in order, with their outcomes (serial or xdist lines)."""
    found = []
    for line in res.stdout.lines:
        m = re.match(r"^(?:\[gw\d+\] \[ *\d+%\] (PASSED|FAILED) )?task\.yaml::(\S+)(?: (PASSED|FAILED))?", line)
        if m and (m.group(1) or m.group(3)):
            found.append(f"{m.group(2)} {m.group(1) or m.group(3)}")
    return found


def lastfailed(root: Path) -> dict:
    return json.loads((root / ".pytest_cache" / "v" / "cache" / "lastfailed").read_text())


def test_lf_reruns_only_the_failed_run(pytester: pytest.Pytester, bin_dir: Path, xdist: list[str]) -> None:
    task_project(pytester.path, bin_dir)
    first = pytester.runpytest("--agentrace", "--agentrace-no-save", *xdist)
    first.assert_outcomes(passed=2, failed=1)
    assert lastfailed(pytester.path) == {"task.yaml::fix-add[lazy-r1]": True}
    again = pytester.runpytest("--agentrace", "--agentrace-no-save", "--lf", "-v", *xdist)
    again.assert_outcomes(failed=1)  # the others are not collected (pytest filters the file)
    assert ran(again) == ["fix-add[lazy-r1] FAILED"]
    (bin_dir / "FIXED").write_text("")
    fixed = pytester.runpytest("--agentrace", "--agentrace-no-save", "--lf", *xdist)
    fixed.assert_outcomes(passed=1)
    assert lastfailed(pytester.path) == {}


def test_lf_reruns_only_the_failed_trial_run(pytester: pytest.Pytester) -> None:
    """A trial item ``question[arm-agent-rN]``: the baseline arm answers 8080 (wrong), the docs arm 8123."""
    make_project(pytester.path)
    (pytester.path / "ports.toml").write_text(trial_toml())
    pytester.runpytest("--agentrace", "--agentrace-no-save").assert_outcomes(passed=1, failed=1)
    assert lastfailed(pytester.path) == {"ports.toml::port[baseline-bot-r1]": True}
    again = pytester.runpytest("--agentrace", "--agentrace-no-save", "--lf")
    again.assert_outcomes(failed=1)
    assert "run-last-failure: rerun previous 1 failure" in again.stdout.str()


def test_ff_runs_the_failed_run_first(pytester: pytest.Pytester, bin_dir: Path) -> None:
    task_project(pytester.path, bin_dir)
    pytester.runpytest("--agentrace", "--agentrace-no-save").assert_outcomes(passed=2, failed=1)
    again = pytester.runpytest("--agentrace", "--agentrace-no-save", "--ff", "-v")
    assert ran(again) == ["fix-add[lazy-r1] FAILED", "fix-add[fixer-r1] PASSED", "fix-add[second-r1] PASSED"]


def test_sw_stops_at_the_failed_run_and_resumes_there(pytester: pytest.Pytester, bin_dir: Path) -> None:
    task_project(pytester.path, bin_dir)
    first = pytester.runpytest("--agentrace", "--agentrace-no-save", "--sw", "-v")
    assert ran(first) == ["fix-add[fixer-r1] PASSED", "fix-add[lazy-r1] FAILED"]  # stopped: second never ran
    (bin_dir / "FIXED").write_text("")
    again = pytester.runpytest("--agentrace", "--agentrace-no-save", "--sw", "-v")
    assert ran(again) == ["fix-add[lazy-r1] PASSED", "fix-add[second-r1] PASSED"]
    assert "skipping 1 already passed items" in again.stdout.str()
