"""Helpers for the report and store tests: outcome records built field by field (no pytest session needed)."""

from __future__ import annotations

from typing import Any

from pytest_agentrace.record.model import CheckResult, Outcome, ToolCall, Usage


def outcome(case: str = "fix-add", agent: str = "a", rep: int = 1, status: str = "passed", score: float | None = None,
            kind: str = "task", arm: str = "default", session_id: str = "s1", seconds: float = 1.0,
            tokens: int | None = 1000, cost: float | None = 0.01, source: str = "/suite/task.yaml", **more: Any) -> Outcome:
    """One outcome with the given figures; ``more`` sets any other Outcome field."""
    usage = more.pop("usage", None) or Usage(
        input_tokens=None if tokens is None else tokens - 100, output_tokens=None if tokens is None else 100,
        total_tokens=tokens, cost_usd=cost, cost_source="reported" if cost is not None else "none", turns=3,
        tool_calls=(ToolCall("bash", "ls"), ToolCall("edit", "calc.py")), answer="done", cli_version="1.2.3",
    )
    checks = more.pop("checks", None)
    if checks is None and kind == "task":
        checks = {"tests": CheckResult("tests", "pytest -q", 0 if status == "passed" else 1, 0.5, "tests.log")}
    return Outcome(
        run_id=f"{kind}:{case}/{arm}/{agent}/r{rep}", kind=kind, source=source, case=case, arm=arm, agent=agent,
        rep=rep, status=status, score=score, session_id=session_id, seconds=seconds, usage=usage,
        checks=checks or {}, exit_code=0 if status != "error" else None, **{"started": "2026-01-01T00:00:00+00:00", **more},
    )


# -- the acceptance project: 3 agents x 2 tasks x 3 reps, and a two-arm trial ------------------------------

# A fake agent that prints Claude Code stream-json (so the claude parser reads tokens, cost, tool calls and the
# answer). argv: style, prompt. alpha fixes every bug with a small diff; beta fixes them with a bigger diff and
# more tokens; gamma fixes only multiply. In a trial workspace it answers from ANSWER.txt; the docs arm (whose
# overlay adds DOCS.md) needs fewer tokens. Tokens vary a little with the process id (a sample, not a constant).
BOT = r"""
import json, os, pathlib, sys
style, prompt = sys.argv[1], sys.argv[2]
ws = pathlib.Path.cwd()
jitter = os.getpid() % 97
calls, answer = [], ""
if (ws / "ANSWER.txt").exists():
    answer = (ws / "ANSWER.txt").read_text().strip()
    calls.append(("Read", {"file_path": "ANSWER.txt"}))
    tokens = (900 if (ws / "DOCS.md").exists() else 2000) + jitter
else:
    fixes = {"alpha": {"a - b": "a + b", "a + b  # mul": "a * b"}, "beta": {"a - b": "a + b", "a + b  # mul": "a * b"},
             "gamma": {"a + b  # mul": "a * b"}}[style]
    calc = ws / "calc.py"
    text = calc.read_text()
    for old, new in fixes.items():
        text = text.replace(old, new)
    if style == "beta":
        text += "\n\n# checked by beta\n# twice\n"
    calc.write_text(text)
    calls += [("Read", {"file_path": "calc.py"}), ("Edit", {"file_path": "calc.py"}), ("Bash", {"command": "python -m pytest -q"})]
    answer = f"{style}: edited calc.py <b>&amp; done</b>"
    tokens = {"alpha": 2000, "beta": 3500, "gamma": 1500}[style] + jitter
events = [{"type": "system", "subtype": "init", "cwd": str(ws), "session_id": "s", "model": "claude-test", "claude_code_version": "9.9.9"}]
for i, (name, inp) in enumerate(calls):
    events.append({"type": "assistant", "message": {"model": "claude-test", "content": [{"type": "tool_use", "id": f"t{i}", "name": name, "input": inp}]}, "parent_tool_use_id": None})
    events.append({"type": "user", "message": {"role": "user", "content": [{"tool_use_id": f"t{i}", "type": "tool_result", "content": "ok"}]}, "parent_tool_use_id": None})
events.append({"type": "assistant", "message": {"model": "claude-test", "content": [{"type": "text", "text": answer}]}, "parent_tool_use_id": None})
events.append({"type": "result", "subtype": "success", "is_error": False, "num_turns": len(calls) + 1, "result": answer,
               "total_cost_usd": round(tokens * 5e-6, 6), "usage": {"input_tokens": tokens - 100, "output_tokens": 100,
               "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0}})
print("\n".join(json.dumps(e) for e in events))
"""

CALC_REPO = {
    "calc.py": "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a + b  # mul\n",
    "test_add.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
    "test_mul.py": "from calc import mul\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n",
    "pytest.ini": "[pytest]\naddopts = -p no:cacheprovider\n",
}

AGENTS = "\n".join(f"  - {{name: {n}, command: 'bot {n} {{prompt}}', kind: claude}}" for n in ("alpha", "beta", "gamma"))


def task_yaml(name: str, test_file: str) -> str:
    return (f"name: {name}\ndescription: Fix {name[4:]}() in calc.py. <script>alert(1)</script>\nrepo: repo\n"
            f"test_command: python -m pytest -q {test_file}\ntimeout: 60\nagents:\n{AGENTS}\n")


TRIAL_TOML = """\
name = "ports"

[defaults]
reps = 3
timeout = 60

[[repos]]
name = "app"
source = "app"

[[arms]]
name = "baseline"

[[arms]]
name = "docs"
overlay = "docs"

[[agents]]
name = "reader"
command = ["bot", "alpha", "{prompt}"]
kind = "claude"

[[questions]]
id = "port"
repo = "app"
prompt = "Which port does the server listen on?"
expect = ["8123"]
"""


def make_acceptance_project(root, bin_dir) -> None:
    """Write the acceptance project into ``root``: ``repo`` (calc with two bugs), ``fix-add.yaml`` and
    ``fix-mul.yaml`` (agents alpha, beta, gamma), ``app`` + ``docs`` overlay and ``ports.toml`` (two arms); the
    fake agent ``bot`` goes into ``bin_dir`` (on PATH)."""
    from helpers import make_repo, write_script

    make_repo(root / "repo", CALC_REPO)
    (root / "fix-add.yaml").write_text(task_yaml("fix-add", "test_add.py"))
    (root / "fix-mul.yaml").write_text(task_yaml("fix-mul", "test_mul.py"))
    make_repo(root / "app", {"app.py": "PORT = 8123\n", "ANSWER.txt": "The port is 8080.\n"})
    (root / "docs").mkdir()
    (root / "docs" / "ANSWER.txt").write_text("The server listens on port 8123.\n")
    (root / "docs" / "DOCS.md").write_text("Port: 8123\n")
    (root / "ports.toml").write_text(TRIAL_TOML)
    write_script(bin_dir / "bot", BOT)
