"""The Harbor task judge: a Harbor task folder's run in Harbor's layout, without Docker (``spec.harbor`` loads it).

The run's sandbox gives the paths Harbor's containers have (``run.sandbox.Mount``):

- the agent: the workspace (an empty repository) at the task's workdir (``/app``), ``/logs/agent`` writable, and for
  the ``oracle`` a copy of ``solution/`` at ``/solution`` (it runs ``bash /solution/solve.sh``);
- the verifier, after the agent: the workspace at ``/app``, a fresh copy of ``tests/`` at ``/tests``, an empty
  ``/logs/verifier`` (and ``/logs/agent``); ``cd /app && bash /tests/test.sh`` runs with ``[verifier] env`` within
  ``[verifier] timeout_sec``.

The reward is the verify result, read as Harbor's verifier reads it: ``/logs/verifier/reward.json`` (a number, or
``{name: number}``) when present, else ``reward.txt`` (one number). The run passes when the reward is 1 (every
value 1 for a mapping); any other number fails it, and ``extra.reward`` / ``extra.rewards`` record the numbers. No
reward file, or one that is no finite number, fails the run with the reason. ``test.sh``'s own exit code is kept in
``extra.verify_exit_code``; the ``verify`` check's exit code is 0 exactly when the reward passed. The environment's
Dockerfile is not built: the box holds this host's toolchain, which ``extra.harbor`` says (and the session's summary,
once per task).
"""

from __future__ import annotations

import math
import os
import shutil
import stat
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from pytest_agentrace import fstree, untrusted
from pytest_agentrace.record.model import Usage
from pytest_agentrace.run.checks import run_check
from pytest_agentrace.run.judge import Judgement
from pytest_agentrace.run.sandbox import Mount
from pytest_agentrace.run.task import TaskJudge

AGENT_LOGS, VERIFIER_LOGS, TESTS, SOLUTION = "/logs/agent", "/logs/verifier", "/tests", "/solution"
REWARD_LIMIT = 65536  # bytes of a reward file read
SCRATCH = "harbor"  # the run's scratch folder of copies and logs (beside ws/, removed with it)
NEEDS_SANDBOX = ("a Harbor task needs the sandbox (bwrap) to show its workspace at /app, its tests at /tests and "
                 "/logs/verifier: run where bubblewrap works, without --agentrace-sandbox off")


