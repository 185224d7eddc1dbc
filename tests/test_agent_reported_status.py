"""What the agent's own output says decides the run too (issue 3, issue 4), for task and trial runs:

- a claude ``result`` with ``is_error: true`` from a process that exited 0 is a failed run (the tests may pass;
  the exit part of the score is 0), with the agent's error as the reason;
- a stream cut off by a crash (non-zero exit, no terminal event) is the agent's failure, not an infrastructure
  ``error``: it is ranked and counted, and the run fails even when its checks pass (one rule for tasks and
  trials: the agent did not finish its work);
- a stream with no terminal event from a process that exited 0 stays ``error`` ("incomplete agent run").
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import BUGGY_REPO, make_repo, write_script

# A fake claude (``kind: claude``): fixes calc.py, prints stream-json, then behaves as CLAUDE_END says:
# "is_error" (an error result, exit 0), "crash" (no result, exit 3), "cut" (no result, exit 0), else a success.
FAKE_CLAUDE = r"""
import json, os, pathlib, sys
end = sys.argv[1]
calc = pathlib.Path("calc.py")
if calc.exists():
    calc.write_text(calc.read_text().replace("a - b", "a + b"))
def emit(e):
    print(json.dumps(e), flush=True)
emit({"type": "system", "subtype": "init", "model": "claude-x", "session_id": "s"})
emit({"type": "assistant", "message": {"content": [{"type": "text", "text": "The port is 8123, it listens there."}]}})
usage = {"input_tokens": 10, "output_tokens": 5}
if end == "is_error":
    emit({"type": "result", "subtype": "error_max_turns", "is_error": True, "num_turns": 9, "usage": usage})
elif end == "crash":
    sys.exit(3)
elif end == "cut":
    sys.exit(0)
else:
    emit({"type": "result", "subtype": "success", "is_error": False, "result": "The port is 8123, it listens there.",
          "num_turns": 1, "usage": usage})
"""

TASK = """\
name: fix-add
description: Fix add.
repo: repo
test_command: python -m pytest -q test_calc.py
agents:
  - {name: ok, kind: claude, command: [fakeclaude, success]}
  - {name: erred, kind: claude, command: [fakeclaude, is_error]}
  - {name: crashed, kind: claude, command: [fakeclaude, crash]}
  - {name: cut, kind: claude, command: [fakeclaude, cut]}
"""


def records(out: Path) -> dict[str, dict]:
    return {d["agent"]: d for d in (json.loads(p.read_text()) for p in out.glob("runs/**/run.json"))}


def test_task_runs_follow_the_agents_own_verdict(pytester: pytest.Pytester, bin_dir: Path, xdist: list[str]) -> None:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "fakeclaude", FAKE_CLAUDE)
    (pytester.path / "task.yaml").write_text(TASK)
    res = pytester.runpytest("--agentrace", "--agentrace-out", "out", "--junitxml", "j.xml", *xdist)
    res.assert_outcomes(passed=1, failed=2, errors=1)
    got = records(pytester.path / "out")
    assert got["ok"]["status"] == "passed"
    erred = got["erred"]
    assert erred["status"] == "failed" and erred["checks"]["tests"]["exit_code"] == 0
    assert erred["reason"] == "the agent reported a failure: result subtype error_max_turns"
    crashed = got["crashed"]  # fixed the code, then crashed: it fails like a trial run, its tests still recorded
    assert crashed["status"] == "failed" and crashed["exit_code"] == 3 and crashed["reason"] == "agent crashed (exit 3)"
    assert crashed["checks"]["tests"]["exit_code"] == 0
    assert got["cut"]["status"] == "error" and got["cut"]["reason"].startswith("incomplete agent run")
    # erred and crashed: tests 40 + lint 15, no exit credit, and no time/lines credit as they did not pass; ok is
    # the only passing run, so it gets every part
    rows = [line.split("|") for line in res.stdout.lines if line.startswith("| ")]
    scores = {row[2].strip(): row[3].strip() for row in rows}
    assert scores["erred"] == "55.0" and scores["crashed"] == "55.0" and scores["ok"] == "100.0"
    assert scores["cut"] == "-"


TRIAL = """\
name = "ports"

[defaults]
reps = 1
timeout = 30

[[repos]]
name = "app"
source = "app"

[[arms]]
name = "baseline"

[[agents]]
name = "{name}"
kind = "claude"
command = ["fakeclaude", "{end}", "{{prompt}}"]

[[questions]]
id = "port"
repo = "app"
prompt = "Which port does the server listen on?"
expect = ["8123", "listens"]
"""


def test_trial_runs_follow_the_agents_own_verdict(pytester: pytest.Pytester, bin_dir: Path, xdist: list[str]) -> None:
    make_repo(pytester.path / "app", {"app.py": "PORT = 8123\n"})
    write_script(bin_dir / "fakeclaude", FAKE_CLAUDE)
    for name, end in (("ok", "success"), ("erred", "is_error"), ("crashed", "crash"), ("cut", "cut")):
        (pytester.path / f"{name}.toml").write_text(TRIAL.format(name=name, end=end).replace('"ports"', f'"{name}"'))
    res = pytester.runpytest("--agentrace", "--agentrace-out", "out", *xdist)
    res.assert_outcomes(passed=1, failed=2, errors=1)
    got = records(pytester.path / "out")
    assert got["ok"]["status"] == "passed"
    assert got["erred"]["status"] == "failed"
    assert got["erred"]["reason"] == "the agent reported a failure: result subtype error_max_turns"
    assert got["erred"]["answer_score"]["correct"] is True  # the answer is kept and scored all the same
    assert got["crashed"]["status"] == "failed" and got["crashed"]["reason"] == "agent crashed (exit 3)"
    assert got["cut"]["status"] == "error" and got["cut"]["reason"].startswith("incomplete agent run")
