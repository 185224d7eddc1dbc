"""Live progress without ``-v``: plain progress lines every ``--agentrace-progress-seconds`` when the output is not a
terminal (serial and under xdist), and the ETA from the finished runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import BUGGY_REPO, FIXER, make_repo, write_script

from pytest_agentrace.plugin.progress import Tracker, fmt_eta

SLOW = "import time\ntime.sleep(2)\n" + FIXER
LINE = re.compile(r"^agentrace: progress: (\d)/3 runs done; running (fix-add\[slow-r\d\] \d+ s(, )?)+; ETA (.+)$")


def test_slow_runs_print_progress_lines_when_not_a_terminal(pytester: pytest.Pytester, bin_dir: Path,
                                                             xdist: list[str]) -> None:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "slow", SLOW)
    (pytester.path / "task.yaml").write_text("name: fix-add\ndescription: Fix add().\nrepo: repo\n"
                                             "test_command: python -m pytest -q test_calc.py\nagents: [{name: slow, command: slow}]\n")
    res = pytester.runpytest("--agentrace", "--agentrace-no-save", "--agentrace-reps", "3",
                             "--agentrace-progress-seconds", "0.3", *xdist)
    res.assert_outcomes(passed=3)
    found = [m for line in res.stdout.lines if (m := LINE.match(line))]
    assert found, res.stdout.str()
    assert found[0].group(4) == "unknown"  # nothing finished yet: no ETA
    assert any(m.group(1) != "0" and m.group(4) != "unknown" for m in found)  # later: an ETA from the finished runs
    assert not [line for line in res.stdout.lines if line.startswith("agentrace: started")]  # those need -v


def test_no_progress_lines_under_qq(pytester: pytest.Pytester, bin_dir: Path) -> None:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "slow", SLOW)
    (pytester.path / "task.yaml").write_text("name: fix-add\ndescription: Fix add().\nrepo: repo\n"
                                             "test_command: python -m pytest -q test_calc.py\nagents: [{name: slow, command: slow}]\n")
    res = pytester.runpytest("--agentrace", "--agentrace-no-save", "--agentrace-progress-seconds", "0.3", "-qq")
    assert res.ret == pytest.ExitCode.OK
    assert not [line for line in res.stdout.lines if line.startswith("agentrace: progress")]


def test_eta_from_finished_runs() -> None:
    ids = [f"t.yaml::c[a-r{i}]" for i in range(1, 7)] + ["test_x.py::test_plain"]
    tracker = Tracker(workers=2)
    tracker.collected(ids)
    assert tracker.total == 6 and tracker.eta(0.0) is None
    for nodeid, start in zip(ids[:2], (0.0, 0.0), strict=True):
        tracker.started(nodeid, start)
    tracker.finished(ids[0], 10.0)
    tracker.finished(ids[1], 30.0)  # mean 20 s
    tracker.started(ids[2], 30.0)
    tracker.started(ids[3], 30.0)
    # at 35 s: 2 runs waiting (2 x 20 s) + 2 running with 15 s each left, over 2 workers
    assert tracker.eta(35.0) == pytest.approx((2 * 20 + 15 + 15) / 2)
    assert tracker.line(35.0) == ("agentrace: progress: 2/6 runs done; running c[a-r3] 5 s, c[a-r4] 5 s; ETA 35 s")
    tracker.skipped.add(ids[2])
    tracker.finished(ids[2], 31.0)  # a skipped run counts as done, not in the mean
    assert tracker.done == 3 and tracker.durations == [10.0, 30.0]
    assert [fmt_eta(s) for s in (None, 40, 300, 5400)] == ["ETA unknown", "ETA 40 s", "ETA 5 min", "ETA 1.5 h"]


def _slow_task(pytester: pytest.Pytester, bin_dir: Path) -> None:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "slow", SLOW)
    (pytester.path / "task.yaml").write_text("name: fix-add\ndescription: Fix add().\nrepo: repo\n"
                                             "test_command: python -m pytest -q test_calc.py\nagents: [{name: slow, command: slow}]\n")


WHOLE = re.compile(r"^agentrace: progress: \d/2 runs done(; running [^;]+)?; ETA (unknown|\d+ s|\d+ min)$")


@pytest.mark.parametrize(("verbose", "xdist"), [
    pytest.param([], [], id="dots-serial"), pytest.param(["-q"], [], id="q-serial"),
    pytest.param(["-v"], [], id="v-serial"), pytest.param(["-v"], ["-p", "xdist", "-n", "2"], id="v-xdist"),
])
def test_progress_lines_have_lines_of_their_own_in_a_log(pytester: pytest.Pytester, bin_dir: Path, xdist: list[str],
                                                         verbose: list[str]) -> None:
    """In a CI log (a subprocess writing to a pipe) each progress line starts at column 0 and nothing of pytest's
    (its dots, a file prefix, ``[ 50%]``) is written after it on its line; a serial session's lines are not lost in
    the captured call phase; and under ``-v`` each run's node id is printed once."""
    _slow_task(pytester, bin_dir)
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--agentrace", "--agentrace-no-save",
                                        "--agentrace-reps", "2", "--agentrace-progress-seconds", "0.4", *verbose, *xdist)
    res.assert_outcomes(passed=2)
    out = res.stdout.lines
    touched = [line for line in out if "agentrace: progress:" in line]
    assert touched, res.stdout.str()
    assert all(WHOLE.match(line) for line in touched), touched
    if verbose == ["-v"]:
        for rep in (1, 2):
            named = [line for line in out if f"task.yaml::fix-add[slow-r{rep}]" in line]
            assert len(named) == 1 and "PASSED" in named[0], named
            assert f"agentrace: started fix-add[slow-r{rep}]" in out
