"""A control group per run, where the host delegates one: the kernel bounds the whole process tree of an agent
(memory, processes) and counts what it refused.

Two kinds of parent folder are used (see cgroups(7), the kernel's Documentation/admin-guide/cgroup-v2.rst):

- **cgroup v2** (``cgroup2`` mount): a folder whose ``cgroup.subtree_control`` enables ``memory`` and ``pids`` and
  that this process may write (a delegated subtree, e.g. made by ``systemd-run -p Delegate=yes`` or by root in a
  container). A run's group gets ``memory.max``, ``memory.swap.max`` 0, ``memory.oom.group`` 1 and ``pids.max``;
  hits are read from ``memory.events`` (``oom_kill``) and ``pids.events`` (``max``).
- **cgroup v1 pids** (a ``cgroup`` mount with the ``pids`` controller, still common on hybrid hosts): the folder of
  this process's own pids group, when writable; only ``pids.max`` and ``pids.events`` (memory stays with the
  per-process ``RLIMIT_DATA``; the memory hierarchy is left alone).

``find_parent("auto")`` looks for a v2 parent first, then a v1 pids one, and returns None where neither exists (the
caller falls back to rlimits). A run's group is made by ``RunGroup.create``; the child process joins it before
``exec`` (``join``, from ``preexec_fn``), so every descendant is born inside it.
"""

from __future__ import annotations

import functools
import itertools
import os
import secrets
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from pytest_agentrace.run.runspec import CGROUP_AUTO, CGROUP_OFF

_counter = itertools.count(1)
_swept: set[Path] = set()  # the parents this process has swept (RunGroup.create)


@dataclass(frozen=True)
class Parent:
    """A folder run groups are made in: ``path``, ``version`` (2 or 1) and the controllers usable there."""

    path: Path
    version: int
    controllers: frozenset[str]

    def describe(self) -> str:
        return f"cgroup v{self.version} {self.path} ({', '.join(sorted(self.controllers))})"


def _mounts() -> list[tuple[str, str, set[str]]]:
    """``[(mount point, fstype, super options)]`` of the cgroup mounts in /proc/self/mountinfo (see proc(5))."""
    found = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) >= 5 and len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
            found.append((fields[4], tail[0], set(tail[2].split(","))))
    return found


def _own_groups() -> dict[str, str]:
    """This process's groups from /proc/self/cgroup: ``{"": v2 path, "pids": v1 pids path, ...}``."""
    groups: dict[str, str] = {}
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return groups
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) == 3:
            for name in parts[1].split(",") if parts[1] else [""]:
                groups[name] = parts[2]
    return groups


def _v2_parent(folder: Path) -> Parent | None:
    try:
        enabled = set((folder / "cgroup.subtree_control").read_text().split())
    except OSError:
        return None
    if not {"memory", "pids"} <= enabled or not os.access(folder, os.W_OK):
        return None
    return Parent(folder, 2, frozenset(enabled & {"memory", "pids"}))


def _v1_pids_parent(folder: Path) -> Parent | None:
    if not (folder / "pids.max").exists() and not (folder / "cgroup.procs").exists():
        return None
    if not os.access(folder, os.W_OK):
        return None
    return Parent(folder, 1, frozenset({"pids"}))


@functools.lru_cache(maxsize=8)
def find_parent(setting: str = CGROUP_AUTO) -> Parent | None:
    """The parent folder for run groups: ``setting`` ``"auto"`` searches (v2 delegated subtree, then v1 pids),
    ``"off"`` gives None, a path names the folder (v2 with memory and pids in its ``cgroup.subtree_control``, or a
    v1 pids folder). Raises ``ValueError`` (with the fix) when a named folder cannot be used. Cached per process."""
    if setting == CGROUP_OFF:
        return None
    if setting != CGROUP_AUTO:
        folder = Path(setting)
        found = _v2_parent(folder) or _v1_pids_parent(folder)
        if found is None:
            raise ValueError(f"{folder} is no writable cgroup folder with memory and pids enabled in its "
                             "cgroup.subtree_control (cgroup v2) and no writable v1 pids folder; make one, e.g. "
                             "`sudo mkdir /sys/fs/cgroup/agentrace && echo +memory +pids | sudo tee "
                             "/sys/fs/cgroup/cgroup.subtree_control && sudo chown -R $USER /sys/fs/cgroup/agentrace`")
        return found
    own = _own_groups()
    mounts = _mounts()
    for point, fstype, _opts in mounts:
        if fstype == "cgroup2" and "" in own:
            found = _v2_parent(Path(point + own[""].rstrip("/")) if own[""] != "/" else Path(point))
            if found is not None:
                return found
    for point, fstype, opts in mounts:
        if fstype == "cgroup" and "pids" in opts and "pids" in own:
            found = _v1_pids_parent(Path(point + own["pids"].rstrip("/")) if own["pids"] != "/" else Path(point))
            if found is not None:
                return found
    return None


