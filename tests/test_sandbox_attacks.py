"""Sealed runs: a battery of hostile agents, one test per attack, under the sandbox (serial and -n 2).

The agent is a custom command (``hostile``) that tries one attack, named by ``$ATTACK``, and prints what it got as
its answer. Each attack works against an unsandboxed run (``test_attacks_work_without_the_sandbox`` proves the agent
can do harm, so the sealed tests can fail); under the default sandbox every one fails, and the user's repo, HOME and
results are byte-identical afterwards.
"""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

import pytest
from helpers import BUGGY_REPO, git, make_repo, write_script

from pytest_agentrace.run.sandbox import probe

pytestmark = pytest.mark.skipif(probe()[0] is None, reason=f"no sandbox here: {probe()[1]}")

SECRET = "HIDDEN-VERIFY-SECRET-1234"

HOSTILE = r"""
import glob, json, os, socket, subprocess, sys
attack, target = os.environ["ATTACK"], os.environ.get("TARGET", "")
got = "nothing"
try:
    if attack == "read_task_file":
        got = open(target).read()
    elif attack == "read_earlier_run":
        hits = [p for p in glob.glob(target + "/**/test_hidden.py", recursive=True)]
        got = " ".join(open(p).read() for p in hits) or "nothing"
    elif attack == "read_home":
        got = open(target).read()
    elif attack in ("write_repo", "write_home", "write_results"):
        with open(target, "w") as fh:
            fh.write("pwned")
        got = "wrote"
    elif attack == "git_push":
        open("pwned.txt", "w").write("pwned")
        subprocess.run(["git", "add", "-A"], check=True)
        subprocess.run(["git", "-c", "user.name=x", "-c", "user.email=x@x", "commit", "-qm", "pwn"], check=True)
        res = subprocess.run(["git", "push", "-q", "origin", "HEAD:main"], capture_output=True, text=True)
        got = "pushed" if res.returncode == 0 else "push failed: " + res.stderr[-200:]
    elif attack == "network":
        host, port = target.split(":")
        with socket.create_connection((host, int(port)), timeout=3) as s:
            got = s.recv(100).decode()
except Exception as exc:
    got = f"failed: {type(exc).__name__}: {exc}"
print("RESULT " + json.dumps(got))
"""


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` with its bytes (``.git`` included)."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def project(pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """A task (hidden verify file with ``SECRET``) whose repo is a git repository beside it, a real HOME with a
    planted file, and the hostile agent."""
    repo = make_repo(pytester.path / "repo", BUGGY_REPO)
    home = tmp_path_factory.mktemp("realhome")
    (home / "planted.txt").write_text("PLANTED-HOME-SECRET")
    monkeypatch.setenv("HOME", str(home))
    write_script(pytester.path / "hostile.py", HOSTILE)
    return pytester, repo, home


def run_attack(pytester: pytest.Pytester, attack: str, target: str, xdist: list[str], *extra: str, reps: int = 1):
    (pytester.path / "task.yaml").write_text(
        "name: sealed\ndescription: fix add\nrepo: repo\ntest_command: python -m pytest -q test_calc.py\n"
        f"verify_command: python -m pytest -q test_hidden.py\nverify_files:\n  test_hidden.py: |\n    # {SECRET}\n"
        "    def test_x():\n        assert True\n"
        f"env: {{ATTACK: {attack}, TARGET: '{target}'}}\n"
        f"agents:\n  - {{name: hostile, command: '{pytester.path / 'hostile.py'}'}}\n")
    sandbox = [] if "--agentrace-sandbox" in extra else ["--agentrace-sandbox", "bwrap"]
    res = pytester.runpytest("--agentrace", "--agentrace-out", "out", "--agentrace-reps", str(reps), *sandbox, *extra, *xdist)
    outs = sorted((pytester.path / "out" / "runs").glob("sealed/default/hostile/*/raw.out"))
    results = [json.loads(line[len("RESULT "):]) for o in outs for line in o.read_text().splitlines() if line.startswith("RESULT ")]
    return res, results


def test_cannot_read_the_task_file(project, xdist) -> None:
    pytester, _, _ = project
    _, results = run_attack(pytester, "read_task_file", str(pytester.path / "task.yaml"), xdist)
    assert results and all(SECRET not in r and r.startswith("failed") for r in results)


def test_cannot_read_an_earlier_runs_hidden_files(project, xdist) -> None:
    pytester, _, _ = project
    res, results = run_attack(pytester, "read_earlier_run", "/tmp", xdist, reps=3)
    assert len(results) == 3 and all(SECRET not in r for r in results)
    assert not list((pytester.path).rglob("basetemp/**/ws")), "finished workspaces are deleted"


def test_cannot_read_the_real_home(project, xdist) -> None:
    pytester, _, home = project
    _, results = run_attack(pytester, "read_home", str(home / "planted.txt"), xdist)
    assert results and all("PLANTED" not in r for r in results)


def test_cannot_write_the_users_repo(project, xdist) -> None:
    pytester, repo, _ = project
    before = snapshot(repo)
    _, results = run_attack(pytester, "write_repo", str(repo / "calc.py"), xdist)
    assert results and all(r.startswith("failed") for r in results)
    assert snapshot(repo) == before


def test_cannot_write_the_real_home(project, xdist) -> None:
    pytester, _, home = project
    before = snapshot(home)
    _, results = run_attack(pytester, "write_home", str(home / "pwned.txt"), xdist)
    assert results and all(r.startswith("failed") for r in results)
    assert snapshot(home) == before


def test_cannot_write_another_runs_results(project, xdist) -> None:
    pytester, _, _ = project
    other = pytester.path / "out" / "runs" / "other" / "default" / "x" / "1"
    other.mkdir(parents=True)
    (other / "run.json").write_text("{}")
    before = snapshot(pytester.path / "out" / "runs" / "other")
    _, results = run_attack(pytester, "write_results", str(other / "run.json"), xdist)
    assert results and all(r.startswith("failed") for r in results)
    assert snapshot(pytester.path / "out" / "runs" / "other") == before


def test_cannot_push_to_origin(project, xdist) -> None:
    pytester, repo, _ = project
    before = git(repo, "rev-parse", "HEAD")
    _, results = run_attack(pytester, "git_push", "", xdist)
    assert results and all(r != "pushed" for r in results)
    assert git(repo, "rev-parse", "HEAD") == before


def test_cannot_reach_the_network_offline(project, xdist) -> None:
    """A server on the host's loopback stands for "the network": under --agentrace-offline the agent's namespace has
    a loopback of its own, so the host's is out of reach."""
    pytester, _, _ = project
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def serve() -> None:
        server.settimeout(30)
        try:
            while True:
                conn, _ = server.accept()
                conn.sendall(b"REACHED")
                conn.close()
        except OSError:
            return

    threading.Thread(target=serve, daemon=True).start()
    try:
        _, results = run_attack(pytester, "network", f"127.0.0.1:{port}", xdist, "--agentrace-offline")
        assert results and all(r != "REACHED" and r.startswith("failed") for r in results)
    finally:
        server.close()


def test_an_agent_script_in_the_projects_bin_folder_does_not_show_the_project(project) -> None:
    """A custom command at ``<project>/bin/hostile``: its install prefix would be the project folder (the rule for
    venvs and npm prefixes); the sandbox shows the script, not the task file beside ``bin``."""
    pytester, _, _ = project
    (pytester.path / "bin").mkdir()
    write_script(pytester.path / "bin" / "hostile", HOSTILE)
    (pytester.path / "hostile.py").unlink()
    (pytester.path / "hostile.py").symlink_to(pytester.path / "bin" / "hostile")
    _, results = run_attack(pytester, "read_task_file", str(pytester.path / "task.yaml"), [])
    assert results and all(SECRET not in r and r.startswith("failed") for r in results)


@pytest.mark.parametrize("attack", ["read_task_file", "read_home", "write_home"])
def test_attacks_work_without_the_sandbox(project, attack) -> None:
    """The same agent, with --agentrace-sandbox off: each attack succeeds (so the tests above can fail)."""
    pytester, _, home = project
    target = {"read_task_file": str(pytester.path / "task.yaml"), "read_home": str(home / "planted.txt"),
              "write_home": str(home / "pwned.txt")}[attack]
    _, results = run_attack(pytester, attack, target, [], "--agentrace-sandbox", "off")
    assert results and not results[0].startswith("failed")
    if attack == "write_home":
        assert (home / "pwned.txt").read_text() == "pwned"
