"""Issue 2 acceptance: task files end to end through pytest, serial and under pytest-xdist."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers import BUGGY_REPO, FIXER, git, make_repo, write_script


def task_yaml(repo: str, agents: list[str], extra: str = "") -> str:
    lines = "\n".join(f"  - {a}" for a in agents)
    return (
        "name: fix-add\n"
        "description: Fix add() in calc.py so that it adds.\n"
        f"repo: {repo}\n"
        "test_command: python -m pytest -q test_calc.py\n"
        "timeout: 60\n"
        f"agents:\n{lines}\n" + extra
    )


@pytest.fixture
def fixer_project(pytester: pytest.Pytester, bin_dir: Path) -> pytest.Pytester:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "fixer", FIXER)
    (pytester.path / "task.yaml").write_text(task_yaml("repo", ["{name: fixer, command: 'fixer {prompt}'}", "noop"]))
    return pytester


def test_fixer_beats_noop_and_junit_has_properties(fixer_project: pytest.Pytester, xdist: list[str]) -> None:
    res = fixer_project.runpytest("--agentrace", "--junitxml=out.xml", *xdist)
    res.assert_outcomes(passed=1, xfailed=1)
    text = res.stdout.str()
    table = [line for line in text.splitlines() if line.startswith("|") and ("fixer" in line or "noop" in line)]
    assert [row.split("|")[2].strip() for row in table] == ["fixer", "noop"]
    assert table[0].split("|")[1].strip() == "1" and table[1].split("|")[1].strip() == "2"
    assert "passed" in table[0] and "failed" in table[1]
    root = ET.parse(fixer_project.path / "out.xml").getroot()
    props = {}
    for case in root.iter("testcase"):
        p = {e.get("name"): e.get("value") for e in case.iter("property")}
        props[p["agentrace.run_id"]] = p
    fixer = props["task:fix-add/default/fixer/r1"]
    noop = props["task:fix-add/default/noop/r1"]
    assert json.loads(fixer["agentrace.outcome"])["status"] == "passed"
    assert float(fixer["agentrace.score"]) == 100.0  # the only passing run: full time and lines credit
    assert float(noop["agentrace.score"]) == 35.0  # exit 20 + lint 15 (no lint command: full credit); no time/lines
    assert int(fixer["agentrace.lines"]) == 2 and int(noop["agentrace.lines"]) == 0
    assert float(fixer["agentrace.seconds"]) >= 0


VERBOSE_FIXER = FIXER + """
with open("calc.py", "a") as fh:
    fh.write("".join(f"# note {i}\\n" for i in range(20)))
