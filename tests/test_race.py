"""--agentrace-race: the agents of a task start together; the first to meet coderace's win condition wins and the
others are stopped after the grace window, recorded as ``stopped`` (neither a failure nor a sample). Serial and -n 2."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from helpers import BUGGY_REPO, FIXER, make_repo, write_script

from pytest_agentrace.record.model import CheckResult, Outcome, Status
from pytest_agentrace.record.store import Store
from pytest_agentrace.run.race import won
from pytest_agentrace.stats.cells import summarize_cell
from pytest_agentrace.stats.score import score_group
from pytest_agentrace.stats.snapshot import cell_record

SLEEPER = """\
import pathlib, time
pathlib.Path("started-slow").write_text("x")
time.sleep(120)
p = pathlib.Path("calc.py")
p.write_text(p.read_text().replace("a - b", "a + b"))
"""


def task_yaml(agents: list[str]) -> str:
    lines = "\n".join(f"  - {a}" for a in agents)
    return ("name: fix-add\ndescription: Fix add() in calc.py so that it adds.\nrepo: repo\n"
            "test_command: python -m pytest -q test_calc.py\ntimeout: 300\n" f"agents:\n{lines}\n")


@pytest.fixture
def race_project(pytester: pytest.Pytester, bin_dir: Path) -> pytest.Pytester:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "fixer", FIXER)
    write_script(bin_dir / "sleeper", SLEEPER)
    (pytester.path / "task.yaml").write_text(task_yaml(["{name: sleeper, command: 'sleeper'}",
                                                        "{name: fixer, command: 'fixer {prompt}'}"]))
    return pytester


def records(out: Path) -> dict[str, dict]:
    return {d["run_id"]: d for d in (json.loads(p.read_text()) for p in sorted(out.glob("runs/**/run.json")))}


def test_fast_agent_wins_and_the_sleeper_is_stopped(race_project: pytest.Pytester, xdist: list[str]) -> None:
    began = time.monotonic()
    res = race_project.runpytest("--agentrace", "--agentrace-out", "out", "--agentrace-db", "history.db",
                                 "--agentrace-race", "--agentrace-race-grace", "1", "-rs", *xdist)
    took = time.monotonic() - began
    res.assert_outcomes(passed=1, skipped=1)  # the stopped run is no failure
    assert took < 100  # far less than the sleeper's 120 s: it was stopped (not a timing claim about the winner)
    text = res.stdout.str()
    assert "race task:fix-add/default/r1: winner fixer in" in text
    assert "no runner-up within the 1 s grace window; stopped: sleeper" in text
    recs = records(race_project.path / "out")
    slow, fast = recs["task:fix-add/default/sleeper/r1"], recs["task:fix-add/default/fixer/r1"]
    assert slow["status"] == "stopped" and fast["status"] == "passed"
    assert slow["seconds"] < 120  # its agent was stopped, not left to finish its sleep
    assert slow["reason"].startswith("stopped: fixer won the race")
    assert slow["extra"]["race"]["winner"] == "task:fix-add/default/fixer/r1"
    assert slow["extra"]["race"]["stopped"] == ["task:fix-add/default/sleeper/r1"]
    assert slow["checks"] == {}  # the stop cut its checks short: none ran to a result
    row = next(line for line in res.stdout.lines if line.startswith("|") and " sleeper " in line)
    assert [c.strip() for c in row.split("|")[4:7]] == ["stopped", "not run", "-"]  # Status, Tests, Verify
    with Store(race_project.path / "history.db") as store:
        rows = {r["run_id"]: r for r in store.runs()}
    assert rows["task:fix-add/default/sleeper/r1"]["status"] == "stopped"
    assert json.loads(rows["task:fix-add/default/fixer/r1"]["outcome"])["extra"]["race"]["winner"].endswith("fixer/r1")


def test_two_finishers_name_the_runner_up(pytester: pytest.Pytester, bin_dir: Path) -> None:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "fixer", FIXER)
    write_script(bin_dir / "later", "import time\ntime.sleep(1)\n" + FIXER)
    (pytester.path / "task.yaml").write_text(task_yaml(["{name: later, command: 'later'}", "{name: fixer, command: 'fixer'}"]))
    res = pytester.runpytest("--agentrace", "--agentrace-out", "out", "--agentrace-no-save", "--agentrace-race",
                             "--agentrace-race-grace", "60")
    res.assert_outcomes(passed=2)
    line = next(x for x in res.outlines if x.startswith("race task:fix-add/default/r1"))
    assert "winner fixer in" in line and "runner-up later +" in line and "stopped" not in line


def outcome(status: str, checks: dict | None = None, exit_code: int | None = 0) -> Outcome:
    return Outcome(run_id="task:t/default/a/r1", kind="task", source="t.yaml", case="t", arm="default", agent="a", rep=1,
                   status=status, checks=checks or {}, exit_code=exit_code)


def test_win_condition_is_coderaces() -> None:
    ok, bad = CheckResult("verify", "v", exit_code=0, seconds=0.1), CheckResult("verify", "v", exit_code=1, seconds=0.1)
    assert won(outcome("passed", {"verify": ok, "tests": bad}))  # verify decides when there is one
    assert not won(outcome("failed", {"verify": bad, "tests": ok}))
    assert won(outcome("passed", {"tests": ok})) and not won(outcome("failed", {"tests": bad}))
    assert won(outcome("failed", {}, exit_code=0)) and not won(outcome("failed", {}, exit_code=3))
    assert not won(outcome("failed", {}).replace(kind="trial")) and won(outcome("passed", {}).replace(kind="trial"))


def test_stopped_runs_are_no_samples() -> None:
    runs = [outcome("passed"), outcome("stopped").replace(run_id="task:t/default/b/r1", agent="b")]
    assert not runs[1].is_sample
    assert score_group(runs, False, False)["task:t/default/b/r1"] is None
    cell = summarize_cell([runs[0], runs[1].replace(agent="a")], resamples=200)
    assert (cell.passed, cell.valid, cell.runs, cell.errors) == (1, 1, 1, 0)  # the stopped run neither passes nor fails
    rec = cell_record([runs[0], runs[1].replace(agent="a")])
    assert (rec["passed"], rec["total"], rec["errors"]) == (1, 1, 0)  # the snapshot does not count it as an error
    assert Status.STOPPED == "stopped"


def test_a_race_stays_on_one_shard(race_project: pytest.Pytester, xdist: list[str]) -> None:
    seen = []
    for k in (1, 2, 3):
        res = race_project.runpytest("--agentrace", "--agentrace-out", "out", "--agentrace-race", "--agentrace-reps", "3",
                                     "--agentrace-shard", f"{k}/3", "--collect-only", "-q", *xdist)
        ids = sorted(x for x in res.outlines if x.startswith("task.yaml::"))
        reps = {x.rsplit("-r", 1)[1] for x in ids}
        assert len(ids) == 2 and len(reps) == 1  # both agents of one rep: the race's runs start together
        seen += ids
    assert len(set(seen)) == 6


def test_the_statistics_footer_counts_stopped_runs_as_stopped() -> None:
    """The report's footer says how many runs were stopped in races, apart from infrastructure errors (it counted
    them as errors); a reps table counts them apart too."""
    from pytest_agentrace.report.stats_text import footer_lines
    from pytest_agentrace.report.text import task_tables
    from pytest_agentrace.stats.report import build_report
    from pytest_agentrace.stats.score import score_outcomes

    def run(agent: str, rep: int, status: str) -> Outcome:
        checks = {} if status == "stopped" else {"tests": CheckResult("tests", "pytest", 0 if status == "passed" else 1, 1.0)}
        return Outcome(run_id=f"task:t/default/{agent}/r{rep}", kind="task", source="t.yaml", case="t", arm="default",
                       agent=agent, rep=rep, status=status, checks=checks, exit_code=0, seconds=1.0)

    runs = [run("a", 1, "passed"), run("a", 2, "passed"), run("b", 1, "stopped"), run("b", 2, "error"), run("b", 3, "failed")]
    footer = footer_lines(build_report(score_outcomes(runs), resamples=200))[-1]
    assert "5 runs, 1 infrastructure error (excluded), 1 stopped in a race (excluded), " in footer
    row = next(line for line in task_tables(runs) if line.startswith("|") and " b " in line)
    assert "3 (1 error, 1 stopped)" in row
