"""Issue 4: ``agentrace init-trial`` and ``agentrace context-eval`` write trial files that load and run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from helpers import BUGGY_REPO, make_repo, write_script
from helpers.atif import check_folder
from helpers.trial import runs

from pytest_agentrace.cli import main
from pytest_agentrace.cli.trials import toml_str
from pytest_agentrace.spec.trial import load_trial

REPO_ROOT = Path(__file__).resolve().parents[1]


def tree(root: Path) -> dict[str, tuple[str, bool]]:
    return {
        p.relative_to(root).as_posix(): (p.read_text(), os.access(p, os.X_OK))
        for p in sorted(root.rglob("*")) if p.is_file() and "__pycache__" not in p.parts
    }


def test_init_trial_writes_a_valid_example(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["init-trial", str(tmp_path / "t.toml")]) == 0
    assert "dry run: pytest --agentrace" in capsys.readouterr().out
    trial = load_trial(tmp_path / "t.toml")
    assert [a.name for a in trial.arms] == ["baseline", "docs"]
    assert [a.name for a in trial.agents] == ["source-reader", "docs-first"]
    assert [a.kind for a in trial.agents] == ["claude", "claude"]
    assert [q.id for q in trial.questions] == ["port", "storage"]
    assert trial.repos[0].source == str(tmp_path / "example-repo")
    assert os.access(tmp_path / "example-agents" / "reader_agent.py", os.X_OK)


def test_init_trial_refuses_to_overwrite(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    target = tmp_path / "t.toml"
    target.write_text("mine")
    assert main(["init-trial", str(target)]) == 2
    assert "already exist" in capsys.readouterr().err and target.read_text() == "mine"
    assert main(["init-trial", str(target), "--force"]) == 0
    assert load_trial(target).name == "docs-layer"


def test_example_suite_is_the_init_trial_output(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["init-trial", str(tmp_path / "trial.toml")]) == 0
    assert tree(tmp_path) == tree(REPO_ROOT / "example_suites" / "trials")
    # the shipped example is the source: init-trial over it would delete what it copies from
    before = tree(REPO_ROOT / "example_suites" / "trials")
    assert main(["init-trial", str(REPO_ROOT / "example_suites" / "trials" / "trial.toml"), "--force"]) == 2
    assert "holds the example itself" in capsys.readouterr().err
    assert tree(REPO_ROOT / "example_suites" / "trials") == before


def test_example_trial_runs_offline(pytester: pytest.Pytester, xdist: list[str]) -> None:
    shutil.copytree(REPO_ROOT / "example_suites" / "trials", pytester.path, dirs_exist_ok=True)
    items = [x for x in pytester.runpytest("--agentrace", "--collect-only", "-q").stdout.lines if "::" in x]
    assert len(items) == 24 and all(x.startswith("trial.toml::") for x in items)  # example-repo/tests not collected
    res = pytester.runpytest("--agentrace", "--agentrace-out", "out", *xdist)
    res.assert_outcomes(passed=24)
    assert check_folder(pytester.path / "out") == 24  # each run's trajectory.json: valid ATIF, as its run.json says
    recs = runs(pytester.path / "out")
    assert all(r["answer_score"]["correct"] for r in recs.values())
    assert "8123" in recs["trial:port/docs/docs-first/r1"]["usage"]["answer"]
    assert "ARCHITECTURE.md" in recs["trial:storage/docs/docs-first/r2"]["usage"]["answer"]
    # tokens parsed from the agents' Claude-format output: docs-first reads only docs/ in the docs arm
    tokens = {k: r["usage"]["total_tokens"] for k, r in recs.items()}
    assert tokens["trial:port/docs/docs-first/r1"] < tokens["trial:port/baseline/docs-first/r1"]
    assert tokens["trial:port/baseline/docs-first/r1"] == tokens["trial:port/baseline/source-reader/r1"]
    assert recs["trial:port/docs/docs-first/r1"]["used_tool"] is True
    assert recs["trial:port/docs/source-reader/r1"]["used_tool"] is False
    assert [t["name"] for t in recs["trial:port/docs/docs-first/r1"]["usage"]["tool_calls"]] == ["Read"]
    prompt = (pytester.path / "out/runs/port/docs/source-reader/1/prompt.txt").read_text()
    assert prompt == "The folder docs/ describes this repository.\n\nWhich port does the inventory API listen on?"
    # the verdict on the two questions that ran (the default target): docs-first's docs arm is cheaper, provisional at
    # 3 runs per arm and question; the stratified permutation test reaches p = 2/400 where a sign-flip over 2 cases stops at 0.5
    assert docs_verdict(res.stdout.str()) == "cheaper (provisional)"
    assert "target: these cases (fixed cases;" in res.stdout.str()
    # for new questions like these (ini agentrace_generalize = cases) two questions cannot decide: the clustered-t
    # interval on K - 1 = 1 degree of freedom is wide and includes 1.00
    (pytester.path / "pytest.ini").write_text("[pytest]\nagentrace_generalize = cases\n")
    res = pytester.runpytest("--agentrace", "--agentrace-out", "out", "--agentrace-resume", *xdist)
    res.assert_outcomes(passed=24)
    assert docs_verdict(res.stdout.str()) == "no clear difference (provisional)"
    assert "target: new cases like these" in res.stdout.str()


def docs_verdict(text: str) -> str:
    """The Verdict cell of the docs arm in the statistics block of agent docs-first."""
    block = text.split("agent docs-first (baseline arm: baseline)", 1)[1].split("\ntrial ", 1)[0]
    row = next(line for line in block.splitlines() if line.startswith("| docs "))
    return [c.strip() for c in row.strip().strip("|").split("|")][5]


@pytest.mark.parametrize("value", ["plain", 'quo"te \\ back', "two\nlines", "ends with '", "tab\tand\nnewline", "has ''' inside\n", "cr\r\n", "ünï\ncode"])
def test_toml_str_round_trips(value: str) -> None:
    assert tomllib.loads(f"x = {toml_str(value)}")["x"] == value


# A fake Claude Code: fixes the bug only when the workspace has CLAUDE.md (the context arm's overlay).
FAKE_CLAUDE = r"""
import json, pathlib, sys
if sys.argv[1:] == ["--version"]:
    print("2.1.197 (Claude Code)"); sys.exit(0)