"""


def test_junit_scores_are_the_session_scores(pytester: pytest.Pytester, bin_dir: Path, xdist: list[str]) -> None:
    """A score is relative to the other agents of the task and rep, known only at session end: the JUnit
    ``agentrace.score`` is rewritten then (a worker alone would give every passing run full credit)."""
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "fixer", FIXER)
    write_script(bin_dir / "verbose", VERBOSE_FIXER)
    agents = ["{name: fixer, command: 'fixer {prompt}'}", "{name: verbose, command: 'verbose {prompt}'}"]
    (pytester.path / "task.yaml").write_text(task_yaml("repo", agents))
    res = pytester.runpytest("--agentrace", "--junitxml=out.xml", *xdist)
    res.assert_outcomes(passed=2)
    table = {row.split("|")[2].strip(): row.split("|")[3].strip() for row in res.stdout.lines if row.startswith("| ")}
    root = ET.parse(pytester.path / "out.xml").getroot()
    scores = {}
    for case in root.iter("testcase"):
        p = {e.get("name"): e.get("value") for e in case.iter("property")}
        scores[json.loads(p["agentrace.outcome"])["agent"]] = float(p["agentrace.score"])
    assert scores == {agent: float(score) for agent, score in table.items() if agent in scores}
    assert scores["verbose"] <= 90.0  # 22 lines against 2: no lines credit (10 points)


def test_xdist_tables_equal_serial(fixer_project: pytest.Pytester) -> None:
    def tables(args):
        out = fixer_project.runpytest("--agentrace", *args).stdout.str()
        section = out.split("agentrace ===", 1)[1].split("=====", 1)[0]
        # drop the time column (wall time differs between runs)
        rows = []
        for line in section.splitlines():
            cells = line.split("|")
            if len(cells) > 9:
                del cells[9]
            rows.append("|".join(cells))
        return rows

    assert tables([]) == tables(["-p", "xdist", "-n", "2"])


def test_run_results_on_disk(fixer_project: pytest.Pytester) -> None:
    fixer_project.runpytest("--agentrace", "--agentrace-out", "results").assert_outcomes(passed=1, xfailed=1)
    run_dir = fixer_project.path / "results/runs/fix-add/default/fixer/1"
    names = {p.name for p in run_dir.iterdir()}
    assert {"run.json", "raw.out", "raw.err", "prompt.txt", "diff.patch", "tests.log"} <= names
    record = json.loads((run_dir / "run.json").read_text())
    assert record["schema_version"] == 2 and record["status"] == "passed"
    assert record["lines_added"] == 1 and record["lines_removed"] == 1
    assert "a + b" in (run_dir / "diff.patch").read_text()
    assert (run_dir / "prompt.txt").read_text() == "Fix add() in calc.py so that it adds."
    assert "fixed calc.py" in (run_dir / "raw.out").read_text()


def test_user_repo_untouched(fixer_project: pytest.Pytester, xdist: list[str]) -> None:
    repo = fixer_project.path / "repo"
    (repo / "untracked.txt").write_text("mine\n")
    git(repo, "branch", "feature")
    before = (git(repo, "status", "--porcelain"), git(repo, "rev-parse", "HEAD"), git(repo, "branch", "-a"), git(repo, "symbolic-ref", "HEAD"))
    files_before = {p: p.read_bytes() for p in repo.rglob("*") if p.is_file()}
    fixer_project.runpytest("--agentrace", "--agentrace-reps", "2", *xdist).assert_outcomes(passed=2, xfailed=2)
    after = (git(repo, "status", "--porcelain"), git(repo, "rev-parse", "HEAD"), git(repo, "branch", "-a"), git(repo, "symbolic-ref", "HEAD"))
    assert before == after
    assert files_before == {p: p.read_bytes() for p in repo.rglob("*") if p.is_file()}


def test_runs_never_see_each_other(pytester: pytest.Pytester, bin_dir: Path, xdist: list[str]) -> None:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "leaker", """\
        import pathlib, sys
        if pathlib.Path("leak.txt").exists():
            print("saw a previous run's file"); sys.exit(3)
        pathlib.Path("leak.txt").write_text("x")
        p = pathlib.Path("calc.py"); p.write_text(p.read_text().replace("a - b", "a + b"))
    """)
    (pytester.path / "task.yaml").write_text(task_yaml("repo", ["{name: leaker, command: 'leaker'}"]))
    res = pytester.runpytest("--agentrace", "--agentrace-reps", "3", "-p", "no:randomly", *xdist)
    res.assert_outcomes(passed=3)


def test_timeout_kills_grandchildren(pytester: pytest.Pytester, bin_dir: Path, tmp_path: Path, xdist: list[str]) -> None:
    marker = tmp_path / "grandchild-wrote-this"
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "hanger", f"""\
        import subprocess, sys, time
        # a background grandchild that would write a file after the timeout
        subprocess.Popen([sys.executable, "-c", "import time, pathlib; time.sleep(4); pathlib.Path({str(marker)!r}).write_text('alive')"])
        time.sleep(60)
    """)
    (pytester.path / "task.yaml").write_text(task_yaml("repo", ["{name: hanger, command: 'hanger'}"]).replace("timeout: 60", "timeout: 1"))
    res = pytester.runpytest("--agentrace", *xdist)
    res.assert_outcomes(failed=1)
    assert "timeout" in res.stdout.str()
    import time

    time.sleep(6)
    assert not marker.exists()


def test_missing_agent_skips(pytester: pytest.Pytester, xdist: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A CLI that is not installed (a built-in adapter's or a custom command's program not on PATH) skips its items."""
    make_repo(pytester.path / "repo", BUGGY_REPO)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # git and sh, no agent CLI
    (pytester.path / "task.yaml").write_text(task_yaml("repo", ["{name: mine, command: no-such-agent-cli-xyz}", "cursor"]))
    res = pytester.runpytest("--agentrace", "-rs", *xdist)
    res.assert_outcomes(skipped=2)
    assert "agent 'mine' not found on PATH (looked for no-such-agent-cli-xyz)" in res.stdout.str()
    assert "agent 'cursor' not found on PATH (looked for cursor-agent)" in res.stdout.str()


