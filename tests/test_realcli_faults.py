"""Fault scripts with the real agent CLIs (marker ``realcli``): a 500 on the first turn, a 429 then success, a
malformed SSE line, and a model that never stops calling tools until the timeout.

Each ends as a sample or an error, never a crash of the session: the run folder keeps run.json, the raw output
and the double's request log, and after a timeout no process of the run survives. What each CLI does with the
fault is its own behaviour (retries, exit codes); the statuses asserted here are what the adapters make of it.

Most of these sessions wait (Aider's retries sleep about 64 s, a timeout is a timeout), so the module runs them
as ``pytest --agentrace`` subprocesses, a few at once (``PARALLEL``), each in a folder of its own, started when the
module's first test asks; each test waits for its own session and checks it. Only the sessions of the selected
tests run (``-k`` picks one). Under pytest-xdist the module is one ``xdist_group``: ``--dist loadgroup`` (as
``.ci/run`` runs) keeps it on one worker, so its sessions run once.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers.realcli import (
    CLIS,
    TOOLS_BIN,
    leftover_processes,
    outcomes,
    requests,
    require_cli,
)

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
# a busy 2-core machine, more with other sessions starting beside it); the others' faults end on their own
ENDLESS_TIMEOUTS = {"opencode": 90, "gemini": 60}
ENDLESS_TIMEOUT = 40
PARALLEL = 4  # sessions at once: their time is mostly waiting (retry back-off, timeouts), not CPU
# the sessions that wait longest start first (Aider retries a failing call for about 64 s; OpenCode's malformed
# stream and every endless run take 40-80 s), so the short ones fill the gaps
SLOW_FIRST = [("aider", "http500"), ("aider", "malformed"), ("opencode", "malformed"),
              *((cli, "endless") for cli in ("opencode", "gemini", "copilot", "codex", "claude", "aider")), ("gemini", "http500")]
SESSION_LIMIT = 900  # seconds a session may take before the test fails (an endless run is bounded by its timeout)


@dataclass
class FaultSession:
    """One finished fault session: its folder, exit code, output, and the processes still running under its
    folder right after it ended (``leftover_processes``)."""

    path: Path
    returncode: int
    output: str
    leftovers: list[str]


def session_env(path: Path) -> dict[str, str]:
    """The environment of a session subprocess, as pytester gives an in-process one: HOME is the session's folder,
    no outer pytest or pytest-xdist variables, the real CLIs first on PATH."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "TOX_ENV_DIR"))}
    env.update(HOME=str(path), USERPROFILE=str(path), PY_COLORS="0",
               PATH=f"{TOOLS_BIN}{os.pathsep}{os.environ.get('PATH', '')}" if TOOLS_BIN.is_dir() else os.environ.get("PATH", ""))
    return env


def run_session(path: Path, cli: str, fault: str) -> FaultSession:
    """Run ``pytest --agentrace hello.yaml`` with ``cli`` against the fault's script in ``path`` (config, rootdir,
    basetemp and results all inside it)."""
    script = ENDLESS_AIDER if (fault, cli) == ("endless", "aider") else SCRIPTS[fault]
    (path / "script.yaml").write_text(script)
    (path / "hello.yaml").write_text(TASK.format(cli=cli, timeout=ENDLESS_TIMEOUTS.get(cli, ENDLESS_TIMEOUT) if fault == "endless" else 180))
    (path / "tox.ini").write_text("[pytest]\n")
    argv = [sys.executable, "-m", "pytest", "--agentrace", "hello.yaml", "-c", "tox.ini", "--rootdir", str(path),
            "--basetemp", str(path / "basetemp"), "--agentrace-out", "out", "-p", "no:cacheprovider"]
    proc = subprocess.run(argv, cwd=path, env=session_env(path), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, errors="replace", timeout=SESSION_LIMIT, check=False)
    return FaultSession(path, proc.returncode, proc.stdout, leftover_processes(path))


def selected(session: pytest.Session, module: Any) -> list[tuple[str, str]]:
    """(cli, fault) of this module's selected tests, slowest first."""
    wanted = {(item.callspec.params["cli"], item.function.fault) for item in session.items
              if getattr(item, "module", None) is module and hasattr(item, "callspec")}
    return sorted(wanted, key=lambda p: SLOW_FIRST.index(p) if p in SLOW_FIRST else len(SLOW_FIRST))


