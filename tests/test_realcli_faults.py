"""Fault scripts with the real agent CLIs (marker ``realcli``): a 500 on the first turn, a 429 then success, a
malformed SSE line, and a model that never stops calling tools until the timeout.

Each ends as a sample or an error, never a crash of the session: the run folder keeps run.json, the raw output
and the double's request log, and after a timeout no process of the run survives. What each CLI does with the
fault is its own behaviour (retries, exit codes); the statuses asserted here are what the adapters make of it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.realcli import (
    CLIS,
    leftover_processes,
    outcomes,
    requests,
    require_cli,
    session_args,
)

pytestmark = pytest.mark.realcli

TASK = """\
name: hello
description: Create hello.txt containing hi.
test_command: test "$(cat hello.txt)" = hi
timeout: {timeout}
agents:
  - {{name: {cli}, model_double: script.yaml}}
"""
HELLO = "  - write: {path: hello.txt, content: \"hi\\n\"}\n"
SCRIPTS = {
    "http500": "steps:\n" + HELLO + "    error: {status: 500, message: scripted overload}\n  - text: done\n",
    "http429": "steps:\n" + HELLO + "    error: {status: 429, message: scripted rate limit, times: 1}\n  - text: done\n",
    "malformed": "steps:\n" + HELLO + "    malformed: true\n  - text: done\n",
    # every call differs ({turn}): no CLI's loop detection (Gemini CLI stops a cycle of identical calls repeated
    # 5 times) stops it; aider calls no tools, so its model is just too slow
    "endless": "loop: true\nsteps:\n  - shell: echo turn {turn}\n",
}
ENDLESS_AIDER = "steps:\n  - text: never\n    delay: 600\n"
TIMEOUTS = {"endless": 40}  # seconds; OpenCode alone needs 10-30 s to start on a busy 2-core machine


def run_fault(pytester: pytest.Pytester, cli: str, fault: str) -> dict:
    script = ENDLESS_AIDER if (fault, cli) == ("endless", "aider") else SCRIPTS[fault]
    (pytester.path / "script.yaml").write_text(script)
    pytester.makefile(".yaml", hello=TASK.format(cli=cli, timeout=TIMEOUTS.get(fault, 180)))
    pytester.runpytest(*session_args(pytester))
    run = outcomes(pytester.path / "out")[f"task:hello/default/{cli}/r1"]
    files = {p.name for p in Path(run["_dir"]).iterdir()}
    assert {"run.json", "raw.out", "raw.err", "model-double-requests.jsonl", "model-double.json"} <= files
    return run


@pytest.mark.parametrize("cli", CLIS)
def test_http_500_on_every_attempt_ends_the_run_without_a_change(cli: str, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    require_cli(cli, monkeypatch)
    run = run_fault(pytester, cli, "http500")
    log = requests(run)
    assert all(r["answer"]["kind"] == "error" for r in log if r["answer"].get("step") is not None)
    assert len([r for r in log if r["answer"]["kind"] == "error"]) >= 2  # the CLI retried before giving up
    # the provider failed, not the agent: an infrastructure error naming the CLI's own message (auth.PROVIDER_PATTERNS)
    assert run["status"] == "error" and run["files_changed"] == 0, run["reason"]
    assert run["reason"].startswith("agent environment: model provider failed"), run["reason"]
    assert not run["timed_out"]


@pytest.mark.parametrize("cli", CLIS)
def test_http_429_once_is_retried_and_the_run_passes(cli: str, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    require_cli(cli, monkeypatch)
    run = run_fault(pytester, cli, "http429")
    kinds = [r["answer"]["kind"] for r in requests(run) if r["answer"].get("step") is not None]
    assert kinds[0] == "error" and "error" not in kinds[1:]
    assert run["status"] == "passed", run["reason"]


@pytest.mark.parametrize("cli", CLIS)
def test_malformed_stream_fails_the_run(cli: str, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    require_cli(cli, monkeypatch)
    run = run_fault(pytester, cli, "malformed")
    # a response the CLI cannot parse fails the run; aider (litellm) reports it as an InternalServerError, the
    # same words as a 500, so for aider it is a provider error (auth module docstring)
    expected = "error" if cli == "aider" else "failed"
    assert run["status"] == expected and not run["timed_out"], run["reason"]
    assert run["files_changed"] == 0


@pytest.mark.parametrize("cli", CLIS)
def test_endless_tool_calls_time_out_and_leave_no_process(cli: str, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    require_cli(cli, monkeypatch)
    run = run_fault(pytester, cli, "endless")
    assert run["status"] == "timeout" and run["timed_out"], run["reason"]
    if cli != "aider":  # the model was still calling tools when the timeout struck
        assert [r["answer"]["kind"] for r in requests(run) if r["answer"].get("step") is not None][-1] == "tool"
    assert leftover_processes(pytester.path) == []
