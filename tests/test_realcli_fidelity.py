"""Every figure is what was served (marker ``realcli``): each real CLI runs a task against the model double, and
``run.json``'s tokens (in total and per model, router calls included), turns and tool calls equal what the double
served, read from its request log (``model-double-requests.jsonl``) rather than from the script.

The script writes a file (each CLI's write tool where it offers one, else its shell), reads it back with a shell
command, then answers; every step reports different usage (cache reads included), so a figure taken from the
wrong request, or a request left out, shows. Aider runs no tools: its one request carries the script's usage.
A read-only Codex run checks the tool calls its ``--json`` stream leaves out (refused by the sandbox). The
sessions run a few at once (``helpers.sessions``), each test checking its own.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path

import pytest
from helpers.realcli import CLIS, outcomes, requests
from helpers.sessions import SessionRun, finished, session, start_sessions

from pytest_agentrace.model_double.runs import read_log, served_usage
from pytest_agentrace.model_double.script import TurnUsage

pytestmark = [pytest.mark.realcli, pytest.mark.xdist_group("realcli_fidelity")]

SCRIPT = """\
side: {usage: {input: 310, output: 7}}
steps:
  - write: {path: hello.txt, content: "hi\\n"}
    usage: {input: 1000, output: 50, cache_read: 200}
  - shell: cat hello.txt
    usage: {input: 1100, output: 40, cache_read: 300}
  - text: "DONE: hello.txt holds hi."
    usage: {input: 1200, output: 10, cache_read: 400}
