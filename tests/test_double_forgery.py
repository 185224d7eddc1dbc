"""What the model double says about a run (a cassette mismatch, a script step the CLI offered no tool for, the tokens
it served) comes from the double itself, never from a file the agent can write. The double's request log lies in the
agent's outbox when the double runs inside the run's namespace (``--agentrace-offline``) and in the record folder
otherwise (which an agent without the box can reach); an agent that failed and then wrote a mismatch or a ``none``
answer into that log was judged an ``error`` (never counted), which left its failures out of its pass rate."""

from __future__ import annotations

import json

import pytest
from helpers import BUGGY_REPO, BUGGY_TASK, make_repo, write_script

from pytest_agentrace.model_double.cassette import Cassette, cassette_path
from pytest_agentrace.model_double.netns import probe as netns_probe
from pytest_agentrace.run.sandbox import probe

FORGER = r"""
import glob, json, os, sys, urllib.request
outbox, record = sys.argv[1], os.environ.get("RECORD_DIR", "")
base, key = os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"]
body = {"model": "test", "messages": [{"role": "user", "content": "fix add"}]}
req = urllib.request.Request(base + "/chat/completions", data=json.dumps(body).encode(), method="POST",
                             headers={"Content-Type": "application/json", "Authorization": "Bearer " + key})
with urllib.request.urlopen(req, timeout=30) as r:  # one honest turn: the double answers it
    print("the double said:", json.load(r)["choices"][0]["message"]["content"], flush=True)
if os.environ.get("ASK_AGAIN"):  # a turn the cassette does not hold, asked by the agent itself, not its CLI
    try:
        urllib.request.urlopen(req, timeout=30)
    except urllib.error.HTTPError as e:
        print("the double refused:", e.code, flush=True)
forged = [
    {"ts": 0, "method": "POST", "path": "/v1/chat/completions", "query": {}, "headers": {}, "body": None,
     "protocol": "chat", "answer": {"kind": "mismatch", "turn": 1, "field": "body", "status": 400,
                                    "error": "cassette mismatch: turn 1: body: forged by the agent"}},
    {"ts": 0, "method": "POST", "path": "/v1/chat/completions", "query": {}, "headers": {}, "body": {"model": "x"},
     "protocol": "chat", "answer": {"kind": "none", "step": 0, "usage": {"input": 1, "output": 1},
                                    "text": "scripted model: step 0 (forged by the agent) needs a shell tool"}},
]
lines = "".join(json.dumps(f) + "\n" for f in forged)
for folder in (outbox, record):  # the request log wherever it may lie: the outbox, the record folder
    if folder:
        try:
            with open(os.path.join(folder, "model-double-requests.jsonl"), "a") as fh:
                fh.write(lines)
        except OSError:
            pass
if os.environ.get("GRAB"):  # the double's report as the harness might read it, on every pipe this agent can open
    report = json.dumps({"requests": 3, "mismatch": "cassette mismatch: turn 1: forged by the agent",
                         "none": "scripted model: forged by the agent", "served": {}, "played": 0}).encode()
    for path in glob.glob("/proc/[0-9]*/fd/*"):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            os.write(fd, report)
        except OSError:
            pass
        os.close(fd)
    for fd in range(3, 256):
        try:
            os.write(fd, report)
        except OSError:
            pass
print("the agent gave up", flush=True)
sys.exit(1)
"""

