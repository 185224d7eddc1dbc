"""Catch the descendants of a run that left its process group (``setsid``, ``start_new_session``, double fork).

A run's command gets its own process group, and the group is killed when the run ends; a descendant that made
itself a new session is not in that group. On Linux this process makes itself a *child subreaper*
(``prctl(PR_SET_CHILD_SUBREAPER)``, see prctl(2)): an orphaned descendant is then re-parented to us instead of to
init, so after the command exits every escaped descendant is our child. ``Sweep`` remembers our children before a
run starts and, afterwards, kills (SIGKILL, with their process groups) and reaps every new one, repeating while
killing them orphans further descendants. Children are listed from /proc (psutil where it has no children lists).
Elsewhere (no prctl) nothing is swept.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading

PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
MAX_ROUNDS = 20  # a fork bomb that keeps re-spawning is cut off after this many kill rounds
_lock = threading.Lock()
_subreaper: bool | None = None


def become_subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants (once per process). Returns whether it is."""
    global _subreaper
    with _lock:
        if _subreaper is None:
            _subreaper = False
            if sys.platform.startswith("linux"):
                try:
                    libc = ctypes.CDLL(None, use_errno=True)
                    _subreaper = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
                except (OSError, AttributeError):
                    _subreaper = False
        return _subreaper


def _children() -> set[int]:
    """This process's children's pids: the ``/proc/self/task/*/children`` lists (proc(5); a few small reads),
    else psutil (which reads every process's ``/proc/PID/stat``, and is slow to import)."""
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        tasks = []
    pids: set[int] = set()
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/children", encoding="ascii") as fh:
                pids.update(int(pid) for pid in fh.read().split())
        except FileNotFoundError:
            if tid == str(os.getpid()):  # the kernel has no children lists (CONFIG_PROC_CHILDREN off)
                return _children_psutil()
        except (OSError, ValueError):
            continue  # a thread that ended meanwhile
    return pids if tasks else _children_psutil()


def _children_psutil() -> set[int]:
    import psutil

    try:
        return {p.pid for p in psutil.Process().children()}
    except psutil.Error:
        return set()


def _reaped(pid: int) -> bool:
    """Reap ``pid``, a child of ours, when it has already exited (``waitpid(WNOHANG)``); True when it had. A
    sandboxed command leaves one such child every time: bwrap's inner process (``--new-session``, a session of its
    own) is re-parented to us, the subreaper, when the outer bwrap exits, and has died with it. An exited process
    runs nothing: there is nothing to kill, and no psutil to import for it."""
    try:
        done, _status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True  # not (or no longer) our child to wait for: reaped elsewhere
    except OSError:
        return False
    return done == pid


class Sweep:
    """Kill what a run left behind outside its process group. Create it just before the run's command starts;
    call ``kill_new()`` after the command has exited and its group was killed. Returns nothing; never raises."""

    def __init__(self) -> None:
        self.active = become_subreaper()
        self.before = set(_children()) if self.active else set()

    def kill_new(self) -> int:
        """SIGKILL every child (and its process group) that was not our child before the run, reap it, and repeat
        for the orphans that killing re-parents to us. Returns how many processes were killed."""
        if not self.active:
            return 0
        killed = 0
        for _ in range(MAX_ROUNDS):
            pids = [pid for pid in _children() if pid not in self.before and not _reaped(pid)]
            if not pids:
                break
            import psutil  # only when something escaped alive: its import is slow

            new = []
            for pid in pids:
                try:
                    new.append(psutil.Process(pid))
                except psutil.Error:
                    continue  # gone meanwhile
            for proc in new:
                for kill in (lambda p=proc: os.killpg(p.pid, signal.SIGKILL), proc.kill):
                    try:
                        kill()
                    except (ProcessLookupError, PermissionError, psutil.Error):
                        pass
            psutil.wait_procs(new, timeout=5)  # reaps them (they are our children)
            killed += len(new)
        return killed


def signal_helpers(sig: int, keep: set[int] | frozenset[int] = frozenset()) -> list[int]:
    """Send ``sig`` to this process's children that share its session (pytest-xdist workers, helpers it started),
    not to those in a session of their own (a run's command: its group is ended by whoever runs it). Returns their
    pids; ``keep``: pids left alone (children from before the session). A Ctrl-C in a terminal reaches every
    process of the foreground group; a signal to the controller alone reaches its workers only this way."""
    import psutil

    mine = os.getsid(0)
    sent = []
    for pid in _children():
        if pid in keep:
            continue
        try:
            if os.getsid(pid) == mine:
                os.kill(pid, sig)
                sent.append(pid)
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
    return sent
