"""Issue 4: a session interrupted halfway (SIGINT / SIGTERM to a real pytest subprocess) keeps every finished run,
leaves no half-written run.json and no agent process behind; ``--agentrace-resume`` then runs only the missing
items and the final results equal those of an uninterrupted session. Serial and under ``-n 2``."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import WAIT_SECONDS, wait_for
from helpers.trial import agent_logs, make_project, runs, trial_rows, trial_toml

# the blocking bot (helpers.trial BOT_WAIT_FOR) waits on files beside the results folder, which the sandbox hides; the
# sandbox itself is tested in test_sandbox_attacks.py, resume in it in test_resume.py
NO_SANDBOX = ("--agentrace-sandbox", "off")


def env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_CORE_"))}


def default_sigint() -> None:
    """In the started session (before exec): SIGINT's default disposition, so the session installs Python's Ctrl-C
    handler even when this suite was started with SIGINT ignored (``nohup ... &``), which children inherit."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start(project: Path, out: str, *args: str, sandbox: tuple[str, ...] = NO_SANDBOX,
          preexec=default_sigint) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "--agentrace", "--agentrace-out", out, *sandbox, "-p", "no:cacheprovider", "-p", "no:randomly", *args],
        cwd=project, env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        preexec_fn=preexec,
    )



def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def project(tmp_path: Path) -> Path:
    """The ports trial (2 arms x 3 reps); every docs run blocks in its agent until ``gate`` exists."""
    make_project(tmp_path)
    (tmp_path / "docs" / "WAIT").write_text("")
    agent = 'env = { BOT_WAIT_FOR = "gate", BOT_WAITING = "waiting" }'  # relative: the same file in every project
    (tmp_path / "trial.toml").write_text(trial_toml(reps=3, agent=agent))
    return tmp_path


def view(records: dict[str, dict]) -> dict[str, tuple]:
    """What a run measured, without what differs between sessions (times, session id, paths, reused)."""
    return {
        k: (r["status"], r["reason"], r["exit_code"], r["usage"]["answer"], json_key(r["answer_score"]), r["claim"], r["used_tool"],
            tuple(sorted((n, c["passed"]) for n, c in r["checks"].items())), r["lines_changed"], r["content_hash"])
        for k, r in records.items()
    }


def json_key(d):
    return tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in (d or {}).items()))


def interrupt_then_resume(tmp_path: Path, xdist: list[str], sig: int, group: bool) -> tuple[subprocess.CompletedProcess, Path, int]:
    root = project(tmp_path)
    out = root / "out"
    proc = start(root, "out", *xdist)
    try:
        wait_for(lambda: (root / "waiting").exists() and len(list(out.glob("runs/**/run.json"))) >= (3 if not xdist else 1), "a blocked docs run")
        (os.killpg if group else os.kill)(proc.pid, sig)
        stdout, _ = proc.communicate(timeout=WAIT_SECONDS)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == pytest.ExitCode.INTERRUPTED, stdout
    assert "KeyboardInterrupt" in stdout or "Interrupted" in stdout, stdout
    pids = [int(x) for x in (root / "waiting").read_text().split()]
    wait_for(lambda: not any(alive(pid) for pid in pids), f"the blocked agents {pids} to be gone")
    # no half-written record, no temp file left by the atomic writer (safefile.TEMP_PREFIX; .run.json.* before)
    assert not list(out.glob("runs/**/.run.json.*")) and not list(out.glob("**/.agentrace-tmp.*"))
    first = runs(out)
    assert 1 <= len(first) < 6
    assert all(r["status"] in ("passed", "failed") for r in first.values())
    seen_before = {p.name for p in (out / "agent-log").glob("*.json")}
    (root / "gate").write_text("")
    resumed = subprocess.run(
        [sys.executable, "-m", "pytest", "--agentrace", "--agentrace-out", "out", *NO_SANDBOX, "-p", "no:cacheprovider", "--agentrace-resume", *xdist],
        cwd=root, env=env(), capture_output=True, text=True, timeout=600, check=False,
    )
    assert resumed.returncode == pytest.ExitCode.TESTS_FAILED, resumed.stdout  # the baseline runs answer wrong
    new_runs = sorted(
        f'trial:port/{log["env"]["TRIAL_ARM"]}/bot/r{log["env"]["TRIAL_REP"]}'
        for log in agent_logs(out) if f'{log["env"]["TRIAL_ID"]}.json' not in seen_before
    )
    all_ids = [f"trial:port/{arm}/bot/r{r}" for arm in ("baseline", "docs") for r in (1, 2, 3)]
    assert new_runs == sorted(set(all_ids) - set(first)), "resume must run exactly the missing items"
    final = runs(out)
    assert {k: final[k] for k in first} == first  # finished runs untouched
    return resumed, out, len(first)


def uninterrupted(tmp_path: Path) -> dict[str, dict]:
    root = project(tmp_path)
    (root / "gate").write_text("")
    subprocess.run([sys.executable, "-m", "pytest", "--agentrace", "--agentrace-out", "out", *NO_SANDBOX, "-p", "no:cacheprovider"], cwd=root, env=env(), capture_output=True, timeout=600, check=False)
    return runs(root / "out")


def test_sigint_then_resume_equals_uninterrupted(tmp_path: Path, xdist: list[str]) -> None:
    # serial: SIGINT to pytest itself (kill -INT); -n 2: to the whole process group, like Ctrl-C in a terminal
    resumed, out, finished = interrupt_then_resume(tmp_path / "a", xdist, signal.SIGINT, group=bool(xdist))
    reference = uninterrupted(tmp_path / "b")
    assert len(reference) == 6
    assert view(runs(out)) == view(reference)
    # the trial table's Runs column says, per cell, how many runs were reported from the first session
    reused = [int(m.group(1)) for row in trial_rows(resumed.stdout) if (m := re.search(r"\((\d+) reused\)", row[3]))]
    assert sum(reused) == finished


def test_serial_sigint_keeps_exactly_the_finished_runs(tmp_path: Path) -> None:
    root = project(tmp_path)
    proc = start(root, "out")
    try:
        wait_for(lambda: (root / "waiting").exists(), "the first docs run to block")
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=WAIT_SECONDS)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert sorted(runs(root / "out")) == [f"trial:port/baseline/bot/r{r}" for r in (1, 2, 3)]
    interrupted = root / "out/runs/port/docs/bot/1"
    assert (interrupted / "prompt.txt").exists() and not (interrupted / "run.json").exists()


def test_sigterm_stops_cleanly_like_ctrl_c(tmp_path: Path, xdist: list[str]) -> None:
    """SIGTERM to the controller only: it stops like Ctrl-C (exit 2, summary), the agent is terminated."""
    _resumed, out, _finished = interrupt_then_resume(tmp_path, xdist, signal.SIGTERM, group=False)
    assert len(runs(out)) == 6
