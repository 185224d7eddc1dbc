"""Live progress without ``-v``: plain progress lines every ``--agentrace-progress-seconds`` when the output is not a
terminal (serial and under xdist), and the ETA from the finished runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import BUGGY_REPO, FIXER, make_repo, write_script
from pytest_agentrace.plugin.progress import Tracker, fmt_eta

XDIST = [pytest.param([], id="serial"), pytest.param(["-p", "xdist", "-n", "2"], id="xdist")]
SLOW = "import time\ntime.sleep(2)\n" + FIXER
LINE = re.compile(r"^agentrace: progress: (\d)/3 runs done; running (fix-add\[slow-r\d\] \d+ s(, )?)+; ETA (.+)$")


@pytest.mark.parametrize("xdist", XDIST)
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
