"""Harness cost per run: the git processes a task run starts (counted through a logging ``git`` on PATH), the
"before" snapshot taken from the clone's commit, and the workspace gone once the run is recorded."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from helpers import BUGGY_REPO, FIXER, make_repo, write_script

from pytest_agentrace.record import index
from pytest_agentrace.run import discard

REAL_GIT = shutil.which("git")
LOGGING_GIT = f"""\
import os, sys
with open(LOG, "a") as fh:  # the parent's pid first: the harness or a check's tool
    args, skip = [], False
    for a in sys.argv[1:]:  # without the ``-c key=value`` pairs
        if not skip and a != "-c":
            args.append(a)
        skip = a == "-c"
    fh.write(str(os.getppid()) + " " + " ".join(args) + "\\n")
os.execv({REAL_GIT!r}, [{REAL_GIT!r}, *sys.argv[1:]])
"""


def task(setup: str = "") -> str:
    return ("name: fix-add\ndescription: Fix add() in calc.py so that it adds.\nrepo: repo\n"
            "test_command: python -m pytest -q test_calc.py\ntimeout: 60\n"
            "agents:\n  - {name: fixer, command: 'fixer {prompt}'}\n" + setup)


@pytest.fixture
def git_log(pytester: pytest.Pytester, bin_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "fixer", FIXER)
    log = pytester.path / "git-calls.log"  # named in the script: the harness's git runs without GIT_* variables
    write_script(bin_dir / "git", LOGGING_GIT.replace("LOG", repr(str(log)), 1))
    return log


def harness_calls(log: Path) -> list[str]:
    """The git subcommands the harness (this process: pytester runs in-process) started, not a check's tools."""
    me = str(os.getpid())
    out = []
    for line in log.read_text().splitlines():
        words = line.split()
        if words[0] != me:
            continue
        rest = words[1:]
        while rest and rest[0].startswith("--"):  # git's own options: --git-dir X, --work-tree=Y, --no-pager ...
            rest = rest[2:] if rest[0] in ("--git-dir", "--work-tree") else rest[1:]
        out.append(rest[0] if rest else "")
    return out


def runs(out: Path) -> list[dict]:
    return sorted((json.loads(p.read_text()) for p in out.glob("runs/**/run.json")), key=lambda r: r["rep"])


def test_a_run_without_setup_starts_the_listed_git_processes(pytester: pytest.Pytester, git_log: Path) -> None:
    (pytester.path / "task.yaml").write_text(task())
    res = pytester.runpytest("--agentrace", "--agentrace-reps=3", f"--agentrace-out={pytester.path / 'out'}",
                             f"--basetemp={pytester.path / 'bt'}")
    res.assert_outcomes(passed=3)
    calls = harness_calls(git_log)
    # per run: rev-parse (the source commit), read-tree (the workspace's checkout of the template: its .git written
    # by the harness, no origin to drop, workspace.checkout), add + write-tree (the "after" snapshot only), diff
    # twice (numstat of the whole change; the patch, read up to workspace.PATCH_CAP), diff-tree (the clean tree: the
    # agent's tree itself when nothing is left out; its commit written by the harness, cleantree._commit),
    # read-tree (one checkout per check, in the checkout form); the middle run of three is clear of what a session does once
    starts = [i for i, c in enumerate(calls[:-1]) if c == "read-tree" and calls[i + 1] == "add"]  # the workspaces
    assert len(starts) == 3, calls
    # the clean tree's overlay form (run.cleanlayers) instead of read-tree per check: diff-tree (the change layer's
    # paths), read-tree (its .git index, no files), one cat-file --batch (the changed blobs)
    forms = {r["extra"].get("clean_tree", "checkout") for r in runs(pytester.path / "out")}
    assert len(forms) == 1, forms
    clean = ["diff-tree", "read-tree", "cat-file"] if forms == {"overlay"} else ["read-tree"]
    assert calls[starts[1] - 1:starts[2] - 1] == ["rev-parse", "read-tree", "add", "write-tree", "diff", "diff",
                                                  "diff-tree", *clean], calls
    assert "clone" not in calls and "commit-tree" not in calls
    assert calls.count("write-tree") == 3  # the template's tree is looked up once: no "before" hashing at all
    for r in runs(pytester.path / "out"):  # behaviour kept: the change is measured against the clone's commit
        assert (r["lines_added"], r["lines_removed"], r["files_changed"], r["status"]) == (1, 1, 1, "passed")
    patch = next((pytester.path / "out").glob("runs/**/diff.patch")).read_text()
    assert "-    return a - b" in patch and "+    return a + b" in patch
    assert not list((pytester.path / "bt").glob("*/ws"))  # every workspace gone from its name as its run ended
    discard.drain()  # and deleted behind it (a session's process waits for that at its exit)
    assert not list((pytester.path / "bt").glob("**/ws"))
    assert len(index.read_index(pytester.path / "out") or {}) == 3  # the controller kept the results index


def test_a_run_with_setup_hashes_its_before_snapshot(pytester: pytest.Pytester, git_log: Path) -> None:
    """Setup may write into the workspace: what it wrote is not the agent's change."""
    setup = "setup:\n  - python -c \"open('made_by_setup.txt','w').write('s\\\\n')\"\n"
    (pytester.path / "task.yaml").write_text(task(setup))
    res = pytester.runpytest("--agentrace", f"--agentrace-out={pytester.path / 'out'}")
    res.assert_outcomes(passed=1)
    calls = harness_calls(git_log)
    # before and after setup's files are hashed, and the checks' base (run.cleantree: ignored files too)
    assert calls.count("write-tree") == 3
    (r,) = runs(pytester.path / "out")
    assert (r["lines_added"], r["lines_removed"], r["files_changed"]) == (1, 1, 1)
