"""Resource limits of one run: what an agent's process tree may use, how the kernel enforces it, and which limit a
finished run hit.

The four limits (``Limits``; 0 switches one off):

- ``memory`` (bytes): a cgroup v2 ``memory.max`` on the whole tree where a delegated group exists (``run.cgroup``),
  and always ``RLIMIT_DATA`` on each process (setrlimit(2)). Not ``RLIMIT_AS``: node/V8 (Gemini CLI's WebAssembly)
  reserves address space far beyond what it uses, and ``RLIMIT_AS`` at 4 GiB stops ``gemini --version``, while
  ``RLIMIT_DATA`` at 1 GiB starts every supported CLI (claude, codex, gemini, opencode, copilot, aider);
- ``processes`` (tasks, threads included): the group's ``pids.max`` (v2, or v1 pids); without a group,
  ``RLIMIT_NPROC`` set to this user's current task count plus the limit (the kernel counts per user, not per tree,
  and exempts root: as root without a group the limit is recorded as not enforced);
- ``disk`` (bytes): ``RLIMIT_FSIZE`` bounds the largest file any process writes (SIGXFSZ / EFBIG), and the harness
  checks the workspace's total growth while the run goes (``DiskWatch``, stopping the run's process group);
- ``cpu_time`` (seconds of CPU per process): ``RLIMIT_CPU`` (SIGXCPU at the limit, SIGKILL 5 s of CPU later).

``diagnose`` names the limit a run hit from the kernel's own evidence first (the disk watch stopped it, the group's
``memory.events``/``pids.events``, death by SIGXCPU/SIGXFSZ) and, for an agent that exited non-zero, from the errno
text its processes printed (``MemoryError``, ``Cannot allocate memory``, ``Resource temporarily unavailable``,
``File too large``, ...).
"""

from __future__ import annotations

import dataclasses
import os
import re
import resource
import signal
import stat
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_agentrace.argtypes import human_bytes
from pytest_agentrace.run.cgroup import Parent, RunGroup
from pytest_agentrace.run.runspec import DEFAULTS as DEFAULTS  # the session's limits, kept where they were named
from pytest_agentrace.run.runspec import NAMES, Limits

REASON = "resource limit: {}"  # a run's reason: "resource limit: memory" (processes, disk, cpu)
REASON_WORD = {"memory": "memory", "processes": "processes", "disk": "disk", "cpu_time": "cpu"}
REASON_RE = re.compile(r"^resource limit: (memory|processes|disk|cpu)\b")
CPU_GRACE = 5  # seconds of CPU between SIGXCPU (soft limit) and SIGKILL (hard limit)
DISK_EVERY = 1.0  # seconds between two looks at the workspace's size (at least; longer for big trees)


def describe(name: str, value: float) -> str:
    """One limit's value for people: ``"4 GiB"``, ``"512 processes"``, ``"3600 s"``, ``"off"``."""
    if not value:
        return "off"
    if name in ("memory", "disk"):
        return human_bytes(int(value))
    return f"{int(value)} processes" if name == "processes" else f"{value:g} s"


def _user_tasks(uid: int) -> int:
    """Tasks (threads included) of real user ``uid`` now, read from /proc (what ``RLIMIT_NPROC`` counts)."""
    total = 0
    try:
        entries = os.listdir("/proc")
    except OSError:
        return 0
    for pid in entries:
        if not pid.isdigit():
            continue
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        uid_line = re.search(r"^Uid:\s+(\d+)", status, re.MULTILINE)
        threads = re.search(r"^Threads:\s+(\d+)", status, re.MULTILINE)
        if uid_line and int(uid_line.group(1)) == uid:
            total += int(threads.group(1)) if threads else 1
    return total


