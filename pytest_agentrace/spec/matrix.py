"""Expand tasks (and trials) into ``RunSpec``s with stable ids.

A RunSpec id is ``"<kind>:<case>/<arm>/<agent>/r<rep>"``; it keys outcomes, result folders and resume,
never the pytest node id (pytest-xdist may rewrite those).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_agentrace.spec.common import AgentSpec
from pytest_agentrace.spec.harbor import harbor_agent

DEFAULT_ARM = "default"


@dataclass(frozen=True)
class RunSpec:
    """One run: ``case`` x ``arm`` x ``agent`` x ``rep`` (rep counts from 1).

    ``spec`` is the loaded Task (or the trial); ``case_obj`` what the agent is asked (Task or question).
    ``timeout`` is seconds per command.
    """

    kind: str
    source: Path
    case: str
    arm: str
    agent: AgentSpec
    rep: int
    timeout: float
    spec: Any
    case_obj: Any

    @property
    def id(self) -> str:
        return f"{self.kind}:{self.case}/{self.arm}/{self.agent.id}/r{self.rep}"

    @property
    def param_ids(self) -> tuple[str, ...]:
        """The parts of the pytest item's parameter id, as pytest's ``parametrize`` ids: ``(agent, "rN")`` for
        tasks, ``(arm, agent, "rN")`` for trials (joined with ``-`` inside the name's brackets)."""
        if self.kind == "task":
            return (self.agent.id, f"r{self.rep}")
        return (self.arm, self.agent.id, f"r{self.rep}")

    @property
    def item_name(self) -> str:
        """pytest item name: ``case[agent-rN]`` for tasks, ``case[arm-agent-rN]`` for trials."""
        return f"{self.case}[{'-'.join(self.param_ids)}]"

    def run_dir(self, out: Path) -> Path:
        """``<out>/runs/<case>/<arm>/<agent>/<rep>``."""
        return out / "runs" / self.case / self.arm / self.agent.id / str(self.rep)


def task_runs(task: Any, agents: Sequence[AgentSpec], reps: int) -> list[RunSpec]:
    """RunSpecs for a task: every agent x rep (reps 1..``reps``), in file order, rep-major per agent. A Harbor
    task's ``oracle`` runs its ``solution/solve.sh`` (``spec.harbor.harbor_agent``)."""
    return [
        RunSpec("task", task.path, task.name, DEFAULT_ARM, agent, rep, task.timeout, task, task)
        for agent in (harbor_agent(task, a) for a in agents)
        for rep in range(1, reps + 1)
    ]


def trial_runs(trial: Any, agents: Sequence[AgentSpec], arms: Sequence[str], reps: int) -> list[RunSpec]:
    """RunSpecs for a trial: question x arm x agent x rep (reps 1..``reps``) in file order.

    ``case`` is the question id and ``case_obj`` the ``Question``; ``spec`` is the ``Trial``.
    """
    return [
        RunSpec("trial", trial.path, q.id, arm, agent, rep, trial.timeout, trial, q)
        for q in trial.questions
        for arm in arms
        for agent in agents
        for rep in range(1, reps + 1)
    ]
