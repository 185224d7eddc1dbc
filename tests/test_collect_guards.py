"""Collection guards against silent mistakes: two files whose runs would share a results folder, a misspelt
agent name, and ``--agentrace-agent`` on a task file keeping the file's own entry for that agent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import BUGGY_REPO, FIXER, make_repo, write_script

TASK = "name: {name}\ndescription: fix add\nrepo: repo\ntest_command: python -m pytest -q test_calc.py\nagents: [{agents}]\n"


def test_two_files_with_one_case_name_are_errors_not_overwrites(pytester: pytest.Pytester, bin_dir: Path, xdist: list[str]) -> None:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "fixer", FIXER)
    (pytester.path / "a.yaml").write_text(TASK.format(name="dup", agents="{name: fixer, command: fixer}"))
    (pytester.path / "b.yaml").write_text(TASK.format(name="dup", agents="{name: fixer, command: fixer}"))
    (pytester.path / "c.yaml").write_text(TASK.format(name="other", agents="{name: fixer, command: fixer}"))
    res = pytester.runpytest("--agentrace", "--agentrace-out", "o", *xdist)
    res.assert_outcomes(passed=1, errors=2)
    a, b = pytester.path / "a.yaml", pytester.path / "b.yaml"
    # One error section per item; the section's message line starts with the message (the short summary's
    # "ERROR a.yaml::..." lines repeat it, cut to the terminal width, so they are not counted).
    message = f"{a} and {b} both have a task/question named 'dup'"
    assert sum(line.startswith(message) for line in res.stdout.lines) == 2
    records = [json.loads(p.read_text())["case"] for p in (pytester.path / "o").glob("runs/**/run.json")]
    assert records == ["other"]


def test_misspelt_agent_name_is_a_collection_error(pytester: pytest.Pytester) -> None:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    (pytester.path / "task.yaml").write_text(TASK.format(name="t", agents="claud, noop"))
    res = pytester.runpytest("--agentrace", "--agentrace-out", "o")
    assert res.ret == pytest.ExitCode.TESTS_FAILED  # one collection error; the other files would still run
    assert "key 'agents[0]': unknown agent 'claud' (did you mean 'claude'?)" in res.stdout.str()
    (pytester.path / "task.yaml").write_text(TASK.format(name="t", agents="{name: cdex, model: m}"))
    res = pytester.runpytest("--agentrace", "--agentrace-out", "o")
    assert "key 'agents[0].name': unknown agent 'cdex' (did you mean 'codex'?)" in res.stdout.str()
    (pytester.path / "task.yaml").write_text(TASK.format(name="t", agents="noop"))
    res = pytester.runpytest("--agentrace", "--agentrace-out", "o", "--agentrace-agent", "claud")
    assert "unknown agent 'claud' (did you mean 'claude'?)" in res.stdout.str()
    assert not (pytester.path / "o" / "runs").exists()


def test_agent_option_keeps_the_task_files_entry(pytester: pytest.Pytester, bin_dir: Path, xdist: list[str]) -> None:
    """``--agentrace-agent NAME`` picks the task file's own entries for NAME (with their command, env, model double)
    rather than replacing them with a bare spec; a name the file does not list still runs as given."""
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "envfixer", FIXER + "import os\nprint('ENV', os.environ.get('FROM_FILE'))\n")
    agents = "{name: envfixer, command: envfixer, env: {FROM_FILE: kept}}, {name: other, command: envfixer}, noop"
    (pytester.path / "task.yaml").write_text(TASK.format(name="t", agents=agents))
    res = pytester.runpytest("--agentrace", "--agentrace-out", "o", "--agentrace-agent", "envfixer", "--agentrace-agent", "oracle", *xdist)
    res.assert_outcomes(passed=1, failed=1)  # oracle: this task has no reference solution, so it changes nothing
    runs = sorted(p.parts[-3] for p in (pytester.path / "o").glob("runs/t/default/*/1/run.json"))
    assert runs == ["envfixer", "oracle"]
    assert "ENV kept" in (pytester.path / "o/runs/t/default/envfixer/1/raw.out").read_text()


def test_a_file_named_on_the_command_line_is_always_loaded(pytester: pytest.Pytester) -> None:
    """Named explicitly, a YAML/TOML file is a task/trial even when it does not look like one, so its mistake is
    reported (with the fix) instead of pytest's "not found"; in a folder such files are still left alone."""
    pytester.path.joinpath("t.yaml").write_text('name: t1\ndescripton: do it\ntest_command: "true"\n')
    pytester.path.joinpath("empty.yaml").write_text("")
    pytester.path.joinpath("other.toml").write_text("x = 1\n")
    res = pytester.runpytest("--agentrace", "t.yaml")
    assert "t.yaml: key 'descripton': unknown key (did you mean 'description'?)" in res.stdout.str()
    res = pytester.runpytest("--agentrace", "empty.yaml")
    assert "empty.yaml: a task file must be a YAML mapping with name, description and test_command" in res.stdout.str()
    res = pytester.runpytest("--agentrace", "other.toml")
    assert "other.toml: key 'questions': a trial file needs a [[questions]] array of tables" in res.stdout.str()
    res = pytester.runpytest("--agentrace", ".")
    assert res.ret == pytest.ExitCode.NO_TESTS_COLLECTED and "error" not in res.stdout.str().lower()


