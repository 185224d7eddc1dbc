"""Check commands run with the session's interpreter first on PATH; a missing check tool is an error run, and
``--agentrace-validate`` says "cannot validate here" for it (serial and -n 2).

The venv is made unactivated: the session runs as ``<venv>/bin/python -m pytest`` with PATH not naming the venv. Its
only extra is a module of our own, ``venvonlytool``, written into the venv's site-packages, so ``python -m
venvonlytool`` works with the venv's interpreter and with no other."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import BUGGY_REPO, make_repo


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv that sees the packages of the interpreter running these tests (pytest, the plugin and its
    dependencies): ``--system-site-packages`` alone gives the *base* interpreter's, which lack them when this suite
    itself runs from a venv, so a ``.pth`` line adds this interpreter's site folders (their own ``.pth`` files, e.g.
    an editable install, processed by ``site.addsitedir``)."""
    import site

    root = tmp_path_factory.mktemp("venv") / "v"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(root)], check=True)
    purelib = subprocess.run([root / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    ours = [*site.getsitepackages(), *([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])]
    Path(purelib, "_suite_site.pth").write_text("import site; " + "; ".join(f"site.addsitedir({p!r})" for p in ours) + "\n")
    Path(purelib, "venvonlytool.py").write_text("import sys\nprint('venvonlytool: ok')\nsys.exit(0)\n")
    return root


def session(pytester: pytest.Pytester, python: Path | str, lint: str, *args: str) -> subprocess.CompletedProcess:
    if not (pytester.path / "repo").exists():
        make_repo(pytester.path / "repo", BUGGY_REPO)
    (pytester.path / "task.yaml").write_text(
        f"name: env\ndescription: nothing to do\nrepo: repo\ntest_command: python -m pytest -q test_calc.py\n"
        f"lint_command: {lint}\nsolution_files:\n  calc.py: \"def add(a, b):\\n    return a + b\\n\"\n"
        "verify_command: python -c 'raise SystemExit(0 if open(\"calc.py\").read().count(\"+\") else 1)'\n"
        "agents: [oracle]\n")
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if "/v/bin" not in p)
    env = {**os.environ, "PATH": path, "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    return subprocess.run([str(python), "-m", "pytest", "-p", "no:cacheprovider", "task.yaml", "--agentrace", "--agentrace-out",
                           "out", *args], cwd=pytester.path, env=env, capture_output=True, text=True, timeout=300)


def record(pytester: pytest.Pytester) -> dict:
    return json.loads(next((pytester.path / "out").glob("runs/**/run.json")).read_text())


def test_the_venv_tool_runs_through_an_unactivated_venv(pytester: pytest.Pytester, venv: Path) -> None:
    res = session(pytester, venv / "bin" / "python", "python -m venvonlytool")
    assert res.returncode == 0, res.stdout[-2000:]
    rec = record(pytester)
    assert rec["status"] == "passed" and rec["checks"]["lint"]["exit_code"] == 0


def test_a_tool_missing_everywhere_is_an_error_naming_it(pytester: pytest.Pytester, xdist: list[str]) -> None:
    res = session(pytester, sys.executable, "python -m venvonlytool", *xdist)
    assert res.returncode == 1
    rec = record(pytester)
    assert rec["status"] == "error"
    assert rec["reason"] == "lint cannot run here: venvonlytool is missing (`python -m venvonlytool`)"
    assert rec["checks"]["lint"]["missing"] == "venvonlytool"
    res = session(pytester, sys.executable, "no-such-linter-xyz --check .", *xdist)
    assert record(pytester)["reason"].startswith("lint cannot run here: no-such-linter-xyz is missing")


def test_validate_tells_a_missing_tool_from_an_invalid_task(pytester: pytest.Pytester, venv: Path, xdist: list[str]) -> None:
    res = session(pytester, venv / "bin" / "python", "python -m venvonlytool", "--agentrace-validate", *xdist)
    assert "1 of 1 task(s) valid" in res.stdout, res.stdout[-3000:]
    res = session(pytester, sys.executable, "python -m venvonlytool", "--agentrace-validate", *xdist)
    assert "cannot validate here: venvonlytool missing" in res.stdout and "invalid:" not in res.stdout.split("agentrace validate")[-1]
    assert "0 of 1 task(s) valid, 0 invalid" in res.stdout


def test_checks_put_the_session_interpreter_first_on_path() -> None:
    """The folder put first on a check's PATH is the one of the running interpreter."""
    from pytest_agentrace.run.checks import clean_env, session_bin

    assert session_bin() == os.path.dirname(os.path.abspath(sys.executable))
    assert clean_env({"PATH": "/opt/x/bin"})["PATH"].split(os.pathsep) == [session_bin(), "/opt/x/bin"]


