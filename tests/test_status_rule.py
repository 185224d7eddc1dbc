"""One status rule for task and trial runs (``run.pipeline``): each case below is decided the same way for both
kinds, serially and under pytest-xdist. The agent is a small script whose behaviour ``$MODE`` picks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import BUGGY_REPO, make_repo, write_script

AGENT = r"""
import os, pathlib, shutil, sys, time
mode = os.environ["MODE"]
calc = pathlib.Path("calc.py")
calc.write_text(calc.read_text().replace("a - b", "a + b"))
print("The port is 8123, it listens there.")
if mode == "crash":
    sys.exit(3)
if mode == "hang":
    time.sleep(60)
if mode == "unreadable":
    pathlib.Path(".git/HEAD").unlink()
    shutil.rmtree(".git/refs")
if mode == "tamper":
    pathlib.Path("test_calc.py").write_text("def test_add():\n    assert True\n")
"""

TASK = """\
name: rule
description: fix add
repo: repo
test_command: python -m pytest -q test_calc.py
timeout: {timeout}
protected: [test_calc.py]
setup: [{setup}]
env: {{MODE: {mode}}}
agents:
  - {{name: bot, command: [bot]}}
"""

TRIAL = """\
name = "rule"

[defaults]
reps = 1
timeout = {timeout}

[[repos]]
name = "app"
source = "repo"

[[arms]]
name = "base"
setup = [{setup}]

[[agents]]
name = "bot"
command = ["bot", "{{prompt}}"]
edits = true
env = {{MODE = "{mode}"}}

[[questions]]
id = "port"
repo = "app"
prompt = "Which port?"
expect = ["8123"]
"""

# mode -> (status, start of the reason); the same for both kinds
CASES = {
    "ok": ("passed", None),
    "crash": ("failed", "agent crashed (exit 3)"),
    "hang": ("timeout", "agent timed out after 4s"),
    # the agent breaks its own .git: the harness's git folder (the desk) is not it, so the run is judged as usual
    "unreadable": ("passed", None),  # its fix is right and the desk does not read the agent's .git
    "setup": ("error", None),
}


def run(pytester: pytest.Pytester, kind: str, mode: str, xdist: list[str]) -> dict:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    setup = '"exit 1"' if mode == "setup" else ""
    env_mode = "ok" if mode == "setup" else mode
    if kind == "task":
        (pytester.path / "task.yaml").write_text(TASK.format(timeout=4, setup=setup.replace('"', "'"), mode=env_mode))
    else:
        (pytester.path / "trial.toml").write_text(TRIAL.format(timeout=4, setup=setup, mode=env_mode))
    pytester.runpytest("--agentrace", "--agentrace-out", "out", *xdist)
    records = [json.loads(p.read_text()) for p in (pytester.path / "out").glob("runs/**/run.json")]
    assert len(records) == 1
    return records[0]


@pytest.fixture
def bot(bin_dir: Path) -> None:
    write_script(bin_dir / "bot", AGENT)


@pytest.mark.parametrize("kind", ["task", "trial"])
@pytest.mark.parametrize("mode", list(CASES))
def test_one_status_rule(pytester: pytest.Pytester, bot: None, kind: str, mode: str, xdist: list[str]) -> None:
    record = run(pytester, kind, mode, xdist)
    status, reason = CASES[mode]
    assert record["status"] == status, record["reason"]
    if reason:
        assert record["reason"].startswith(reason)
    if mode == "setup":
        assert "setup" in record["reason"] and "failed (exit 1)" in record["reason"]


def test_tampering_fails_a_task_run(pytester: pytest.Pytester, bot: None, xdist: list[str]) -> None:
    """A task's protected files (``protected:`` and its verify files) changed by the agent fail the run (trials have no
    protected paths in their format)."""
    record = run(pytester, "task", "tamper", xdist)
    assert record["status"] == "failed" and record["reason"] == "tampered: test_calc.py"
    assert record["tampered"] == ["test_calc.py"]
