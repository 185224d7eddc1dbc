"""Run one command with a timeout in its own process group, with bounded output capture.

On timeout (or interrupt) the whole group gets SIGTERM, then SIGKILL after ``grace`` seconds (a further SIGINT or
SIGTERM meanwhile is held until the clean-up is done, so it cannot leave the group running); after a
normal exit any process left in the group (a background grandchild) is killed too, and so is, on Linux, any
descendant that left the group with ``setsid`` (``reaper``), so no descendant outlives its run. Output is read
by threads while the command runs; each stream keeps its first ``head`` and last ``tail`` bytes and counts the
total, and is decoded as UTF-8 with replacement. A cut stream holds one marker line where the bytes were dropped
(``CUT_MARKER``: ``[agentrace: output cut here: N of T bytes dropped, kept the first H and the last L]``), and
``ProcessResult.cut`` says how many bytes each stream lost. A ``preexec_fn`` runs in the child before exec (the run's
resource limits and cgroup, ``run.limits``), and a ``watch`` callback may stop the group while it runs
(``ProcessResult.stopped``: the workspace outgrew its disk limit).
"""

from __future__ import annotations

import collections
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_agentrace.run import reaper

DEFAULT_HEAD = 8 * 1024 * 1024  # bytes kept from the start of a stream
DEFAULT_TAIL = 2 * 1024 * 1024  # bytes kept from the end of a stream
GRACE_SECONDS = 3.0
WATCH_EVERY = 0.5  # seconds between two calls of ``run``'s ``watch``
POLL_SECONDS = 0.1  # how often a wait looks at its thread's stop event
_STOP = threading.local()  # .event: a threading.Event that stops every command of this thread (``stop_on``)
CUT_MARKER = ("[agentrace: output cut here: {dropped} of {total} bytes dropped, "
              "kept the first {head} and the last {tail}]")
CUT_RE = re.compile(
    r"^\[agentrace: output cut here: (\d+) of (\d+) bytes dropped, "
    r"kept the first (\d+) and the last (\d+)\]$", re.MULTILINE,
)
CUT_NOTE_PREFIX = {"raw.out": "raw.out cut: ", "raw.err": "raw.err cut: "}  # how a run record's cut notes start


class _Capture:
    """Head/tail-bounded reader of one pipe (runs in a thread)."""

    def __init__(self, stream, head: int, tail: int, on_chunk=None):
        self.stream, self.head_limit, self.tail_limit = stream, head, tail
        self.on_chunk = on_chunk  # called with every chunk read (a live progress display); None: nothing
        self.head = bytearray()
        self.tail: collections.deque[bytes] = collections.deque()
        self.tail_size = 0
        self.total = 0
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        try:
            while chunk := self.stream.read1(65536) if hasattr(self.stream, "read1") else self.stream.read(65536):
                self.total += len(chunk)
                if self.on_chunk is not None:
                    try:
                        self.on_chunk(chunk)
                    except Exception:  # noqa: BLE001 - a display must never cost output
                        self.on_chunk = None
                room = self.head_limit - len(self.head)
                if room > 0:
                    self.head += chunk[:room]
                    chunk = chunk[room:]
                if chunk:
                    self.tail.append(chunk)
                    self.tail_size += len(chunk)
                    while self.tail and self.tail_size - len(self.tail[0]) >= self.tail_limit:
                        self.tail_size -= len(self.tail.popleft())
        except (OSError, ValueError):
            pass

    def _kept(self) -> tuple[bytes, bytes]:
        tail = b"".join(self.tail)
        if len(self.head) + len(tail) >= self.total:
            return bytes(self.head), tail
        return bytes(self.head), tail[-self.tail_limit:] if self.tail_limit else b""

    @property
    def dropped(self) -> int:
        """Bytes of the stream that were not kept (0: the whole stream is kept)."""
        head, tail = self._kept()
        return self.total - len(head) - len(tail)

    def bytes(self) -> bytes:
        """The kept bytes; a cut stream has ``CUT_MARKER`` on a line of its own between head and tail."""
        head, tail = self._kept()
        dropped = self.total - len(head) - len(tail)
        if not dropped:
            return head + tail
        marker = CUT_MARKER.format(dropped=dropped, total=self.total, head=len(head), tail=len(tail))
        return head + ("" if head.endswith(b"\n") else "\n").encode() + marker.encode() + b"\n" + tail


