"""Issue 2: the strict task schema — every error names the file, the key and the fix; other files are left alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_agentrace.errors import SpecError
from pytest_agentrace.spec.task import load_task, read_yaml

BASE = "name: t\ndescription: do it\ntest_command: 'true'\nagents: [noop]\n"


def load(tmp_path: Path, text: str):
    p = tmp_path / "task.yaml"
    p.write_text(text)
    return load_task(p)


@pytest.mark.parametrize(
    ("text", "key", "message"),
    [
        (BASE + "lint_commnd: ruff\n", "lint_commnd", "did you mean 'lint_command'?"),
        (BASE.replace("agents: [noop]", "agents: claude"), "agents", "must be a list, not str 'claude'"),
        (BASE + "timeout: '300'\n", "timeout", "must be an integer or a number, not str '300'"),
        (BASE + "timeout: -1\n", "timeout", "must be greater than 0"),
        (BASE + "verify_command: x\nverify_files:\n  /etc/passwd: x\n", "verify_files./etc/passwd", "must be relative to the workspace"),
        (BASE + "verify_command: x\nverify_files:\n  ../x: y\n", "verify_files.../x", "escapes the workspace"),
        ("name: t\ndescription: d\nagents: [noop]\nrepo: r\ntest_command: null\n", "test_command", "required key is missing"),
        ("description: d\ntest_command: x\n", "name", "required key is missing"),
        (BASE + "difficulty: [hard]\n", "difficulty", "must be a string or an integer or a number, not list"),
        (BASE + "difficulty: 'easy, hard'\n", "difficulty", "give a non-empty name without commas"),
        (BASE + "scoring: {tests: 1, tests_pass: 2}\n", "scoring.tests_pass", "the same weight as scoring.tests"),
        (BASE + "scoring: {test_pass: 2}\n", "scoring.test_pass", "did you mean 'tests_pass'?"),
        (BASE + "pricing: {claude: {input_per_1m: 3, input: 3}}\n", "pricing.claude.input",
         "the same rate as pricing.claude.input_per_1m"),
        (BASE + "pricing: {claude: {input_per_1m: -1.0, output_per_1m: 15}}\n", "pricing.claude.input_per_1m",
         "0 or more"),
        (BASE + "pricing: {claude: {input_per_1M: 3}}\n", "pricing.claude.input_per_1M",
         "did you mean 'input_per_1m'?"),
        (BASE + "pricing: {claude: 3.0}\n", "pricing.claude", "must be a mapping"),
        (BASE + "scoring: {tests: 1, speed: 2}\n", "scoring.speed", "unknown key"),
        (BASE + "agents: [{name: x, comand: y}]\n".replace("agents: [noop]\n", ""), "agents[0].comand", "did you mean 'command'?"),
        (BASE + "verify_files: {a.py: x}\n", "verify_command", "no verify_command"),
        (BASE + "pricing: {m: {input: cheap}}\n", "pricing.m.input", "must be an integer or a number"),
    ],
)
def test_schema_errors_name_file_key_and_fix(tmp_path: Path, text: str, key: str, message: str) -> None:
    if text.count("agents:") > 1:
        text = text.replace("agents: [noop]\n", "", 1)
    with pytest.raises(SpecError) as exc:
        load(tmp_path, text)
    assert exc.value.key == key
    assert str(tmp_path / "task.yaml") in str(exc.value)
    assert message in str(exc.value)


def test_repo_is_resolved_relative_to_the_task_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "sub").mkdir()
    p = tmp_path / "sub" / "task.yaml"
    p.write_text(BASE + "repo: ../starter\n")
    monkeypatch.chdir("/")
    assert load_task(p).repo == str(tmp_path / "starter")


def test_agent_specs(tmp_path: Path) -> None:
    task = load(tmp_path, BASE.replace("[noop]", "[codex:gpt-5.4, {name: mine, command: 'run {prompt} --m {model}', kind: plain, model: m1, env: {A: '1'}}]"))
    codex, mine = task.agents
    assert (codex.name, codex.model, codex.id, codex.adapter) == ("codex", "gpt-5.4", "codex:gpt-5.4", "codex")
    assert mine.command == ("run", "{prompt}", "--m", "{model}") and mine.adapter == "plain" and mine.env == {"A": "1"}
    assert mine.id == "mine:m1"


def test_coderace_task_file_loads_unchanged(tmp_path: Path) -> None:
    text = """\
name: fibonacci
description: |
  Write fib.py with a function fibonacci(n) returning the n-th Fibonacci number.
repo: .
test_command: python -m pytest tests/ -x
lint_command: ruff check .
timeout: 300
agents:
  - claude
  - codex
  - aider
difficulty: easy
verify_command: python -m pytest verify_tests/ -x
verify_files:
  verify_tests/test_fib.py: |
    from fib import fibonacci
    def test_zero():
        assert fibonacci(0) == 0