FAKER = r"""#!/usr/bin/env python3
import os
line, code = os.environ["FAKE"].split("|")
open("calc.py", "w").write(
    "import os, sys\n"
    f"sys.stderr.write({line!r} + '\\n')\n"
    f"os._exit({code})\n")
"""


@pytest.mark.parametrize(("test_command", "fake"), [
    ("python -m pytest -q test_calc.py", "/usr/bin/python: No module named pytest|1"),
    ("python -m pytest -q test_calc.py", "sh: 1: pytest: not found|127"),
    ("pytest -q test_calc.py", "sh: 1: pytest: not found|127"),
    ("pytest -q test_calc.py", "bash: pytest: command not found|126"),
    ("python -m pytest -q test_calc.py", "zzz-helper: not found|127"),  # a tool nobody has: the command runs none
    ("python -m pytest -q test_calc.py", "test_calc.py: not found|1"),  # an argument of the command, no program
], ids=["no-module", "not-found-127-python-m", "not-found-127", "command-not-found-126", "made-up-127", "argument-1"])
def test_code_that_prints_a_missing_tool_is_the_agents_failure(pytester: pytest.Pytester, test_command: str,
                                                                fake: str) -> None:
    """The agent's code, run by the tests check, prints a missing tool's signs and exits: the harness looks for the
    tool itself, finds it, and the run is ``failed`` (an ``error`` run is never counted: a failing agent would have
    left its failures out of its pass rate)."""
    make_repo(pytester.path / "repo", BUGGY_REPO)
    faker = pytester.path / "faker.py"
    faker.write_text(FAKER)
    faker.chmod(0o755)
    (pytester.path / "task.yaml").write_text(
        f"name: fake\ndescription: fix add\nrepo: repo\ntest_command: {test_command}\n"
        f"env: {{FAKE: {json.dumps(fake)}}}\nagents:\n  - {{name: faker, command: '{faker}'}}\n")
    pytester.runpytest("--agentrace", "task.yaml", "--agentrace-out", "out", "--agentrace-no-save", "-p", "no:cacheprovider")
    rec = record(pytester)
    assert rec["status"] == "failed", (rec["status"], rec["reason"])
    assert rec["checks"]["tests"]["missing"] is None


def test_the_harness_look_for_a_tool_shares_the_checks_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``tool_present``'s look is given what the check left of its timeout, not a limit of its own; a tool missing
    for real is still found missing (the look ran to its end)."""
    from pytest_agentrace.run import checks

    calls = []
    real = checks.process.run

    def counted(argv, **kwargs):  # the real run, its timeout noted
        res = real(argv, **kwargs)
        calls.append((kwargs["timeout"], res))
        return res

    monkeypatch.setattr(checks.process, "run", counted)
    command = f"{sys.executable} -m agentrace_no_such_module_here"
    result = checks.run_check("tests", command, tmp_path, {"PATH": os.environ["PATH"]}, 20.0, tmp_path / "tests.log")
    assert result.missing == "agentrace_no_such_module_here"
    (check_timeout, check_res), (look_timeout, look) = calls
    assert check_timeout == 20.0 and look_timeout == 20.0 - check_res.seconds
    assert look.exit_code == 3  # find_spec found nothing


def test_with_no_time_left_the_tool_is_not_confirmed_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A check whose code spent its whole timeout before printing a missing tool leaves no time to look: the tool is
    not confirmed missing, so the check's failure stays the change's (an ``error`` is never counted)."""
    from pytest_agentrace.run import checks

    command, tool, env = f"{sys.executable} -m agentrace_no_such_module_here", "agentrace_no_such_module_here", \
        {"PATH": os.environ["PATH"]}
    assert checks.tool_present(command, tool, tmp_path, env) is False  # with time, the look finds it missing
    looked = []
    monkeypatch.setattr(checks.process, "run", lambda *a, **k: looked.append(a))
    assert checks.tool_present(command, tool, tmp_path, env, timeout=0.0) is True
    assert checks.tool_present(command, tool, tmp_path, env, timeout=-1.5) is True
    assert looked == []


def test_a_missing_tool_is_one_the_command_runs() -> None:
    """The programs a check command runs: each simple command's first word (assignments skipped, a wrapper's next
    word too); only such a name, printed as not found, can be a missing tool."""
    from pytest_agentrace.run.checks import _programs, missing_tool

    assert _programs("cd sub && FOO=1 make test | tee log; timeout 30 npm test || nice -n 5 ./gradlew") == {
        "cd", "make", "tee", "timeout", "npm", "nice", "./gradlew"}
    assert _programs("python -m pytest -q test_calc.py") == {"python"}
    assert missing_tool("ruff check .", 127, "sh: 1: ruff: not found") == "ruff"
    assert missing_tool("python -m pytest -q", 127, "zzz-helper: not found") is None
    assert missing_tool("python -m pytest -q test_calc.py", 1, "test_calc.py: not found") is None
    assert missing_tool("make test", 2, "make: not found") == "make"
