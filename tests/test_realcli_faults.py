"""Fault scripts with the real agent CLIs (marker ``realcli``): a 500 on the first turn, a 429 then success, a
malformed SSE line, and a model that never stops calling tools until the timeout.

Each ends as a sample or an error, never a crash of the session: the run folder keeps run.json, the raw output
and the double's request log, and after a timeout no process of the run survives. What each CLI does with the
fault is its own behaviour (retries, exit codes); the statuses asserted here are what the adapters make of it.

Most of these sessions wait (Aider's retries sleep about 64 s, a timeout is a timeout), so they run a few at once
(``helpers.sessions``), each test checking its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path

import pytest
from helpers.realcli import CLIS, outcomes, requests
from helpers.sessions import SessionRun, finished, session, start_sessions

pytestmark = [pytest.mark.realcli, pytest.mark.xdist_group("realcli_faults")]

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
# seconds of the endless runs: long enough for each CLI to start and reach the double (OpenCode needs 10-30 s on
# a busy 2-core machine, more with other sessions starting beside it); the other faults end on their own
ENDLESS_TIMEOUTS = {"opencode": 90, "gemini": 60}
ENDLESS_TIMEOUT = 40
# the sessions that wait longest start first (Aider retries a failing call for about 64 s; OpenCode's malformed
# stream and every endless run take 40-90 s), so the short ones fill the gaps
SLOW_FIRST = [("http500", "aider"), ("malformed", "aider"), ("malformed", "opencode"),
              *(("endless", cli) for cli in ("opencode", "gemini", "copilot", "codex", "claude", "aider")), ("http500", "gemini")]


def prepare(path: Path, fault: str, cli: str) -> list[str]:
    script = ENDLESS_AIDER if (fault, cli) == ("endless", "aider") else SCRIPTS[fault]
    (path / "script.yaml").write_text(script)
    timeout = ENDLESS_TIMEOUTS.get(cli, ENDLESS_TIMEOUT) if fault == "endless" else 180
    (path / "hello.yaml").write_text(TASK.format(cli=cli, timeout=timeout))
    return ["hello.yaml"]


@pytest.fixture(scope="module")
def sessions(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[tuple[str, str], Future[SessionRun]]]:
    yield from start_sessions(request, tmp_path_factory, prepare, SLOW_FIRST)


def fault_run(sessions: dict[tuple[str, str], Future[SessionRun]], cli: str, fault: str, monkeypatch: pytest.MonkeyPatch) -> tuple[dict, SessionRun]:
    """The run of ``cli`` in the session of ``fault`` (its run.json, ``_dir`` added), after checking that the
    run folder keeps run.json, the raw output and the double's request log and files."""
    done = finished(sessions, fault, cli, monkeypatch)
    runs = outcomes(done.path / "out")
    assert f"task:hello/default/{cli}/r1" in runs, (done.res.ret, done.tail())
    run = runs[f"task:hello/default/{cli}/r1"]
    files = {p.name for p in Path(run["_dir"]).iterdir()}
    assert {"run.json", "raw.out", "raw.err", "model-double-requests.jsonl", "model-double.json"} <= files, done.tail()
    return run, done


@session("http500")
@pytest.mark.parametrize("cli", CLIS)
def test_http_500_on_every_attempt_ends_the_run_without_a_change(cli: str, sessions: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    run, _ = fault_run(sessions, cli, "http500", monkeypatch)
    log = requests(run)
    assert all(r["answer"]["kind"] == "error" for r in log if r["answer"].get("step") is not None)
    assert len([r for r in log if r["answer"]["kind"] == "error"]) >= 2  # the CLI retried before giving up
    # the provider failed, not the agent: an infrastructure error naming the CLI's own message (auth.PROVIDER_PATTERNS)
    assert run["status"] == "error" and run["files_changed"] == 0, run["reason"]
    assert run["reason"].startswith("agent environment: model provider failed"), run["reason"]
    assert not run["timed_out"]


@session("http429")
@pytest.mark.parametrize("cli", CLIS)
def test_http_429_once_is_retried_and_the_run_passes(cli: str, sessions: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    run, _ = fault_run(sessions, cli, "http429", monkeypatch)
    kinds = [r["answer"]["kind"] for r in requests(run) if r["answer"].get("step") is not None]
    assert kinds[0] == "error" and "error" not in kinds[1:]
    assert run["status"] == "passed", run["reason"]


@session("malformed")
@pytest.mark.parametrize("cli", CLIS)
def test_malformed_stream_fails_the_run(cli: str, sessions: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    run, _ = fault_run(sessions, cli, "malformed", monkeypatch)
    # a response the CLI cannot parse fails the run; aider (litellm) reports it as an InternalServerError, the
    # same words as a 500, so for aider it is a provider error (auth module docstring)
    expected = "error" if cli == "aider" else "failed"
    assert run["status"] == expected and not run["timed_out"], run["reason"]
    assert run["files_changed"] == 0


@session("endless")
@pytest.mark.parametrize("cli", CLIS)
def test_endless_tool_calls_time_out_and_leave_no_process(cli: str, sessions: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    run, done = fault_run(sessions, cli, "endless", monkeypatch)
    assert run["status"] == "timeout" and run["timed_out"], run["reason"]
    if cli != "aider":  # the model was still calling tools when the timeout struck
        assert [r["answer"]["kind"] for r in requests(run) if r["answer"].get("step") is not None][-1] == "tool"
    assert done.leftovers == []  # checked as soon as the session ended