def test_an_agent_mapping_on_the_command_line_replaces_the_files_entry(
        pytester: pytest.Pytester, bin_dir: Path, xdist: list[str]) -> None:
    """``--agentrace-agent '{name: claude, command: ...}'`` runs that command in place of the task file's ``claude``
    (before, the file's entry was kept: skipped as "not installed", or the real CLI ran); the summary names the
    command that ran. A plain name still picks the file's entry."""
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "fixer", FIXER)
    write_script(bin_dir / "claude", "import pathlib\npathlib.Path('REAL_CLI_RAN').write_text('')\nraise SystemExit(3)\n")
    (pytester.path / "task.yaml").write_text(TASK.format(name="t", agents="claude, noop"))
    res = pytester.runpytest("--agentrace", "--agentrace-out", "o", "--agentrace-agent", "{name: claude, command: fixer}",
                             "-p", "no:randomly", *xdist)
    res.assert_outcomes(passed=1)
    record = json.loads((pytester.path / "o/runs/t/default/claude/1/run.json").read_text())
    assert record["status"] == "passed" and record["agent"] == "claude"
    assert "fixed calc.py" in (pytester.path / "o/runs/t/default/claude/1/raw.out").read_text()
    assert not list(pytester.path.rglob("REAL_CLI_RAN"))
    assert "agent claude: ran `fixer` (--agentrace-agent; replaces the files' entries named claude)" in res.stdout.str()


def test_the_summary_says_whether_an_agent_mapping_replaced_or_added(
        pytester: pytest.Pytester, bin_dir: Path, xdist: list[str]) -> None:
    """A mapping whose name no file lists is added, and the summary says so instead of "replaces the files' entries
    named ..." (under ``-n 2`` the workers' collections tell the controller what each mapping did)."""
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "fixer", FIXER)
    (pytester.path / "t.yaml").write_text(TASK.format(name="t", agents="claude, noop"))
    (pytester.path / "u.yaml").write_text(TASK.format(name="u", agents="noop"))
    res = pytester.runpytest("--agentrace", "--agentrace-out", "o", "--agentrace-agent", "{name: claude, command: fixer}",
                             "--agentrace-agent", "{name: helper, command: fixer}", *xdist)
    res.assert_outcomes(passed=4)
    text = res.stdout.str()
    assert ("agent claude: ran `fixer` (--agentrace-agent; replaces the entries named claude of the files that list one, "
            "added to the others)") in text
    assert "agent helper: ran `fixer` (--agentrace-agent; added: no file lists an agent named helper)" in text


