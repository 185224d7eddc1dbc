"""The start channel: how the harness tells its own start-up faults from the agent's, through a pipe the agent
cannot write.

An agent's exit code and stderr are the agent's to choose: a run judged ``error`` (the harness's fault, never
counted) from a line such as ``agentrace netns: cannot start the model double`` and exit 125 could be forged by
an agent that failed, which would then leave its failures out of its pass rate. So the box's start-up says how
it went on a pipe instead:

- the harness makes a pipe (``StartChannel``), passes its write end (``START_FD_ENV`` names its number) through
  bwrap and the run's helpers (``model_double.netns``, ``run.netbridge``), and reads it after the run;
- a helper that fails writes ``F`` + its message (``helper_fault``); a helper hands the write end on to its child
  only and closes its own copy at once (``start_child``), and is not dumpable, so that the agent cannot take the
  pipe from ``/proc/<helper>/fd``;
- the innermost command is the launcher (``launched``): it writes ``S``, marks the pipe close-on-exec and
  ``exec``\\ s the agent; an ``exec`` that fails writes ``E`` + the error (no agent ran). The agent never holds
  the pipe: ``exec`` closed it.

Read after the run (``StartChannel.verdict``): nothing means the box never ran the launcher (bwrap could not set
the box up: a harness fault, with bwrap's first stderr line); ``F`` a helper's fault; ``SE`` an agent that could
not start; ``S`` alone an agent that ran, whose exit code and output are its own. bwrap's own init process closes
every inherited descriptor (only the command gets it).

A channel made with ``report=True`` has a second pipe, the report pipe (``REPORT_FD_ENV``), for a helper that
tells the harness what happened during the run: the model double inside the run's namespace sends its own
account of the requests it served (``model_double.routes.report_of``: a cassette mismatch, a script step without a
fitting tool) when the agent has exited. The helper takes the write end (``take_report``) and keeps it out of its
child's reach (never passed on, not inheritable, the helper not dumpable); the launcher closes one it is handed.
The harness reads it after the run (``StartChannel.report``): never from a file the agent could write.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import namedtuple
from collections.abc import Sequence

START_FD_ENV = "AGENTRACE_START_FD"  # the write end's number, for the helpers and the launcher (never the agent)
REPORT_FD_ENV = "AGENTRACE_REPORT_FD"  # the report pipe's write end, for a helper that reports on the run
READ_CAP = 65536  # bytes read back from a pipe (a pipe's default capacity: a write of this size never blocks)

# -S -I: no site-packages, no PYTHON* variables, no user site: nothing of the agent's environment runs here
LAUNCHER = (
    "import os, sys\n"
    "r = os.environ.pop('AGENTRACE_REPORT_FD', '')\n"
    "if r.isdigit():\n"
    "    try:\n"
    "        os.close(int(r))\n"
    "    except OSError:\n"
    "        pass\n"
    "fd = int(os.environ.pop('AGENTRACE_START_FD'))\n"
    "os.set_inheritable(fd, False)\n"
    "os.write(fd, b'S')\n"
    "argv = sys.argv[1:]\n"
    "try:\n"
    "    os.execvp(argv[0], argv)\n"
    "except OSError as exc:\n"
    "    os.write(fd, ('E%s: %s' % (type(exc).__name__, exc)).encode('utf-8', 'replace')[:4000])\n"
    "    os._exit(127)\n"
)


def launched(argv: Sequence[str]) -> list[str]:
    """``argv`` behind the launcher (this interpreter with ``-S -I -c``): it reports its start on the pipe named by
    ``START_FD_ENV`` and ``exec``\\ s ``argv`` (found on the environment's ``PATH``)."""
    return [sys.executable, "-S", "-I", "-c", LAUNCHER, *argv]


# the two records below are ``collections.namedtuple`` classes, not dataclasses or ``typing.NamedTuple``: the run
# helpers import this module at every run's start inside the box, and ``dataclasses`` (with ``inspect``) and
# ``typing`` took about a third of a helper's start-up CPU


class Wrapped(namedtuple("Wrapped", ("argv", "env", "helper"), defaults=(None,))):
    """An agent's ``argv`` (list[str]) and ``env`` (dict[str, str]) as a run stage left them, and the ``helper``
    (str or None) that stage put in front of ``argv`` (``netns``: the offline namespace and its model double;
    ``netbridge``: the provider network's bridge), which starts the launcher in front of the agent itself; None: no
    helper, the caller puts the launcher there (``launched``)."""

    __slots__ = ()

    def launchable(self) -> list[str]:
        """``argv`` as it is started: behind the launcher unless a helper is in front (which puts it there)."""
        return self.argv if self.helper else launched(self.argv)


class Start(namedtuple("Start", ("fault", "kind"), defaults=(None, None))):
    """What the start channel said: ``fault`` (str or None) is the harness's message when the agent did not run
    through no fault of its own (``kind``: ``box`` (the sandbox could not be set up), ``helper`` (a run helper
    failed: the message is the helper's, such as ``model double: ...``), ``exec`` (the agent's program could not be
    started)); None when the agent ran."""

    __slots__ = ()


def _read_all(fd: int) -> bytes:
    """What is in the pipe ``fd`` (at most ``READ_CAP`` bytes), without blocking."""
    data = b""
    try:
        while len(data) < READ_CAP:
            chunk = os.read(fd, READ_CAP - len(data))
            if not chunk:
                break
            data += chunk
    except BlockingIOError:  # a writer still holds the pipe (a stray descendant): what is there is enough
        pass
    return data


class StartChannel:
    """One run's pipe (see the module docstring), and with ``report`` its report pipe. ``env(env)`` adds
    ``START_FD_ENV`` (and ``REPORT_FD_ENV``); ``pass_fds`` is what the process start must keep open;
    ``close_write()`` after the start; ``verdict(stderr)`` and ``report()`` after the run. A context manager: its
    exit closes every end still open, also when the run raised."""

    def __init__(self, report: bool = False) -> None:
        self.read_fd, self.write_fd = os.pipe()
        self.report_read, self.report_write = os.pipe() if report else (-1, -1)
        for fd in (self.read_fd, self.report_read):
            if fd >= 0:
                os.set_blocking(fd, False)
        for fd in (self.write_fd, self.report_write):
            if fd >= 0:
                os.set_inheritable(fd, True)

    def __enter__(self) -> StartChannel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def pass_fds(self) -> tuple[int, ...]:
        return tuple(fd for fd in (self.write_fd, self.report_write) if fd >= 0)

    def env(self, env: dict[str, str]) -> dict[str, str]:
        more = {REPORT_FD_ENV: str(self.report_write)} if self.report_write >= 0 else {}
        return {**env, START_FD_ENV: str(self.write_fd), **more}

    def close_write(self) -> None:
        """Close the harness's write ends (the process started holds its own)."""
        for name in ("write_fd", "report_write"):
            fd = getattr(self, name)
            if fd >= 0:
                os.close(fd)
                setattr(self, name, -1)

    def close(self) -> None:
        """Close every end still open."""
        self.close_write()
        for name in ("read_fd", "report_read"):
            fd = getattr(self, name)
            if fd >= 0:
                os.close(fd)
                setattr(self, name, -1)

    def read(self) -> bytes:
        """What was written on the start pipe (at most ``READ_CAP`` bytes), without blocking."""
        self.close_write()
        return _read_all(self.read_fd) if self.read_fd >= 0 else b""

    def report(self) -> bytes | None:
        """What a helper wrote on the report pipe (at most ``READ_CAP`` bytes; empty when it wrote nothing), without
        blocking; None for a channel without one."""
        if self.report_read < 0:
            return None
        self.close_write()
        return _read_all(self.report_read)

    def verdict(self, stderr: str, boxed: bool) -> Start:
        """The run's ``Start`` from the pipe; ``stderr`` (the run's) names bwrap's fault when the box never ran the
        launcher; ``boxed``: the run went through bwrap (without it an empty pipe means the launcher could not
        start, which the process start already reports)."""
        data = self.read()
        if self.read_fd >= 0:
            os.close(self.read_fd)
            self.read_fd = -1
        if data.startswith(b"F"):
            return Start(data[1:].decode("utf-8", "replace").strip() or "a run helper failed", "helper")
        if data.startswith(b"SE"):
            return Start(data[2:].decode("utf-8", "replace").strip(), "exec")
        if not data and boxed:
            first = next((line for line in stderr.splitlines() if line.strip()), "no output")
            return Start(f"the sandbox could not start the run: {first.strip()}", "box")
        return Start()


def _fd() -> int | None:
    value = os.environ.get(START_FD_ENV, "")
    return int(value) if value.isdigit() else None


def undumpable() -> None:
    """Make this process non-dumpable (``prctl(PR_SET_DUMPABLE, 0)``): a process of the same user without
    capabilities can no longer open its ``/proc/<pid>/fd`` entries. Does nothing where ``prctl`` is missing."""
    import ctypes  # only in the helpers, which run inside the box

    try:
        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
    except (OSError, AttributeError):
        pass


def helper_fault(message: str) -> None:
    """Tell the harness (``F`` + ``message``) that this run helper failed before the agent started; also printed to
    stderr for a person reading ``raw.err``. Without a start channel only printed."""
    print(message, file=sys.stderr, flush=True)
    fd = _fd()
    if fd is not None:
        try:
            os.write(fd, b"F" + message.encode("utf-8", "replace")[:4000])
        except OSError:
            pass


def take_report() -> int | None:
    """The report pipe's write end handed to this helper (``REPORT_FD_ENV``), taken out of the environment and made
    not inheritable so that no child of the helper learns of it or holds it; None without one."""
    value = os.environ.pop(REPORT_FD_ENV, "")
    if not value.isdigit():
        return None
    fd = int(value)
    try:
        os.set_inheritable(fd, False)
    except OSError:
        return None
    return fd


def send_report(fd: int | None, data: bytes) -> None:
    """Write ``data`` (at most ``READ_CAP`` bytes, so the write never waits on the reader) on the report pipe ``fd``
    and close it; nothing without a pipe."""
    if fd is None:
        return
    try:
        os.set_blocking(fd, False)
        os.write(fd, data[:READ_CAP])
    except OSError:
        pass
    finally:
        try:
            os.close(fd)
        except OSError:
            pass


def start_child(argv: Sequence[str]) -> subprocess.Popen:
    """Start a helper's child (``argv``: the launcher and the agent) with the start channel handed on to it, and
    close this helper's own copy at once. Raises ``OSError`` when it cannot start."""
    fd = _fd()
    child = subprocess.Popen(list(argv), pass_fds=(fd,) if fd is not None else ())
    if fd is not None:
        os.environ.pop(START_FD_ENV, None)
        try:
            os.close(fd)
        except OSError:
            pass
    return child
