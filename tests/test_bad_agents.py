"""Agents that crash, flood output or print garbage are recorded as such; nothing else is lost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import BUGGY_REPO, FIXER, make_repo, write_script

from pytest_agentrace.run.sandbox import probe


def test_bad_agents_never_break_the_session(pytester: pytest.Pytester, bin_dir: Path, xdist: list[str]) -> None:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "fixer", FIXER)
    write_script(bin_dir / "crasher", "raise RuntimeError('agent blew up')\n")
    write_script(bin_dir / "segfaulter", "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    write_script(bin_dir / "flooder", "import sys\nfor _ in range(40):\n    sys.stdout.write('y' * 1_000_000)\n")
    write_script(bin_dir / "garbler", "import sys, os\nsys.stdout.buffer.write(os.urandom(20000))\n")
    agents = ", ".join(f"{{name: {n}, command: {n}}}" for n in ("fixer", "crasher", "flooder", "garbler", "segfaulter"))
    (pytester.path / "task.yaml").write_text(
        f"name: t\ndescription: fix add\nrepo: repo\ntest_command: python -m pytest -q test_calc.py\nagents: [{agents}]\n"
    )
    res = pytester.runpytest("--agentrace", "--agentrace-out", "o", *xdist)
    res.assert_outcomes(passed=1, failed=4)
    runs = {p.parts[-3]: json.loads(p.read_text()) for p in (pytester.path / "o").glob("runs/t/default/*/1/run.json")}
    assert sorted(runs) == ["crasher", "fixer", "flooder", "garbler", "segfaulter"]
    assert runs["segfaulter"]["exit_code"] == -11 and runs["segfaulter"]["reason"] == "tests failed (exit 1); agent crashed (SIGSEGV)"
    assert runs["crasher"]["exit_code"] == 1 and runs["crasher"]["status"] == "failed"
    assert "agent blew up" in (pytester.path / "o/runs/t/default/crasher/1/raw.err").read_text()
    flood_out = (pytester.path / "o/runs/t/default/flooder/1/raw.out").read_text()
    assert len(flood_out) < 11 * 1024 * 1024
    assert "\n[agentrace: output cut here: 29514240 of 40000000 bytes dropped, kept the first 8388608 and the last 2097152]\n" in flood_out
    assert "raw.out cut: 29,514,240 of 40,000,000 bytes dropped from the middle" in runs["flooder"]["usage"]["parse_warnings"][-1]
    assert runs["flooder"]["extra"]["output_bytes"] == {"stdout": 40_000_000, "stderr": 0}  # all it printed
    assert runs["garbler"]["extra"]["output_bytes"] == {"stdout": 20000, "stderr": 0}
    assert runs["garbler"]["status"] == "failed"
    assert runs["fixer"]["status"] == "passed"


@pytest.mark.parametrize("sandbox", ["off", pytest.param("bwrap", marks=pytest.mark.skipif(
    probe()[0] is None, reason=f"no sandbox here: {probe()[1]}"))])
def test_prompt_file_and_model_placeholders(pytester: pytest.Pytester, bin_dir: Path, sandbox: str) -> None:
    """``{prompt_file}`` names a file with the exact prompt (a key-shaped word in it too, as ``{prompt}`` gives it),
    outside the results folder; the record's ``prompt.txt`` has the key redacted."""
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "echoer", """\
        import json, pathlib, sys
        pathlib.Path("calc.py").write_text("def add(a, b):\\n    return a + b\\n")
        print(json.dumps(sys.argv[1:]))
        print("same" if pathlib.Path(sys.argv[2]).read_text() == sys.argv[1] else "differs")
    """)
    key = "sk-ant-api03-" + "k" * 93 + "AA"
    (pytester.path / "task.yaml").write_text(
        f"name: t\ndescription: the prompt text {key}\nrepo: repo\ntest_command: python -m pytest -q test_calc.py\n"
        "env: {TASK_VAR: from-task}\n"
        "agents: [{name: echoer, command: 'echoer {prompt} {prompt_file} --model={model}', model: m-1}]\n"
    )
    res = pytester.runpytest("--agentrace", "--agentrace-out", "o", "--agentrace-sandbox", sandbox)
    res.assert_outcomes(passed=1)
    run_dir = pytester.path / "o/runs/t/default/echoer:m-1/1"
    out = (run_dir / "raw.out").read_text().splitlines()
    argv = json.loads(out[0])
    assert argv[0] == "the prompt text <redacted>" and argv[1].endswith("prompt.txt") and argv[2] == "--model=m-1"
    assert not argv[1].startswith(str(pytester.path / "o"))  # the agent's input is not the record
    assert out[1] == "same"
    assert (run_dir / "prompt.txt").read_text() == "the prompt text <redacted>"


