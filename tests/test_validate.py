"""Issue 6: `--agentrace-validate` proves a task solvable (oracle passes every check) and its checks able to
tell the starting code from a solution (noop fails them); broken tasks fail with the reason."""

from __future__ import annotations

import textwrap

import pytest

STARTER = {
    "calc.py": "def add(a, b):\n    return a - b\n",
    "test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
    "pytest.ini": "[pytest]\naddopts = -p no:cacheprovider\n",
}
GOOD_SOLUTION = "def add(a, b):\n    return a + b\n"
HIDDEN = "from calc import add\n\n\ndef test_negative():\n    assert add(-2, -3) == -5\n"


def block(text: str, indent: int) -> str:
    return "|\n" + textwrap.indent(text, " " * indent)


def write_task(pytester: pytest.Pytester, name: str, *, solution: str | None = GOOD_SOLUTION, hidden: str = HIDDEN,
               starter: dict[str, str] | None = None, extra: str = "", verify: bool = True, lint: bool = True) -> None:
    """A task folder ``name/`` with a starter ``repo/`` and ``task.yaml``."""
    folder = pytester.path / name
    for rel, content in (starter or STARTER).items():
        path = folder / "repo" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    text = (
        f"name: {name}\n"
        "description: Fix add() in calc.py.\n"
        "repo: repo\n"
        "test_command: python -m pytest -q test_calc.py\n"
        "timeout: 120\n"
        "env: {PYTEST_DISABLE_PLUGIN_AUTOLOAD: '1'}\n"
        "agents: [claude]\n"
    )
    if lint:
        text += "lint_command: python -m ruff check --quiet --no-cache --isolated --select E4,E7,E9,F .\n"
    if verify:
        text += f"verify_command: python -m pytest -q test_hidden.py\nverify_files:\n  test_hidden.py: {block(hidden, 4)}"
    if solution is not None:
        text += f"solution_files:\n  calc.py: {block(solution, 4)}"
    (folder / "task.yaml").write_text(text + extra)


def verdicts(output: str) -> dict[str, str]:
    """Task -> verdict column of the 'agentrace validate' table."""
    section = output.split("agentrace validate", 1)[1]
    rows = [line.split("|") for line in section.splitlines() if line.startswith("| ") and not line.startswith("| Task")]
    return {r[1].strip(): r[4].strip() for r in rows}


def test_valid_task_passes_with_only_oracle_and_noop(pytester: pytest.Pytester, xdist: list[str]) -> None:
    write_task(pytester, "good")
    # the file names claude (not installed) and asks for 3 reps: validation ignores both
    res = pytester.runpytest("--agentrace", "--agentrace-validate", "--agentrace-reps", "3", "--agentrace-agent", "codex", *xdist)
    res.assert_outcomes(passed=2)
    assert verdicts(res.stdout.str()) == {"good": "valid"}
    assert "1 of 1 task(s) valid, 0 invalid" in res.stdout.str()
    assert res.ret == 0
    # oracle/noop check the task; they are no race between agents: nothing goes to the history or the Elo ratings
    assert not (pytester.path / ".agentrace" / "history.db").exists()  # the Elo ratings live in it too


def test_wrong_reference_solution_is_invalid(pytester: pytest.Pytester, xdist: list[str]) -> None:
    write_task(pytester, "wrong", solution="def add(a, b):\n    return abs(a) + abs(b)\n")
    res = pytester.runpytest("--agentrace", "--agentrace-validate", *xdist)
    res.assert_outcomes(passed=1, failed=1)
    out = res.stdout.str()
    assert "invalid task wrong: the reference solution (oracle) fails verify (exit 1)" in out
    assert "test_negative" in out  # the tail of the failing check's log
    assert verdicts(out)["wrong"].startswith("invalid: the reference solution (oracle) fails verify")
    assert "0 of 1 task(s) valid, 1 invalid" in out
    assert res.ret == 1


def test_verify_suite_passing_on_the_starter_is_invalid(pytester: pytest.Pytester, xdist: list[str]) -> None:
    # the hidden test only checks that add exists: the unsolved code passes it
    write_task(pytester, "toothless", hidden="from calc import add\n\n\ndef test_exists():\n    assert callable(add)\n")
    res = pytester.runpytest("--agentrace", "--agentrace-validate", *xdist)
    res.assert_outcomes(passed=1, failed=1)
    out = res.stdout.str()
    assert "toothless[noop-r1]" in out
    assert "invalid task toothless: the hidden verify suite passes on the starting code" in out
    assert verdicts(out)["toothless"].startswith("invalid: the hidden verify suite passes on the starting code")


