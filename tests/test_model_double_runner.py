"""The model double through ``pytest --agentrace``: a task's and a trial's agent entry with ``model_double:``,
``--agentrace-model-double``, ``--agentrace-offline``; serially and under pytest-xdist.

The agent is a small real agent loop on PATH (``miniagent``): it sends Chat Completions requests with a
``bash`` tool to ``$OPENAI_BASE_URL`` (set by the model double's environment for custom commands), runs the
commands it is given in its workspace, and prints the final answer. It also records the network interfaces
it can see, so the offline test can check that only loopback exists.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import BUGGY_REPO, make_repo, write_script

from pytest_agentrace.model_double import netns

MINIAGENT = r"""
import json, os, socket, subprocess, sys, urllib.request
if os.environ.get("IFACES_OUT"):
    with open(os.environ["IFACES_OUT"], "w") as fh:
        json.dump(sorted(name for _, name in socket.if_nameindex()), fh)
url = os.environ["OPENAI_BASE_URL"] + "/chat/completions"
tools = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}]
messages = [{"role": "user", "content": sys.argv[1]}]
for _ in range(20):
    req = urllib.request.Request(url, json.dumps({"model": "x", "messages": messages, "tools": tools}).encode(),
                                 {"Content-Type": "application/json", "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
    msg = json.load(urllib.request.urlopen(req, timeout=30))["choices"][0]["message"]
    if not msg.get("tool_calls"):
        print(msg["content"])
        break
    messages.append(msg)
    for call in msg["tool_calls"]:
        cmd = json.loads(call["function"]["arguments"])["command"]
        out = subprocess.run(cmd, shell=True, capture_output=True, text=True)
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": out.stdout + out.stderr})
"""
FIXED = "def add(a, b):\n    return a + b\n"
SOLVE = {
    "steps": [
        {"write": {"path": "calc.py", "content": FIXED}, "usage": {"input": 1000, "output": 60}},
        {"shell": "python -m pytest -q test_calc.py", "usage": {"input": 1400, "output": 30}},
        {"text": "DONE: add() adds.", "usage": {"input": 1600, "output": 12}},
    ]
}
NOTHING = {"steps": [{"text": "I changed nothing.", "usage": {"input": 900, "output": 15}}]}


@pytest.fixture
def project(pytester: pytest.Pytester, bin_dir: Path) -> pytest.Pytester:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "miniagent", MINIAGENT)
    scripts = pytester.path / "scripts"
    scripts.mkdir()
    (scripts / "solve.yaml").write_text(json.dumps(SOLVE))  # JSON is YAML
    (scripts / "nothing.yaml").write_text(json.dumps(NOTHING))
    return pytester


def task(agents: str, ifaces: Path | None = None) -> str:
    extra = f", IFACES_OUT: '{ifaces}'" if ifaces else ""
    return (
        "name: fix-add\ndescription: Fix add() in calc.py so that it adds.\nrepo: repo\n"
        "test_command: python -m pytest -q test_calc.py\ntimeout: 60\n"
        f"env: {{PYTEST_DISABLE_PLUGIN_AUTOLOAD: '1'{extra}}}\nagents:\n{agents}"
    )


def records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "model-double-requests.jsonl").read_text().splitlines()]


def test_task_agents_play_their_scripts(project: pytest.Pytester, xdist: list[str]) -> None:
    project.makefile(".yaml", task(
        "  - {name: mini, command: 'miniagent {prompt}', model_double: scripts/solve.yaml}\n"
        "  - {name: mini, command: 'miniagent {prompt}', model_double: scripts/nothing.yaml, expect: fail}\n"
    ))
    res = project.runpytest("--agentrace", "--agentrace-out", "out", *xdist)
    res.assert_outcomes(passed=1, xfailed=1)
    solved = project.path / "out/runs/fix-add/default/mini/1"
    outcome = json.loads((solved / "run.json").read_text())
    assert outcome["status"] == "passed" and outcome["usage"]["answer"] == "DONE: add() adds."
    assert [(r["answer"]["kind"], r["answer"]["step"]) for r in records(solved)] == [("tool", 0), ("tool", 1), ("text", 2)]
    assert records(solved)[0]["answer"]["tool"] == "bash" and records(solved)[0]["headers"]["Authorization"] == "<redacted>"
    info = json.loads((solved / "model-double.json").read_text())
    assert info["requests"] == 3 and info["url"].startswith("http://127.0.0.1:") and info["offline"] is False
    assert info["script"] == str(project.path / "scripts/solve.yaml")
    nothing = project.path / "out/runs/fix-add/default/mini~2/1"
    assert json.loads((nothing / "run.json").read_text())["status"] == "failed"
    assert [r["answer"]["kind"] for r in records(nothing)] == ["text"]


def test_session_wide_script_option(project: pytest.Pytester, xdist: list[str]) -> None:
    project.makefile(".yaml", task("  - {name: mini, command: 'miniagent {prompt}'}\n  - noop\n"))
    res = project.runpytest("--agentrace", "--agentrace-out", "out", "--agentrace-model-double", "scripts/solve.yaml", *xdist)
    res.assert_outcomes(passed=1, xfailed=1)
    assert len(records(project.path / "out/runs/fix-add/default/mini/1")) == 3
    assert not (project.path / "out/runs/fix-add/default/noop/1/model-double.json").exists()  # in-process agents: no double


def test_bad_script_is_an_error_that_names_file_and_key(project: pytest.Pytester) -> None:
    (project.path / "scripts/bad.yaml").write_text("steps:\n  - shel: ls\n  - text: x\n")
    project.makefile(".yaml", task("  - {name: mini, command: 'miniagent {prompt}', model_double: scripts/bad.yaml}\n"))
    res = project.runpytest("--agentrace", "--agentrace-out", "out")
    res.assert_outcomes(errors=1)
    assert "model_double: " + str(project.path / "scripts/bad.yaml") + ": key 'steps[0].shel': unknown key (did you mean 'shell'?)" in res.stdout.str()
    usage = project.runpytest("--agentrace", "--agentrace-model-double", "scripts/bad.yaml")
    assert usage.ret == pytest.ExitCode.USAGE_ERROR
    assert "--agentrace-model-double: " + str(project.path / "scripts/bad.yaml") + ": key 'steps[0].shel'" in usage.stderr.str()


def test_trial_agent_entry_with_model_double(project: pytest.Pytester) -> None:
    project.makefile(".toml", trial=(
        'name = "calc"\n'
        '[[repos]]\nname = "app"\nsource = "repo"\n'
        '[[agents]]\nname = "mini"\ncommand = "miniagent {prompt}"\nmodel_double = "scripts/nothing.yaml"\n'
        '[[questions]]\nid = "change"\nrepo = "app"\nprompt = "Did you change anything?"\nexpect = ["changed nothing"]\n'
    ))
    res = project.runpytest("--agentrace", "--agentrace-out", "out")
    res.assert_outcomes(passed=1)
    run_dirs = list((project.path / "out/runs").rglob("model-double-requests.jsonl"))
    assert len(run_dirs) == 1 and records(run_dirs[0].parent)[0]["answer"]["text"] == "I changed nothing."


@pytest.mark.skipif(netns.probe()[0] is None, reason="network namespaces are not permitted here")
def test_offline_runs_agent_and_double_in_a_loopback_only_namespace(project: pytest.Pytester, xdist: list[str]) -> None:
    ifaces = project.path / "ifaces.json"
    project.makefile(".yaml", task(
        "  - {name: mini, command: 'miniagent {prompt}', model_double: scripts/solve.yaml}\n", ifaces,
    ))
    # the netns helper's own namespace (no sandbox); the sandbox's --unshare-net: test_sandbox_attacks.py
    res = project.runpytest("--agentrace", "--agentrace-out", "out", "--agentrace-offline", "--agentrace-sandbox", "off", *xdist)
    res.assert_outcomes(passed=1)
    assert json.loads(ifaces.read_text()) == ["lo"]
    run = project.path / "out/runs/fix-add/default/mini/1"
    assert [r["answer"]["step"] for r in records(run)] == [0, 1, 2]
    info = json.loads((run / "model-double.json").read_text())
    assert info["offline"] is True and info["requests"] == 3
    assert json.loads((run / "argv.json").read_text())[0].endswith("unshare")