@pytest.mark.parametrize(("value", "message"), [
    ("{name: mine, command: my-agent {prompt}}", "not a valid YAML flow mapping: expected ',' or '}', but got '{'"),
    ("{name:mine,command:/nope/x}", "unknown key (did you mean 'name'?): YAML flow mappings need a space after ':' "
                                    "(write name: mine)"),
    ("{name: mine, comand: x}", "unknown key (did you mean 'command'?)"),
])
def test_a_malformed_agent_option_is_one_error_without_a_traceback(
        pytester: pytest.Pytester, xdist: list[str], value: str, message: str) -> None:
    """The option is parsed once: its error is the task file's one collection error, and the session's summary
    (which names the option's overrides) does not parse it again and raise. Run in a subprocess, as a user runs it
    (the whole output, stderr included, is the user's)."""
    (pytester.path / "task.yaml").write_text("name: t\ndescription: d\ntest_command: 'true'\nagents: [noop]\n")
    res = pytester.runpytest_subprocess("--agentrace", "--agentrace-out", "o", "--agentrace-agent", value, *xdist)
    text = res.stdout.str() + res.stderr.str()
    assert "Traceback" not in text and "INTERNALERROR" not in text
    errors = [line for line in res.stdout.lines if line.startswith("agentrace: --agentrace-agent: key ")]
    assert len(errors) == 1 and message in errors[0], text
    assert res.ret == pytest.ExitCode.TESTS_FAILED
    res.assert_outcomes(errors=1)


def test_a_plain_agent_name_keeps_the_files_entry_and_prints_no_override(pytester: pytest.Pytester, bin_dir: Path) -> None:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "fixer", FIXER)
    (pytester.path / "task.yaml").write_text(TASK.format(name="t", agents="{name: claude, command: fixer}, noop"))
    res = pytester.runpytest("--agentrace", "--agentrace-out", "o", "--agentrace-agent", "claude")
    res.assert_outcomes(passed=1)
    assert "--agentrace-agent; replaces" not in res.stdout.str()


def test_an_agent_mapping_replaces_a_trials_agent_of_that_name(pytester: pytest.Pytester, bin_dir: Path) -> None:
    """In a trial the same rule holds: the mapping replaces the file's ``claude`` for every arm."""
    make_repo(pytester.path / "app", {"ANSWER.txt": "port 8123\n"})
    write_script(bin_dir / "answerer", "print('The port is 8123.')\n")
    (pytester.path / "trial.toml").write_text(
        'name = "ports"\n[defaults]\nreps = 1\n[[repos]]\nname = "app"\nsource = "app"\n[[arms]]\nname = "baseline"\n'
        '[[agents]]\nname = "claude"\n[[agents]]\nname = "noop"\n'
        '[[questions]]\nid = "port"\nrepo = "app"\nprompt = "Which port?"\nexpect = ["8123"]\n')
    res = pytester.runpytest("--agentrace", "--agentrace-out", "o", "--agentrace-agent",
                             "{name: claude, command: answerer}", "-rA")
    res.assert_outcomes(passed=1)
    assert "PASSED trial.toml::port[baseline-claude-r1]" in res.stdout.str()
    assert "agent claude: ran `answerer`" in res.stdout.str()


