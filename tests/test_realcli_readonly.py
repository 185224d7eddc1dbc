"""Read-only mode of the real agent CLIs (marker ``realcli``): a trial agent with ``edits = false`` must not
change the workspace, one with ``edits = true`` must (issue 4: "default false = read-only permission mode
where the CLI has one").

Each CLI runs one trial with the same agent twice (``edits = false`` and ``edits = true``; run ids ``<cli>`` and
``<cli>~2``) against the model double playing a model that tries to create a file with the CLI's write tool
(its shell tool when it has none), then another with a shell command that writes without a redirection
(``python3 -c "open(...).write(...)"``), then answers. Checked: the read-only run changes no file (files and
lines changed 0, empty recorded diff) and the CLI refused in the way ``BLOCKED`` records; the editing run
creates both files (aider runs no tools: only the write step applies to it).

What each pinned CLI did in read-only mode (observed, see ``BLOCKED``):
- claude 2.1.197 ``--permission-mode plan``: both tool calls refused ("Cannot write ... while in plan mode";
  the shell command "requires approval", which ``-p`` mode cannot give; a ``>`` redirection is refused too);
- codex 0.171.0 ``--sandbox read-only``: both commands ran inside the sandbox and failed with "Read-only file
  system";
- gemini 0.61.0 ``--approval-mode default`` (non-interactive): the CLI does not offer ``write_file``,
  ``replace`` or ``run_shell_command`` at all, so the model cannot call them (the double answers "needs a
  shell tool" and the run ends, as an ``error``: the script cannot be played in that mode);
- opencode 1.18.33: ``--agent plan`` alone let both writes through (its ``write`` and ``bash`` tools ran);
  the adapter now adds ``OPENCODE_PERMISSION`` denying edit and bash (see ``agents/opencode.py``), and the
  CLI then does not offer ``write``, ``edit`` or ``bash`` at all;
- copilot 1.0.102 ``--deny-tool write --deny-tool shell``: ``create`` refused by the ``write`` rule, ``bash`` by
  the ``shell`` rule;
- aider 0.86.2 ``--chat-mode ask``: the model's whole-file listing is not applied.
Cursor cannot take a custom endpoint, so it is not verified here. The sessions run a few at once
(``helpers.sessions``), each test checking its own.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from helpers.realcli import CLIS, outcomes, requests
from helpers.sessions import SessionRun, finished, session, start_sessions

from pytest_agentrace.model_double.tools import offered_tools
from pytest_agentrace.spec.builtin import find_builtin

pytestmark = [pytest.mark.realcli, pytest.mark.xdist_group("realcli_readonly")]

SCRIPT = """\
steps:
  - write: {path: by-write-tool.txt, content: "written\\n"}
  - shell: python3 -c "open('by-shell-tool.txt', 'w').write('shell')"
  - text: "DONE: tried to write by-write-tool.txt and by-shell-tool.txt."