"""
TASK = """\
name: hello
description: Create hello.txt containing hi, then show it.
repo: repo
test_command: grep -qx hi hello.txt
agents: [{{name: {cli}, model_double: script.yaml}}]
"""
# the tool name each adapter records for a tool the double called (by the name the CLI offered)
RECORDED_AS = {"codex": {"exec_command": "command_execution"}}
TURN_KINDS = ("tool", "text", "none", "edit")  # answers to the main conversation (not side or router requests)
# CLIs that count cache reads as plain input: aider 0.86.2 reads only DeepSeek's ``prompt_cache_hit_tokens`` and
# Anthropic's ``cache_read_input_tokens`` (base_coder.py), not the OpenAI ``prompt_tokens_details.cached_tokens``
# the double sends on the Chat Completions wire, so its ``prompt_tokens`` include them
CACHE_AS_INPUT = {"aider"}


def make_repo(path) -> None:
    import subprocess

    path.mkdir()
    (path / "README.md").write_text("hello\n")
    for argv in (
        ["git", "init", "-q"],
        ["git", "add", "."],
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"],
    ):
        subprocess.run(argv, cwd=path, check=True)


def prepare(path: Path, name: str, cli: str) -> list[str]:
    """The session ``figures`` (the task, one CLI) or ``read-only`` (Codex's read-only trial)."""
    make_repo(path / "repo")
    (path / "script.yaml").write_text(SCRIPT)
    if name == "read-only":
        (path / "trial.toml").write_text(READ_ONLY_TRIAL)
        return ["trial.toml"]
    (path / "task.yaml").write_text(TASK.format(cli=cli))
    return ["task.yaml"]


@pytest.fixture(scope="module")
def sessions(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[tuple[str, str], Future[SessionRun]]]:
    yield from start_sessions(
        request, tmp_path_factory, prepare, [("figures", "opencode"), ("figures", "aider"), ("figures", "gemini")]
    )


@session("figures")
@pytest.mark.parametrize("cli", CLIS)
def test_run_json_figures_equal_what_the_double_served(
    cli: str, sessions: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    done = finished(sessions, "figures", cli, monkeypatch)
    run = outcomes(done.path / "out")[f"task:hello/default/{cli}/r1"]
    run["_stdout"] = done.tail()
    assert run["status"] == "passed", (run["reason"], run["_stdout"])
    log = read_log(Path(run["_dir"]) / "model-double-requests.jsonl")
    assert log == requests(run) and log
    served = served_usage(log)
    total = sum(served.values(), TurnUsage())
    u = run["usage"]
    # tokens: the CLI's report equals every answer the double served (side and router requests included)
    if cli in CACHE_AS_INPUT:
        served = {m: TurnUsage(t.input + t.cache_read, t.output, 0, t.cache_write) for m, t in served.items()}
        total = sum(served.values(), TurnUsage())
    got = (u["input_tokens"], u["output_tokens"], u["cache_read_tokens"] or 0, u["cache_write_tokens"] or 0)
    assert got == total.as_tuple(), (u, served)
    assert u["total_tokens"] == total.total
    assert not [w for w in u["parse_warnings"] if w.startswith("tokens differ")], u["parse_warnings"]
    # per model, where the CLI reports per model (Claude Code's modelUsage, Gemini CLI's stats.models, Copilot's OTel)
    if u["model_usage"]:
        got = {
            m: TurnUsage(
                v["input_tokens"] or 0,
                v["output_tokens"] or 0,
                v["cache_read_tokens"] or 0,
                v["cache_write_tokens"] or 0,
            )
            for m, v in u["model_usage"].items()
        }
        assert got == served, (u["model_usage"], served)
    # turns: one per answer to the main conversation; tool calls: one per tool answer, in order
    answers = [r["answer"] for r in log]
    assert u["turns"] == sum(a["kind"] in TURN_KINDS for a in answers), (u["turns"], [a["kind"] for a in answers])
    called = [RECORDED_AS.get(cli, {}).get(a["tool"], a["tool"]) for a in answers if a["kind"] == "tool"]
    assert [t["name"] for t in u["tool_calls"]] == called, (u["tool_calls"], called)
    assert len(called) == (0 if cli == "aider" else 2)
    if cli == "opencode":  # no npm install at start (environment.opencode_env): nothing the gate had to refuse
        assert [c for c in run["extra"]["network"] if not c["allowed"]] == [], run["extra"]["network"]


READ_ONLY_TRIAL = """\
name = "ro"
[[repos]]
name = "r"
source = "repo"
[[arms]]
name = "default"
uses = "> hello.txt"  # the write the sandbox refused: only the session log has it
[[agents]]
name = "codex"
model_double = "script.yaml"
edits = false
[[questions]]
id = "q"
repo = "r"
prompt = "Create hello.txt containing hi, then show it."
"""


@session("read-only", cli="codex")
def test_codex_read_only_run_records_the_commands_its_sandbox_refused(
    sessions: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``codex exec --json -s read-only`` often prints no ``command_execution`` for the write the sandbox refused
    (it does for the ``cat`` that then fails); the session log has both calls, so run.json does, and the arm's
    ``uses`` regex sees them ("Used tool 1/1")."""
    done = finished(sessions, "read-only", "codex", monkeypatch)
    res = done.res
    run = outcomes(done.path / "out")["trial:q/default/codex/r1"]
    assert run["extra"]["edits"] is False and run["files_changed"] == 0, (run["reason"], res.stdout.str()[-3000:])
    answers = [r["answer"] for r in requests(run)]
    assert [a.get("tool") for a in answers if a["kind"] == "tool"] == ["exec_command", "exec_command"]
    assert [t["name"] for t in run["usage"]["tool_calls"]] == ["command_execution", "command_execution"]
    assert run["usage"]["turns"] == 3 and run["used_tool"] is True
    raw = (Path(run["_dir"]) / "raw.out").read_text()
    # The stream always shows the failed cat. Whether it also shows the refused write varies between runs of the
    # same CLI (seen under load, with "Read-only file system"); when it does, that item is a failed command.
    assert "cat hello.txt" in raw
    writes = [json.loads(line)["item"] for line in raw.splitlines() if "printf" in line and '"item.completed"' in line]
    assert all(item["status"] == "failed" and item["exit_code"] != 0 for item in writes), writes
    row = next(line for line in res.stdout.str().splitlines() if line.startswith("| q "))
    assert " 1/1 " in row  # Used tool
