"""pytest's reporting habits on run items: ``--tb`` styles, the agent in the call phase (``--durations``, JUnit time),
infrastructure errors shown and written as errors, no empty numeric JUnit property, ``-q`` / ``-qq`` shorten the
agentrace section, and skip reasons summed up in it. Sessions serial and with ``-n 2``."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers import BUGGY_REPO, FIXER, make_repo, write_script
from helpers.trial import make_project, trial_toml

TASK = ("# a task\nname: fix-add\ndescription: Fix add().\nrepo: repo\ntest_command: python -m pytest -q test_calc.py\n"
        "timeout: 60\n{more}agents:\n{agents}")
LAZY = "print('I changed nothing')\n"


def project(root: Path, bin_dir: Path, agents: str, more: str = "") -> None:
    make_repo(root / "repo", BUGGY_REPO)
    write_script(bin_dir / "fixer", FIXER)
    write_script(bin_dir / "lazy", LAZY)
    (root / "task.yaml").write_text(TASK.format(agents=agents, more=more))


def section(res: pytest.RunResult, title: str, until: str = ".*") -> list[str]:
    """The lines of the ``=== title ===`` section, up to pytest's next heading (matching ``until``)."""
    lines = res.stdout.lines
    start = next(i for i, line in enumerate(lines) if re.match(rf"^=+ {title} =+$", line))
    end = next((i for i in range(start + 1, len(lines)) if re.match(rf"^=+ {until} =+$", lines[i])), len(lines))
    return lines[start + 1:end]


def test_tb_line_is_shorter_than_tb_long(pytester: pytest.Pytester, bin_dir: Path, xdist: list[str]) -> None:
    project(pytester.path, bin_dir, "  - {name: fixer, command: fixer}\n  - {name: lazy, command: lazy}\n")
    head = "task:fix-add/default/lazy/r1: failed: tests failed (exit 1)"
    failures = {}
    for style in ("long", "short", "line"):
        res = pytester.runpytest("--agentrace", "--agentrace-no-save", f"--tb={style}", *xdist)
        res.assert_outcomes(passed=1, failed=1)
        # the failure section holds the check's log, with the inner pytest's headings: it ends at ours
        failures[style] = [line for line in section(res, "FAILURES", "agentrace") if not line.startswith("[gw")]
    assert failures["line"] == [f"task.yaml:2: {head}"]  # the line that names the task
    assert len(failures["line"]) < len(failures["short"]) < len(failures["long"])
    assert any("assert -1 == 5" in line for line in failures["long"])  # the failing test's output, from tests.log
    no = pytester.runpytest("--agentrace", "--agentrace-no-save", "--tb=no", *xdist)
    assert not any(re.match(r"^=+ FAILURES =+$", line) for line in no.stdout.lines)


def test_the_agent_runs_in_the_call_phase(pytester: pytest.Pytester, bin_dir: Path, xdist: list[str]) -> None:
    """``--durations`` lists the run's call phase, and the JUnit time of a test case covers its agent's time."""
    project(pytester.path, bin_dir, "  - {name: fixer, command: fixer}\n")
    res = pytester.runpytest("--agentrace", "--agentrace-no-save", "--durations=0", "--durations-min=0", "-vv",
                             "--junitxml=out.xml", *xdist)
    res.assert_outcomes(passed=1)
    assert any(re.match(r"^\d+\.\d+s call +task\.yaml::fix-add\[fixer-r1\]$", line) for line in res.stdout.lines)
    case = next(ET.parse(pytester.path / "out.xml").getroot().iter("testcase"))
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert float(case.get("time")) >= float(props["agentrace.seconds"]) > 0


def test_an_infrastructure_error_is_an_error(pytester: pytest.Pytester, bin_dir: Path, xdist: list[str]) -> None:
    """A setup command that fails is an infrastructure fault: pytest shows and counts it as an error, JUnit writes
    ``<error>`` (not ``<failure>``), and the run's payload still reaches the summary."""
    project(pytester.path, bin_dir, "  - {name: fixer, command: fixer}\n", more="setup: ['exit 3']\n")
    res = pytester.runpytest("--agentrace", "--agentrace-no-save", "--junitxml=out.xml", "-rE", *xdist)
    res.assert_outcomes(errors=1)
    assert any(line.startswith("ERROR task.yaml::fix-add[fixer-r1]") for line in res.stdout.lines)
    case = next(ET.parse(pytester.path / "out.xml").getroot().iter("testcase"))
    assert [e.tag for e in case if e.tag in ("error", "failure")] == ["error"]
    assert "infrastructure error" in case.find("error").get("message")
    suite = next(ET.parse(pytester.path / "out.xml").getroot().iter("testsuite"))
    assert (suite.get("errors"), suite.get("failures"), suite.get("tests")) == ("1", "0", "1")  # totals match the cases
    assert any(line.startswith("|") and "fixer" in line and "error" in line for line in section(res, "agentrace"))


def test_junit_has_no_empty_numeric_property(pytester: pytest.Pytester, xdist: list[str]) -> None:
    make_project(pytester.path)
    (pytester.path / "ports.toml").write_text(trial_toml())
    pytester.runpytest("--agentrace", "--agentrace-no-save", "--junitxml=out.xml", *xdist).assert_outcomes(passed=1, failed=1)
    numeric = ("agentrace.score", "agentrace.seconds", "agentrace.lines", "agentrace.tokens", "agentrace.cost_usd")
    cases = list(ET.parse(pytester.path / "out.xml").getroot().iter("testcase"))
    assert len(cases) == 2
    for case in cases:
        props = [(p.get("name"), p.get("value")) for p in case.iter("property")]
        assert "agentrace.score" not in dict(props)  # a trial run has no composite score
        for name, value in props:
            if name in numeric:
                float(value)  # raises on ""


def test_quiet_shortens_the_agentrace_section(pytester: pytest.Pytester, bin_dir: Path, xdist: list[str]) -> None:
    project(pytester.path, bin_dir, "  - {name: fixer, command: fixer}\n  - {name: lazy, command: lazy}\n")
    lines = {}
    for flag in ("", "-q", "-qq"):
        res = pytester.runpytest("--agentrace", "--agentrace-no-save", *([flag] if flag else []), *xdist)
        assert res.ret == pytest.ExitCode.TESTS_FAILED  # -qq prints no outcome counts to parse
        lines[flag] = [line for line in section(res, "agentrace") if line.strip()]
    assert len(lines["-qq"]) < len(lines["-q"]) < len(lines[""])
    assert lines["-qq"] == ["agentrace: 2 runs: 1 passed, 1 failed"]
    assert any(line.startswith("method:") for line in lines[""]) and not any(line.startswith("method:") for line in lines["-q"])
    assert [line for line in lines["-q"] if line.startswith("|") and "fixer" in line]  # the table stays


def test_skip_reasons_are_summed_up(pytester: pytest.Pytester, bin_dir: Path, xdist: list[str]) -> None:
    agents = ("  - {name: fixer, command: fixer}\n  - {name: ghost, command: ghost-cli}\n"
              "  - {name: phantom, command: phantom-cli}\n")
    project(pytester.path, bin_dir, agents)
    res = pytester.runpytest("--agentrace", "--agentrace-no-save", "--agentrace-reps", "2", *xdist)
    res.assert_outcomes(passed=2, skipped=4)
    assert "skipped 4 runs: not installed: ghost, phantom (4 runs)" in section(res, "agentrace")
    quiet = pytester.runpytest("--agentrace", "--agentrace-no-save", "-qq", *xdist)
    assert "skipped 2 runs: not installed: ghost, phantom (2 runs)" in section(quiet, "agentrace")
