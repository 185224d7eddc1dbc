"""Record once, replay offline, with each real CLI (marker ``realcli``).

A standalone model double (``agentrace model-double SCRIPT``, a subprocess) acts as the upstream of a session
that records with ``--agentrace-record DIR --agentrace-record-upstream URL``. The double is then stopped (SIGTERM,
exit 0), and a second session, with another basetemp and another HOME, replays the cassette strictly
(``--agentrace-replay DIR``): status, tokens, tool calls, answer and diff equal the recorded run's, and the history
store marks the replayed run. The script's shell step prints what differs by session and machine (the workspace,
HOME, an object address, the date, ``uname -a``, the user and host names, a mktemp folder, a UUID), so every turn
after it holds them. A third session with a changed prompt against the same cassette is an ``error`` run whose
reason is a cassette mismatch naming turn 1. No cassette holds the dummy key the CLI sent while recording, nor
the machine's user name, host name, kernel, OS, or a path of the recording session. Each CLI's three sessions
run in order; the CLIs' run a few at once (``helpers.sessions``), each test checking its own.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from helpers.realcli import CLIS, host_facts_in, outcomes
from helpers.sessions import PARALLEL, finished, run_session, selected, session

from pytest_agentrace.model_double.environment import DUMMY_KEY

pytestmark = [pytest.mark.realcli, pytest.mark.xdist_group("realcli_replay")]

SCRIPT = """\
side: {usage: {input: 310, output: 7}}
steps:
  - write: {path: hello.txt, content: "hi\\n"}
    usage: {input: 1000, output: 50, cache_read: 200}
  - shell: "cat hello.txt; pwd; echo $HOME; python3 -c 'print(object())'; date; uname -a; whoami; hostname; mktemp -d; python3 -c 'import uuid; print(uuid.uuid4())'"
    usage: {input: 1100, output: 40}
  - text: "DONE: hello.txt holds hi."
    usage: {input: 1200, output: 10}
