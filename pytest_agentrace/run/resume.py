"""Resume and interrupt safety, for task and trial runs alike.

``--agentrace-resume``: a run whose ``run.json`` in the results folder is complete (it parses as a run record
of this schema), is for the same RunSpec id, the same agent entry and timeout (``RunSpec.agent_hash``) and has the
same content hash as the task/trial file now, is not run again; its item reports the stored outcome with ``reused = True``.
A record is reused only when it is verified against the results folder's manifests (``record.manifest``): one
changed, added or removed after its session is run again.
``--agentrace-retry-failed`` (implies resume): the same, except runs that did not finish cleanly are run
again: status ``error`` or ``timeout``, or an agent that crashed (non-zero exit code).

Interrupts: ``run.json`` is written atomically (``outcome.write_atomic``) after everything else of a run, so
a run interrupted midway leaves no record and is simply missing on resume. ``install_sigterm`` makes SIGTERM
behave like Ctrl-C in the controller (a ``KeyboardInterrupt``, so process groups are terminated and pytest
stops cleanly) instead of killing the process where it stands.
"""

from __future__ import annotations

import functools
import signal
import threading
from pathlib import Path
from typing import Any

from pytest_agentrace.record.manifest import MANIFEST_DIR, check_run, load_manifests
from pytest_agentrace.record.model import Outcome, Status
from pytest_agentrace.record.runfile import RUN_FILE, read_run


def needs_retry(outcome: Outcome) -> bool:
    """True for a run that did not finish cleanly: ``error``, ``timeout`` or a non-zero agent exit code."""
    return outcome.status in (Status.ERROR, Status.TIMEOUT) or (outcome.exit_code is not None and outcome.exit_code != 0)


def stored_outcome(spec: Any, out: Path, retry_failed: bool = False) -> Outcome | None:
    """The stored outcome of ``spec`` (a RunSpec) to reuse, marked ``reused``; ``None`` when it must run.

    ``None`` when ``run.json`` is missing or unreadable, is unverifiable (its folder does not match the newest
    manifest naming it, or its status contradicts its evidence: ``record.manifest.check_run``), records another
    run id or an older content hash (after ``agentrace rescore``: the hash it was re-graded with,
    ``graded_hash``), was made by another agent entry or timeout (``RunSpec.agent_hash``; a record of a version
    without it too), has an unknown status, or (with ``retry_failed``) ``needs_retry``.
    """
    path = spec.run_dir(out) / RUN_FILE
    if not path.is_file():
        return None
    where = path.parent.resolve().relative_to(Path(out).resolve()).as_posix()
    if check_run(path.parent, _manifests(Path(out).resolve(), _listing(Path(out))).get(where)):
        return None
    try:
        outcome = read_run(path)
    except ValueError:
        return None
    content_hash = getattr(spec.spec, "content_hash", "")
    if outcome.run_id != spec.id or not content_hash or graded_hash(outcome) != content_hash:
        return None
    if (outcome.extra or {}).get("agent_hash") != spec.agent_hash:  # another agent entry (command, env, ...) under this id
        return None
    if outcome.status not in set(Status):
        return None
    if retry_failed and needs_retry(outcome):
        return None
    return outcome.replace(reused=True)


def _listing(out: Path) -> tuple[tuple[str, int], ...]:
    """The manifests folder's files with their mtimes (ns): the cache key of ``_manifests``."""
    folder = out / MANIFEST_DIR
    return tuple(sorted((p.name, p.stat().st_mtime_ns) for p in folder.glob("*.json"))) if folder.is_dir() else ()


@functools.lru_cache(maxsize=4)
def _manifests(out: Path, listing: tuple[tuple[str, int], ...]) -> dict[str, dict[str, str]]:
    return load_manifests(out)[0]


def graded_hash(outcome: Outcome) -> str:
    """The content hash of the file version ``outcome``'s status was judged against: the one ``agentrace rescore``
    recorded (``extra["rescored"]["content_hash"]``) when it was re-graded, else the one it ran with."""
    rescored = outcome.extra.get("rescored") if isinstance(outcome.extra, dict) else None
    if isinstance(rescored, dict) and isinstance(rescored.get("content_hash"), str):
        return rescored["content_hash"]
    return outcome.content_hash


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")


def install_sigterm(config: Any) -> None:
    """Turn SIGTERM into ``KeyboardInterrupt`` for this pytest session (main thread only); the previous
    handler is restored by ``config.add_cleanup``."""
    if threading.current_thread() is not threading.main_thread():
        return
    previous = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, _raise_interrupt)
    config.add_cleanup(lambda: signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL))