"""
TRIAL = """\
name = "readonly"
[[repos]]
name = "fib"
source = "{repo}"
[[agents]]
name = "{cli}"
model_double = "script.yaml"
edits = false
[[agents]]
name = "{cli}"
model_double = "script.yaml"
edits = true
[[questions]]
id = "write"
repo = "fib"
prompt = "Create by-write-tool.txt and by-shell-tool.txt in the repository."
"""
FILES = ("by-write-tool.txt", "by-shell-tool.txt")
# How each CLI's read-only mode stopped the two tool calls: (tool names the double called, text the CLI sent
# back to the model for each refused call, in order). Observed with the pinned versions.
BLOCKED: dict[str, tuple[list[str], list[str]]] = {
    "claude": (["Write", "Bash"], ["while in plan mode", "This command requires approval"]),
    "codex": (["exec_command", "exec_command"], ["Read-only file system", "Read-only file system"]),
    "gemini": ([], []),  # WITHHELD: no write or shell tool offered, nothing to call
    "opencode": ([], []),  # WITHHELD (with OPENCODE_PERMISSION; --agent plan alone offered and ran both)
    "copilot": (["create", "bash"], ["denied due to the following rules: `write`", "denied due to the following rules: `shell`"]),
    "aider": ([], []),  # no tools; checked through the edit reply below
}
# CLIs whose read-only mode does not offer their writing tools to the model at all (the double then has no
# tool to call and answers "needs a shell tool", ending the run); the editing run offers and calls them
WITHHELD = {
    "gemini": ({"write_file", "replace", "run_shell_command"}, ["write_file", "run_shell_command"]),
    "opencode": ({"write", "edit", "bash"}, ["write", "bash"]),
}


def prepare(path: Path, name: str, cli: str) -> list[str]:
    repo = find_builtin("fibonacci").path.parent / "repo"
    (path / "script.yaml").write_text(SCRIPT)
    (path / "trial.toml").write_text(TRIAL.format(repo=repo, cli=cli))
    return ["trial.toml"]


@pytest.fixture(scope="module")
def sessions(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[tuple[str, str], Future[SessionRun]]]:
    yield from start_sessions(request, tmp_path_factory, prepare, [("both", "opencode"), ("both", "aider"), ("both", "gemini")])


def run_both(sessions: dict, cli: str, monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, Any], dict[str, Any], str]:
    done = finished(sessions, "both", cli, monkeypatch)
    runs = outcomes(done.path / "out")
    return runs[f"trial:write/default/{cli}/r1"], runs[f"trial:write/default/{cli}~2/r1"], done.tail()


def tool_answers(log: list[dict[str, Any]]) -> list[str]:
    return [r["answer"]["tool"] for r in log if r["answer"]["kind"] == "tool"]


def tool_results(body: dict[str, Any]) -> list[str]:
    """The tool results a request holds, as text, in order (Anthropic ``tool_result`` blocks, Responses
    ``*_call_output`` items, Chat ``role: tool`` messages)."""
    found = []
    for item in body.get("messages") or body.get("input") or ():
        if item.get("role") == "tool":
            found.append(json.dumps(item.get("content")))
        elif str(item.get("type", "")).endswith("_call_output"):
            found.append(json.dumps(item.get("output")))
        elif isinstance(item.get("content"), list):
            found += [json.dumps(b.get("content")) for b in item["content"] if isinstance(b, dict) and b.get("type") == "tool_result"]
    return found


def offered(request: dict[str, Any]) -> set[str]:
    return set(offered_tools(request["body"]))


# cursor-agent is not here: it cannot take a custom model endpoint, so it cannot run against the model double


@session("both")
@pytest.mark.parametrize("cli", CLIS)
def test_read_only_agent_changes_no_file_and_editing_agent_does(cli: str, sessions: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    ro, rw, out = run_both(sessions, cli, monkeypatch)
    assert (ro["extra"]["edits"], rw["extra"]["edits"]) == (False, True)
    if cli in WITHHELD:  # the script's write step has no tool to run on: the run tested the script, an error
        assert (ro["status"], rw["status"]) == ("error", "passed"), (ro["reason"], rw["reason"], out)
        assert ro["reason"].startswith("agent environment: model script does not fit this CLI: step 0 (write: by-write-tool.txt)")
    else:
        assert (ro["status"], rw["status"]) == ("passed", "passed"), (ro["reason"], rw["reason"], out)

    # read-only: nothing changed, and the CLI refused the way it was observed to
    ro_log = requests(ro)
    assert (ro["files_changed"], ro["lines_changed"]) == (0, 0), (Path(ro["_dir"]) / "diff.patch").read_text()
    assert (Path(ro["_dir"]) / "diff.patch").read_text() == ""
    names, refusals = BLOCKED[cli]
    assert tool_answers(ro_log) == names, [r["answer"] for r in ro_log]
    assert len(ro["usage"]["tool_calls"]) == len(names), ro["usage"]["tool_calls"]  # refused calls are recorded too
    if names:  # the last request holds the CLI's result for each call
        results = tool_results(ro_log[-1]["body"])
        assert len(results) == len(refusals) and all(t in r for t, r in zip(refusals, results, strict=True)), results
    if cli in WITHHELD:
        asked = [r for r in ro_log if r["answer"]["kind"] not in ("json", "side")]
        assert asked and all(not (offered(r) & WITHHELD[cli][0]) for r in asked), [sorted(offered(r)) for r in asked]
        assert asked[-1]["answer"]["kind"] == "none"  # the double had no tool to call
    if cli == "aider":  # the model answered with a whole-file listing anyway; ask mode did not apply it
        assert [r["answer"]["kind"] for r in ro_log] == ["edit"]
        assert "by-write-tool.txt\n```\nwritten\n```" in (Path(ro["_dir"]) / "raw.out").read_text()

    # editing: both files created (aider: the write step only)
    rw_log = requests(rw)
    want = FILES[:1] if cli == "aider" else FILES
    patch = (Path(rw["_dir"]) / "diff.patch").read_text()
    assert rw["files_changed"] == len(want), (rw["reason"], patch, out)
    assert all(f"+++ b/{name}" in patch for name in want), patch
    if names:
        assert tool_answers(rw_log) == names
    if cli in WITHHELD:
        assert tool_answers(rw_log) == WITHHELD[cli][1]