def test_task_env_reaches_the_agent_and_pytest_vars_do_not(pytester: pytest.Pytester, bin_dir: Path) -> None:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "envy", """\
        import os, sys
        assert os.environ["TASK_VAR"] == "from-task", os.environ.get("TASK_VAR")
        assert os.environ["AGENT_VAR"] == "from-agent"
        assert not [k for k in os.environ if k.startswith("PYTEST_")], [k for k in os.environ if k.startswith("PYTEST_")]
        open("calc.py", "w").write("def add(a, b):\\n    return a + b\\n")
    """)
    (pytester.path / "task.yaml").write_text(
        "name: t\ndescription: d\nrepo: repo\ntest_command: python -m pytest -q test_calc.py\n"
        "env: {TASK_VAR: from-task}\nagents: [{name: envy, command: envy, env: {AGENT_VAR: from-agent}}]\n"
    )
    pytester.runpytest("--agentrace").assert_outcomes(passed=1)


def test_missing_custom_path_is_an_error_and_bad_shebang_is_not_scored(pytester: pytest.Pytester, bin_dir: Path, xdist: list[str]) -> None:
    """A custom command naming a path that does not exist is a configuration error of the item (not a skip like a
    CLI that is not installed, and no run.json); a script whose #! names a missing interpreter is an ``error`` run
    (never scored) whose reason says so; the other agents' runs are kept."""
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "fixer", FIXER)
    (pytester.path / "bots").mkdir()
    bad = pytester.path / "bots" / "shebang"
    bad.write_text("#!/no/such/interpreter\nprint('hi')\n")
    bad.chmod(0o755)
    (pytester.path / "bots" / "plain").write_text("print('not executable')\n")
    agents = "{name: fixer, command: fixer}, {name: typo, command: ./bots/fixr}, {name: shebang, command: ./bots/shebang}, " \
             "{name: plain, command: ./bots/plain}, {name: notinstalled, command: no-such-agent-cli}"
    (pytester.path / "task.yaml").write_text(
        f"name: t\ndescription: fix add\nrepo: repo\ntest_command: python -m pytest -q test_calc.py\nagents: [{agents}]\n"
    )
    res = pytester.runpytest("--agentrace", "--agentrace-out", "o", "-rsE", *xdist)
    res.assert_outcomes(passed=1, errors=3, skipped=1)
    out = res.stdout.str()
    typo = str((pytester.path / "bots" / "fixr").resolve())
    assert f"task.yaml: key 'agents' (agent 'typo'): command './bots/fixr' does not exist: {typo}" in out
    assert "(agent 'plain'): command './bots/plain' is not executable (chmod +x it)" in out
    assert "its #! interpreter line names a program that is missing" in out
    assert "agent 'notinstalled' not found on PATH" in out
    runs = {p.parts[-3]: json.loads(p.read_text()) for p in (pytester.path / "o").glob("runs/t/default/*/1/run.json")}
    assert sorted(runs) == ["fixer", "shebang"]
    assert runs["shebang"]["status"] == "error" and "interpreter line" in runs["shebang"]["reason"]
    assert runs["fixer"]["status"] == "passed"
