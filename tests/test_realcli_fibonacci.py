"""End to end with the real agent CLIs (marker ``realcli``): the built-in ``fibonacci`` task and a trial, each
CLI against the model double playing a script that solves the task and one that does nothing.

Checked per run: status, tokens equal to the script (per the CLI's counting rule), tool calls in order, the final
answer, verify pass/fail, and that the double's log accounts for every request, all sent to 127.0.0.1.
The sessions run a few at once (``helpers.sessions``), each test checking its own.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path

import pytest
from helpers.realcli import (
    CLIS,
    NOTHING,
    SOLVE,
    SOLVE_TOOLS,
    check_log_is_complete,
    check_usage,
    expected_usage,
    outcomes,
    requests,
)
from helpers.sessions import SessionRun, finished, session, start_sessions

from pytest_agentrace.agents.pricing import NO_PRICE_PREFIXES
from pytest_agentrace.model_double.netns import probe
from pytest_agentrace.model_double.script import load_script

# Where network namespaces are permitted, the solving runs use --agentrace-offline: the CLI and the double share a
# namespace with loopback only, so no request can have left 127.0.0.1 (not just: none that reached the double did).
OFFLINE = probe()[0] is not None

pytestmark = [pytest.mark.realcli, pytest.mark.xdist_group("realcli_fibonacci")]

TRIAL = """\
name = "fib-state"
[[repos]]
name = "fib"
source = "{repo}"
[[agents]]
name = "{cli}"
[[questions]]
id = "state"
repo = "fib"
prompt = "Is fibonacci() in fib.py implemented yet? Answer in one sentence."
expect = ["NotImplementedError"]
"""

# the slowest to start first (OpenCode and Aider take longest; the trial session runs two of each CLI's runs)
SLOW_FIRST = [("nothing", "opencode"), ("nothing", "aider"), ("solve", "opencode"), ("solve", "aider"), ("nothing", "gemini")]


def prepare(path: Path, name: str, cli: str) -> list[str]:
    if name == "solve":
        return ["--agentrace-builtin", "fibonacci", "--agentrace-agent", cli, "--agentrace-model-double", str(SOLVE),
                *(["--agentrace-offline"] if OFFLINE else [])]
    from pytest_agentrace.spec.builtin import find_builtin

    repo = find_builtin("fibonacci").path.parent / "repo"
    (path / "trial.toml").write_text(TRIAL.format(repo=repo, cli=cli))
    return ["--agentrace-builtin", "fibonacci", "trial.toml", "--agentrace-agent", cli, "--agentrace-model-double", str(NOTHING)]


@pytest.fixture(scope="module")
def sessions(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[tuple[str, str], Future[SessionRun]]]:
    yield from start_sessions(request, tmp_path_factory, prepare, SLOW_FIRST)


@session("solve")
@pytest.mark.parametrize("cli", CLIS)
def test_solving_script_passes_fibonacci(cli: str, sessions: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    done = finished(sessions, "solve", cli, monkeypatch)
    runs = outcomes(done.path / "out")
    run = runs[f"task:fibonacci/default/{cli}/r1"]
    assert run["status"] == "passed", (run["reason"], done.tail())
    done.res.assert_outcomes(passed=1)
    # the double's model is free, whatever list price the CLI applies to the model name it was given
    assert (run["usage"]["cost_usd"], run["usage"]["cost_source"]) == (0.0, "priced")
    assert run["extra"]["cost_note"] == "the model double's model is priced at 0 USD"
    assert [w for w in run["usage"]["parse_warnings"] if w.startswith(NO_PRICE_PREFIXES)] == []  # no advice to price it
    # the script's shell calls (python -m pytest) found the session's tools: Codex's shell keeps the run's PATH
    assert [n for n in run["extra"].get("notes", []) if "command not found" in n] == []
    assert json.loads((Path(run["_dir"]) / "model-double.json").read_text())["offline"] is OFFLINE
    log = requests(run)
    check_log_is_complete(log, [0] if cli == "aider" else [0, 1, 2])
    check_usage(run, expected_usage(cli, SOLVE, log))
    assert [t["name"] for t in run["usage"]["tool_calls"]] == SOLVE_TOOLS[cli]
    if SOLVE_TOOLS[cli]:
        assert "pytest" in run["usage"]["tool_calls"][1]["summary"]
    final = load_script(SOLVE).final_text
    assert run["usage"]["answer"] == final if cli != "aider" else final in run["usage"]["answer"]
    assert run["checks"]["tests"]["passed"] and run["checks"]["verify"]["passed"]
    assert run["files_changed"] == 1  # fib.py only: no CLI state lands in the workspace


@session("nothing")
@pytest.mark.parametrize("cli", CLIS)
def test_do_nothing_script_fails_fibonacci_and_answers_a_trial(cli: str, sessions: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    done = finished(sessions, "nothing", cli, monkeypatch)
    runs = outcomes(done.path / "out")
    task = runs[f"task:fibonacci/default/{cli}/r1"]
    trial = runs[f"trial:state/default/{cli}/r1"]
    assert (task["status"], trial["status"]) == ("failed", "passed"), (task["reason"], trial["reason"], done.tail())
    done.res.assert_outcomes(passed=1, failed=1)
    final = load_script(NOTHING).final_text
    for run in (task, trial):
        log = requests(run)
        check_log_is_complete(log, [0])
        check_usage(run, expected_usage(cli, NOTHING, log))
        assert run["usage"]["tool_calls"] == []
        assert final in run["usage"]["answer"]
    assert task["files_changed"] == 0 and not task["checks"]["verify"]["passed"]
    assert trial["answer_score"]["correct"] is True
