"""Markers on run items (``agentrace``, ``agentrace_task``, ``agentrace_trial``, with keyword arguments for
``-m "agentrace(agent='x')"``), registered so ``--strict-markers`` is clean, and ini keys under ``--strict-config``."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import BUGGY_REPO, FIXER, make_repo, write_script
from helpers.trial import make_project, trial_toml

TASK = ("name: fix-add\ndescription: Fix add().\nrepo: repo\ntest_command: python -m pytest -q test_calc.py\n"
        "agents:\n  - {name: fixer, command: fixer}\n  - noop\n")
PLAIN = "def test_plain():\n    assert True\n"


def project(root: Path, bin_dir: Path) -> None:
    make_repo(root / "repo", BUGGY_REPO)
    write_script(bin_dir / "fixer", FIXER)
    (root / "task.yaml").write_text(TASK)
    (root / "test_plain.py").write_text(PLAIN)


def collected(res: pytest.RunResult) -> list[str]:
    return sorted(line for line in res.stdout.lines if "::" in line and not line.startswith(("ERROR", "FAILED")))


def test_ini_reps_doubles_the_items_under_strict_config_and_markers(pytester: pytest.Pytester, bin_dir: Path,
                                                                     xdist: list[str]) -> None:
    project(pytester.path, bin_dir)
    args = ["--agentrace", "--agentrace-out", "o", "--agentrace-no-save", "--strict-config", "--strict-markers",
            "-m", "agentrace", *xdist]
    deselected = None if xdist else 1  # xdist's controller does not count its workers' deselected items
    # passed counts show the plain test (not an agentrace item) did not run
    pytester.runpytest(*args).assert_outcomes(passed=1, xfailed=1, deselected=deselected)
    pytester.makeini("[pytest]\nagentrace_reps = 2\n")
    res = pytester.runpytest(*args)
    res.assert_outcomes(passed=2, xfailed=2, deselected=deselected)
    assert sorted(p.parent.name for p in (pytester.path / "o").glob("runs/fix-add/default/fixer/*/run.json")) == ["1", "2"]
    assert "PytestUnknownMarkWarning" not in res.stdout.str() and "PytestConfigWarning" not in res.stdout.str()


def test_markers_with_keyword_arguments_select_runs(pytester: pytest.Pytester, bin_dir: Path) -> None:
    project(pytester.path, bin_dir)
    make_project(pytester.path)
    (pytester.path / "ports.toml").write_text(trial_toml(reps=2))

    def select(expr: str) -> list[str]:
        res = pytester.runpytest("--agentrace", "--strict-markers", "--collect-only", "-q", "-m", expr)
        assert res.ret == pytest.ExitCode.OK, res.stdout.str()
        return collected(res)

    trial = ["ports.toml::port[baseline-bot-r1]", "ports.toml::port[baseline-bot-r2]",
             "ports.toml::port[docs-bot-r1]", "ports.toml::port[docs-bot-r2]"]
    assert select("agentrace") == [*trial, "task.yaml::fix-add[fixer-r1]", "task.yaml::fix-add[noop-r1]"]
    assert select("agentrace_trial") == trial
    assert select("agentrace_task") == ["task.yaml::fix-add[fixer-r1]", "task.yaml::fix-add[noop-r1]"]
    assert select("agentrace(agent='fixer')") == ["task.yaml::fix-add[fixer-r1]"]
    assert select("agentrace_trial(arm='docs', rep=2)") == ["ports.toml::port[docs-bot-r2]"]
    assert select("agentrace(case='port') and not agentrace(arm='docs')") == trial[:2]
    assert select("agentrace_task and not agentrace(agent_name='noop')") == ["task.yaml::fix-add[fixer-r1]"]
    assert select("not agentrace") == ["test_plain.py::test_plain"]


def test_markers_are_registered_without_agentrace(pytester: pytest.Pytester) -> None:
    (pytester.path / "test_plain.py").write_text(PLAIN)
    res = pytester.runpytest("--strict-markers", "--markers")
    assert res.ret == pytest.ExitCode.OK
    for name in ("agentrace", "agentrace_task", "agentrace_trial"):
        assert any(line.startswith(f"@pytest.mark.{name}:") for line in res.stdout.lines)
    pytester.runpytest("--strict-markers", "-m", "agentrace").assert_outcomes(deselected=1)
