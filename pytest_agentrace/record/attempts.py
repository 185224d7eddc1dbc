"""Nothing lost: a later session's infrastructure error never replaces a finished record.

A run's folder ``<out>/runs/<case>/<arm>/<agent>/<rep>`` holds one record. When a run starts and its folder holds a
*finished* record (a regular ``run.json`` whose status is not ``error``: passed, failed, timeout or stopped), that
folder is set aside (renamed to ``<out>/attempts/<session id>/.kept/<case>/<arm>/<agent>/<rep>``) while the run
makes a fresh one. When the run ends:

- not ``error``: the new record stands and the set-aside one is removed (a newer finished record replaces an older
  one, as before);
- ``error``: the new record is moved to ``<out>/attempts/<session id>/<case>/<arm>/<agent>/<rep>`` (an *attempt*,
  with every file the run wrote: ``run.json``, ``harness-error.log``, logs) and the finished record goes back to
  its place, unchanged;
- interrupted (``KeyboardInterrupt``, or SIGTERM made one): the partial folder is removed and the finished record
  goes back.

A session killed outright (SIGKILL) between the two renames leaves the finished record in ``.kept``; the next run
of the same RunSpec puts it back first (``Keeper.set_aside``). Attempts are outside ``runs/``: tables, statistics,
resume and exports read only records; ``agentrace verify`` checks attempts against the manifests too (an
attempt's manifest entry names its own folder). An error over an unfinished record (none, or an ``error``) simply
replaces it. Every rename is of the harness's own folders, never through a link (``os.rename`` moves a link itself).

A record of *another* task or trial file that names its task or question as the run's does (``other_source``) is
never replaced: the run is not made (``plugin.collect``), as two such files in one session are not
(``spec.select.collisions``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from pytest_agentrace import untrusted
from pytest_agentrace.record.model import Status
from pytest_agentrace.record.runfile import RUN_FILE
from pytest_agentrace.record.safefile import read_text

ATTEMPTS_DIR = "attempts"
KEPT = ".kept"


def _field(run_dir: Path, name: str) -> Any:
    """Field ``name`` of the record at ``run_dir`` (a real folder, not a link; its regular ``run.json``, read
    through no link), or None when there is none or it does not parse as a JSON object."""
    if run_dir.is_symlink() or not run_dir.is_dir():
        return None
    text = read_text(run_dir / RUN_FILE)
    try:
        return untrusted.loads(text).get(name) if text is not None else None
    except (ValueError, AttributeError):
        return None


def finished(run_dir: Path) -> bool:
    """Whether ``run_dir`` (a real folder, not a link) holds a regular ``run.json`` whose status is a finished one
    (anything but ``error``; an unreadable record is not finished)."""
    status = _field(run_dir, "status")
    return isinstance(status, str) and status in set(Status) and status != Status.ERROR


def other_source(run_dir: Path, source: Path | str) -> str | None:
    """The task or trial file of the record at ``run_dir`` when it is not ``source`` and still exists (another file
    that names a task or question as ``source`` does, run into the same results folder by an earlier session), else
    None: no record, an unreadable one, one without a source, or one of a file since moved or deleted (whose runs a
    new one replaces as usual). Reads ``run.json`` through no link."""
    found = _field(run_dir, "source")
    if not isinstance(found, str) or not os.path.isabs(found):
        return None
    if os.path.realpath(found) == os.path.realpath(source) or not os.path.exists(found):
        return None
    return found


def attempt_dir(out: Path, session_id: str, run_dir: Path) -> Path:
    """Where ``session_id``'s error attempt of the run at ``run_dir`` goes: ``<out>/attempts/<session>/<path under
    runs/>``."""
    return Path(out) / ATTEMPTS_DIR / session_id / _below_runs(out, run_dir)


def recorded_dir(out: Path, session_id: str, run_dir: Path) -> Path:
    """The folder that holds this session's record of the run at ``run_dir``: its attempt when the run ended in an
    error over a finished record, else ``run_dir``."""
    attempt = attempt_dir(out, session_id, run_dir)
    return attempt if attempt.is_dir() and not attempt.is_symlink() else run_dir


def _below_runs(out: Path, run_dir: Path) -> Path:
    return Path(os.path.relpath(run_dir, Path(out) / "runs"))


class Keeper:
    """Keeps the finished record of one run while the run is redone (module docstring). Use: ``set_aside()`` before
    the run writes anything, then ``settle(status)`` with the new record's status, or ``restore()`` when the run was
    interrupted. Never raises for a folder that is missing."""

    def __init__(self, out: Path, run_dir: Path, session_id: str) -> None:
        self.out, self.run_dir, self.session_id = Path(out), Path(run_dir), session_id
        self.kept = self.out / ATTEMPTS_DIR / session_id / KEPT / _below_runs(out, run_dir)
        self.active = False

    def set_aside(self) -> bool:
        """Put back a record an earlier killed session left in ``.kept``, then move a finished record out of the
        run's way. Returns whether one was set aside."""
        if not finished(self.run_dir):
            self._recover()
        if not finished(self.run_dir):
            return False
        _remove(self.kept)
        self.kept.parent.mkdir(parents=True, exist_ok=True)
        os.rename(self.run_dir, self.kept)
        self.active = True
        return True

    def settle(self, status: str) -> Path | None:
        """The run ended with ``status``: an ``error`` becomes an attempt (its path returned) and the finished record
        goes back; any other status keeps the new record and drops the set-aside one (None returned)."""
        if not self.active:
            return None
        self.active = False
        if status != Status.ERROR:
            _remove(self.kept)
            return None
        attempt = attempt_dir(self.out, self.session_id, self.run_dir)
        _remove(attempt)
        attempt.parent.mkdir(parents=True, exist_ok=True)
        if self.run_dir.is_dir() and not self.run_dir.is_symlink():
            os.rename(self.run_dir, attempt)
        else:
            _remove(self.run_dir)
        os.rename(self.kept, self.run_dir)
        return attempt

    def restore(self) -> None:
        """The run was interrupted: drop what it wrote and put the finished record back."""
        if not self.active:
            return
        self.active = False
        _remove(self.run_dir)
        os.rename(self.kept, self.run_dir)

    def _recover(self) -> None:
        below = _below_runs(self.out, self.run_dir)
        for session in sorted((self.out / ATTEMPTS_DIR).glob("*")) if (self.out / ATTEMPTS_DIR).is_dir() else ():
            stranded = session / KEPT / below
            if finished(stranded):
                _remove(self.run_dir)
                self.run_dir.parent.mkdir(parents=True, exist_ok=True)
                os.rename(stranded, self.run_dir)
                return


def _remove(path: Path) -> None:
    """Remove a folder (or a link or file in its place: never followed)."""
    if path.is_symlink() or (path.exists() and not path.is_dir()):
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)
