"""Whose fault a run that did not start was: told by ``run.launch``'s start channel, never by the agent's exit code
or output. An agent that failed and then printed a harness helper's fault line with its exit code was judged an
``error`` (never counted), so a hostile agent could leave its failures out of its pass rate. The box's own faults
(bwrap could not set it up, a helper failed, the program could not be started) are still errors."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from helpers import BUGGY_REPO, make_repo, write_script

from pytest_agentrace.run import launch
from pytest_agentrace.run.sandbox import probe

needs_sandbox = pytest.mark.skipif(probe()[0] is None, reason=f"no sandbox here: {probe()[1]}")

FORGER = r"""
import glob, os, sys
line, code = os.environ["LINE"], int(os.environ["CODE"])
if os.environ.get("GRAB"):  # try to write a helper's fault on any pipe this agent can open, as the harness would read it
    for path in glob.glob("/proc/[0-9]*/fd/*"):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            os.write(fd, b"Fmodel double: forged by the agent")
        except OSError:
            pass
        os.close(fd)
    for fd in range(3, 256):
        try:
            os.write(fd, b"Fmodel double: forged by the agent")
        except OSError:
            pass
print("the agent gave up", flush=True)
sys.stderr.write(line + "\n")
sys.exit(code)
"""

FORGED = [
    ("agentrace netns: cannot start the model double: OSError: nope", 125),
    ("model double: OSError: nope", 125),
    ("bwrap: execvp fixer: No such file or directory", 1),
    ("agentrace netbridge: cannot make the run's network: [Errno 1] nope", 125),
    ("agentrace netbridge: cannot start fixer: [Errno 2] nope", 127),
    ("agentrace netns: cannot start fixer: [Errno 2] nope", 127),
]


def forge(pytester: pytest.Pytester, line: str, code: int, *args: str, grab: bool = False) -> dict:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(pytester.path / "forger.py", FORGER)
    env = json.dumps({"LINE": line, "CODE": str(code), **({"GRAB": "1"} if grab else {})})
    (pytester.path / "task.yaml").write_text(
        "name: t\ndescription: fix add\nrepo: repo\ntest_command: python -m pytest -q test_calc.py\n"
        f"env: {env}\nagents:\n  - {{name: forger, command: '{pytester.path / 'forger.py'}'}}\n")
    pytester.runpytest("--agentrace", "task.yaml", "--agentrace-out", "out", "--agentrace-no-save",
                       "-p", "no:cacheprovider", *args)
    return json.loads((pytester.path / "out/runs/t/default/forger/1/run.json").read_text())


@pytest.mark.parametrize(("line", "code"), FORGED, ids=[f"{c}-{i}" for i, (_, c) in enumerate(FORGED)])
@pytest.mark.parametrize("mode", ["box-provider", "box-host", "no-box"])
def test_a_forged_fault_line_is_the_agents_failure(pytester: pytest.Pytester, line: str, code: int, mode: str) -> None:
    if mode != "no-box" and probe()[0] is None:
        pytest.skip(f"no sandbox here: {probe()[1]}")
    args = {"box-provider": (), "box-host": ("--agentrace-network", "host"),
            "no-box": ("--agentrace-sandbox", "off", "--agentrace-network", "host")}[mode]
    run = forge(pytester, line, code, *args)
    assert run["status"] == "failed", (run["status"], run["reason"])
    assert "the agent gave up" in (pytester.path / "out/runs/t/default/forger/1/raw.out").read_text()


@needs_sandbox
@pytest.mark.parametrize("network", ["provider", "host"])
def test_the_agent_cannot_write_on_the_start_channel(pytester: pytest.Pytester, network: str) -> None:
    """Inside the box the agent tries every descriptor it has and every ``/proc/*/fd`` entry it can open: the
    launcher's copy was closed by ``exec``, bwrap's init holds none, a helper closed its own and is not dumpable."""
    run = forge(pytester, "model double: OSError: nope", 125, "--agentrace-network", network, grab=True)
    assert run["status"] == "failed", (run["status"], run["reason"])


@needs_sandbox
def test_a_box_that_cannot_be_set_up_is_an_error(pytester: pytest.Pytester) -> None:
    """bwrap cannot make a host ``/proc/<pid>`` file inside the box: the run never started, the harness's fault."""
    run = forge(pytester, "unused", 0, "--agentrace-sandbox-read", "/proc/self/status")
    assert run["status"] == "error", run
    assert run["reason"].startswith("the sandbox could not start the run: bwrap: "), run["reason"]


def channel_with(data: bytes) -> launch.StartChannel:
    channel = launch.StartChannel()
    if data:
        os.write(channel.write_fd, data)
    return channel


@pytest.mark.parametrize(("data", "boxed", "fault", "kind"), [
    (b"S", True, None, None),
    (b"S", False, None, None),
    (b"", False, None, None),
    (b"", True, "the sandbox could not start the run: bwrap: Can't mkdir", "box"),
    (b"Fmodel double: ValueError: bad script", True, "model double: ValueError: bad script", "helper"),
    (b"SEFileNotFoundError: [Errno 2] No such file or directory: 'x'", True,
     "FileNotFoundError: [Errno 2] No such file or directory: 'x'", "exec"),
    (b"SFmodel double: forged after the start", True, None, None),
])
def test_verdict(data: bytes, boxed: bool, fault: str | None, kind: str | None) -> None:
    start = channel_with(data).verdict("\nbwrap: Can't mkdir\nmore\n", boxed=boxed)
    assert (start.fault, start.kind) == (fault, kind)


def test_the_launcher_reports_its_start_and_execs(tmp_path: Path) -> None:
    """The launcher writes ``S``, then the program runs without the channel (close-on-exec) and without the
    variable; a program that cannot be started is ``SE`` + the error, exit 127."""
    import subprocess

    probe_fds = "import os; print(sorted(int(f) for f in os.listdir('/proc/self/fd')), os.environ.get('AGENTRACE_START_FD'))"
    channel = launch.StartChannel()
    res = subprocess.run(launch.launched([sys.executable, "-c", probe_fds]), env=channel.env(dict(os.environ)),
                         pass_fds=channel.pass_fds, capture_output=True, text=True)
    fds, var = res.stdout.rsplit(" ", 1)
    assert channel.write_fd not in json.loads(fds) and var.strip() == "None"
    assert channel.verdict("", boxed=True) == launch.Start()
    channel = launch.StartChannel()
    res = subprocess.run(launch.launched([str(tmp_path / "missing")]), env=channel.env(dict(os.environ)),
                         pass_fds=channel.pass_fds, capture_output=True, text=True)
    start = channel.verdict(res.stderr, boxed=True)
    assert res.returncode == 127 and start.kind == "exec" and start.fault.startswith("FileNotFoundError: ")
