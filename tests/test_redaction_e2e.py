"""Redaction everywhere, and one session per results folder at a time (serial and -n 2).

An API key in the environment, printed by the agent in its answer and in a tool call, appears in no file the session
wrote: run.json, logs, the SQLite history (and its WAL), JUnit XML, HTML, JSON and Markdown. Two sessions started
together on one results folder both finish and lose no run.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import BUGGY_REPO, make_repo, write_script

KEY = "sk-live-4f8a9c2e1b7d6a5f3e0c9b8a7d6e5f4c"  # also the shape of an OpenAI key
LEAKY = r"""
import json, os
key = os.environ["MY_SERVICE_TOKEN"]
def emit(e):
    print(json.dumps(e), flush=True)
emit({"type": "system", "subtype": "init", "model": "claude-x", "session_id": "s"})
emit({"type": "assistant", "message": {"content": [
    {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "curl -H 'x-key: " + key + "' https://x"}}]}})
emit({"type": "result", "subtype": "success", "is_error": False, "result": "The key is " + key,
      "num_turns": 1, "usage": {"input_tokens": 10, "output_tokens": 5}})
"""


def test_a_printed_key_is_in_no_artifact(pytester: pytest.Pytester, bin_dir: Path, monkeypatch: pytest.MonkeyPatch,
                                         xdist: list[str]) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", KEY)
    make_repo(pytester.path / "repo", BUGGY_REPO)
    # a custom agent never gets the session's keys (environment by allow-list); this one knows the key anyway (its
    # own script, outside the project, holds it) and prints it: the session's secret values are still redacted
    write_script(bin_dir / "leaky", LEAKY.replace('os.environ["MY_SERVICE_TOKEN"]', repr(KEY)))
    (pytester.path / "task.yaml").write_text(
        "name: leak\ndescription: fix add\nrepo: repo\ntest_command: python -m pytest -q test_calc.py\n"
        "agents:\n  - {name: leaky, kind: claude, command: [leaky]}\n  - noop\n")
    res = pytester.runpytest("--agentrace", "--agentrace-out", "out", "--junitxml", "j.xml", "--agentrace-html", "r.html",
                             "--agentrace-json", "r.json", "--agentrace-md", "r.md", *xdist)
    res.assert_outcomes(failed=1, xfailed=1)
    record = json.loads(next((pytester.path / "out").glob("runs/leak/default/leaky/1/run.json")).read_text())
    assert "<redacted>" in record["usage"]["answer"] and "<redacted>" in record["usage"]["tool_calls"][0]["summary"]
    leaks = [p for p in pytester.path.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]
    assert leaks == []
    assert list(pytester.path.rglob("history.db"))  # the store was written, and grepped


def test_two_sessions_on_one_results_folder_lose_no_run(pytester: pytest.Pytester, bin_dir: Path) -> None:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "slowfix", "import time, pathlib\ntime.sleep(2)\n"
                 "p = pathlib.Path('calc.py'); p.write_text(p.read_text().replace('a - b', 'a + b'))\n")
    for name in ("one", "two"):
        (pytester.path / f"{name}.yaml").write_text(
            f"name: {name}\ndescription: fix add\nrepo: repo\ntest_command: python -m pytest -q test_calc.py\n"
            "agents:\n  - {name: slowfix, command: [slowfix]}\n")
    cmds = [[sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"{name}.yaml", "--agentrace", "--agentrace-out",
             "out", "--agentrace-reps", "2"] for name in ("one", "two")]
    procs = [subprocess.Popen(c, cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for c in cmds]
    results = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], results
    assert any("another session is writing" in err for _, err in results)  # the second one waited
    records = sorted(str(p.relative_to(pytester.path / "out")) for p in (pytester.path / "out").glob("runs/**/run.json"))
    assert records == [f"runs/{n}/default/slowfix/{r}/run.json" for n in ("one", "two") for r in (1, 2)]
    assert all(json.loads((pytester.path / "out" / r).read_text())["status"] == "passed" for r in records)
