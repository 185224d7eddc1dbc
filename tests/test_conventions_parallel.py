"""``[defaults] parallel = N`` caps how many runs of a trial run at once, across pytest-xdist workers (file-lock run
slots, ``run.slots``)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from helpers import write_script
from helpers.trial import make_project, trial_toml

from pytest_agentrace.run.slots import run_slot, slot_key

# Marks itself active, counts the active runs after a moment, stays 1.5 s, answers right.
BOT = """\
import os, pathlib, time
shared = pathlib.Path(os.environ["SHARED"])
active = shared / "active"
active.mkdir(parents=True, exist_ok=True)
me = active / os.environ["TRIAL_ID"]
me.write_text("")
time.sleep(0.3)
(shared / "seen").mkdir(exist_ok=True)
(shared / "seen" / os.environ["TRIAL_ID"]).write_text(str(len(list(active.iterdir()))))
time.sleep(1.5)
me.unlink()
print("The server listens on port 8123.")
"""


# the agents meet in a shared folder outside their workspaces (to count who runs at once): no sandbox here
def seen(pytester: pytest.Pytester) -> list[int]:
    return sorted(int(p.read_text()) for p in (pytester.path / "shared" / "seen").iterdir())


@pytest.mark.parametrize("defaults, most", [("parallel = 1", 1), ("", 2)], ids=["parallel-1", "no-cap"])
def test_parallel_caps_the_runs_at_once_across_workers(pytester: pytest.Pytester, defaults: str, most: int) -> None:
    """Four runs on two xdist workers: with ``parallel = 1`` no run ever sees another one active; without a cap
    the two workers overlap (the control that shows the count can see an overlap)."""
    make_project(pytester.path)
    write_script(pytester.path / "bots" / "counter.py", BOT)
    agent = f'env = {{ SHARED = "{pytester.path / "shared"}" }}'
    toml = trial_toml(reps=2, defaults=defaults, agent=agent).replace("./bots/bot.py", "./bots/counter.py")
    (pytester.path / "ports.toml").write_text(toml)
    res = pytester.runpytest("--agentrace", "--agentrace-no-save", "--agentrace-sandbox", "off", "-p", "xdist", "-n", "2")
    res.assert_outcomes(passed=4)
    counts = seen(pytester)
    assert len(counts) == 4 and max(counts) == most


def test_parallel_serial_session(pytester: pytest.Pytester) -> None:
    make_project(pytester.path)
    write_script(pytester.path / "bots" / "counter.py", BOT)
    agent = f'env = {{ SHARED = "{pytester.path / "shared"}" }}'
    toml = trial_toml(defaults="parallel = 1", agent=agent).replace("./bots/bot.py", "./bots/counter.py")
    (pytester.path / "ports.toml").write_text(toml)
    pytester.runpytest("--agentrace", "--agentrace-no-save", "--agentrace-sandbox", "off").assert_outcomes(passed=2)
    assert seen(pytester) == [1, 1]
    assert len(list((pytester.path / ".agentrace" / ".locks").glob(f"parallel-{slot_key(pytester.path / 'ports.toml')}-*.lock"))) == 1


def test_run_slots_are_a_counting_semaphore(tmp_path: Path) -> None:
    lock = threading.Lock()
    active, most, used = [0], [0], set()

    def hold() -> None:
        with run_slot(tmp_path, "k", 2, poll=0.01) as index:
            with lock:
                active[0] += 1
                most[0] = max(most[0], active[0])
                used.add(index)
            time.sleep(0.2)
            with lock:
                active[0] -= 1

    threads = [threading.Thread(target=hold) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most[0] == 2 and used == {0, 1}
