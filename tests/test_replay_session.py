"""Record and replay through whole pytest sessions with a fake agent CLI (a small Python script that calls the
OpenAI Chat Completions API at ``$OPENAI_BASE_URL`` as a real CLI would, then prints the answer), with and without
``-n 2``; the standalone ``agentrace model-double`` command; the options' usage errors."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_agentrace.model_double.environment import DUMMY_KEY

FAKE_CLI = r'''#!/usr/bin/env python3
import getpass, json, os, platform, sys, time, urllib.request
base = os.environ["OPENAI_BASE_URL"]
# what a real CLI's system prompt says of its session and machine
system = "Today is %s. cwd %s, HOME %s, %s, %s, user %s, tool output %r" % (
    time.strftime("%Y-%m-%d"), os.getcwd(), os.environ["HOME"], platform.platform(), " ".join(platform.uname()),
    getpass.getuser(), object())
body = {"model": "test", "stream": False, "user": "run-%f" % time.time(),
        "messages": [{"role": "system", "content": system},
                     {"role": "user", "content": sys.argv[1]}]}
req = urllib.request.Request(base + "/chat/completions", data=json.dumps(body).encode(), method="POST",
                             headers={"Content-Type": "application/json",
                                      "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
try:
    with urllib.request.urlopen(req, timeout=30) as r:
        print(json.load(r)["choices"][0]["message"]["content"])
except urllib.error.HTTPError as e:
    print(e.read().decode(), file=sys.stderr)
    sys.exit(1)
'''
SCRIPT = "side: {text: 'the recorded answer', usage: {input: 300, output: 5}}\nsteps:\n  - text: DONE\n"
TASK = """\
name: t{n}
description: {prompt}
repo: repo
test_command: "true"
agents: [{{name: fake, command: "python3 {cli} {{prompt}}"}}]
"""


def make(pytester: pytest.Pytester, prompt: str = "say something", tasks: int = 2) -> None:
    repo = pytester.path / "repo"
    if not repo.exists():
        repo.mkdir()
        (repo / "README.md").write_text("x\n")
        for argv in (["git", "init", "-q"], ["git", "add", "."],
                     ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"]):
            subprocess.run(argv, cwd=repo, check=True)
        (pytester.path / "fake_cli.py").write_text(FAKE_CLI)
    for n in range(tasks):
        (pytester.path / f"t{n}.yaml").write_text(TASK.format(n=n, prompt=prompt, cli=pytester.path / "fake_cli.py"))


def runs(out: Path) -> dict[str, dict]:
    return {d["run_id"]: d for d in (json.loads(p.read_text()) for p in (out / "runs").rglob("run.json"))}


def session(pytester: pytest.Pytester, out: str, *args: str) -> dict[str, dict]:
    """A session in a subprocess, results in ``out``; ``args`` may name another ``--basetemp``."""
    ini = pytester.makeini("[pytest]\n")
    res = pytester.runpytest_subprocess("--agentrace", "-c", str(ini), "--rootdir", str(pytester.path), "-p",
                                        "no:cacheprovider", "--agentrace-out", out, "--agentrace-db", "history.db",
                                        *args, "t0.yaml", "t1.yaml")
    found = runs(pytester.path / out)
    assert len(found) == 2, res.stdout.str()[-2000:]
    return found


@pytest.mark.parametrize("xdist", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_record_replay_and_mismatch_sessions(pytester: pytest.Pytester, model_double, xdist: list[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_agentrace.model_double.script import parse_script

    model_double.use(parse_script(__import__("yaml").safe_load(SCRIPT), "script.yaml"))
    make(pytester)
    rec = session(pytester, "out1", *xdist, "--agentrace-record", "cassettes", "--agentrace-record-upstream",
                  model_double.url)
    assert {r["status"] for r in rec.values()} == {"passed"}
    assert {r["usage"]["answer"] for r in rec.values()} == {"the recorded answer"}
    assert len(model_double.requests()) == 2
    files = sorted(p.name for p in (pytester.path / "cassettes").iterdir())
    assert files == ["task__t0__default__fake__r1.json", "task__t1__default__fake__r1.json"]
    for name in files:
        assert DUMMY_KEY not in (pytester.path / "cassettes" / name).read_text()
    model_double.use(parse_script({"steps": [{"text": "the upstream answered"}]}, "other.yaml"))  # never asked

    # another session, basetemp and HOME: the workspace, HOME and object address in the prompt differ, strictly
    for name in files:
        text = (pytester.path / "cassettes" / name).read_text()
        assert "{{workspace}}" in text and str(pytester.path) not in text and "0x<addr>" in text
    monkeypatch.setenv("HOME", str(pytester.mkdir("another-home")))
    rep = session(pytester, "out2", *xdist, "--agentrace-replay", "cassettes", f"--basetemp={pytester.path / 'bt2'}")
    assert {r["status"] for r in rep.values()} == {"passed"}, [r["reason"] for r in rep.values()]
    assert {r["usage"]["answer"] for r in rep.values()} == {"the recorded answer"}
    assert len(model_double.requests()) == 2  # the upstream saw nothing more
    assert {r["extra"]["replay"]["turns_played"] for r in rep.values()} == {1}

    make(pytester, prompt="say something else")
    bad = session(pytester, "out3", *xdist, "--agentrace-replay", "cassettes")
    for r in bad.values():
        assert r["status"] == "error"
        assert r["reason"] == ("cassette mismatch: turn 1: body.messages[1].content: differs at character 13: "
                               "recorded 'say something', got 'say something else'")
    loose = session(pytester, "out4", *xdist, "--agentrace-replay", "cassettes", "--agentrace-replay-match", "loose")
    assert {r["status"] for r in loose.values()} == {"passed"}
    with sqlite3.connect(pytester.path / "history.db") as conn:
        marks = conn.execute("SELECT status, replayed FROM runs ORDER BY id").fetchall()
    assert marks == [("passed", 0)] * 2 + [("passed", 1)] * 2 + [("error", 1)] * 2 + [("passed", 1)] * 2


@pytest.mark.parametrize("box", [[], ["--agentrace-sandbox", "bwrap"]], ids=["netns", "bwrap"])
def test_replay_offline(pytester: pytest.Pytester, model_double, box: list[str]) -> None:
    """With ``--agentrace-offline`` the double that plays the cassette runs inside the loopback-only namespace
    (``netns --cassette``), in the bubblewrap sandbox too (the cassette folder, hidden with the task's, is shown)."""
    from pytest_agentrace.model_double.netns import probe
    from pytest_agentrace.model_double.script import parse_script
    from pytest_agentrace.run.sandbox import probe as sandbox_probe

    if probe()[0] is None:
        pytest.skip(probe()[1])
    if box and sandbox_probe(True)[0] is None:
        pytest.skip(sandbox_probe(True)[1])
    model_double.use(parse_script(__import__("yaml").safe_load(SCRIPT), "script.yaml"))
    make(pytester)
    session(pytester, "out1", "--agentrace-record", "cassettes", "--agentrace-record-upstream", model_double.url)
    model_double.stop()
    rep = session(pytester, "out2", *box, "--agentrace-offline", "--agentrace-replay", "cassettes")
    for r in rep.values():
        assert (r["status"], r["usage"]["answer"]) == ("passed", "the recorded answer"), r["reason"]
        assert r["extra"]["replay"]["turns_played"] == 1
    make(pytester, prompt="say something else")
    bad = session(pytester, "out3", *box, "--agentrace-offline", "--agentrace-replay", "cassettes")
    assert {r["reason"].split(":")[0] for r in bad.values()} == {"cassette mismatch"}


def test_replay_without_a_cassette_for_the_run_is_an_error(pytester: pytest.Pytester) -> None:
    make(pytester)
    (pytester.path / "empty").mkdir()
    found = session(pytester, "out", "--agentrace-replay", "empty")
    for r in found.values():
        assert r["status"] == "error"
        assert r["reason"].startswith("--agentrace-replay: ") and "no cassette" in r["reason"]


@pytest.mark.parametrize(("args", "message"), [
    (["--agentrace-record", "a", "--agentrace-replay", "a"], "cannot be used together"),
    (["--agentrace-record-upstream", "http://127.0.0.1:9"], "needs --agentrace-record DIR"),
    (["--agentrace-record", "a", "--agentrace-record-upstream", "127.0.0.1:9"], "give an http:// or https:// URL"),
    (["--agentrace-record", "a", "--agentrace-offline"], "needs the network"),
    (["--agentrace-replay", "missing"], "no such folder of cassettes"),
    (["--agentrace-replay", ".", "--agentrace-replay-match", "fuzzy"], "invalid choice"),
])
def test_usage_errors(pytester: pytest.Pytester, args: list[str], message: str) -> None:
    make(pytester, tasks=1)
    res = pytester.runpytest("--agentrace", "-p", "no:cacheprovider", *args, "t0.yaml")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert message in res.stderr.str()


def _start(args: list[str]) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", "pytest_agentrace.cli", "model-double", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_standalone_model_double_serves_and_stops_cleanly(tmp_path: Path, sig: signal.Signals) -> None:
    from helpers.double import call

    (tmp_path / "s.yaml").write_text(SCRIPT)
    proc, line = _start([str(tmp_path / "s.yaml"), "--log", str(tmp_path / "log.jsonl")])
    try:
        assert line.startswith("listening on http://127.0.0.1:")
        url = line.removeprefix("listening on ")
        got = call(url, "/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "hi"}]})
        assert got.json()["choices"][0]["message"]["content"] == "the recorded answer"
    finally:
        proc.send_signal(sig)
        assert proc.wait(timeout=30) == 0
    assert proc.stderr is not None and "Traceback" not in proc.stderr.read()
    assert len((tmp_path / "log.jsonl").read_text().splitlines()) == 1


def test_standalone_model_double_serves_a_cassette(tmp_path: Path) -> None:
    from helpers.double import call

    from pytest_agentrace.model_double.cassette import Cassette

    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    reply = '{"choices": [{"message": {"role": "assistant", "content": "recorded"}}]}'
    Cassette("r", [{"turn": 1, "request": {"method": "POST", "path": "/v1/chat/completions", "query": {}, "body": body},
                    "response": {"status": 200, "headers": {"Content-Type": "application/json"}, "stream": False,
                                 "chunks": [reply], "encoding": "utf-8"}}]).save(tmp_path / "c.json")
    proc, line = _start([str(tmp_path / "c.json")])
    try:
        url = line.removeprefix("listening on ")
        assert call(url, "/v1/chat/completions", body).body.decode() == reply
        again = call(url, "/v1/chat/completions", body)  # played once: the next request is not in the cassette
        assert again.status == 400 and "cassette mismatch: turn 2" in again.json()["error"]["message"]
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0


def test_record_an_agents_own_model_double(pytester: pytest.Pytester) -> None:
    """Without an upstream, an agent with a ``model_double:`` script records its run's double."""
    make(pytester)
    (pytester.path / "script.yaml").write_text(SCRIPT)
    for n in range(2):
        path = pytester.path / f"t{n}.yaml"
        path.write_text(path.read_text().replace('agents: [{name: fake, command:',
                                                 'agents: [{name: fake, model_double: script.yaml, command:'))
    found = session(pytester, "out", "--agentrace-record", "cassettes")
    for r in found.values():
        assert (r["status"], r["usage"]["answer"]) == ("passed", "the recorded answer"), r["reason"]
        cas = json.loads(Path(r["extra"]["cassette"]).read_text())
        assert cas["upstream"].startswith("http://127.0.0.1:")
        assert '"the recorded answer"' in "".join(cas["interactions"][0]["response"]["chunks"])


def test_standalone_model_double_fixed_port_and_bad_script(tmp_path: Path) -> None:
    import socket

    (tmp_path / "s.yaml").write_text(SCRIPT)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc, line = _start([str(tmp_path / "s.yaml"), "--host", "127.0.0.1", "--port", str(port)])
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0 and line == f"listening on http://127.0.0.1:{port}"
    (tmp_path / "bad.yaml").write_text("steps: [{dance: 1}]\n")
    proc, _ = _start([str(tmp_path / "bad.yaml")])
    assert proc.wait(timeout=30) == 2
    assert proc.stderr is not None and "bad.yaml" in proc.stderr.read()
