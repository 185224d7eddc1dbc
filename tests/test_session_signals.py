"""Clean processes: SIGTERM or SIGINT to a session, serial or ``-n 2``, sandbox on or off, leaves no agent process
alive once the session has exited, also when the session was started with SIGINT ignored (``nohup ... &``).

Every agent gets a marker in its environment (``AGENT_MARK``, a fresh id per test); after the session's exit every
process on the machine whose environment holds it is a survivor (psutil reads ``/proc/<pid>/environ``: agents,
their children, a detached grandchild, bwrap). The signal goes to the controller only (the worst case: its xdist
workers get nothing from the terminal)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import psutil
import pytest
from helpers import BUGGY_REPO, WAIT_SECONDS, make_repo, wait_for, write_script

# an agent that starts a child in its group and a grandchild in a session of its own, then blocks
BLOCKER = """\
import os, subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(900)"])
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(900)"], start_new_session=True)
time.sleep(900)
"""


def marked(mark: str) -> list[tuple[psutil.Process, str]]:
    """Live processes whose environment holds ``AGENT_MARK=mark``, with their command lines."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get("AGENT_MARK") == mark and proc.status() != psutil.STATUS_ZOMBIE:
                found.append((proc, " ".join(proc.cmdline())))
        except (psutil.Error, OSError):
            continue
    return found



def project(root: Path, bin_dir: Path, mark: str) -> None:
    make_repo(root / "repo", BUGGY_REPO)
    write_script(bin_dir / "blocker", BLOCKER)
    (root / "task.yaml").write_text(
        "name: t\ndescription: fix add\nrepo: repo\ntest_command: python -m pytest -q test_calc.py\ntimeout: 900\n"
        f"agents: [{{name: blocker, command: blocker, env: {{AGENT_MARK: {mark}}}}}]\n")


def ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # what `nohup cmd &` from a script gives the session


def default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # this suite may itself run with SIGINT ignored


CASES = [pytest.param(sig, xdist, sandbox, id=f"{sig.name}-{'n2' if xdist else 'serial'}-sandbox-{sandbox}")
         for sig in (signal.SIGTERM, signal.SIGINT) for xdist in ((), ("-p", "xdist", "-n", "2")) for sandbox in ("auto", "off")]


@pytest.mark.parametrize(("sig", "xdist", "sandbox"), CASES)
def test_no_agent_outlives_a_signalled_session(tmp_path: Path, bin_dir: Path, sig: signal.Signals, xdist: tuple,
                                               sandbox: str) -> None:
    interrupt(tmp_path, bin_dir, sig, xdist, sandbox, default_sigint)


@pytest.mark.parametrize("xdist", [(), ("-p", "xdist", "-n", "2")], ids=["serial", "n2"])
def test_no_agent_outlives_a_backgrounded_session_given_sigterm(tmp_path: Path, bin_dir: Path, xdist: tuple) -> None:
    """Started as ``nohup pytest ... &`` does (SIGINT ignored, inherited by the workers and agents): SIGTERM still
    ends it with no survivor."""
    interrupt(tmp_path, bin_dir, signal.SIGTERM, xdist, "off", ignore_sigint)


def interrupt(tmp_path: Path, bin_dir: Path, sig: signal.Signals, xdist: tuple, sandbox: str, preexec) -> None:
    mark = uuid.uuid4().hex
    project(tmp_path, bin_dir, mark)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_CORE_"))}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "--agentrace", "--agentrace-out", "out", "--agentrace-sandbox", sandbox,
         "--agentrace-reps", "4", "-p", "no:cacheprovider", "-p", "no:randomly", *xdist],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        preexec_fn=preexec)
    agents = 2 if xdist else 1
    try:  # each agent: itself, its child and its detached grandchild (+ bwrap's processes in the sandbox)
        wait_for(lambda: len([p for p, line in marked(mark) if "time.sleep(900)" in line]) >= 2 * agents,
                 f"{agents} blocked agent(s) with their descendants")
        proc.send_signal(sig)
        stdout, _ = proc.communicate(timeout=WAIT_SECONDS)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    survivors = marked(mark)
    for p, _line in survivors:  # never left running for the next test
        try:
            p.kill()
        except psutil.Error:
            pass
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, stdout[-3000:]
    assert not survivors, ([(p.pid, p.ppid(), line) for p, line in survivors], stdout[-3000:])
