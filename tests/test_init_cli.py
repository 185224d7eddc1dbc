"""Issue 6: `agentrace init NAME [-o DIR]` writes a commented template that passes the strict schema,
collects, and validates (its reference solution passes, the empty start fails)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_agentrace.cli import main
from pytest_agentrace.spec.task import load_task


def test_init_writes_a_loadable_commented_template(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["init", "my-task"]) == 0
    path = tmp_path / "my-task.yaml"
    text = path.read_text()
    assert text.startswith("# Task file for pytest-agentrace")
    assert sum(line.lstrip().startswith("#") for line in text.splitlines()) >= 15
    task = load_task(path)
    assert task.name == "my-task" and task.verify_files and task.solution_files and task.difficulty == "easy"
    assert "wrote my-task.yaml" in capsys.readouterr().out


def test_init_output_dir_force_and_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", "x", "-o", str(tmp_path / "new" / "dir")]) == 0
    path = tmp_path / "new" / "dir" / "x.yaml"
    assert load_task(path).name == "x"
    path.write_text("edited")
    assert main(["init", "x", "-o", str(path.parent)]) == 2  # like init-trial: nothing written, exit 2
    assert "exists; pass --force" in capsys.readouterr().err
    assert path.read_text() == "edited"
    assert main(["init", "x", "-o", str(path.parent), "--force"]) == 0
    assert load_task(path).name == "x"
    assert main(["init", "a/b"]) == 2
    assert "cannot be a task name" in capsys.readouterr().err


def test_init_then_collect_only(pytester: pytest.Pytester) -> None:
    assert main(["init", "x", "-o", str(pytester.path)]) == 0
    res = pytester.runpytest("--agentrace", "x.yaml", "--collect-only", "-q")
    assert res.ret == 0
    assert [line for line in res.stdout.lines if "::" in line] == ["x.yaml::x[oracle-r1]", "x.yaml::x[noop-r1]"]


def test_the_template_validates(pytester: pytest.Pytester) -> None:
    assert main(["init", "x", "-o", str(pytester.path)]) == 0
    res = pytester.runpytest("--agentrace", "--agentrace-validate", "x.yaml")
    res.assert_outcomes(passed=2)
    assert "1 of 1 task(s) valid" in res.stdout.str()
