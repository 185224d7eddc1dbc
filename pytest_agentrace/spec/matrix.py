"""Expand tasks (and trials) into ``RunSpec``s with stable ids.

A RunSpec id is ``"<kind>:<case>/<arm>/<agent>/r<rep>"``; it keys outcomes, result folders and resume,
never the pytest node id (pytest-xdist may rewrite those).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pytest_agentrace.run.runspec import RunSpec
from pytest_agentrace.spec.common import AgentSpec
from pytest_agentrace.spec.harbor import harbor_agent

DEFAULT_ARM = "default"


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
