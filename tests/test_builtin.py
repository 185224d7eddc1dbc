"""Issue 6: the 20 built-in tasks (shape, hidden suites, protection) and running them without a path:
`--agentrace-builtin NAME[,NAME]` and `--agentrace-difficulty`, serial and under pytest-xdist."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from pytest_agentrace.cli.tasks import count_tests
from pytest_agentrace.run.treefiles import _matches
from pytest_agentrace.spec.builtin import (
    builtin_root,
    builtin_tasks,
    find_builtin,
    select_builtin,
)
from pytest_agentrace.spec.task import load_task

EXPECTED = {
    "fibonacci": "easy",
    **dict.fromkeys(["json-parser", "markdown-to-html", "csv-analyzer", "cli-args-parser", "file-watcher"], "medium"),
    "state-machine": "medium-hard",  # coderace's own level for it
    **dict.fromkeys([
        "http-server", "binary-search-tree", "regex-engine", "lru-cache", "expression-evaluator", "url-router",
        "diff-algorithm", "task-scheduler", "bug-hunt", "refactor", "concurrent-queue", "api-client", "data-pipeline",
    ], "hard"),
}
TASKS = [t.name for t in builtin_tasks()]


def test_the_suite_has_coderaces_names_and_difficulties() -> None:
    assert {t: load_task(find_builtin(t).path).difficulty for t in TASKS} == EXPECTED


def test_builtins_are_found_through_the_package() -> None:
    import pytest_agentrace

    root = builtin_root()
    assert root == Path(pytest_agentrace.__file__).parent / "builtin_tasks"
    # in the source tree the package folder links to example_suites/builtin (one copy, shipped as package data)
    assert root.resolve() == (Path(__file__).parents[1] / "example_suites" / "builtin").resolve()


@pytest.mark.parametrize("name", TASKS)
def test_builtin_task_shape(name: str) -> None:
    task = load_task(find_builtin(name).path)
    assert task.name == name and task.difficulty == EXPECTED[name]
    repo = Path(task.repo)
    assert repo.is_dir() and repo.name == "repo"
    assert "-p no:cacheprovider" in (repo / "pytest.ini").read_text()
    assert task.verify_command and task.lint_command and "ruff check" in task.lint_command
    assert count_tests(task.verify_files) >= 8, "a hidden suite needs at least 8 tests"
    assert task.solution_files or task.solution_patch_text()
    assert {a.id for a in task.agents} == {"oracle", "noop"}
    # conftest.py at any depth, the hidden files and the visible tests are protected
    for path in ("conftest.py", "pkg/sub/conftest.py", "pytest.ini", *task.verify_files):
        assert any(_matches(path, g) for g in task.protected_globs), path
    visible = [p.relative_to(repo).as_posix() for p in repo.rglob("test_*.py")]
    assert visible and all(any(_matches(v, g) for g in task.protected_globs) for v in visible)
    # the hidden files are not in the starter repo, and the description does not paste the code
    assert not any((repo / v).exists() for v in task.verify_files)
    assert "def " not in task.description


def test_bug_hunt_and_refactor_start_from_planted_code() -> None:
    for name in ("bug-hunt", "refactor"):
        task = load_task(find_builtin(name).path)
        assert task.solution_patch and task.solution_patch.endswith(".patch")
        patched = re.findall(r"^\+\+\+ b/(.+)$", task.solution_patch_text(), re.MULTILINE)
        assert patched and all((Path(task.repo) / p).is_file() for p in patched)


def test_select_builtin() -> None:
    assert [t.name for t in select_builtin(["lru-cache", "fibonacci", "lru-cache"])] == ["lru-cache", "fibonacci"]
    assert len(select_builtin(["all"])) == 20
    assert [t.name for t in select_builtin(["all"], ["easy"])] == ["fibonacci"]
    with pytest.raises(KeyError, match="did you mean 'fibonacci'"):
        select_builtin(["fibonaci"])


def test_run_a_builtin_without_a_path(pytester: pytest.Pytester, xdist: list[str]) -> None:
    res = pytester.runpytest("--agentrace", "--agentrace-builtin", "fibonacci", *xdist)
    res.assert_outcomes(passed=1, xfailed=1)
    out = res.stdout.str()
    assert "task fibonacci" in out and "builtin_tasks/fibonacci/task.yaml" in out
    # results go to the invocation's rootdir, never into the package
    assert (pytester.path / ".agentrace" / "runs" / "fibonacci" / "default" / "oracle" / "1" / "run.json").is_file()


def test_builtin_lists_and_difficulty_filter(pytester: pytest.Pytester, xdist: list[str]) -> None:
    res = pytester.runpytest("--agentrace", "--agentrace-builtin", "all", "--agentrace-difficulty", "easy,medium", "--collect-only", "-q", *xdist)
    names = sorted({line.split("::")[1].split("[")[0] for line in res.stdout.lines if "::" in line})
    assert names == sorted(n for n, d in EXPECTED.items() if d in ("easy", "medium"))
    res = pytester.runpytest("--agentrace", "--agentrace-builtin", "lru-cache,fibonacci", "--agentrace-builtin", "refactor", "--collect-only", "-q")
    items = [line for line in res.stdout.lines if "::" in line]
    assert len(items) == 6 and sum("refactor[" in i for i in items) == 2


def test_builtin_alongside_paths_and_without_testpaths(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\ntestpaths = tests\n")
    pytester.mkdir("tests")
    (pytester.path / "tests" / "test_x.py").write_text("def test_x():\n    assert False\n")
    res = pytester.runpytest("--agentrace", "--agentrace-builtin", "fibonacci", "--collect-only", "-q")
    items = [line for line in res.stdout.lines if "::" in line]
    assert len(items) == 2 and all("fibonacci[" in i for i in items)  # testpaths are not added
    res = pytester.runpytest("--agentrace", "--agentrace-builtin", "fibonacci", "tests", "--collect-only", "-q")
    assert len([line for line in res.stdout.lines if "::" in line]) == 3


@pytest.mark.parametrize("args, message", [
    (["--agentrace", "--agentrace-builtin", "fibonaci"], "no built-in task 'fibonaci' (did you mean 'fibonacci'?)"),
    (["--agentrace-builtin", "fibonacci"], "--agentrace-builtin needs --agentrace"),
    (["--agentrace", "--agentrace-builtin", "fibonacci", "--agentrace-difficulty", "hard"], "no task among fibonacci has difficulty hard"),
    (["--agentrace", "--agentrace-builtin", "state-machine", "--agentrace-difficulty", "medium-hrad"],
     "has difficulty medium-hrad (did you mean 'medium-hard'?); their levels: medium-hard"),
    (["--agentrace", "--agentrace-difficulty", ","], "give one or more levels"),
])
def test_usage_errors(pytester: pytest.Pytester, args: list[str], message: str) -> None:
    res = pytester.runpytest(*args)
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert message in res.stderr.str()


TASK = """\
name: {name}
description: x
test_command: "false"
{difficulty}agents: [noop]
"""


def test_a_level_no_task_has_is_a_warning(pytester: pytest.Pytester) -> None:
    for name, level in (("a", "easy"), ("b", "medium-hard")):
        (pytester.path / f"{name}.yaml").write_text(TASK.format(name=name, difficulty=f"difficulty: {level}\n"))
    res = pytester.runpytest("--agentrace", "--agentrace-difficulty", "medium-hrad", "--collect-only", "-q")
    assert res.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    expected = ("*--agentrace-difficulty: no collected task has difficulty medium-hrad (did you mean 'medium-hard'?); "
                "the tasks' levels are easy, medium-hard*")
    res.stdout.fnmatch_lines([expected])


def test_difficulty_filter_deselects_task_runs(pytester: pytest.Pytester, xdist: list[str]) -> None:
    for name, level in (("a", "easy"), ("b", "medium"), ("c", "hard"), ("d", None)):
        (pytester.path / f"{name}.yaml").write_text(TASK.format(name=name, difficulty=f"difficulty: {level}\n" if level else ""))
    (pytester.path / "test_plain.py").write_text("def test_plain():\n    pass\n")
    res = pytester.runpytest("--agentrace", "--agentrace-difficulty", "medium,hard", "-v", *xdist)
    ran = sorted(re.findall(r"::(\w+)\[noop-r1\]", res.stdout.str())) + sorted(re.findall(r"::(test_plain) ", res.stdout.str()))
    assert sorted(set(ran)) == ["b", "c", "test_plain"]
    if not xdist:  # pytest-xdist does not count what its workers deselect
        res.assert_outcomes(passed=1, xfailed=2, deselected=2)


@pytest.mark.slow
def test_builtins_ship_in_the_wheel_and_run_from_an_install(tmp_path: Path) -> None:
    """Build a wheel from a copy of the source, unpack it as an install would, and run a built-in from there."""
    src = Path(__file__).parents[1]
    copy = tmp_path / "src"
    copy.mkdir()
    for rel in ("pyproject.toml", "README.md"):
        shutil.copy2(src / rel, copy / rel)
    shutil.copytree(src / "pytest_agentrace", copy / "pytest_agentrace", symlinks=True, ignore=shutil.ignore_patterns("__pycache__"))
    for part in ("builtin", "trials"):  # the package's builtin_tasks and example_trial link to these
        shutil.copytree(src / "example_suites" / part, copy / "example_suites" / part, ignore=shutil.ignore_patterns("__pycache__", ".agentrace"))
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"), str(copy)],
                          check=False, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    wheel = next((tmp_path / "dist").glob("*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    for task in TASKS:
        assert f"pytest_agentrace/builtin_tasks/{task}/task.yaml" in names
        assert f"pytest_agentrace/builtin_tasks/{task}/repo/pytest.ini" in names
    assert "pytest_agentrace/builtin_tasks/bug-hunt/solution.patch" in names
    assert {"pytest_agentrace/example_trial/trial.toml", "pytest_agentrace/example_trial/example-agents/reader_agent.py",
            "pytest_agentrace/example_trial/example-repo/inventory/config.py"} <= set(names)
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    assert (site / "pytest_agentrace" / "builtin_tasks").is_dir() and not (site / "pytest_agentrace" / "builtin_tasks").is_symlink()
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(site), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "pytest_agentrace.plugin", "-p", "no:cacheprovider",
                           "--agentrace", "--agentrace-builtin", "fibonacci", "--agentrace-agent", "oracle"],
                          cwd=work, env=env, check=False, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert str(site / "pytest_agentrace" / "builtin_tasks" / "fibonacci" / "task.yaml") in proc.stdout or "site/pytest_agentrace/builtin_tasks/fibonacci" in proc.stdout
    assert "1 passed" in proc.stdout
    # `agentrace init-trial` writes the shipped example trial, which then runs
    proc = subprocess.run([sys.executable, "-m", "pytest_agentrace.cli", "init-trial", "t.toml"], cwd=work, env=env, check=False,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and (work / "example-agents" / "reader_agent.py").stat().st_mode & 0o111, proc.stderr
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "pytest_agentrace.plugin", "-p", "no:cacheprovider", "--agentrace",
                           "t.toml", "--agentrace-out", "trial-out"], cwd=work, env=env, check=False, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and "24 passed" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-2000:]
    # nothing is ever written inside the installed package: a task named by its installed path puts its results in
    # the invocation folder; run from inside the package, pytest stops with a usage error before any run
    task = site / "pytest_agentrace" / "builtin_tasks" / "fibonacci" / "task.yaml"

    def package_files() -> list[Path]:
        return sorted(p.relative_to(site) for p in (site / "pytest_agentrace").rglob("*") if "__pycache__" not in p.parts)

    before = package_files()
    args = [sys.executable, "-m", "pytest", "-p", "pytest_agentrace.plugin", "-p", "no:cacheprovider", "--agentrace", str(task), "--agentrace-agent", "oracle"]
    proc = subprocess.run(args, cwd=work, env=env, check=False, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert list((work / ".agentrace").glob("runs/**/run.json"))
    proc = subprocess.run(args, cwd=task.parent, env=env, check=False, capture_output=True, text=True, timeout=600)
    assert proc.returncode == pytest.ExitCode.USAGE_ERROR, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "inside the installed pytest-agentrace package; run pytest from another folder or pass --agentrace-out DIR" in proc.stderr
    assert package_files() == before


def test_builtin_ini_key_counts_only_in_an_agentrace_session(pytester: pytest.Pytester) -> None:
    """``agentrace_builtin`` in an ini file adds the built-in tasks to an agentrace session and leaves a plain pytest
    run alone (it used to be a usage error there: "--agentrace-builtin needs --agentrace")."""
    pytester.makeini("[pytest]\nagentrace_builtin = fibonacci\n")
    pytester.makepyfile(test_plain="def test_ok():\n    pass\n")
    plain = pytester.runpytest("-p", "no:cacheprovider")
    assert plain.ret == 0
    plain.assert_outcomes(passed=1)
    collected = pytester.runpytest("--agentrace", "--collect-only", "-q", "--agentrace-agent", "noop", "-p", "no:cacheprovider")
    assert "fibonacci" in collected.stdout.str()