def test_agent_override_reps_and_ids(pytester: pytest.Pytester, bin_dir: Path) -> None:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "fixer", FIXER)
    (pytester.path / "task.yaml").write_text(task_yaml("repo", ["noop"]))
    res = pytester.runpytest("--agentrace", "--collect-only", "-q", "--agentrace-agent", "codex:gpt-5.4", "--agentrace-agent", "aider:openrouter/anthropic/x", "--agentrace-agent", "aider:openrouter_anthropic/x", "--agentrace-reps", "2")
    ids = [line for line in res.stdout.lines if "::" in line]
    assert ids == [
        "task.yaml::fix-add[codex:gpt-5.4-r1]", "task.yaml::fix-add[codex:gpt-5.4-r2]",
        "task.yaml::fix-add[aider:openrouter_anthropic_x-r1]", "task.yaml::fix-add[aider:openrouter_anthropic_x-r2]",
        "task.yaml::fix-add[aider:openrouter_anthropic_x~2-r1]", "task.yaml::fix-add[aider:openrouter_anthropic_x~2-r2]",
    ]


def test_tampering_with_protected_files_fails(pytester: pytest.Pytester, bin_dir: Path, xdist: list[str]) -> None:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "rigger", """\
        import pathlib
        pathlib.Path("conftest.py").write_text("def pytest_collection_modifyitems(items):\\n    items.clear()\\n")
        pathlib.Path("test_calc.py").write_text("def test_ok():\\n    pass\\n")
    """)
    extra = "protected: ['conftest.py', 'test_calc.py']\n"
    (pytester.path / "task.yaml").write_text(task_yaml("repo", ["{name: rigger, command: 'rigger'}"], extra))
    res = pytester.runpytest("--agentrace", *xdist)
    res.assert_outcomes(failed=1)
    assert "tampered: conftest.py, test_calc.py" in res.stdout.str()


def test_setup_failure_is_an_error_not_a_failure(pytester: pytest.Pytester, xdist: list[str]) -> None:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    (pytester.path / "task.yaml").write_text(task_yaml("repo", ["noop"], "setup: ['exit 7']\n"))
    res = pytester.runpytest("--agentrace", *xdist)
    res.assert_outcomes(errors=1)
    assert "setup command 1 failed (exit 7)" in res.stdout.str()


def test_check_command_not_found_is_error(pytester: pytest.Pytester, xdist: list[str]) -> None:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    (pytester.path / "task.yaml").write_text(task_yaml("repo", ["oracle"]).replace("python -m pytest -q test_calc.py", "no-such-test-runner-xyz"))
    res = pytester.runpytest("--agentrace", *xdist)
    res.assert_outcomes(errors=1)
    assert "tests cannot run here: no-such-test-runner-xyz is missing (`no-such-test-runner-xyz`)" in res.stdout.str()


def test_failure_report_shows_check_tail(pytester: pytest.Pytester, bin_dir: Path) -> None:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "idle", "print('did nothing')\n")
    (pytester.path / "task.yaml").write_text(task_yaml("repo", ["{name: idle, command: idle}"]))
    res = pytester.runpytest("--agentrace")
    res.assert_outcomes(failed=1)
    out = res.stdout.str()
    assert "task:fix-add/default/idle/r1: failed: tests failed (exit 1)" in out
    assert "assert -1 == 5" in out  # from the last lines of tests.log


