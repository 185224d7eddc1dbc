"""Ini keys are typed (``bool``, ``int``, ``float``, ``linelist``; ``options.Option.ini_type``), so pytest 9's native
TOML (``pytest.toml``, ``[tool.pytest]``) takes unquoted values, and the ini-file spellings (strings) still parse on
pytest 8 and 9."""

from __future__ import annotations

from importlib.metadata import version

import pytest

from pytest_agentrace.options import BY_NAME, OPTIONS

TASK = "name: t\ndescription: d\ntest_command: 'false'\nagents: [oracle]\n"
NATIVE_TOML = int(version("pytest").split(".")[0]) >= 9


def test_every_option_has_the_ini_type_of_its_value() -> None:
    kinds = {o.name: o.ini_type for o in OPTIONS if o.has_ini}
    assert kinds["reps"] == "int" and kinds["seed"] == "int" and kinds["resamples"] == "int"
    assert kinds["tolerance"] == "float" and kinds["timeout"] == "float" and kinds["regression_alpha"] == "float"
    assert kinds["no_save"] == "bool" and kinds["resume"] == "bool" and kinds["agent"] == "linelist"
    assert kinds["memory"] == "string" and kinds["sandbox"] == "string"  # 4G, none; a choice
    assert BY_NAME["race_grace"].ini_type == "float" and BY_NAME["fail_on"].ini_type == "linelist"


def _ids(res: pytest.RunResult) -> list[str]:
    return [line for line in res.stdout.lines if "::" in line]


@pytest.mark.skipif(not NATIVE_TOML, reason="native TOML configuration is pytest 9's")
@pytest.mark.parametrize("where", ["pytest.toml", "pyproject.toml"])
def test_native_toml_takes_unquoted_values(pytester: pytest.Pytester, where: str) -> None:
    table = "[pytest]" if where == "pytest.toml" else "[tool.pytest]"
    (pytester.path / where).write_text(
        f"{table}\nagentrace_reps = 2\nagentrace_no_save = true\nagentrace_tolerance = 0.2\n"
        'agentrace_agent = ["noop"]\nagentrace_seed = 7\n')
    pytester.makefile(".yaml", task=TASK)
    res = pytester.runpytest("--agentrace", "--collect-only", "-q", "--strict-config")
    assert res.ret == 0, res.stdout.str() + res.stderr.str()
    assert _ids(res) == ["task.yaml::t[noop-r1]", "task.yaml::t[noop-r2]"]


@pytest.mark.skipif(not NATIVE_TOML, reason="native TOML configuration is pytest 9's")
def test_native_toml_wrong_type_names_the_key(pytester: pytest.Pytester) -> None:
    (pytester.path / "pytest.toml").write_text('[pytest]\nagentrace_reps = "two"\n')
    pytester.makefile(".yaml", task=TASK)
    res = pytester.runpytest("--agentrace", "--collect-only", "-q")
    assert res.ret != 0
    assert "agentrace_reps" in res.stdout.str() + res.stderr.str()


def test_ini_file_strings_still_parse(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nagentrace_reps = 3\nagentrace_no_save = yes\nagentrace_tolerance = 0.25\n"
                     "agentrace_agent =\n    noop\n")
    pytester.makefile(".yaml", task=TASK)
    res = pytester.runpytest("--agentrace", "--collect-only", "-q", "--strict-config")
    assert res.ret == 0, res.stdout.str() + res.stderr.str()
    assert _ids(res) == [f"task.yaml::t[noop-r{n}]" for n in (1, 2, 3)]


def test_pyproject_ini_options_strings_and_numbers(pytester: pytest.Pytester) -> None:
    """``[tool.pytest.ini_options]`` (ini mode on pytest 9, the only TOML form on pytest 8): quoted and unquoted."""
    pytester.makepyprojecttoml('[tool.pytest.ini_options]\nagentrace_reps = "2"\nagentrace_seed = 3\n'
                               'agentrace_agent = ["noop"]\n')
    pytester.makefile(".yaml", task=TASK)
    res = pytester.runpytest("--agentrace", "--collect-only", "-q", "--strict-config")
    assert res.ret == 0, res.stdout.str() + res.stderr.str()
    assert _ids(res) == ["task.yaml::t[noop-r1]", "task.yaml::t[noop-r2]"]


def test_bad_ini_number_names_the_key(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nagentrace_reps = many\n")
    pytester.makefile(".yaml", task=TASK)
    res = pytester.runpytest("--agentrace", "--collect-only", "-q")
    assert res.ret != 0
    assert "agentrace_reps" in res.stdout.str() + res.stderr.str()
