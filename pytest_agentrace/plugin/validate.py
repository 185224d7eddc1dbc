"""``--agentrace-validate``: prove each task solvable and its checks able to tell solved from unsolved.

Like SWE-bench's harness, which runs every instance with its reference ("gold") patch and with the empty
patch, validation runs every collected task with two agents only, ``oracle`` (applies the task's
``solution_files`` / ``solution_patch``) and ``noop`` (changes nothing), once each. A task is *invalid*
when:

* the oracle run does not pass every check: tests, verify and lint (when the task has them), or the
  reference solution cannot be applied, or it changes protected files; or
* the noop run passes the hidden checks: ``verify`` when the task has a verify command, else ``tests``.
  (Visible tests passing on the starting code is fine: a refactoring task's behaviour tests must.)

Each run is one item (``task[oracle-r1]``, ``task[noop-r1]``) that passes when its half of the rule holds
and fails with the reason otherwise; ``noop`` is *not* an expected failure here. Trial runs are deselected.
After the runs, the controller prints one table: task, oracle, noop, verdict.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_agentrace.plugin.collect import HarborTaskFile, RunItem, TaskFile
from pytest_agentrace.plugin.failure import RunFailed
from pytest_agentrace.record.model import Outcome, Status
from pytest_agentrace.run.checks import log_tail
from pytest_agentrace.spec.matrix import task_runs
from pytest_agentrace.spec.select import VALIDATION_AGENTS, validation_agents

ORACLE_CHECKS = ("tests", "verify", "lint")


def invalid_reason(outcome: Outcome) -> str | None:
    """Why ``outcome`` (an oracle or noop run of a task) makes its task invalid; ``None`` when it does not.

    Oracle: every check present (tests, verify, lint) must pass, nothing protected may change, and the
    solution must apply. Noop: the verify check (tests when the task has no verify) must fail.
    """
    if outcome.status == Status.ERROR:
        if missing := cannot_validate(outcome):
            return missing
        return f"the {outcome.agent} run could not be made ({outcome.reason})"
    checks = outcome.checks
    if outcome.agent == "oracle":
        if outcome.usage.error:
            return f"the reference solution cannot be applied: {outcome.usage.error}"
        if outcome.tampered:
            return f"the reference solution changes protected files: {', '.join(outcome.tampered)}"
        failing = [f"{name} ({checks[name].why})" for name in ORACLE_CHECKS if name in checks and not checks[name].passed]
        if failing:
            return "the reference solution (oracle) fails " + ", ".join(failing)
        if outcome.status != Status.PASSED:
            return f"the reference solution (oracle) does not pass: {outcome.reason}"
        return None
    if outcome.agent == "noop":
        hidden = "verify" if outcome.extra.get("has_verify") or "verify" in checks else "tests"
        check = checks.get(hidden)
        if check is not None and check.passed:
            what = "the hidden verify suite passes" if hidden == "verify" else "the tests pass (and the task has no verify suite)"
            return f"{what} on the starting code: noop made no change and `{check.command}` exited 0"
        return None
    return f"agent {outcome.agent!r} is not a validation agent (oracle, noop)"


def cannot_validate(outcome: Outcome) -> str | None:
    """``"cannot validate here: ruff missing"`` when a check or setup command of ``outcome`` could not run its tool
    (a fact about this machine, not about the task), else None."""
    missing = sorted({c.missing for c in outcome.checks.values() if c.missing})
    return f"cannot validate here: {', '.join(missing)} missing" if missing else None


def check_validity(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """The call phase of a validation item: fail with the reason (and the failing check's log tail) when the
    run makes its task invalid."""
    item = request.node
    outcome = item.run_outcome
    if outcome is None:
        return
    reason = invalid_reason(outcome)
    if reason:
        spec = item.run_spec
        check, log = _failing_check_tail(item, outcome) if outcome.agent == "oracle" else (None, [])
        raise RunFailed(f"invalid task {spec.case}: {reason}", check, log)


def _failing_check_tail(item: RunItem, outcome: Outcome) -> tuple[str | None, list[str]]:
    """The first failing oracle check (tests, verify, lint): its line and the last lines of its log."""
    run_dir = item.run_spec.run_dir(item.agentrace.out)
    for name in ORACLE_CHECKS:
        check = outcome.checks.get(name)
        if check is not None and not check.passed:
            return (f"--- {name}: `{check.command}` {check.why}; last lines of {run_dir / (check.log or '')}:",
                    log_tail(run_dir, check).splitlines())
    return None, []


class ValidationTaskFile(TaskFile):
    """A task file under ``--agentrace-validate``: one oracle and one noop item, judged by ``check_validity``
    (the file's agents, ``--agentrace-agent`` and ``--agentrace-reps`` do not apply)."""

    def collect(self):
        yield from self.make_items(task_runs(self.load(), validation_agents(), 1), check_validity, baselines_xfail=False)


def _run_cell(o: Outcome | None) -> str:
    if o is None:
        return "not run"
    marks = ", ".join(f"{n} {'pass' if o.checks[n].passed else 'fail'}" for n in ORACLE_CHECKS if n in o.checks)
    return f"{o.status}" + (f" ({marks})" if marks else "")


def verdict_rows(outcomes) -> tuple[tuple[tuple[str, ...], ...], int]:
    """Table rows ``[task, oracle, noop, verdict]`` (sorted by task file and name) and the number of
    invalid tasks. A task missing one of its two runs is ``incomplete`` (not counted as invalid)."""
    by_task: dict[tuple[str, str], dict[str, Outcome]] = {}
    for o in outcomes:
        if o.kind == "task":
            by_task.setdefault((o.source, o.case), {})[o.agent] = o
    rows, invalid = [], 0
    for (_, case), runs in sorted(by_task.items()):
        reasons = [r for r in (invalid_reason(runs[a]) for a in VALIDATION_AGENTS if a in runs) if r]
        here = next((r for r in reasons if r.startswith("cannot validate here")), None)
        if here:
            verdict = here
        elif reasons:
            verdict, invalid = "invalid: " + "; ".join(reasons), invalid + 1
        elif all(a in runs for a in VALIDATION_AGENTS):
            verdict = "valid"
        else:
            verdict = "incomplete"
        rows.append((case, _run_cell(runs.get("oracle")), _run_cell(runs.get("noop")), verdict))
    return tuple(rows), invalid


class ValidationHarborTaskFile(HarborTaskFile):
    """A Harbor task folder under ``--agentrace-validate``: its oracle (``solution/solve.sh``) and noop, once each."""

    def collect(self):
        yield from self.make_items(task_runs(self.load(), validation_agents(), 1), check_validity, baselines_xfail=False)