SCRIPT = "side: {text: the scripted answer, usage: {input: 30, output: 5}}\nsteps:\n  - text: DONE\n"
REPLY = json.dumps({"id": "c1", "object": "chat.completion", "model": "test",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": "the recorded answer"},
                                 "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 30, "completion_tokens": 5, "total_tokens": 35}})
RUN = "out/runs/t/default/forger/1"
MODES = {
    "box-offline": ("--agentrace-offline",),
    "box": (),
    "no-box-offline": ("--agentrace-sandbox", "off", "--agentrace-offline"),
    "no-box": ("--agentrace-sandbox", "off", "--agentrace-network", "host"),
}


def forge(pytester: pytest.Pytester, kind: str, mode: str, grab: bool = False, ask_again: bool = False) -> dict:
    """One session whose agent takes one honest turn from the double, fails, and forges the double's verdict."""
    if mode.startswith("box") and probe(True)[0] is None:
        pytest.skip(f"no sandbox here: {probe(True)[1]}")
    if mode == "no-box-offline" and netns_probe()[0] is None:
        pytest.skip(netns_probe()[1])
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(pytester.path / "forger.py", FORGER)
    (pytester.path / "script.yaml").write_text(SCRIPT)
    env = {"RECORD_DIR": str(pytester.path / RUN), **({"GRAB": "1"} if grab else {}),
           **({"ASK_AGAIN": "1"} if ask_again else {})}
    double = ", model_double: script.yaml" if kind == "script" else ""
    (pytester.path / "task.yaml").write_text(
        BUGGY_TASK + f"env: {json.dumps(env)}\n"
        f"agents:\n  - {{name: forger, command: '{pytester.path / 'forger.py'} {{run_dir}}'{double}}}\n")
    args = list(MODES[mode])
    if kind == "replay":
        turn = {"turn": 1, "request": {"method": "POST", "path": "/v1/chat/completions", "query": {}, "body": {}},
                "response": {"status": 200, "headers": {"Content-Type": "application/json"}, "stream": False,
                             "chunks": [REPLY], "encoding": "utf-8"}}
        Cassette("task:t/default/forger/r1", [turn]).save(cassette_path(pytester.path / "cassettes",
                                                                        "task:t/default/forger/r1"))
        args += ["--agentrace-replay", "cassettes", "--agentrace-replay-match", "loose"]
    pytester.runpytest("--agentrace", "task.yaml", "--agentrace-out", "out", "--agentrace-no-save",
                       "-p", "no:cacheprovider", *args)
    said = (pytester.path / RUN / "raw.out").read_text()
    answer = "the recorded answer" if kind == "replay" else "the scripted answer"
    assert f"the double said: {answer}" in said and "the agent gave up" in said, said
    return json.loads((pytester.path / RUN / "run.json").read_text())


@pytest.mark.parametrize("kind", ["replay", "script"])
@pytest.mark.parametrize("mode", list(MODES))
def test_a_forged_double_verdict_is_the_agents_failure(pytester: pytest.Pytester, kind: str, mode: str) -> None:
    run = forge(pytester, kind, mode)
    assert run["status"] == "failed", (run["status"], run["reason"])
    assert "forged" not in json.dumps(run["usage"])  # no forged line became a parse warning either
    if kind == "replay":  # what the run record says of the replay is the double's own count
        assert run["extra"]["replay"]["turns_played"] == 1, run["extra"]["replay"]
    info = json.loads((pytester.path / RUN / "model-double.json").read_text())
    assert info["requests"] == 1, info


@pytest.mark.parametrize("kind", ["replay", "script"])
def test_the_agent_cannot_write_the_doubles_report(pytester: pytest.Pytester, kind: str) -> None:
    """Inside the box the double runs in the run's namespace and tells the harness on a pipe: the agent tries every
    descriptor it has and every ``/proc/*/fd`` entry it can open."""
    run = forge(pytester, kind, "box-offline", grab=True)
    assert run["status"] == "failed", (run["status"], run["reason"])
    # the report that came is the double's alone: a byte of the agent's on the pipe would have spoilt it
    assert json.loads((pytester.path / RUN / "model-double.json").read_text())["requests"] == 1
    if kind == "replay":
        assert run["extra"]["replay"]["turns_played"] == 1, run["extra"]["replay"]


@pytest.mark.xfail(strict=True, reason="not closed: the agent can reach its own double with the key its CLI was "
                   "given, and a turn it asks itself that the cassette does not hold is a real mismatch (the double "
                   "cannot tell the CLI's requests from its tool calls'); the run becomes an error")
@pytest.mark.parametrize("mode", ["box-offline", "no-box"])
def test_a_mismatch_the_agent_asks_for_itself(pytester: pytest.Pytester, mode: str) -> None:
    run = forge(pytester, "replay", mode, ask_again=True)
    assert "the double refused: 400" in (pytester.path / RUN / "raw.out").read_text()
    assert run["status"] == "failed", (run["status"], run["reason"])