scoring:
  tests: 40
  exit: 20
  lint: 15
  time: 15
  lines: 10
"""
    task = load(tmp_path, text)
    assert task.name == "fibonacci" and [a.name for a in task.agents] == ["claude", "codex", "aider"]
    assert task.protected_globs == ("verify_tests/test_fib.py",)


def test_collection_error_is_one_clear_line(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", task="name: t\ndescription: d\ntest_command: x\nlint_commnd: y\nagents: [noop]\n")
    res = pytester.runpytest("--agentrace")
    assert res.ret == pytest.ExitCode.TESTS_FAILED
    res.stdout.fnmatch_lines(["*task.yaml: key 'lint_commnd': unknown key (did you mean 'lint_command'?)*"])




def test_a_bad_file_is_one_collection_error_and_the_other_files_still_run(pytester: pytest.Pytester,
                                                                         xdist: list[str]) -> None:
    """Without --continue-on-collection-errors pytest would stop the session before its first run ("Interrupted:
    1 error during collection"); for agentrace files continuing is the default, and the session still fails."""
    for name in ("a", "b"):
        (pytester.path / name).mkdir()
        (pytester.path / name / "task.yaml").write_text(
            f"name: {name}\ndescription: d\ntest_command: 'false'\nagents: [noop]\n")
    (pytester.path / "bad").mkdir()
    (pytester.path / "bad" / "task.yaml").write_text(
        "name: bad\ndescription: d\ntest_command: x\nagents: [noop]\nscoring: {speed: 1}\n")
    (pytester.path / "broken").mkdir()
    (pytester.path / "broken" / "task.yaml").write_text("name: broken\ndescription: [unclosed\ntest_command: x\n")
    res = pytester.runpytest("--agentrace", "--agentrace-no-save", *xdist)
    res.assert_outcomes(xfailed=2, errors=2)
    assert res.ret == pytest.ExitCode.TESTS_FAILED
    assert "Interrupted" not in res.stdout.str()
    res.stdout.fnmatch_lines(["*bad/task.yaml: key 'scoring.speed': unknown key*"])
    res.stdout.fnmatch_lines(["*broken/task.yaml*not valid YAML*"])


def test_a_broken_python_test_module_still_stops_the_session(pytester: pytest.Pytester) -> None:
    """pytest's own rule stays for other files: a test module that does not import stops the session."""
    pytester.makefile(".yaml", task="name: t\ndescription: d\ntest_command: 'false'\nagents: [noop]\n")
    pytester.makefile(".yaml", bad="name: b\ndescription: d\ntest_command: x\nagents: [nope]\n")
    pytester.makepyfile(test_broken="import no_such_module_xyz\n")
    res = pytester.runpytest("--agentrace", "--agentrace-no-save")
    assert res.ret == pytest.ExitCode.INTERRUPTED
    res.stdout.fnmatch_lines(["*Interrupted: 2 errors during collection*"])
    res = pytester.runpytest("--agentrace", "--agentrace-no-save", "--continue-on-collection-errors")
    res.assert_outcomes(xfailed=1, errors=2)


def test_broken_yaml_task_is_reported_not_skipped(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", task="name: t\ndescription: [unclosed\ntest_command: x\n")
    res = pytester.runpytest("--agentrace")
    res.stdout.fnmatch_lines(["*task.yaml*not valid YAML*"])


def test_opt_in_unrelated_files_untouched(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", config="database: {host: localhost}\ntest_command_like: 1\n")
    pytester.makefile(".yml", other="- a\n- b\n")
    pytester.makefile(".toml", settings="[tool]\nx = 1\n")
    pytester.makepyprojecttoml("[tool.pytest.ini_options]\naddopts = ''\n")
    pytester.makepyfile(test_plain="def test_ok():\n    assert True\n")
    pytester.makefile(".yaml", task="name: t\ndescription: d\ntest_command: 'false'\nagents: [noop]\n")
    plain = pytester.runpytest()
    plain.assert_outcomes(passed=1)
    assert "= agentrace =" not in plain.stdout.str() and "task.yaml" not in plain.stdout.str()
    assert not (pytester.path / ".agentrace").exists()
    claimed = pytester.runpytest("--agentrace", "--collect-only", "-q")
    assert [line for line in claimed.stdout.lines if "::" in line] == ["task.yaml::t[noop-r1]", "test_plain.py::test_ok"]


def test_starter_repo_tests_are_not_collected(pytester: pytest.Pytester) -> None:
    (pytester.path / "suite" / "repo").mkdir(parents=True)
    (pytester.path / "suite" / "repo" / "test_starter.py").write_text("def test_fails():\n    assert False\n")
    (pytester.path / "suite" / "repo" / "conftest.py").write_text("raise RuntimeError('must not be imported')\n")
    (pytester.path / "suite" / "task.yaml").write_text("name: t\ndescription: d\nrepo: repo\ntest_command: 'false'\nagents: [noop]\n")
    res = pytester.runpytest("--agentrace", "--collect-only", "-q", "suite")
    assert [line for line in res.stdout.lines if "::" in line] == ["suite/task.yaml::t[noop-r1]"]


@pytest.mark.parametrize(
    ("text", "key", "message"),
    [
        (BASE + "repo: ''\n", "repo", "is empty"),
        (BASE.replace("test_command: 'true'", "test_command: ''"), "test_command", "is empty"),
        (BASE.replace("description: do it", "description: '  '"), "description", "is empty"),
        (BASE + "timeout: .nan\n", "timeout", "must be greater than 0"),
        (BASE + "timeout: .inf\n", "timeout", "must be greater than 0"),
        (BASE.replace("[noop]", "[{name: x, command: 'x {promt}'}]"), "agents[0].command", "unknown placeholder {promt} (did you mean '{prompt}'?)"),
        (BASE.replace("[noop]", "['..']"), "agents[0]", "empty agent name"),
        (BASE.replace("[noop]", "[{name: '..', command: x}]"), "agents[0].name", "cannot name an agent"),
        (BASE.replace("[noop]", "['codex:']"), "agents[0]", "empty model after ':' in 'codex:'"),
        (BASE + "test_command: 'false'\n", "test_command", "given twice (lines 3 and 5); YAML would keep only the second"),
        (BASE + "scoring: {tests: 1, tests: 2}\n", "tests", "given twice (lines 5 and 5)"),
    ],
)
def test_more_schema_errors(tmp_path: Path, text: str, key: str, message: str) -> None:
    with pytest.raises(SpecError) as exc:
        load(tmp_path, text)
    assert exc.value.key == key and message in str(exc.value)


def test_misspelt_required_key_is_reported_not_skipped(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", task="name: t\ndescripton: d\ntest_command: x\nagents: [noop]\n")
    res = pytester.runpytest("--agentrace")
    res.stdout.fnmatch_lines(["*task.yaml: key 'descripton': unknown key (did you mean 'description'?)*"])


def test_unexpected_load_error_is_one_line_and_others_still_run(pytester: pytest.Pytester) -> None:
    (pytester.path / "bad").mkdir()
    (pytester.path / "bad" / "task.yaml").write_text("name: b\ndescription: d\ntest_command: x\nrepo: ~no-such-user-xyz/r\nagents: [noop]\n")
    (pytester.path / "good").mkdir()
    (pytester.path / "good" / "task.yaml").write_text("name: g\ndescription: d\ntest_command: 'false'\nagents: [noop]\n")
    res = pytester.runpytest("--agentrace", "--continue-on-collection-errors")
    res.assert_outcomes(xfailed=1, errors=1)
    assert "INTERNALERROR" not in res.stdout.str()
    res.stdout.fnmatch_lines(["*bad/task.yaml: cannot load this file: RuntimeError*"])


def test_bad_option_values_are_usage_errors(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", task=BASE)
    for args in (["--agentrace-timeout", "-5"], ["--agentrace-timeout", "nan"], ["--agentrace-reps", "0"], ["--agentrace-reps", "x"]):
        res = pytester.runpytest("--agentrace", *args)
        assert res.ret == pytest.ExitCode.USAGE_ERROR, args
    (pytester.path / "afile").write_text("")
    res = pytester.runpytest("--agentrace", "--agentrace-out", "afile")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "cannot write the results folder there" in res.stderr.str()


def test_infrastructure_error_is_one_line_without_traceback(pytester: pytest.Pytester) -> None:
    pytester.makefile(".yaml", task=BASE + "repo: nonexistent\n")
    res = pytester.runpytest("--agentrace")
    res.assert_outcomes(errors=1)
    out = res.stdout.str()
    assert "infrastructure error: workspace: repo" in out and "does not exist" in out
    assert "def setup" not in out and "collect.py" not in out


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("name: t\ndescription: d\ntest_command: x\nsetup\n  - a\nagents: [noop]\n", 4),  # key without its ':'
        ("name: t\ndescription d\ntest_command: x\n", 2),
        ("name: t\ndescription: [a, b\ntest_command: x\n", 2),  # unclosed flow sequence
        ("name: t\ndescription: d\n  test_command: x\n", 3),  # a stray indent: fault and problem on one line
    ],
)
def test_yaml_syntax_error_names_the_line_written(tmp_path: Path, text: str, line: int) -> None:
    path = tmp_path / "task.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as err:
        read_yaml(path)
    assert f"not valid YAML at line {line}," in str(err.value), str(err.value)