class Confinement:
    """How one run is confined: the rlimits and the cgroup its child gets before exec (``preexec``), the
    workspace watch (``watch``), and how each limit is enforced (``enforced``: ``{name: "how"}``, and
    ``unenforced``: ``{name: why}``). Make it with ``confine``; call ``close`` after the run."""

    def __init__(self, limits: Limits, group: RunGroup | None, rlimits: list[tuple[int, int, int]],
                 watch: DiskWatch | None, enforced: dict[str, str], unenforced: dict[str, str]):
        self.limits, self.group, self.rlimits, self.disk_watch = limits, group, rlimits, watch
        self.enforced, self.unenforced = enforced, unenforced
        self.peaks: dict[str, int] = {}  # the cgroup's pids.peak / memory.peak, read by ``hits``

    def preexec(self) -> None:
        """Runs in the child between fork and exec: join the run's group, set the rlimits (raises ``OSError``)."""
        if self.group is not None:
            self.group.join()
        for res, soft, hard in self.rlimits:
            resource.setrlimit(res, (soft, hard))

    def watch(self) -> str | None:
        """The limit name when the run must be stopped now (``"disk"``), else None."""
        return self.disk_watch.check() if self.disk_watch is not None else None

    def final_check(self) -> str | None:
        """After the run: ``"disk"`` when the workspace grew past the limit (also when it never was looked at while
        the run went: a short run), else None."""
        return self.disk_watch.check(force=True) if self.disk_watch is not None else None

    def evidence(self, stopped: str | None) -> str | None:
        """Why the run was stopped for limit ``stopped`` (``watch``/``final_check``), or None."""
        return self.disk_watch.evidence if stopped == "disk" and self.disk_watch is not None else None

    def hits(self) -> dict[str, int]:
        """What the run's cgroup refused (``RunGroup.hits``), ``{}`` without one; also keeps its peaks for
        ``record``."""
        if self.group is None:
            return {}
        self.peaks = self.group.peaks()
        return self.group.hits()

    def close(self) -> None:
        """Kill what is left in the run's group and remove it."""
        if self.group is not None:
            self.group.remove()

    def record(self) -> dict[str, Any]:
        """The run.json ``extra.limits`` entry: ``{name: {"limit": value, "by": how}}`` (``"not enforced: why"``),
        plus ``peak`` (the cgroup's most tasks / bytes at once) and, for disk, ``workspace_growth`` (bytes at the
        last look) where known."""
        out: dict[str, Any] = {}
        for name in NAMES:
            value = getattr(self.limits, name) or 0
            how = self.enforced.get(name) or (f"not enforced: {self.unenforced[name]}" if name in self.unenforced
                                              else "off")
            out[name] = {"limit": value, "by": how}
            if name in self.peaks:
                out[name]["peak"] = self.peaks[name]
            if name == "disk" and self.disk_watch is not None:
                out[name]["workspace_growth"] = self.disk_watch.grown
        return out


class DiskWatch:
    """The workspace's growth in bytes (``tree_bytes`` of every root) over its size when the run started; ``check``
    returns ``"disk"`` once it exceeds ``limit``, or once a folder that was not there at the start cannot be measured
    (too deep, not listable: ``tree_bytes``'s ``unmeasured``): what the watch cannot see counts as over the limit.
    Looks at most every ``DISK_EVERY`` seconds, and waits ten times as long as a look took (a big tree is walked less
    often)."""

    def __init__(self, root: Path | Sequence[Path], limit: int, clock=None):
        self.roots = [root] if isinstance(root, (str, Path)) else list(root)
        self.root, self.limit, self._clock = self.roots[0], limit, clock or time.monotonic
        self.unmeasured: set[str] = set()
        self.start = self._bytes()
        self.known = set(self.unmeasured)  # unmeasurable before the run: not the run's doing
        self.grown = 0
        self._next = 0.0

    def check(self, force: bool = False) -> str | None:
        """``"disk"`` when the workspace has grown past the limit or holds a new folder it cannot measure (looked at
        now when ``force``), else None."""
        now = self._clock()
        if now < self._next and not force:
            return None
        self.grown = self._bytes() - self.start
        took = self._clock() - now
        self._next = self._clock() + max(DISK_EVERY, 10 * took)
        return "disk" if self.grown > self.limit or self.unmeasured - self.known else None

    @property
    def evidence(self) -> str:
        """Why the last ``check`` said ``"disk"``, for people."""
        if self.grown > self.limit:
            return "the workspace grew past it"
        return f"a folder the run made cannot be measured: deeper than {MAX_DEPTH} levels, or not listable"

    def _bytes(self) -> int:
        self.unmeasured = set()
        return sum(tree_bytes(r, self.unmeasured) for r in self.roots)