def test_tests_passing_on_the_starter_without_verify_is_invalid(pytester: pytest.Pytester) -> None:
    starter = {**STARTER, "calc.py": GOOD_SOLUTION}
    write_task(pytester, "solved", starter=starter, verify=False)
    res = pytester.runpytest("--agentrace", "--agentrace-validate")
    res.assert_outcomes(passed=1, failed=1)
    assert "the tests pass (and the task has no verify suite) on the starting code" in res.stdout.str()


def test_visible_tests_passing_on_the_starter_is_fine_when_verify_fails(pytester: pytest.Pytester) -> None:
    # a refactoring task: behaviour tests pass before and after; only the hidden suite tells them apart
    starter = {**STARTER, "test_calc.py": "def test_nothing_yet():\n    pass\n"}
    write_task(pytester, "refactorish", starter=starter)
    res = pytester.runpytest("--agentrace", "--agentrace-validate")
    res.assert_outcomes(passed=2)
    assert verdicts(res.stdout.str()) == {"refactorish": "valid"}


def test_missing_solution_and_unappliable_patch_are_invalid(pytester: pytest.Pytester) -> None:
    write_task(pytester, "nosolution", solution=None)
    write_task(pytester, "badpatch", solution=None, extra=(
        "solution_patch: |\n  --- a/calc.py\n  +++ b/calc.py\n  @@ -1,2 +1,2 @@\n   def add(x, y):\n  -    return x * y\n  +    return x + y\n"
    ))
    res = pytester.runpytest("--agentrace", "--agentrace-validate")
    res.assert_outcomes(passed=2, failed=2)
    v = verdicts(res.stdout.str())
    assert v["nosolution"].startswith("invalid: the reference solution cannot be applied: oracle: the task has no solution_files")
    assert v["badpatch"].startswith("invalid: the reference solution cannot be applied: oracle: solution_patch does not apply")


def test_lint_failure_and_protected_change_of_the_oracle_are_invalid(pytester: pytest.Pytester) -> None:
    write_task(pytester, "sloppy", solution="import os\n\n\ndef add(a, b):\n    return a + b\n")
    write_task(pytester, "cheat", extra="  conftest.py: |\n    pass\nprotected: [conftest.py]\n")
    res = pytester.runpytest("--agentrace", "--agentrace-validate")
    res.assert_outcomes(passed=2, failed=2)
    v = verdicts(res.stdout.str())
    assert "F401" in res.stdout.str() and "--- lint:" in res.stdout.str()  # the lint log's tail explains it
    assert v["sloppy"] == "invalid: the reference solution (oracle) fails lint (exit 1)"
    assert v["cheat"] == "invalid: the reference solution changes protected files: conftest.py"


def test_without_validate_the_same_file_races_and_noop_is_expected_to_fail(pytester: pytest.Pytester) -> None:
    write_task(pytester, "good")
    path = pytester.path / "good" / "task.yaml"
    path.write_text(path.read_text().replace("agents: [claude]", "agents: [oracle, noop]"))
    res = pytester.runpytest("--agentrace")
    res.assert_outcomes(passed=1, xfailed=1)
    assert "agentrace validate" not in res.stdout.str()


def test_trial_runs_are_deselected(pytester: pytest.Pytester, xdist: list[str]) -> None:
    from helpers.trial import make_project, trial_toml

    make_project(pytester.path)
    (pytester.path / "trial.toml").write_text(trial_toml())
    write_task(pytester, "good")
    res = pytester.runpytest("--agentrace", "--agentrace-validate", *xdist)
    # (pytest-xdist does not count items its workers deselect)
    res.assert_outcomes(passed=2, deselected=0 if xdist else 2)
    assert verdicts(res.stdout.str()) == {"good": "valid"}
    assert "port[" not in res.stdout.str()


def test_broken_yaml_is_a_collection_error(pytester: pytest.Pytester) -> None:
    write_task(pytester, "good")
    (pytester.path / "bad.yaml").write_text("name: bad\ndescription: x\ntest_command: true\nbogus_key: 1\nagents: [noop]\n")
    res = pytester.runpytest("--agentrace", "--agentrace-validate", "--continue-on-collection-errors")
    res.assert_outcomes(passed=2, errors=1)
    assert "bogus_key" in res.stdout.str()


@pytest.mark.slow
def test_all_builtin_tasks_are_valid(pytester: pytest.Pytester) -> None:
    """The acceptance run: all 20 built-ins, oracle passes every check and noop fails the hidden ones."""
    res = pytester.runpytest_subprocess("--agentrace", "--agentrace-validate", "--agentrace-builtin", "all", "-p", "no:cacheprovider", timeout=1800)
    out = res.stdout.str()
    res.assert_outcomes(passed=40)
    v = verdicts(out)
    assert len(v) == 20 and set(v.values()) == {"valid"}, v
    assert "20 of 20 task(s) valid, 0 invalid" in out
