"""An honest agent that makes a repository inside its workspace (``git init sub``, ``cargo new lib``, a vendored
clone): the run is judged on the files it left, nested ones included, like any other folder's. git alone would
refuse a nested repository without a commit (the run was charged as "left the workspace unreadable to git") and
record one with a commit as a single gitlink (the checks' clean tree lacked its files, so its tests failed)."""

from __future__ import annotations

import json

import pytest
from helpers import BUGGY_REPO, BUGGY_TASK, make_repo, write_script

AGENT = r"""
import pathlib, subprocess
env = {"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@b", "GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@b",
       "PATH": "/usr/bin:/bin"}
for name, commit in (("fresh", False), ("vendored", True)):
    subprocess.run(["git", "init", "-q", name], check=True, env=env)
    pathlib.Path(name, "__init__.py").write_text("def plus(a, b):\n    return a + b\n")
    if commit:
        subprocess.run(["git", "add", "-A"], cwd=name, check=True, env=env)
        subprocess.run(["git", "commit", "-qm", "vendored"], cwd=name, check=True, env=env)
pathlib.Path("calc.py").write_text("from fresh import plus\nfrom vendored import plus as also\n\n\n"
                                   "def add(a, b):\n    assert plus(a, b) == also(a, b)\n    return plus(a, b)\n")
print("moved add into two nested packages")
"""


def test_files_of_repositories_made_inside_the_workspace_are_judged(pytester: pytest.Pytester, bin_dir,
                                                                     xdist: list[str]) -> None:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "nester", AGENT)
    (pytester.path / "task.yaml").write_text(
        BUGGY_TASK + "agents:\n  - {name: nester, command: nester}\n")
    pytester.runpytest("--agentrace", "task.yaml", "--agentrace-out", "out", "--agentrace-no-save", *xdist)
    record = json.loads((pytester.path / "out/runs/t/default/nester/1/run.json").read_text())
    assert record["status"] == "passed", record["reason"]
    assert record["files_changed"] == 3  # calc.py and the two packages' __init__.py; no .git entry