@dataclass(frozen=True)
class ProcessResult:
    """A finished command: ``exit_code`` (None when killed by us), wall ``seconds``, decoded output.

    ``stdout_bytes``/``stderr_bytes`` count everything the command printed, also what was dropped;
    ``cut`` maps a stream (``"stdout"``, ``"stderr"``) to the bytes dropped from its middle (cut streams only).
    ``error`` is set when the command could not be started (e.g. ``FileNotFoundError``).
    """

    argv: tuple[str, ...] | str
    exit_code: int | None
    seconds: float
    stdout: str
    stderr: str
    stdout_bytes: int
    stderr_bytes: int
    timed_out: bool = False
    interrupted: bool = False
    error: str | None = None
    cut: dict[str, int] = field(default_factory=dict)
    stopped: str | None = None  # what ``watch`` returned when it stopped the command (e.g. ``"disk"``)


class _DeferredSignals:
    """Hold SIGINT and SIGTERM while a child is being spawned, then deliver them through the previous handlers.

    Without this, ``KeyboardInterrupt`` raised inside ``subprocess.Popen`` (after the fork, before it returns) loses
    the child's pid: the child runs in its own session, so nothing would ever kill it. Signal handlers can only be
    changed in the main thread; elsewhere this does nothing.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.pending: list[int] = []
        self.previous: dict[int, object] = {}
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                self.previous[sig] = signal.signal(sig, lambda signum, _frame: self.pending.append(signum))

    def release(self) -> None:
        """Restore the previous handlers and re-raise every signal that arrived meanwhile (once each)."""
        for sig, handler in self.previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        self.previous = {}
        for sig in dict.fromkeys(self.pending):
            signal.raise_signal(sig)
        self.pending = []


def stop_on(event: threading.Event | None) -> None:
    """Make ``event`` the calling thread's stop signal: once it is set, the command ``run`` is waiting for (and any
    later one of this thread) is terminated like a timeout, with no exit code (race mode stops the losers this
    way). ``None`` removes it.

    While a thread has a stop event its commands run beside other threads' (a race), so ``run`` does not sweep
    escaped descendants after each command: a sweep kills every new child of this process, and the other threads'
    commands are new children too. The caller sweeps once when all of them have ended (``run.race``)."""
    _STOP.event = event


def _kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def run(
    argv: Sequence[str] | str,
    *,
    cwd: Path | str,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    stdin: str | None = None,
    head: int = DEFAULT_HEAD,
    tail: int = DEFAULT_TAIL,
    grace: float = GRACE_SECONDS,
    on_stdout=None,
    preexec_fn: Callable[[], None] | None = None,
    watch: Callable[[], str | None] | None = None,
    pass_fds: Sequence[int] = (),
    on_start: Callable[[], None] | None = None,
) -> ProcessResult:
    """Run ``argv`` (a list; a string runs through ``/bin/sh -c``) and wait at most ``timeout`` seconds.

    ``stdin`` is written to the process and closed; ``None`` gives it ``/dev/null``. Never raises for the
    command's own failure: a command that cannot start returns ``exit_code=None`` with ``error`` set.
    ``KeyboardInterrupt`` during the wait terminates the group, then re-raises. ``on_stdout(chunk: bytes)``, when
    given, sees stdout as it arrives (from the reader thread; an exception in it only stops the calls).
    ``preexec_fn`` runs in the child before exec (resource limits, a cgroup; an exception there is an ``error``
    result). ``watch()``, when given, is called about every ``WATCH_EVERY`` seconds while the command runs; a
    non-None answer stops the group at once (SIGKILL) and is the result's ``stopped``. ``pass_fds``: descriptors
    the command keeps (every other one is closed; ``run.launch``'s start channel); ``on_start()`` is called once
    the command started (the start channel closes the harness's copy of its write end there).
    """
    shell = isinstance(argv, str)
    start = time.monotonic()
    # descendants that leave the group (setsid) are killed too; not beside other threads' commands (see stop_on)
    sweep = reaper.Sweep() if getattr(_STOP, "event", None) is None else None
    deferred = _DeferredSignals()  # a Ctrl-C while spawning must not lose the child's pid (it would outlive the run)
    try:
        proc = subprocess.Popen(
            argv,
            shell=shell,
            cwd=str(cwd),
            env=dict(env) if env is not None else None,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # own session and process group
            preexec_fn=preexec_fn,
            pass_fds=tuple(pass_fds),
        )
        if on_start is not None:
            on_start()
        out, err = _Capture(proc.stdout, head, tail, on_stdout), _Capture(proc.stderr, head, tail)
        if stdin is not None:
            threading.Thread(target=_feed, args=(proc, stdin), daemon=True).start()
    except (OSError, subprocess.SubprocessError) as exc:  # SubprocessError: preexec_fn raised in the child
        deferred.release()
        return ProcessResult(tuple(argv) if not shell else argv, None, 0.0, "", "", 0, 0, error=f"{type(exc).__name__}: {exc}")
    except BaseException:
        deferred.release()
        raise
    timed_out = interrupted = halted = False
    stopped = None
    try:
        deferred.release()  # a signal that came while spawning is delivered here, where the group gets cleaned up
        stopped, halted = _wait(proc, timeout, start, watch)
    except subprocess.TimeoutExpired:
        timed_out = True
    except KeyboardInterrupt:
        interrupted = True
    seconds = time.monotonic() - start
    held = _DeferredSignals()  # a second Ctrl-C / SIGTERM must not cut the clean-up short: held until it is done
    try:
        if timed_out or interrupted or stopped or halted:
            _kill_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
        # whatever is left in the group (also after a normal exit: background grandchildren) is killed
        _kill_group(proc.pid, signal.SIGKILL)
        proc.wait()
        if sweep is not None:
            sweep.kill_new()
        for cap in (out, err):
            cap.thread.join(timeout=5)
        _close_pipes(proc)
    finally:
        if interrupted:  # the interrupt is raised below; signals that came meanwhile add nothing
            held.pending.clear()
        held.release()
    if interrupted:
        raise KeyboardInterrupt
    code = None if timed_out or stopped or halted else proc.returncode
    return ProcessResult(
        argv=argv if shell else tuple(argv),
        exit_code=code,
        seconds=seconds,
        stdout=out.bytes().decode("utf-8", errors="replace"),
        stderr=err.bytes().decode("utf-8", errors="replace"),
        stdout_bytes=out.total,
        stderr_bytes=err.total,
        timed_out=timed_out,
        cut={name: cap.dropped for name, cap in (("stdout", out), ("stderr", err)) if cap.dropped},
        stopped=stopped,
    )


def _wait(proc: subprocess.Popen, timeout: float | None, start: float, watch) -> tuple[str | None, bool]:
    """Wait for ``proc`` (``TimeoutExpired`` after ``timeout`` seconds from ``start``). With ``watch``, look every
    ``WATCH_EVERY`` seconds and SIGKILL the group when it answers; with the thread's stop event (``stop_on``), end
    the wait when it is set. Returns ``(watch's answer or None, whether the stop event ended a running command)``."""
    event = getattr(_STOP, "event", None)
    if watch is None and event is None:
        proc.wait(timeout=timeout)
        return None, False
    step = POLL_SECONDS if event is not None else WATCH_EVERY
    next_look = time.monotonic() + WATCH_EVERY
    while True:
        if event is not None and event.is_set():
            return None, proc.poll() is None
        left = None if timeout is None else timeout - (time.monotonic() - start)
        if left is not None and left <= 0:
            raise subprocess.TimeoutExpired(proc.args, timeout)
        try:
            proc.wait(timeout=step if left is None else min(step, left))
            return None, False
        except subprocess.TimeoutExpired:
            pass
        if watch is None or time.monotonic() < next_look:
            continue
        next_look = time.monotonic() + WATCH_EVERY
        try:
            stop = watch()
        except Exception:  # noqa: BLE001 - a broken watch must not cost the run; it stops watching
            watch, stop = None, None
        if stop:
            _kill_group(proc.pid, signal.SIGKILL)
            return stop, False


def cut_notes(cut: Mapping[str, int], totals: Mapping[str, int]) -> tuple[str, ...]:
    """One line per cut stream for a run record, e.g. ``raw.out cut: 30,000,000 of 40,000,000 bytes dropped
    from the middle (the file marks the place); figures printed there are missing``. ``cut`` is
    ``ProcessResult.cut``, ``totals`` the streams' byte counts."""
    files = {"stdout": "raw.out", "stderr": "raw.err"}
    return tuple(
        f"{CUT_NOTE_PREFIX[files[name]]}{dropped:,} of {totals.get(name, 0):,} bytes dropped from the middle "
        "(the file marks the place); figures printed there are missing"
        for name, dropped in cut.items() if dropped and name in files
    )


def _close_pipes(proc: subprocess.Popen) -> None:
    """Close the parent's ends of the child's pipes (an unclosed one is a ``ResourceWarning``, an error under
    ``-W error``). Called once the readers have finished; a reader still blocked only sees its pipe end."""
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            try:
                stream.close()
            except (OSError, ValueError):
                pass


def _feed(proc: subprocess.Popen, data: str) -> None:
    try:
        proc.stdin.write(data.encode("utf-8"))
        proc.stdin.close()
    except (BrokenPipeError, OSError, ValueError):
        pass