MAX_DEPTH = 256  # folders below a root measured at most; a deeper one is unmeasured
# what every entry counts at least: one block (what a file of one byte costs). An empty file, a hard link or a short
# link holds no data block, but each costs the host an inode or a folder entry: counted as nothing, a run could
# spend the file system's inodes (a few million) within any byte limit; at a block each, 2 GiB is 524,288 entries.
ENTRY_BYTES = 4096
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def tree_bytes(root: Path, unmeasured: set[str] | None = None) -> int:
    """Bytes of the files below ``root``: each entry's allocated blocks (``st_blocks`` * 512), a regular file at least
    its size, every entry (an empty file, a link, each name of a hard link) at least ``ENTRY_BYTES`` (symlinks not
    followed; entries that vanish meanwhile skipped). A sparse file counts its size, not the
    little it uses: the harness reads every byte of a workspace's files (git hashes them) and writes them out again
    (the checks' clean tree), so a hundred 2 GiB holes cost the host 200 GiB of reading and of disk.

    Folders are walked by descriptor (``openat``), so a path longer than ``PATH_MAX`` is no obstacle; a folder that
    cannot be opened or listed (its mode, or deeper than ``MAX_DEPTH``) is added to ``unmeasured`` (its path below
    ``root``, with ``root``'s own path), for the caller to treat as unbounded."""
    total = 0

    def walk(fd: int, rel: str, depth: int) -> None:
        nonlocal total
        folders: list[str] = []
        try:
            with os.scandir(fd) as it:
                for entry in it:
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    size = st.st_size if stat.S_ISREG(st.st_mode) else 0
                    total += max(getattr(st, "st_blocks", 0) * 512, size, ENTRY_BYTES)
                    if stat.S_ISDIR(st.st_mode):
                        folders.append(entry.name)
        except OSError:
            if unmeasured is not None:
                unmeasured.add(rel)
            return
        for name in folders:
            where = f"{rel}/{name}"
            if depth >= MAX_DEPTH:
                if unmeasured is not None:
                    unmeasured.add(where)
                continue
            try:
                child = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except (FileNotFoundError, NotADirectoryError):
                continue  # gone or replaced meanwhile
            except OSError:
                if unmeasured is not None:
                    unmeasured.add(where)
                continue
            try:
                walk(child, where, depth + 1)
            finally:
                os.close(child)

    try:
        top = os.open(root, _DIR_FLAGS)
    except OSError:
        return 0  # no such folder (yet): nothing in it
    try:
        walk(top, str(root), 0)
    finally:
        os.close(top)
    return total


def confine(limits: Limits, workspace: Path | Sequence[Path] | None, parent: Parent | None) -> Confinement:
    """The confinement of one run with ``limits`` (0 fields: off), its ``workspace`` (the disk watch's root, or
    roots: the workspace and the box's scratch; None: no watch) and the session's cgroup ``parent`` (None: rlimits only). Raises ``OSError`` when the run's group
    cannot be made. rlimits never exceed the harness's own hard limits."""
    enforced: dict[str, str] = {}
    unenforced: dict[str, str] = {}
    group = None
    if parent is not None and (limits.memory or limits.processes):
        group = RunGroup.create(parent, memory=limits.memory or 0, processes=limits.processes or 0)
    rlimits: list[tuple[int, int, int]] = []

    def add(value: int, soft: int, hard: int | None = None) -> None:
        cur_hard = resource.getrlimit(value)[1]
        hard = soft if hard is None else hard
        if cur_hard != resource.RLIM_INFINITY:
            soft, hard = min(soft, cur_hard), min(hard, cur_hard)
        rlimits.append((value, soft, hard))

    if limits.memory:
        add(resource.RLIMIT_DATA, limits.memory)
        per = f"RLIMIT_DATA {human_bytes(limits.memory)} per process"
        enforced["memory"] = (f"cgroup v2 memory.max (whole tree) + {per}" if group and "memory" in group.limits
                              else per)
    if limits.processes:
        if group is not None and "processes" in group.limits:
            enforced["processes"] = f"cgroup v{group.parent.version} pids.max (whole tree)"
        elif hasattr(resource, "RLIMIT_NPROC") and os.getuid() != 0:
            budget = _user_tasks(os.getuid()) + limits.processes
            add(resource.RLIMIT_NPROC, budget)
            enforced["processes"] = f"RLIMIT_NPROC {budget} (this user's tasks at the start + {limits.processes})"
        else:
            unenforced["processes"] = ("running as root, where the kernel ignores RLIMIT_NPROC, and no delegated "
                                       "cgroup (pids) was found; see --agentrace-cgroup")
    if limits.disk:
        add(resource.RLIMIT_FSIZE, limits.disk)
        enforced["disk"] = f"RLIMIT_FSIZE {human_bytes(limits.disk)} (largest file)"
        if workspace is not None:
            scratch = not isinstance(workspace, (str, Path)) and len(workspace) > 1
            enforced["disk"] += (" + workspace growth" + (" (with the box's /tmp and /dev/shm)" if scratch else "")
                                 + " checked every second")
    if limits.cpu_time:
        seconds = max(1, int(limits.cpu_time))
        add(resource.RLIMIT_CPU, seconds, seconds + CPU_GRACE)
        enforced["cpu_time"] = f"RLIMIT_CPU {seconds} s per process"
    watch = DiskWatch(workspace, limits.disk) if limits.disk and workspace is not None else None
    return Confinement(limits, group, rlimits, watch, enforced, unenforced)


