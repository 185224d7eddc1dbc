"""Race mode: the agents of one task (per arm and rep) start together; the first to meet the win condition wins,
and the others are stopped after a grace window.

The win condition is coderace's (``race`` command): the verify check passes when the case has one, else the tests
pass, else the agent exits cleanly (exit code 0, no timeout); a trial run wins when it passed (its answer key). A member is judged when its whole run (agent, then
checks) has finished; the first in wall-clock order to meet the condition is the winner, and its ``finished``
time (seconds from the race's start) is its race time. Members still running ``grace`` seconds later are stopped
(their process groups terminated through ``process.stop_on``) and recorded with status ``stopped``: neither a
failure nor a statistical sample (``Outcome.is_sample``), and with no checks (what the stop cut short never ran
to a result; tables show them ``not run``). A member that finished inside the window keeps its own
status; the second to meet the condition is the runner-up, and ``gap`` is its time minus the winner's. With no
winner every member runs to its end (or timeout).

Coordination across pytest-xdist workers uses files in ``<out>/.race/<session id>/<group>/``: the first process
to reach any member of a group creates ``claim`` (``O_EXCL``) and runs every member in its own thread
(``run_group``); the others wait for ``result.json`` (``wait_result``). So the members start together whatever
worker their pytest items landed on, and one process in one session owns each race.

``result.json``: ``{"race": Race.to_dict(), "outcomes": {run id: Outcome.to_dict()}}``; each member's
``run.json`` carries the race in ``extra["race"]`` (and so does the history store's copy of it).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_agentrace.record.attempts import recorded_dir
from pytest_agentrace.record.model import Outcome, Status
from pytest_agentrace.record.runfile import write_atomic, write_run
from pytest_agentrace.record.trajectory import write_trajectory
from pytest_agentrace.run import process, reaper
from pytest_agentrace.run.pipeline import execute
from pytest_agentrace.run.runspec import RunOptions, RunSpec

DEFAULT_GRACE = 5.0
RACE_DIR = ".race"
CLAIM, RESULT = "claim", "result.json"
POLL = 0.1  # seconds between looks at a race's result file


def group_id(spec: RunSpec) -> str:
    """The race a run belongs to: ``"<kind>:<case>/<arm>/r<rep>"`` (the agents of one case, arm and rep)."""
    return f"{spec.kind}:{spec.case}/{spec.arm}/r{spec.rep}"


def won(outcome: Outcome) -> bool:
    """coderace's win condition: verify passed if there is a verify check, else tests passed, else a clean exit.
    A trial run (no tests; its answer is graded) wins when it passed (answer key and verify)."""
    if outcome.kind == "trial":
        return outcome.status == Status.PASSED
    for name in ("verify", "tests"):
        check = outcome.checks.get(name)
        if check is not None:
            return bool(check.passed) and outcome.is_sample
    return outcome.exit_code == 0 and not outcome.timed_out and outcome.status != Status.ERROR


@dataclass
class Race:
    """One race's result: ``group`` (``group_id``), ``grace`` (seconds), ``winner`` / ``runner_up`` (run ids or
    None), ``times`` (run id -> seconds from the race's start to the end of its run, for those that finished),
    ``stopped`` (run ids), ``agents`` (run id -> agent id)."""

    group: str
    grace: float
    agents: dict[str, str]
    winner: str | None = None
    runner_up: str | None = None
    times: dict[str, float] = field(default_factory=dict)
    stopped: list[str] = field(default_factory=list)

    @property
    def gap(self) -> float | None:
        """Seconds between the winner's and the runner-up's time (None without a runner-up)."""
        if self.winner is None or self.runner_up is None:
            return None
        return round(self.times[self.runner_up] - self.times[self.winner], 3)

    def to_dict(self) -> dict[str, Any]:
        return {"group": self.group, "grace": self.grace, "agents": dict(self.agents), "winner": self.winner,
                "runner_up": self.runner_up, "times": dict(self.times), "stopped": list(self.stopped), "gap": self.gap}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Race:
        return cls(group=d["group"], grace=float(d["grace"]), agents=dict(d["agents"]), winner=d.get("winner"),
                   runner_up=d.get("runner_up"), times={k: float(v) for k, v in d.get("times", {}).items()},
                   stopped=list(d.get("stopped", [])))

    def line(self) -> str:
        """One summary line, as coderace's race output: winner and time, runner-up and gap, who was stopped."""
        if self.winner is None:
            return f"race {self.group}: no winner (no agent met the win condition); all ran to their end"
        text = f"race {self.group}: winner {self.agents[self.winner]} in {self.times[self.winner]:.1f} s"
        if self.runner_up is not None:
            text += f"; runner-up {self.agents[self.runner_up]} +{self.gap:.1f} s"
        else:
            text += f"; no runner-up within the {self.grace:g} s grace window"
        if self.stopped:
            text += "; stopped: " + ", ".join(self.agents[i] for i in self.stopped)
        return text


def run_group(members: Sequence[tuple[RunSpec, Path]], out: Path, options: RunOptions, session_id: str,
              grace: float = DEFAULT_GRACE, run: Callable[..., Outcome] = execute) -> tuple[Race, dict[str, Outcome]]:
    """Run ``members`` (``(spec, scratch folder)`` of one group) together, each in its own thread, through ``run``
    (``pipeline.execute``); stop the ones still running ``grace`` seconds after the first win. Returns the race
    and every member's outcome (run id -> Outcome; stopped ones with status ``stopped``), each also written to its
    ``run.json`` with ``extra["race"]``. A ``KeyboardInterrupt`` stops every member, then propagates."""
    race = Race(group_id(members[0][0]), grace, {spec.id: spec.agent.id for spec, _ in members})
    events = {spec.id: threading.Event() for spec, _ in members}
    results: dict[str, Outcome] = {}
    order: list[str] = []  # run ids that finished before being stopped, in the order they finished
    finished = threading.Condition()
    start = time.monotonic()

    def member(spec: RunSpec, tmp: Path) -> None:
        process.stop_on(events[spec.id])
        try:
            outcome = run(spec, tmp, out, options, session_id)
        finally:
            process.stop_on(None)
        with finished:
            results[spec.id] = outcome
            if not events[spec.id].is_set():
                race.times[spec.id] = round(time.monotonic() - start, 3)
                order.append(spec.id)
            finished.notify_all()

    def places() -> list[str]:
        return [i for i in order if won(results[i])][:2]

    threads = [threading.Thread(target=member, args=m, name=f"race {m[0].id}", daemon=True) for m in members]
    sweep = reaper.Sweep()  # the members' commands do not sweep (process.stop_on); the race does, once all ended
    for t in threads:
        t.start()
    stopping = False
    try:
        with finished:
            while len(results) < len(members):
                first = places()[:1]
                deadline = start + race.times[first[0]] + grace if first and not stopping else None
                if deadline is not None and time.monotonic() >= deadline:
                    for run_id, event in events.items():
                        if run_id not in results:
                            event.set()  # its commands are terminated; it finishes soon after
                    stopping, deadline = True, None
                wait = POLL if deadline is None else max(0.0, min(POLL, deadline - time.monotonic()))
                finished.wait(timeout=wait)
    except BaseException:
        for event in events.values():
            event.set()
        for t in threads:
            t.join()
        sweep.kill_new()
        raise
    for t in threads:
        t.join()
    sweep.kill_new()
    ranked = places()
    race.winner = ranked[0] if ranked else None
    race.runner_up = ranked[1] if len(ranked) > 1 else None
    race.stopped = sorted(i for i in results if i not in race.times)
    outcomes = {}
    for spec, _ in members:
        o = results[spec.id]
        if spec.id in race.stopped:
            winner = race.agents[race.winner] if race.winner else "another agent"
            # its checks were cut short by the stop (or never started): none of them ran to a result
            o = o.replace(status=str(Status.STOPPED), reason=f"stopped: {winner} won the race and this run had not "
                          f"finished {grace:g} s later (the grace window)", score=None, checks={})
        o = o.replace(extra={**o.extra, "race": race.to_dict()})
        where = recorded_dir(out, session_id, spec.run_dir(out))  # an error over a finished record: its attempt
        write_trajectory(where, o)
        write_run(where, o)
        outcomes[spec.id] = o
    return race, outcomes


def race_dir(out: Path, session_id: str, group: str) -> Path:
    """``<out>/.race/<session id>/<sha256 of the group id, 16 hex>``."""
    return out / RACE_DIR / session_id / hashlib.sha256(group.encode("utf-8")).hexdigest()[:16]


def claim(folder: Path) -> bool:
    """Create ``folder/claim`` atomically; True for the one process that created it."""
    folder.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(folder / CLAIM, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as fh:
        fh.write(f"{os.getpid()}\n")
    return True


def write_result(folder: Path, race: Race, outcomes: dict[str, Outcome]) -> None:
    """Write ``result.json`` atomically (see the module docstring)."""
    doc = {"race": race.to_dict(), "outcomes": {k: o.to_dict() for k, o in outcomes.items()}}
    write_atomic(folder / RESULT, json.dumps(doc, sort_keys=True) + "\n")


def read_result(folder: Path) -> tuple[Race, dict[str, Outcome]] | None:
    """The race and outcomes of ``folder/result.json`` (None while it is not written)."""
    path = folder / RESULT
    if not path.is_file():
        return None
    doc = json.loads(path.read_text(encoding="utf-8"))
    return Race.from_dict(doc["race"]), {k: Outcome.from_dict(v) for k, v in doc["outcomes"].items()}


def wait_result(folder: Path, timeout: float) -> tuple[Race, dict[str, Outcome]]:
    """Wait (polling every 0.1 s) for another process's ``result.json``; raises ``TimeoutError`` after ``timeout``
    seconds (the owner died or hangs)."""
    end = time.monotonic() + timeout
    while (found := read_result(folder)) is None:
        if time.monotonic() > end:
            raise TimeoutError(f"{folder / RESULT}: the process running this race wrote no result in {timeout:g} s")
        time.sleep(POLL)
    return found


def session_races(out: Path, session_id: str) -> list[Race]:
    """Every race of the session (``result.json`` files under ``<out>/.race/<session id>``), sorted by group."""
    races = []
    for path in sorted((out / RACE_DIR / session_id).glob(f"*/{RESULT}")):
        try:
            races.append(Race.from_dict(json.loads(path.read_text(encoding="utf-8"))["race"]))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return sorted(races, key=lambda r: r.group)