class RunGroup:
    """One run's group under ``parent``: ``create`` makes it and writes its limits, ``join`` (in the child, before
    exec) moves the calling process in, ``hits`` reads what the kernel refused, ``remove`` kills what is left and
    deletes the folder."""

    def __init__(self, parent: Parent, path: Path):
        self.parent, self.path = parent, path
        self._procs = str(path / "cgroup.procs").encode()

    @classmethod
    def create(cls, parent: Parent, memory: int = 0, processes: int = 0) -> RunGroup:
        """A fresh group ``agentrace-<pid>-<n>-<random>`` with ``memory`` bytes (v2; 0: none) and ``processes``
        tasks (0: none); empty groups left by processes that no longer exist are removed first (a killed session
        cannot remove its own, and pids are reused). Raises ``OSError`` when the folder or a limit cannot be
        written."""
        if parent.path not in _swept:  # once per process and parent: a killed session's groups do not come back
            _swept.add(parent.path)
            sweep(parent.path)
        path = parent.path / f"agentrace-{os.getpid()}-{next(_counter)}-{secrets.token_hex(3)}"
        path.mkdir()
        group = cls(parent, path)
        try:
            if processes and "pids" in parent.controllers:
                (path / "pids.max").write_text(str(processes))
            if memory and "memory" in parent.controllers and parent.version == 2:
                (path / "memory.max").write_text(str(memory))
                for name, value in (("memory.swap.max", "0"), ("memory.oom.group", "1")):
                    if (path / name).exists():
                        (path / name).write_text(value)
        except OSError:
            group.remove()
            raise
        return group

    @property
    def limits(self) -> frozenset[str]:
        """The limits this group enforces: ``"memory"`` (v2 only) and ``"processes"``."""
        names = {"processes"} if "pids" in self.parent.controllers else set()
        if self.parent.version == 2 and "memory" in self.parent.controllers:
            names.add("memory")
        return frozenset(names)

    def join(self) -> None:
        """Move the calling process into the group (called in the child between fork and exec: no allocation
        beyond a few bytes, raises ``OSError`` when the write fails)."""
        fd = os.open(self._procs, os.O_WRONLY)
        try:
            os.write(fd, b"0")  # 0: the writing process (kernel cgroup_procs_write_start)
        finally:
            os.close(fd)

    def hits(self) -> dict[str, int]:
        """``{"memory": oom kills, "processes": refused forks}`` counted by the kernel (only the non-zero ones)."""
        found = {}
        for limit, name, key in (("memory", "memory.events", "oom_kill"), ("processes", "pids.events", "max")):
            try:
                lines = (self.path / name).read_text().splitlines()
            except OSError:
                continue
            for line in lines:
                word, _, count = line.partition(" ")
                if word == key and count.strip().isdigit() and int(count) > 0:
                    found[limit] = int(count)
        return found

    def peaks(self) -> dict[str, int]:
        """``{"processes": most tasks at once, "memory": most bytes at once}`` where the kernel keeps them
        (``pids.peak``, ``memory.peak``; Linux 5.19+/6.1+)."""
        found = {}
        for limit, name in (("processes", "pids.peak"), ("memory", "memory.peak")):
            try:
                found[limit] = int((self.path / name).read_text().split()[0])
            except (OSError, ValueError, IndexError):
                continue
        return found

    def pids(self) -> list[int]:
        try:
            return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
        except (OSError, ValueError):
            return []

    def remove(self, wait: float = 5.0) -> bool:
        """Kill every process left in the group (``cgroup.kill`` on v2, else SIGKILL each) and delete its folder,
        retrying for ``wait`` seconds while the processes die. Returns whether the folder is gone; never raises."""
        deadline = time.monotonic() + wait
        while True:
            try:
                if (self.path / "cgroup.kill").exists():
                    (self.path / "cgroup.kill").write_text("1")
                else:
                    for pid in self.pids():
                        try:
                            os.kill(pid, signal.SIGKILL)
                        except (ProcessLookupError, PermissionError):
                            pass
            except OSError:
                pass
            try:
                self.path.rmdir()
                return True
            except FileNotFoundError:
                return True
            except OSError:
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.05)


def sweep(parent: Path) -> None:
    """Remove the empty ``agentrace-<pid>-...`` groups under ``parent`` whose process is gone (``rmdir`` refuses
    a group that still holds a process, so a live run's group is never touched)."""
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return
    for entry in entries:
        parts = entry.name.split("-")
        if len(parts) < 3 or parts[0] != "agentrace" or not parts[1].isdigit():
            continue
        try:
            os.kill(int(parts[1]), 0)
            continue  # its session is alive
        except ProcessLookupError:
            pass
        except OSError:
            continue
        try:
            os.rmdir(entry.path)
        except OSError:
            pass