def test_non_git_repo_folder_and_oracle(pytester: pytest.Pytester) -> None:
    make_repo(pytester.path / "plain", BUGGY_REPO, commit=False)
    extra = "solution_files:\n  calc.py: |\n    def add(a, b):\n        return a + b\n"
    (pytester.path / "task.yaml").write_text(task_yaml("plain", ["oracle", "noop"], extra))
    res = pytester.runpytest("--agentrace")
    res.assert_outcomes(passed=1, xfailed=1)
    assert not (pytester.path / "plain/.git").exists()


def test_solution_patch_oracle_and_lint_and_verify(pytester: pytest.Pytester) -> None:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    extra = (
        "lint_command: test ! -e lint-fail\n"
        "verify_command: python -m pytest -q hidden/test_hidden.py\n"
        "verify_files:\n  hidden/test_hidden.py: |\n    from calc import add\n    def test_neg():\n        assert add(-1, -1) == -2\n"
        "solution_patch: |\n  --- a/calc.py\n  +++ b/calc.py\n  @@ -1,2 +1,2 @@\n   def add(a, b):\n  -    return a - b\n  +    return a + b\n"
    )
    (pytester.path / "task.yaml").write_text(task_yaml("repo", ["oracle", "noop"], extra))
    res = pytester.runpytest("--agentrace", "--agentrace-out", "o")
    res.assert_outcomes(passed=1, xfailed=1)
    record = json.loads((pytester.path / "o/runs/fix-add/default/oracle/1/run.json").read_text())
    assert record["checks"]["verify"]["passed"] and record["checks"]["lint"]["passed"]
    assert record["score"] is None  # scores are a session figure, not stored per worker


def test_noop_passing_is_strict_xpass_failure(pytester: pytest.Pytester) -> None:
    make_repo(pytester.path / "repo", {**BUGGY_REPO, "calc.py": "def add(a, b):\n    return a + b\n"})
    (pytester.path / "task.yaml").write_text(task_yaml("repo", ["noop"]))
    res = pytester.runpytest("--agentrace")
    res.assert_outcomes(failed=1)
    assert "XPASS(strict)" in res.stdout.str()


def test_repo_resolved_relative_to_task_file(pytester: pytest.Pytester, bin_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_repo(pytester.path / "suite" / "repo", BUGGY_REPO)
    write_script(bin_dir / "fixer", FIXER)
    (pytester.path / "suite" / "task.yaml").write_text(task_yaml("repo", ["{name: fixer, command: fixer}"]))
    (pytester.path / "elsewhere").mkdir()
    monkeypatch.chdir(pytester.path / "elsewhere")
    res = pytester.runpytest("--agentrace", str(pytester.path / "suite"), f"--rootdir={pytester.path}")
    res.assert_outcomes(passed=1)


def test_a_script_the_command_passes_to_an_interpreter_resolves_against_the_task_file(pytester: pytest.Pytester) -> None:
    """``python3 ../agents/fix.py {prompt_file}``: the script argument, a relative path beside the task file, is
    passed as its absolute path (the agent runs in its workspace, where the relative path names nothing; the run was
    charged as the agent's crash), as the command's first word resolves; the box shows it."""
    make_repo(pytester.path / "suite" / "tasks" / "repo", BUGGY_REPO)
    (pytester.path / "suite" / "agents").mkdir()
    (pytester.path / "suite" / "agents" / "fix.py").write_text(FIXER)
    agent = "{name: mine, command: 'python3 ../agents/fix.py {prompt_file}'}"
    (pytester.path / "suite" / "tasks" / "task.yaml").write_text(task_yaml("repo", [agent]))
    res = pytester.runpytest("--agentrace", "--agentrace-out", "out", "suite/tasks")
    res.assert_outcomes(passed=1)
    argv = json.loads(next((pytester.path / "out").glob("runs/**/argv.json")).read_text())
    assert str(pytester.path / "suite" / "agents" / "fix.py") in argv  # the box's command line (bwrap first)
