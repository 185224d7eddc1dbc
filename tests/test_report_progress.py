"""Progress under -v (issue 8): plain lines when not a terminal (serial and -n 2), a live status on a real
pseudo-terminal that shows the tool calls streamed so far, and nothing without -v."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path

import numpy  # noqa: F401  (imported once here: pytester's in-process runs cannot re-import numpy's C extension)
import pytest
import scipy.stats  # noqa: F401
from helpers import BUGGY_REPO, FIXER, make_repo, write_script

from pytest_agentrace.plugin import progress

# Claude Code stream-json, one tool call every 0.6 s, then the result (fixes calc.py).
SLOW_BOT = """\
import json, pathlib, sys, time
def emit(e):
    print(json.dumps(e), flush=True)
emit({"type": "system", "subtype": "init", "model": "m", "claude_code_version": "1.0"})
for i in range(4):
    time.sleep(0.6)
    emit({"type": "assistant", "message": {"model": "m", "content": [{"type": "tool_use", "id": f"t{i}", "name": "Bash", "input": {"command": "ls"}}]}, "parent_tool_use_id": None})
calc = pathlib.Path("calc.py")
calc.write_text(calc.read_text().replace("a - b", "a + b"))
emit({"type": "result", "subtype": "success", "is_error": False, "num_turns": 5, "result": "done", "total_cost_usd": 0.01,
      "usage": {"input_tokens": 1900, "output_tokens": 100}})
"""


def project(root: Path, bin_dir: Path, agents: str) -> None:
    make_repo(root / "repo", BUGGY_REPO)
    write_script(bin_dir / "fixer", FIXER)
    write_script(bin_dir / "slowbot", SLOW_BOT)
    (root / "task.yaml").write_text("name: fix-add\ndescription: Fix add().\nrepo: repo\ntest_command: python -m pytest -q test_calc.py\n"
                                    f"timeout: 60\nagents:\n{agents}")


def test_plain_lines_when_not_a_terminal(pytester: pytest.Pytester, bin_dir: Path, xdist: list[str]) -> None:
    project(pytester.path, bin_dir, "  - {name: fixer, command: 'fixer {prompt}'}\n  - noop\n")
    res = pytester.runpytest("--agentrace", "--agentrace-no-save", "-v", *xdist)
    res.assert_outcomes(passed=1, xfailed=1)
    lines = res.stdout.lines
    assert "agentrace: started fix-add[fixer-r1]" in lines and "agentrace: started fix-add[noop-r1]" in lines
    fixer = [line for line in lines if line.startswith("agentrace: task:fix-add/default/fixer/r1: passed (fixer ")]
    noop = [line for line in lines if line.startswith("agentrace: task:fix-add/default/noop/r1: failed (noop ")]
    assert len(fixer) == 1 and len(noop) == 1  # one line per run, on a line of its own
    # pytest's own result lines are intact
    own = r"^task\.yaml::fix-add\[fixer-r1\] PASSED" if not xdist else r"^\[gw\d\] \[ *\d+%\] PASSED task\.yaml::fix-add\[fixer-r1\] *$"
    assert len([line for line in lines if re.match(own, line)]) == 1


def test_nothing_without_verbose(pytester: pytest.Pytester, bin_dir: Path) -> None:
    project(pytester.path, bin_dir, "  - {name: fixer, command: 'fixer {prompt}'}\n")
    res = pytester.runpytest("--agentrace", "--agentrace-no-save")
    res.assert_outcomes(passed=1)
    assert not [line for line in res.stdout.lines if line.startswith(("agentrace: started", "agentrace: task:"))]


@pytest.mark.parametrize("verbose", [["-v"], []], ids=["verbose", "plain"])
def test_live_status_on_a_terminal(tmp_path: Path, verbose: list[str]) -> None:
    """pytest on a real pseudo-terminal, with and without -v: the status after the item (after the dots without
    -v, naming the run) shows runs done/total, the agent, seconds, the tool calls streamed so far and the ETA, drawn
    with save/restore-cursor and erased before pytest writes the result."""
    bin_dir = tmp_path / "bin"
    project(tmp_path, bin_dir, "  - {name: slow, command: 'slowbot {prompt}', kind: claude}\n")
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "COLUMNS": "150", "LINES": "40", "TERM": "xterm"}
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--agentrace", "--agentrace-no-save", *verbose],
                            cwd=tmp_path, env=env, stdin=slave, stdout=slave, stderr=slave, close_fds=True)
    os.close(slave)
    out = b""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            out += chunk
        elif proc.poll() is not None:
            break
    proc.wait(timeout=30)
    os.close(master)
    text = out.decode("utf-8", "replace")
    assert proc.returncode == 0, text[-3000:]
    draws = [d.split("\x1b[K")[0] for d in text.split("\x1b7")[1:]]
    prefix = " [0/1 runs done · slow " if verbose else " [0/1 runs done · fix-add[slow-r1]: slow "
    assert any(d.startswith(prefix) and d.endswith(" · ETA unknown]") for d in draws), text[-3000:]
    assert any("tool call" in d for d in draws)  # figures streamed while the agent ran
    assert "" in draws  # the status is erased at the end of the run
    assert ("PASSED" in text or not verbose) and "1 passed" in text


def test_live_run_figures_from_partial_output(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "PARSE_EVERY", 0.0)
    live = progress.LiveRun("task:x/default/claude/r1", "claude", "claude")
    events = [{"type": "system", "subtype": "init"},
              {"type": "assistant", "message": {"content": [{"type": "tool_use", "id": "1", "name": "Bash", "input": {}}]}, "parent_tool_use_id": None}]
    text = "".join(json.dumps(e) + "\n" for e in events)
    live.feed(text.encode()[:40])  # half a line: not parseable yet
    assert live.figures() == (0, None)
    live.feed(text.encode()[40:])
    assert live.figures() == (1, None)
    live.feed((json.dumps({"type": "result", "subtype": "success", "result": "ok", "usage": {"input_tokens": 10, "output_tokens": 5}}) + "\n").encode())
    assert live.figures() == (1, 15)
    assert progress.fmt_status("claude", 3.25, 1, 15) == "claude 3.2 s · 1 tool call · 15 tokens"
    assert progress.fmt_status("x", 75, 0, None) == "x 75 s"