@pytest.fixture(scope="module")
def fault_sessions(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[tuple[str, str], Future[FaultSession]]]:
    """Every selected test's session, started ``PARALLEL`` at a time: ``{(cli, fault): Future[FaultSession]}``.
    A CLI that is not installed has no session (its test skips or fails in ``require_cli``)."""
    path = session_env(Path.cwd())["PATH"]
    pairs = [(cli, fault) for cli, fault in selected(request.session, request.module) if shutil.which(cli, path=path)]
    with ThreadPoolExecutor(PARALLEL, thread_name_prefix="fault-session") as pool:
        yield {(cli, fault): pool.submit(run_session, tmp_path_factory.mktemp(f"{fault}-{cli}"), cli, fault) for cli, fault in pairs}


def fault(name: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Mark a test as checking the fault ``name`` (the session it reads from ``fault_sessions``)."""
    def mark(fn: Callable[..., None]) -> Callable[..., None]:
        fn.fault = name  # type: ignore[attr-defined]
        return fn
    return mark


def fault_run(sessions: dict[tuple[str, str], Future[FaultSession]], cli: str, name: str, monkeypatch: pytest.MonkeyPatch) -> tuple[dict, FaultSession]:
    """The run of ``cli`` in the fault session ``name`` (its run.json, ``_dir`` added) after checking that the run
    folder keeps run.json, the raw output and the double's request log and files."""
    require_cli(cli, monkeypatch)
    done = sessions[(cli, name)].result()
    runs = outcomes(done.path / "out")
    assert f"task:hello/default/{cli}/r1" in runs, (done.returncode, done.output[-3000:])
    run = runs[f"task:hello/default/{cli}/r1"]
    files = {p.name for p in Path(run["_dir"]).iterdir()}
    assert {"run.json", "raw.out", "raw.err", "model-double-requests.jsonl", "model-double.json"} <= files, done.output[-3000:]
    return run, done


@fault("http500")
@pytest.mark.parametrize("cli", CLIS)
def test_http_500_on_every_attempt_ends_the_run_without_a_change(cli: str, fault_sessions: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    run, _ = fault_run(fault_sessions, cli, "http500", monkeypatch)
    log = requests(run)
    assert all(r["answer"]["kind"] == "error" for r in log if r["answer"].get("step") is not None)
    assert len([r for r in log if r["answer"]["kind"] == "error"]) >= 2  # the CLI retried before giving up
    # the provider failed, not the agent: an infrastructure error naming the CLI's own message (auth.PROVIDER_PATTERNS)
    assert run["status"] == "error" and run["files_changed"] == 0, run["reason"]
    assert run["reason"].startswith("agent environment: model provider failed"), run["reason"]
    assert not run["timed_out"]


@fault("http429")
@pytest.mark.parametrize("cli", CLIS)
def test_http_429_once_is_retried_and_the_run_passes(cli: str, fault_sessions: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    run, _ = fault_run(fault_sessions, cli, "http429", monkeypatch)
    kinds = [r["answer"]["kind"] for r in requests(run) if r["answer"].get("step") is not None]
    assert kinds[0] == "error" and "error" not in kinds[1:]
    assert run["status"] == "passed", run["reason"]


@fault("malformed")
@pytest.mark.parametrize("cli", CLIS)
def test_malformed_stream_fails_the_run(cli: str, fault_sessions: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    run, _ = fault_run(fault_sessions, cli, "malformed", monkeypatch)
    # a response the CLI cannot parse fails the run; aider (litellm) reports it as an InternalServerError, the
    # same words as a 500, so for aider it is a provider error (auth module docstring)
    expected = "error" if cli == "aider" else "failed"
    assert run["status"] == expected and not run["timed_out"], run["reason"]
    assert run["files_changed"] == 0


@fault("endless")
@pytest.mark.parametrize("cli", CLIS)
def test_endless_tool_calls_time_out_and_leave_no_process(cli: str, fault_sessions: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    run, done = fault_run(fault_sessions, cli, "endless", monkeypatch)
    assert run["status"] == "timeout" and run["timed_out"], run["reason"]
    if cli != "aider":  # the model was still calling tools when the timeout struck
        assert [r["answer"]["kind"] for r in requests(run) if r["answer"].get("step") is not None][-1] == "tool"
    assert done.leftovers == []  # checked as soon as the session ended
