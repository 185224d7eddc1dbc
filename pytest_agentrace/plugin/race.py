"""``--agentrace-race`` in the session: which runs race each other, who runs a race, the race lines of the summary.

The runs of one case, arm and rep (``run.race.group_id``) race: the first pytest process to set one of them up runs
the whole group concurrently (``run.race.run_group``) and writes the result; every member's item, on whichever
xdist worker, reports its own outcome from it. A ``stopped`` run is reported as skipped (neither a failure nor a
sample). Under ``--agentrace-resume`` a race is reused only when every member has a stored record; otherwise it is
run again in full (a race needs its members to start together). Under ``--agentrace-shard`` the runs of a race stay
on one shard (``spec.select``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_agentrace.record.model import Outcome
from pytest_agentrace.report.result import SessionResult
from pytest_agentrace.run.agent import agent_path_error, missing_executable
from pytest_agentrace.run.pipeline import execute
from pytest_agentrace.run.race import (
    Race,
    claim,
    group_id,
    race_dir,
    run_group,
    wait_result,
    write_result,
)
from pytest_agentrace.run.resume import stored_outcome
from pytest_agentrace.spec.matrix import RunSpec

if TYPE_CHECKING:
    from pytest_agentrace.plugin.session import AgentraceSession

COMMANDS_PER_RUN = 4  # a run's commands that may each take the timeout (setup, agent, tests, verify), for a waiter


def groups(specs: Sequence[RunSpec]) -> dict[str, list[RunSpec]]:
    """``{race id: [RunSpec, ...]}``: the races of the selected runs (the same on the controller and on every xdist
    worker). A run whose agent cannot start here (not installed, a bad path: its item is skipped or fails in setup)
    is in no race."""
    found: dict[str, list[RunSpec]] = {}
    for spec in specs:
        if agent_path_error(spec) is None and missing_executable(spec) is None:
            found.setdefault(group_id(spec), []).append(spec)
    return found


def outcome(agentrace: AgentraceSession, spec: RunSpec, tmp: Path) -> Outcome:
    """This run's outcome in its race: run the race when this process claims it first (members' scratch folders
    under ``tmp/race/``), else wait for the process that did."""
    found = agentrace.settings
    members = agentrace.groups.get(group_id(spec), [spec])
    out, session_id = agentrace.out, agentrace.id
    if found.resume or found.retry_failed:
        stored = {s.id: stored_outcome(s, out, retry_failed=found.retry_failed) for s in members}
        if all(o is not None for o in stored.values()):
            return stored[spec.id]
    folder = race_dir(out, session_id, group_id(spec))
    if claim(folder):
        scratch = [(s, _scratch(tmp, i, s)) for i, s in enumerate(members)]
        # each member is hashed into the manifest once the race is in its record (RunItem.runtest)
        race, outcomes = run_group(scratch, out, agentrace.run_options, session_id, found.race_grace,
                                   run=functools.partial(execute, manifest=False))
        write_result(folder, race, outcomes)
    else:
        longest = max(s.timeout for s in members)
        race, outcomes = wait_result(folder, COMMANDS_PER_RUN * longest + found.race_grace + 300)
    return outcomes[spec.id]


def _scratch(tmp: Path, index: int, spec: RunSpec) -> Path:
    folder = tmp / "race" / f"{index}-{re.sub(r'[^A-Za-z0-9_.-]', '_', spec.agent.id)[:40]}"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def summary_lines(result: SessionResult) -> list[str]:
    """The race lines of the session (winner and time, runner-up and gap, stopped agents), one per race run in it,
    sorted by race: read from the session result's outcomes (each member's ``extra["race"]``, ``Race.to_dict``); a
    race whose members were all reused from an earlier session (``--agentrace-resume``) was not run in this one."""
    found: dict[str, Race] = {}
    for o in result.outcomes:
        race = o.extra.get("race") if isinstance(o.extra, dict) else None
        if isinstance(race, dict) and not o.reused and race.get("group") not in found:
            try:
                found[race["group"]] = Race.from_dict(race)
            except (KeyError, TypeError, ValueError):
                continue
    return [found[group].line() for group in sorted(found)]