ws = pathlib.Path.cwd()
if (ws / "CLAUDE.md").exists():
    p = ws / "calc.py"
    p.write_text(p.read_text().replace("a - b", "a + b"))
    text = "fixed add() as CLAUDE.md says"
else:
    text = "I looked around"
print(json.dumps({"type": "system", "subtype": "init", "model": "fake", "claude_code_version": "2.1.197"}))
print(json.dumps({"type": "result", "subtype": "success", "is_error": False, "result": text, "num_turns": 1,
                  "usage": {"input_tokens": 10, "output_tokens": 5}, "total_cost_usd": 0.001}))
"""


@pytest.fixture
def task_dir(tmp_path: Path) -> Path:
    make_repo(tmp_path / "repo", BUGGY_REPO)
    (tmp_path / "task.yaml").write_text(
        "name: fix-add\n"
        "description: |\n  Fix add() in calc.py.\n  Keep the tests green.\n"
        "repo: repo\n"
        "test_command: python -m pytest -q test_calc.py\n"
        "verify_command: python -m pytest -q test_hidden.py\n"
        "verify_files:\n  test_hidden.py: |\n    from calc import add\n    def test_neg():\n        assert add(-1, -2) == -3\n"
        "setup: [\"echo set up\"]\n"
        "env: {CALC_MODE: strict}\n"
        "timeout: 60\n"
    )
    (tmp_path / "CLAUDE.md").write_text("# Notes\nadd() must add; fix calc.py.\n")
    return tmp_path


def test_context_eval_writes_a_two_arm_trial(task_dir: Path) -> None:
    out = task_dir / "evals" / "ctx.toml"
    assert main(["context-eval", "--context-file", str(task_dir / "CLAUDE.md"), "--task", str(task_dir / "task.yaml"),
                 "--agents", "claude,codex:gpt-5", "--trials", "3", "-o", str(out)]) == 0
    trial = load_trial(out)
    assert trial.name == "context-eval-fix-add" and trial.reps == 3 and trial.timeout == 60 and trial.baseline == "baseline"
    assert [(a.name, a.overlay, a.setup) for a in trial.arms] == [
        ("baseline", None, ("echo set up",)), ("context", str(task_dir / "evals" / "ctx-context"), ("echo set up",))]
    assert (task_dir / "evals" / "ctx-context" / "CLAUDE.md").read_text() == (task_dir / "CLAUDE.md").read_text()
    assert trial.repos[0].source == str(task_dir / "repo")
    assert [(a.id, a.edits, a.env) for a in trial.agents] == [("claude", True, {"CALC_MODE": "strict"}), ("codex:gpt-5", True, {"CALC_MODE": "strict"})]
    (q,) = trial.questions
    assert q.id == "fix-add" and q.prompt == "Fix add() in calc.py.\nKeep the tests green.\n"
    hidden = (task_dir / "evals" / ".ctx-verify").resolve()  # a dot folder: pytest does not collect its tests
    assert q.verify == "python -m pytest -q test_calc.py && python -m pytest -q test_hidden.py"
    assert (q.verify_dir, list(q.verify_files)) == (str(hidden), ["test_hidden.py"])  # written by the harness
    assert q.verify_files["test_hidden.py"] == (hidden / "test_hidden.py").read_text()
    assert main(["context-eval", "--context-file", str(task_dir / "CLAUDE.md"), "--task", str(task_dir / "task.yaml"),
                 "--agents", "claude", "-o", str(out)]) == 2  # exists


def test_context_eval_carries_the_tasks_model_double_scripts(task_dir: Path) -> None:
    """A task agent's ``model_double:`` script goes with that agent into the trial (it was dropped, so the trial of an
    offline task could not run offline); an agent the task does not list gets none."""
    (task_dir / "scripts").mkdir()
    (task_dir / "scripts" / "solve.yaml").write_text("steps:\n  - text: DONE\n")
    text = (task_dir / "task.yaml").read_text() + "agents:\n  - {name: claude, model_double: scripts/solve.yaml}\n"
    (task_dir / "task.yaml").write_text(text)
    out = task_dir / "evals" / "ctx.toml"
    assert main(["context-eval", "--context-file", str(task_dir / "CLAUDE.md"), "--task", str(task_dir / "task.yaml"),
                 "--agents", "claude,codex", "-o", str(out)]) == 0
    doubles = {a.name: a.model_double for a in load_trial(out).agents}
    assert doubles == {"claude": str((task_dir / "scripts" / "solve.yaml").resolve()), "codex": None}
    assert 'model_double = "../scripts/solve.yaml"' in out.read_text()


def test_context_eval_bad_input(task_dir: Path, capsys: pytest.CaptureFixture) -> None:
    args = ["context-eval", "--task", str(task_dir / "task.yaml"), "-o", str(task_dir / "o.toml")]
    assert main([*args, "--context-file", str(task_dir / "nope.md"), "--agents", "claude"]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main([*args, "--context-file", str(task_dir / "CLAUDE.md"), "--agents", " , "]) == 2
    assert "--agents is empty" in capsys.readouterr().err
    assert main([*args, "--context-file", str(task_dir / "CLAUDE.md"), "--agents", "claude", "--trials", "0"]) == 2


def test_context_eval_task_without_repo(tmp_path: Path) -> None:
    (tmp_path / "task.yaml").write_text("name: from scratch\ndescription: Write hello.py\ntest_command: python hello.py\n")
    (tmp_path / "AGENTS.md").write_text("be brief\n")
    assert main(["context-eval", "--context-file", str(tmp_path / "AGENTS.md"), "--task", str(tmp_path / "task.yaml"), "--agents", "noop", "--trials", "1", "-o", str(tmp_path / "e.toml")]) == 0
    trial = load_trial(tmp_path / "e.toml")
    assert trial.repos[0].source == str(tmp_path / "e-empty") and trial.questions[0].id == "from-scratch"
    assert trial.questions[0].verify == "python hello.py"


def test_context_eval_trial_runs(task_dir: Path, bin_dir: Path, xdist: list[str]) -> None:
    """The written trial runs as is, in the sandbox (which shows no host folder of hidden files: the harness writes
    them into the checked tree): the fake claude fixes the bug only with the context file."""
    write_script(bin_dir / "claude", FAKE_CLAUDE)
    out = task_dir / "ctx.toml"
    assert main(["context-eval", "--context-file", str(task_dir / "CLAUDE.md"), "--task", str(task_dir / "task.yaml"),
                 "--agents", "claude", "--trials", "2", "-o", str(out)]) == 0
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_CORE_"))}
    res = subprocess.run([sys.executable, "-m", "pytest", "--agentrace", "ctx.toml", "--agentrace-out", "results", "-p", "no:cacheprovider",
                          *xdist],
                         cwd=task_dir, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert res.returncode == 1, res.stdout
    recs = runs(task_dir / "results")
    assert {k: r["status"] for k, r in recs.items()} == {
        "trial:fix-add/baseline/claude/r1": "failed", "trial:fix-add/baseline/claude/r2": "failed",
        "trial:fix-add/context/claude/r1": "passed", "trial:fix-add/context/claude/r2": "passed",
    }
    ctx = recs["trial:fix-add/context/claude/r1"]
    assert ctx["checks"]["verify"]["passed"] and ctx["checks"]["setup"]["passed"] and ctx["lines_changed"] == 2
    assert ctx["extra"]["sandbox"]["on"] is True  # verify passed in the box: test_hidden.py was there (pytest exits 4 without it)
    assert json.loads(json.dumps(ctx["usage"]))["cost_usd"] == 0.001
    assert "verify failed" in recs["trial:fix-add/baseline/claude/r1"]["reason"]