# errno text and shell messages a process prints when the kernel refused it (only read for a non-zero exit)
EVIDENCE: Mapping[str, re.Pattern[str]] = {
    "memory": re.compile(r"MemoryError|Cannot allocate memory|\bENOMEM\b|std::bad_alloc|out of memory|"
                         r"Allocation failed|failed to allocate|memory allocation of \d+ bytes failed|"
                         r"memory is exhausted|MemoryExhaustion", re.IGNORECASE),
    "processes": re.compile(r"Resource temporarily unavailable|\bEAGAIN\b|fork: retry|Cannot fork|"
                            r"can't fork|BlockingIOError|Too many processes", re.IGNORECASE),
    "disk": re.compile(r"File too large|\bEFBIG\b|File size limit exceeded|Disk quota exceeded"),
    "cpu_time": re.compile(r"CPU time limit exceeded|SIGXCPU"),
}
_SIGNALS = {"cpu_time": getattr(signal, "SIGXCPU", None), "disk": getattr(signal, "SIGXFSZ", None)}


@dataclass(frozen=True)
class Hit:
    """A limit a run hit: ``limit`` (a ``NAMES`` entry), its ``value`` and the ``evidence`` (for people)."""

    limit: str
    value: float
    evidence: str

    @property
    def reason(self) -> str:
        """``"resource limit: memory (64 MiB; MemoryError in the output)"``."""
        return f"{REASON.format(REASON_WORD[self.limit])} ({describe(self.limit, self.value)}; {self.evidence})"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def diagnose(limits: Limits, exit_code: int | None, output: str, stopped: str | None = None,
             events: Mapping[str, int] | None = None, evidence: str | None = None) -> Hit | None:
    """The limit a finished run hit, or None. ``exit_code`` is the agent's (negative: the signal that killed it;
    None: stopped by us), ``output`` its stderr and the end of its stdout, ``stopped`` the limit the harness
    stopped it for (``Confinement.watch``; ``evidence``: why, ``Confinement.evidence``), ``events`` the cgroup's counts (``Confinement.hits``). Text evidence
    counts only for a limit that is on and a run that exited non-zero (a process that recovered from a refused
    fork and finished its work did not fail)."""
    events = events or {}

    def on(name: str) -> bool:
        return bool(getattr(limits, name))

    if stopped and on(stopped):
        return Hit(stopped, getattr(limits, stopped), evidence or "the workspace grew past it")
    for name in ("memory", "processes"):
        if events.get(name) and on(name):
            what = "out-of-memory kills" if name == "memory" else "refused forks"
            return Hit(name, getattr(limits, name), f"{events[name]} {what} counted by its cgroup")
    for name, sig in _SIGNALS.items():
        if sig is not None and exit_code == -sig and on(name):
            return Hit(name, getattr(limits, name), f"killed by {signal.Signals(sig).name}")
    if exit_code in (0, None) or not output:
        return None
    for name in ("memory", "processes", "disk", "cpu_time"):
        found = EVIDENCE[name].search(output) if on(name) else None
        if found:
            return Hit(name, getattr(limits, name), f"{found.group(0)!r} in the output")
    return None


def limits_supported() -> bool:
    """Whether this platform has the rlimits used here (POSIX ``resource`` with ``RLIMIT_DATA``)."""
    return sys.platform != "win32" and hasattr(resource, "RLIMIT_DATA")
