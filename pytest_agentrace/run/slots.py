"""Run slots: at most N runs of one trial at once across processes (``[defaults] parallel = N``).

A counting semaphore made of N file locks ``<out>/.locks/parallel-<key>-<i>.lock`` (``filelock``, advisory
``flock`` locks, so pytest-xdist workers on one machine share them and a crashed worker's lock is released by the
kernel). A run takes the first free one and holds it for the whole run; when all N are held it polls until one is
released. No slot is taken for a run reused from the results folder.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Iterator
from pathlib import Path

from filelock import FileLock, Timeout

LOCKS = ".locks"
POLL_SECONDS = 0.1


def slot_key(source: Path) -> str:
    """The lock files' key of a trial file: 12 hex digits of the sha256 of its resolved path."""
    return hashlib.sha256(str(Path(source).resolve()).encode()).hexdigest()[:12]


@contextlib.contextmanager
def run_slot(out: Path, key: str, slots: int, poll: float = POLL_SECONDS) -> Iterator[int]:
    """Hold one of ``slots`` (>= 1) run slots of ``key`` under the results folder ``out`` while the block runs;
    blocks until one is free (polling every ``poll`` seconds). Yields the slot's index (0 to ``slots`` - 1)."""
    folder = out / LOCKS
    folder.mkdir(parents=True, exist_ok=True)
    locks = [FileLock(str(folder / f"parallel-{key}-{i}.lock")) for i in range(slots)]
    while True:
        for index, lock in enumerate(locks):
            try:
                lock.acquire(timeout=0)
            except Timeout:
                continue
            try:
                yield index
            finally:
                lock.release()
            return
        time.sleep(poll)