"""
TASK = """\
name: hello
description: {prompt}
repo: repo
test_command: grep -qx hi hello.txt
agents: [{cli}]
"""
PROMPT = "Create hello.txt containing hi, then show it."
CHANGED = "Create hello.txt containing hi, then show it twice."


def make_repo(path: Path) -> None:
    path.mkdir()
    (path / "README.md").write_text("hello\n")
    for argv in (["git", "init", "-q"], ["git", "add", "."],
                 ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"]):
        subprocess.run(argv, cwd=path, check=True)


def start_double(script: Path, log: Path) -> tuple[subprocess.Popen[str], str]:
    """``agentrace model-double`` in a subprocess; its URL from the first stdout line."""
    argv = [sys.executable, "-m", "pytest_agentrace.cli", "model-double", str(script), "--log", str(log)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    why = proc.stderr.read() if proc.poll() is not None and proc.stderr else ""
    assert line.startswith("listening on http://127.0.0.1:"), (line, why)
    return proc, line.removeprefix("listening on ")


def run_one(path: Path, cli: str, out: str, prompt: str, *args: str, home: Path | None = None) -> dict:
    (path / "task.yaml").write_text(TASK.format(cli=cli, prompt=prompt))
    done = run_session(path, ["--agentrace-out", out, "--agentrace-db", "history.db", *args, "task.yaml"], home=home)
    run = outcomes(path / out)[f"task:hello/default/{cli}/r1"]
    run["_stdout"] = done.tail()
    diff = Path(run["_dir"]) / "diff.patch"
    run["_diff"] = diff.read_text() if diff.exists() else None
    return run


def record_then_replay(path: Path, cli: str) -> dict[str, Any]:
    """The three sessions of ``cli`` in ``path`` (record against a standalone double, replay strictly with
    another HOME and basetemp, replay with a changed prompt): ``{"rec", "rep", "bad"}`` runs, the double's
    exit code (``double_exit``) and ``path``."""
    make_repo(path / "repo")
    script = path / "script.yaml"
    script.write_text(SCRIPT)
    double, url = start_double(script, path / "upstream-requests.jsonl")
    try:
        rec = run_one(path, cli, "out-record", PROMPT, "--agentrace-record", "cassettes", "--agentrace-record-upstream", url)
    finally:
        double.send_signal(signal.SIGTERM)
        double_exit = double.wait(timeout=30)
    found: dict[str, Any] = {"path": path, "rec": rec, "double_exit": double_exit}
    if rec["status"] != "passed" or not (path / "cassettes").is_dir():
        return found
    # the upstream is gone: the replay is served by the cassette alone, in a session with another basetemp and
    # HOME (a new pytest session numbers its temporary folders anew), matched strictly
    home = path / "another-home"
    home.mkdir()
    found["rep"] = run_one(path, cli, "out-replay", PROMPT, "--agentrace-replay", "cassettes", "--agentrace-replay-match",
                           "strict", f"--basetemp={path / 'another-basetemp'}", home=home)
    # a changed prompt does not match the first recorded request
    found["bad"] = run_one(path, cli, "out-changed", CHANGED, "--agentrace-replay", "cassettes", home=home)
    return found


@pytest.fixture(scope="module")
def sessions(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[tuple[str, str], Future[dict[str, Any]]]]:
    """``record_then_replay`` of each selected CLI, ``PARALLEL`` CLIs at once: ``{("replay", cli): Future}``."""
    import shutil

    from helpers.sessions import session_env

    path_var = session_env(Path.cwd())["PATH"]
    keys = [k for k in selected(request) if shutil.which(k[1], path=path_var)]
    keys.sort(key=lambda k: ("opencode", "aider", "gemini").index(k[1]) if k[1] in ("opencode", "aider", "gemini") else 3)
    paths = {k: tmp_path_factory.mktemp(f"replay-{k[1]}") for k in keys}  # in the main thread (not thread-safe)
    with ThreadPoolExecutor(PARALLEL, thread_name_prefix="agentrace-replay") as pool:
        yield {k: pool.submit(record_then_replay, paths[k], k[1]) for k in keys}


def summary(run: dict) -> dict:
    """What a replay must reproduce: status, tokens, tool calls (absolute workspace paths as ``<workspace>``),
    answer, diff."""
    u = run["usage"]
    names = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "total_tokens")
    tokens = {k: u[k] for k in names}
    # an absolute path in the workspace differs by session: <basetemp>/<run's scratch folder>/ws; a summary is cut
    # to a fixed length (with "…") before that path is replaced, so only its first 16 characters are the same
    calls = [(c["name"], re.sub(r"/\S*/ws/", "<workspace>/", c.get("summary") or "")[:16]) for c in u.get("tool_calls") or []]
    return {"status": run["status"], "tokens": tokens, "turns": u.get("turns"), "tool_calls": calls,
            "answer": u.get("answer"), "diff": run["_diff"], "lines_changed": run["lines_changed"]}


@session("replay")
@pytest.mark.parametrize("cli", CLIS)
def test_record_then_replay_offline(cli: str, sessions: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    found = finished(sessions, "replay", cli, monkeypatch)
    rec = found["rec"]
    root = found["path"]
    assert found["double_exit"] == 0  # the standalone double stops cleanly
    assert rec["status"] == "passed", (rec["reason"], rec["_stdout"])
    upstream = [json.loads(line) for line in (root / "upstream-requests.jsonl").read_text().splitlines()]
    assert upstream and all(r["answer"]["kind"] != "not_found" for r in upstream)
    cassettes = sorted((root / "cassettes").iterdir())
    assert [p.name for p in cassettes] == [f"task__hello__default__{cli}__r1.json"]
    data = json.loads(cassettes[0].read_text())
    assert data["version"] == 1 and data["run_id"] == f"task:hello/default/{cli}/r1"
    posts = [r for r in upstream if r["method"] == "POST"]
    assert len([i for i in data["interactions"] if i["turn"] is not None]) == len(posts)
    assert rec["extra"]["cassette"] == str(cassettes[0])

    # no cassette holds a fact of this machine or a path of the recording session
    record_paths = [str(root), os.path.realpath(root / "basetemp")]
    for path in cassettes:
        assert host_facts_in(path.read_text(), record_paths) == [], path

    rep = found["rep"]
    assert rep["_dir"].startswith(str(root / "out-replay"))
    assert rep["status"] == "passed", (rep["reason"], rep["_stdout"])
    assert summary(rep) == summary(rec)
    assert rep["extra"]["replay"]["turns_played"] == rep["extra"]["replay"]["turns_recorded"] == len(posts)
    assert rep["extra"]["replay"]["match"] == "strict"
    if cli == "aider":  # aider's figure comes from the per-token price the harness wrote into its metadata file
        assert [r["usage"]["cost_source"] for r in (rec, rep)] == ["harness-priced"] * 2

    # a changed prompt does not match the first recorded request
    bad = found["bad"]
    assert bad["status"] == "error", (bad["reason"], bad["_stdout"])
    assert bad["reason"].startswith("cassette mismatch: turn 1: body."), bad["reason"]

    for path in (root / "cassettes").rglob("*"):
        assert DUMMY_KEY not in path.read_text(), path
    with sqlite3.connect(root / "history.db") as conn:
        rows = conn.execute("SELECT status, replayed FROM runs ORDER BY id").fetchall()
    assert rows == [("passed", 0), ("passed", 1), ("error", 1)]