def test_a_task_or_trial_file_without_the_flag_gets_a_hint(pytester: pytest.Pytester) -> None:
    """``pytest task.yaml`` without ``--agentrace``: pytest alone says only ``not found``; the plugin adds how to run
    it. A YAML or TOML file that is no task or trial file gets no hint."""
    (pytester.path / "task.yaml").write_text("name: t\ndescription: d\ntest_command: 'true'\n")
    (pytester.path / "trial.toml").write_text("[[questions]]\nid = 'q'\nprompt = 'p'\n")
    (pytester.path / "config.yaml").write_text("verbose: true\n")
    res = pytester.runpytest("task.yaml", "trial.toml", "-p", "no:cacheprovider")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    res.stdout.fnmatch_lines(["agentrace: task.yaml trial.toml: task or trial files of pytest-agentrace, which pytest "
                              "collects only with its flag; run `pytest --agentrace task.yaml trial.toml`"])
    res = pytester.runpytest("config.yaml", "-p", "no:cacheprovider")
    assert res.ret == pytest.ExitCode.USAGE_ERROR and "agentrace:" not in res.stdout.str()
    (pytester.path / "evals" / "deep").mkdir(parents=True)  # a folder of them: pytest says only "no tests ran"
    (pytester.path / "task.yaml").rename(pytester.path / "evals" / "deep" / "task.yaml")
    res = pytester.runpytest("evals", "-p", "no:cacheprovider")
    assert res.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    res.stdout.fnmatch_lines(["agentrace: evals: task or trial files of pytest-agentrace*`pytest --agentrace evals`"])
    (pytester.path / "evals" / "deep" / "task.yaml").unlink()
    res = pytester.runpytest("evals", "-p", "no:cacheprovider")
    assert res.ret == pytest.ExitCode.NO_TESTS_COLLECTED and "agentrace:" not in res.stdout.str()


def test_a_new_results_folder_stays_out_of_git(pytester: pytest.Pytester, bin_dir: Path) -> None:
    """The results folder a session makes holds a ``.gitignore`` of ``*`` (as ``.pytest_cache``), and so does the
    history's ``.agentrace/`` when the results are elsewhere: ``git status`` of the project lists neither. A folder
    that exists already is left as the user keeps it."""
    import subprocess

    from pytest_agentrace.record.safefile import GITIGNORE

    subprocess.run(["git", "init", "-q"], cwd=pytester.path, check=True)
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "fixer", FIXER)
    (pytester.path / "t.yaml").write_text(TASK.format(name="t", agents="{name: fixer, command: fixer}"))
    (pytester.path / "kept").mkdir()
    pytester.runpytest("--agentrace", "t.yaml", "-p", "no:cacheprovider", "--agentrace-out=results").assert_outcomes(passed=1)
    assert (pytester.path / ".agentrace" / "history.db").is_file()
    pytester.runpytest("--agentrace", "t.yaml", "-p", "no:cacheprovider", "--agentrace-out", "kept")
    assert (pytester.path / ".agentrace" / ".gitignore").read_text() == GITIGNORE
    assert (pytester.path / "results" / ".gitignore").read_text() == GITIGNORE
    assert not (pytester.path / "kept" / ".gitignore").exists()
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=pytester.path,
                            capture_output=True, text=True, check=True).stdout
    assert ".agentrace" not in status and "results" not in status and "kept/runs" in status


def test_a_task_file_with_a_misspelt_check_key_is_reported_in_a_folder(pytester: pytest.Pytester) -> None:
    """``test_comand`` (a near miss of ``test_command``) beside ``name``, ``description``, ``repo`` and ``agents``:
    the file is a task with a mistake, reported when its folder is collected, not left out without a word."""
    from pytest_agentrace.spec.task import is_task_data

    data = {"name": "fix-bug", "description": "fix the bug", "repo": ".", "test_comand": "pytest", "agents": ["noop"]}
    assert is_task_data(data)
    assert not is_task_data({"name": "x", "description": "y", "repo": ".", "version": 3})  # no check key, nor a near miss
    pytester.path.joinpath("fix-bug.yaml").write_text("name: fix-bug\ndescription: fix the bug\nrepo: .\ntest_comand: pytest -q\nagents: [noop]\n")
    res = pytester.runpytest("--agentrace", ".", "--collect-only", "-p", "no:cacheprovider")
    assert "fix-bug.yaml: key 'test_comand': unknown key (did you mean 'test_command'?)" in res.stdout.str()
    assert res.ret == pytest.ExitCode.TESTS_FAILED  # a collection error of a task file
