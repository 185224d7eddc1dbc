"""Issue 6: `agentrace tasks list` (a table) and `agentrace tasks show NAME` (the full YAML)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pytest_agentrace.cli import main
from pytest_agentrace.spec.builtin import find_builtin


def rows(out: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in out.splitlines() if line.startswith("| ") and not line.startswith("| Name")]


def test_list_is_a_table_easiest_first(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks", "list"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split("|")[1:5] == [" Name                 ", " Difficulty   ", " Verify         ", "   Timeout (s) "]
    table = rows(out)
    assert len(table) == 20
    assert table[0] == ["fibonacci", "easy", "yes (10 tests)", "300"]
    levels = [r[1] for r in table]
    assert levels == sorted(levels, key=["easy", "medium", "medium-hard", "hard"].index)
    medium = [r[0] for r in table if r[1] == "medium"]
    assert medium == sorted(medium)
    assert all(r[2].startswith("yes (") and int(r[2][5:].split()[0]) >= 8 for r in table)
    assert "20 task(s)" in out


def test_list_difficulty_filter(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks", "list", "--difficulty", "medium"]) == 0
    table = rows(capsys.readouterr().out)
    assert {r[1] for r in table} == {"medium"} and len(table) == 5
    with pytest.raises(SystemExit) as info:
        main(["tasks", "list", "--difficulty", "impossible"])
    assert info.value.code == 2
    assert "unknown difficulty 'impossible'" in capsys.readouterr().err
    assert main(["tasks", "list", "--difficulty", "medium-hard"]) == 0
    assert [r[0] for r in rows(capsys.readouterr().out)] == ["state-machine"]
    with pytest.raises(SystemExit):
        main(["tasks", "list", "--difficulty", "medium-hrad"])
    expected = ("unknown difficulty 'medium-hrad' (did you mean 'medium-hard'?); "
                "the built-in tasks have easy, medium, medium-hard, hard")
    assert expected in capsys.readouterr().err


def test_show_prints_the_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks", "show", "bug-hunt"]) == 0
    assert capsys.readouterr().out == find_builtin("bug-hunt").path.read_text()


def test_show_unknown_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks", "show", "lru_cache"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("agentrace tasks show: error: no built-in task 'lru_cache' (did you mean 'lru-cache'?)")
    assert len(err.strip().splitlines()) == 1


def test_tasks_without_action_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks"]) == 2
    assert "list" in capsys.readouterr().out


def test_console_script() -> None:
    proc = subprocess.run([sys.executable, "-m", "pytest_agentrace.cli", "tasks", "show", "fibonacci"], check=False, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "name: fibonacci" in proc.stdout


def _task(name: str, tests: int, extra: str = "") -> str:
    body = "".join(f"    def test_{i}():\n        assert True\n" for i in range(tests))
    return (f"name: {name}\ndescription: d\ntest_command: 'true'\nverify_command: python -m pytest -q hidden\n"
            f"verify_files:\n  hidden/test_h.py: |\n{body}{extra}")


def test_list_of_a_folder_lists_the_good_tasks_and_reports_each_broken_file(tmp_path, capsys) -> None:
    """One broken file no longer hides the others: every task that loads is listed, each file that does not is one
    error line (file, key, fix) on standard error, and the exit status is 1. "1 test", "2 tests"."""
    (tmp_path / "one.yaml").write_text(_task("one", 1))
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "two.yaml").write_text(_task("two", 2))
    (tmp_path / "typo.yaml").write_text(_task("typo", 1, "timout: 5\n"))
    (tmp_path / "syntax.yaml").write_text("name: s\ndescription: [unclosed\ntest_command: 'true'\n")
    (tmp_path / "other.yaml").write_text("just: some yaml\n")  # not a task: neither listed nor an error
    assert main(["tasks", "list", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert rows(captured.out) == [["one", "yaml", str(tmp_path / "one.yaml"), "-", "yes (1 test)", "300"],
                                  ["two", "yaml", str(tmp_path / "sub" / "two.yaml"), "-", "yes (2 tests)", "300"]]
    assert "2 task(s)." in captured.out
    errors = captured.err.splitlines()
    assert errors[0].startswith(f"agentrace tasks list: error: {tmp_path / 'syntax.yaml'}: ")
    assert errors[1].startswith(f"agentrace tasks list: error: {tmp_path / 'typo.yaml'}: key 'timout': unknown key "
                                "(did you mean 'timeout'?)")
    assert errors[-1] == "agentrace tasks list: 2 task file(s) do not load (above); they are not listed"
    assert main(["tasks", "list", str(tmp_path / "sub"), str(tmp_path / "missing")]) == 1
    captured = capsys.readouterr()
    assert [r[0] for r in rows(captured.out)] == ["two"]
    assert f"agentrace tasks list: error: {tmp_path / 'missing'}: no such file or folder" in captured.err
