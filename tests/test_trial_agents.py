"""Issue 4: trial ``[[agents]]`` keys with built-in adapters (fake ``claude`` / ``codex`` CLIs on PATH that print
their real output formats), and the arm's ``uses`` regex over the parsed tool calls. Serial and ``-n 2``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import write_script
from helpers.trial import make_project, runs, trial_rows

# Both fakes log their argv, answer from ANSWER.txt, and call the "graph" tool only when the workspace has GRAPH
# (the graph arm's overlay adds it); otherwise they grep.
COMMON = r"""
import json, os, pathlib, sys
if sys.argv[1:] == ["--version"]:  # the adapters record the CLI version with a separate call
    print("fake 1.0.0")
    sys.exit(0)
ws = pathlib.Path.cwd()
log = pathlib.Path(os.environ["TRIAL_OUT"]) / "argv"
log.mkdir(parents=True, exist_ok=True)
(log / (os.environ["TRIAL_ID"] + ".json")).write_text(json.dumps({"argv": sys.argv[1:], "foo": os.environ.get("FOO")}))
answer = (ws / "ANSWER.txt").read_text().strip()
graph = (ws / "GRAPH").exists()
def emit(obj):
    print(json.dumps(obj), flush=True)
"""
FAKE_CLAUDE = COMMON + r"""
emit({"type": "system", "subtype": "init", "model": "claude-fake-1", "claude_code_version": "2.1.197"})
tool = {"type": "tool_use", "id": "t1", "name": "mcp__graph__query", "input": {"q": "port"}} if graph else {"type": "tool_use", "id": "t1", "name": "Grep", "input": {"pattern": "PORT"}}
emit({"type": "assistant", "message": {"id": "m1", "model": "claude-fake-1", "content": [tool]}})
emit({"type": "assistant", "message": {"id": "m2", "model": "claude-fake-1", "content": [{"type": "text", "text": answer}]}})
emit({"type": "result", "subtype": "success", "is_error": False, "result": answer, "num_turns": 2, "total_cost_usd": 0.0125,
      "usage": {"input_tokens": 100, "output_tokens": 20, "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}})
"""
FAKE_CODEX = COMMON + r"""
emit({"type": "thread.started", "thread_id": "th1"})
emit({"type": "turn.started"})
item = {"id": "i1", "type": "mcp_tool_call", "server": "graph", "tool": "query", "arguments": {"q": "port"}, "status": "completed"} if graph else {"id": "i1", "type": "command_execution", "command": "grep -rn PORT .", "status": "completed", "exit_code": 0}
emit({"type": "item.completed", "item": item})
emit({"type": "item.completed", "item": {"id": "i2", "type": "agent_message", "text": answer}})
emit({"type": "turn.completed", "usage": {"input_tokens": 200, "cached_input_tokens": 50, "output_tokens": 30}})
"""

TRIAL = """\
name = "tools"

[[repos]]
name = "app"
source = "app"

[[arms]]
name = "baseline"
overlay = "docs"
uses = "graph"

[[arms]]
name = "graph"
overlay = "graph-overlay"
uses = "graph"

[[agents]]
name = "claude"

[[agents]]
name = "claude"
model = "sonnet"
edits = true
args = ["--max-turns", "3"]
env = { FOO = "bar" }

[[agents]]
name = "codex"

[[agents]]
name = "codex"
model = "gpt-fake"
sandbox = "danger-full-access"
edits = true

[[questions]]
id = "port"
prompt = "Which port does the server listen on?"
expect = ["8123"]
"""


@pytest.fixture
def project(pytester: pytest.Pytester, bin_dir: Path) -> pytest.Pytester:
    make_project(pytester.path)
    (pytester.path / "graph-overlay").mkdir()
    (pytester.path / "graph-overlay" / "GRAPH").write_text("")
    (pytester.path / "graph-overlay" / "ANSWER.txt").write_text("8123 (from the graph)\n")
    write_script(bin_dir / "claude", FAKE_CLAUDE)
    write_script(bin_dir / "codex", FAKE_CODEX)
    (pytester.path / "trial.toml").write_text(TRIAL)
    return pytester


def test_uses_regex_over_parsed_tool_calls(project: pytest.Pytester, xdist: list[str]) -> None:
    res = project.runpytest("--agentrace", "--agentrace-out", "out", *xdist)
    res.assert_outcomes(passed=8)
    recs = runs(project.path / "out")
    for agent in ("claude", "claude:sonnet", "codex", "codex:gpt-fake"):
        base, graph = recs[f"trial:port/baseline/{agent}/r1"], recs[f"trial:port/graph/{agent}/r1"]
        assert base["used_tool"] is False and graph["used_tool"] is True, agent
        assert base["extra"]["uses"] == "graph"
        assert graph["usage"]["tool_calls"] and base["usage"]["tool_calls"]
    claude = recs["trial:port/graph/claude/r1"]
    assert claude["usage"]["tool_calls"][0]["name"] == "mcp__graph__query"
    assert (claude["usage"]["input_tokens"], claude["usage"]["output_tokens"], claude["usage"]["cost_usd"]) == (100, 20, 0.0125)
    assert claude["usage"]["answer"] == "8123 (from the graph)"
    codex = recs["trial:port/baseline/codex/r1"]
    assert codex["usage"]["tool_calls"][0]["summary"].startswith("grep -rn PORT")
    rows = trial_rows(res.stdout.str())
    assert [r[8] for r in rows] == ["0/1"] * 4 + ["1/1"] * 4  # Used tool column
    # Tokens/run and Cost/run (USD): claude reports its cost (total_cost_usd); codex reports none and is unpriced
    costs = {(r[1], r[2]): (r[12], r[13]) for r in rows}
    assert costs[("graph", "claude")] == ("120", "0.0125") and costs[("graph", "codex")][1] == "-"


def test_agent_keys_reach_the_cli(project: pytest.Pytester) -> None:
    project.runpytest("--agentrace", "--agentrace-out", "out", "--agentrace-arm", "baseline").assert_outcomes(passed=4)
    out = project.path / "out"
    argv, foo = {}, {}
    for p in out.glob("**/argv/*.json"):  # $TRIAL_OUT: in the sandbox, each run's outbox/
        agent = next(a for a in ("claude_sonnet", "claude", "codex_gpt_fake", "codex") if p.stem.startswith(f"t_port_baseline_{a}_r1"))
        argv[agent] = json.loads(p.read_text())["argv"]
        foo[agent] = json.loads(p.read_text())["foo"]
    assert foo == {"claude_sonnet": "bar", "claude": None, "codex_gpt_fake": None, "codex": None}  # env: per agent
    # edits defaults to false: read-only permission mode / sandbox
    assert argv["claude"][argv["claude"].index("--permission-mode") + 1] == "plan"
    assert "--model" not in argv["claude"]
    # edits = true, model, args (appended)
    cs = argv["claude_sonnet"]
    assert cs[cs.index("--permission-mode") + 1] == "acceptEdits" and cs[cs.index("--model") + 1] == "sonnet"
    assert cs[-2:] == ["--max-turns", "3"]
    assert argv["codex"][argv["codex"].index("-s") + 1] == "read-only"
    cx = argv["codex_gpt_fake"]
    assert cx[cx.index("-s") + 1] == "danger-full-access" and cx[cx.index("--model") + 1] == "gpt-fake"
    recs = runs(out)
    assert recs["trial:port/baseline/claude/r1"]["extra"]["edits"] is False
    assert recs["trial:port/baseline/claude:sonnet/r1"]["extra"]["edits"] is True
    assert recs["trial:port/baseline/claude:sonnet/r1"]["model"] == "sonnet"