class HarborJudge(TaskJudge):
    """The ``Judge`` of a Harbor task's run (``spec.spec.harbor`` is its ``spec.harbor.HarborLayout``)."""

    needs_sandbox = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        layout = self.layout = self.task.harbor
        note = {"folder": str(layout.folder), "workdir": layout.workdir, "environment": "host toolchain (not built)"}
        if layout.environment:
            note["differs"] = layout.environment
        if layout.keywords:
            note["keywords"] = list(layout.keywords)
        self.fields = {**self.fields, "has_verify": True, "extra": {"harbor": note}}

    def hidden(self) -> list[Path]:
        return [*super().hidden(), self.layout.folder]

    def mounts(self, phase: str, ws: Path) -> list[Mount]:
        """The run's Harbor paths for ``phase`` (``agent``: what the agent sees; ``checks``: what the verifier
        sees); makes their host folders under the run's scratch folder."""
        scratch = ws.parent / SCRATCH
        agent_logs = scratch / "logs" / "agent"
        agent_logs.mkdir(parents=True, exist_ok=True)
        found = [Mount(ws, self.layout.workdir, writable=True), Mount(agent_logs, AGENT_LOGS, writable=True)]
        if phase == "agent":
            if self.spec.agent.name == "oracle" and self.layout.solution is not None:
                copy = scratch / "solution"
                shutil.rmtree(copy, ignore_errors=True)
                shutil.copytree(self.layout.solution, copy, symlinks=True)
                found.append(Mount(copy, SOLUTION))
            return found
        for name in ("tests", "verifier"):
            (scratch / name).mkdir(parents=True, exist_ok=True)
        return [*found, Mount(scratch / "tests", TESTS, writable=True), Mount(scratch / "verifier", VERIFIER_LOGS,
                                                                              writable=True)]

    def judge(self, ws: Path, env: Mapping[str, str], run_dir: Path, secrets: list[str], usage: Usage) -> Judgement:
        """Copy ``tests/`` in fresh, empty ``/logs/verifier``, run ``tests/test.sh`` from the workdir (the run's clean
        tree, which the checks' mounts put there), read the reward."""
        scratch = ws.parent / SCRATCH
        for name in ("tests", "verifier"):  # the same host folders the checks' mounts name: emptied, not replaced
            folder = scratch / name
            folder.mkdir(parents=True, exist_ok=True)
            for entry in folder.iterdir():
                fstree.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
        shutil.copytree(self.layout.tests, scratch / "tests", symlinks=True, dirs_exist_ok=True)
        command = f"cd {self.layout.workdir} && {self.task.verify_command}"
        tree = self.check_tree() if self.tree is not None else ws  # the clean tree (run.cleantree), mounted at /app
        res = run_check("verify", command, tree, {**env, **self.layout.verifier_env}, self.layout.verify_timeout,
                        run_dir / "verify.log", secrets, self.box, self.limits)
        reward, rewards, problem = read_reward(scratch / "verifier")
        passed = problem is None and (all(v == 1 for v in rewards.values()) if rewards else reward == 1)
        extra: dict[str, Any] = {"verify_exit_code": res.exit_code, "reward": reward}
        if rewards:
            extra["rewards"] = rewards
        if problem:
            extra["reward_problem"] = problem
        checks = {"verify": replace(res, exit_code=0 if passed else (res.exit_code or 1))}
        if res.missing or res.limit or res.timed_out:
            failure = f"verify failed ({res.why})"
        elif problem:
            failure = f"verify failed: {problem}"
        else:
            failure = None if passed else f"verify failed (reward {_number(reward, rewards)})"
        return Judgement(checks, failure, {"extra": extra})


def _number(reward: float | None, rewards: dict[str, float] | None) -> str:
    if rewards and reward is None:
        return ", ".join(f"{k} {v:g}" for k, v in rewards.items())
    return f"{reward:g}" if reward is not None else "none"


def read_reward(folder: Path) -> tuple[float | None, dict[str, float] | None, str | None]:
    """``(reward, rewards, problem)`` from ``folder`` (the run's ``/logs/verifier``), as Harbor's verifier reads it:
    ``reward.json`` first (a number, or a mapping of names to numbers: ``rewards``, and ``reward`` its ``reward``
    key or its only value), else ``reward.txt`` (one number). ``problem`` says why there is no reward (no file, a
    link, too large, not a finite number). The files were written by code the agent could change: opened without
    following links, regular files only, at most ``REWARD_LIMIT`` bytes."""
    for name in ("reward.json", "reward.txt"):
        path = folder / name
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            continue
        except OSError as exc:
            return None, None, f"/logs/verifier/{name} cannot be read ({exc.strerror})"
        with os.fdopen(fd, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
                return None, None, f"/logs/verifier/{name} is not a regular file"
            data = fh.read(REWARD_LIMIT + 1)
        if len(data) > REWARD_LIMIT:
            return None, None, f"/logs/verifier/{name} is larger than {REWARD_LIMIT} bytes"
        text = data.decode("utf-8", "replace").strip()
        if name == "reward.txt":
            try:
                value = float(text)
            except ValueError:
                return None, None, f"/logs/verifier/reward.txt holds {text[:40]!r}, not a number"
            return (value, None, None) if math.isfinite(value) else (None, None, "reward.txt: not a finite number")
        try:
            value = untrusted.loads(text)
        except ValueError:
            return None, None, "/logs/verifier/reward.json is not valid JSON"
        values = value if isinstance(value, dict) else {"reward": value}
        if not values or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                                 for v in values.values()):
            return None, None, "/logs/verifier/reward.json holds no finite number(s)"
        rewards = {str(k): float(v) for k, v in values.items()}
        reward = rewards.get("reward", next(iter(rewards.values())) if len(rewards) == 1 else None)
        return reward, (rewards if isinstance(value, dict) else None), None
    return None, None, "no reward: tests/test.sh wrote neither /logs/verifier/reward.txt nor reward.json"
