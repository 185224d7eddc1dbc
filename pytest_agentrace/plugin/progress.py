"""Progress of a session's runs: a live status line on a terminal, plain progress lines elsewhere.

Two modes, chosen once per session on the controller (``Progress.mode``):

- ``live`` (a terminal, no pytest-xdist): while a run's agent runs (its item's call phase), one status is drawn
  after what pytest printed last (its ``path::item`` prefix under ``-v``, its dots without): runs done/total, the
  run (its item name without ``-v``), elapsed seconds, the tool calls and tokens seen so far when the agent's output
  streams them (the adapter's parser is run on the output received so far, at most once a second), and an ETA from
  the finished runs. It is drawn with save/restore-cursor escapes on a duplicate of the terminal's file descriptor
  (so pytest's output capture does not swallow it) and erased before pytest writes the result, so the reporter's
  own line is intact.
- ``plain`` (not a terminal, or under xdist, where the controller sees items start and finish on workers): every
  ``--agentrace-progress-seconds`` (default 30) while runs are in progress, one line ``agentrace: progress: 3/12
  runs done; running fix-add[claude-r1] 42 s; ETA 5 min``; under ``-v`` also ``agentrace: started <item>`` when an
  item starts and ``agentrace: <run id>: <status> (<agent> <s> s · <n> tool calls · <tokens> tokens)`` when its
  outcome arrives.

The ETA is the mean time of the runs finished so far (skipped runs not counted) times the runs still to come, the
running ones counted by what their mean leaves, divided by the number of xdist workers. Under ``-qq`` (or without
``--agentrace``) nothing is printed. Figures are seconds and tokens; nothing here changes an outcome.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from pytest_agentrace.agents import get_adapter
from pytest_agentrace.plugin.collect import RunItem
from pytest_agentrace.record.model import Outcome
from pytest_agentrace.report import numbers

if TYPE_CHECKING:
    from pytest_agentrace.plugin.session import AgentraceSession

TICK_SECONDS = 0.5
PARSE_EVERY = 1.0  # seconds between parses of the partial output
MAX_BUFFER = 4 * 1024 * 1024  # bytes of streamed output kept for the live parse


def fmt_status(agent: str, seconds: float, tool_calls: int | None = None, tokens: int | None = None) -> str:
    """``"alpha 12 s · 3 tool calls · 1,234 tokens"`` (unknown figures left out; seconds to 0.1 below 10 s)."""
    parts = [f"{agent} {numbers.duration(seconds)}"]
    if tool_calls:
        parts.append(f"{tool_calls} tool call{'s' if tool_calls != 1 else ''}")
    if tokens:
        parts.append(f"{numbers.tokens(tokens)} tokens")
    return " · ".join(parts)


class LiveRun:
    """The streamed stdout of one running agent and what its adapter's parser makes of it so far."""

    def __init__(self, run_id: str, agent: str, adapter: str):
        self.run_id, self.agent, self.adapter = run_id, agent, adapter
        self.start = time.monotonic()
        self.buffer = bytearray()
        self.lock = threading.Lock()
        self.parsed_at = 0.0
        self.parsed_size = -1
        self.tool_calls: int | None = None
        self.tokens: int | None = None

    def feed(self, chunk: bytes) -> None:
        """Called from the output reader thread with each chunk of the agent's stdout."""
        with self.lock:
            if len(self.buffer) < MAX_BUFFER:
                self.buffer += chunk[: MAX_BUFFER - len(self.buffer)]

    def figures(self) -> tuple[int | None, int | None]:
        """``(tool calls, tokens)`` from the output so far (re-parsed at most every ``PARSE_EVERY`` seconds)."""
        now = time.monotonic()
        with self.lock:
            size = len(self.buffer)
            text = bytes(self.buffer) if size != self.parsed_size and now - self.parsed_at >= PARSE_EVERY else None
        if text is not None:
            self.parsed_at, self.parsed_size = now, size
            try:
                usage = get_adapter(self.adapter).parse(text.decode("utf-8", errors="replace"), "", None)
                self.tool_calls, self.tokens = len(usage.tool_calls), usage.total_tokens
            except Exception:  # noqa: BLE001, S110 - partial output may not parse; progress is best effort
                pass
        return self.tool_calls, self.tokens

    def status(self) -> str:
        calls, tokens = self.figures()
        return fmt_status(self.agent, time.monotonic() - self.start, calls, tokens)


def fmt_eta(seconds: float | None) -> str:
    """``"ETA 40 s"``, ``"ETA 5 min"``, ``"ETA 1.5 h"``; ``"ETA unknown"`` before any run finished."""
    if seconds is None:
        return "ETA unknown"
    if seconds < 60:
        return f"ETA {seconds:.0f} s"
    if seconds < 3600:
        return f"ETA {seconds / 60:.0f} min"
    return f"ETA {seconds / 3600:.1f} h"


class Tracker:
    """Runs done and running, by node id, and the durations (seconds, start to finish) of those that ran."""

    def __init__(self, workers: int = 1):
        self.workers = max(1, workers)
        self.total: int | None = None
        self.done = 0
        self.running: dict[str, float] = {}  # node id -> monotonic start
        self.skipped: set[str] = set()
        self.durations: list[float] = []

    def collected(self, nodeids: Iterator[str] | list[str]) -> None:
        """The session's run items (the first report counts: every xdist worker collects the same)."""
        if self.total is None:
            self.total = sum(1 for n in nodeids if is_run_item(n))

    def started(self, nodeid: str, now: float) -> None:
        if is_run_item(nodeid):
            self.running[nodeid] = now

    def finished(self, nodeid: str, now: float) -> None:
        start = self.running.pop(nodeid, None)
        if start is None:
            return
        self.done += 1
        if nodeid not in self.skipped:
            self.durations.append(now - start)

    def eta(self, now: float) -> float | None:
        """Seconds until the last run is expected to finish (None before any run finished)."""
        if not self.durations or self.total is None:
            return None
        mean = sum(self.durations) / len(self.durations)
        waiting = max(0, self.total - self.done - len(self.running))
        left = waiting * mean + sum(max(0.0, mean - (now - start)) for start in self.running.values())
        return left / self.workers

    def counts(self) -> str:
        return f"{self.done}/{self.total if self.total is not None else '?'} runs done"

    def line(self, now: float, most: int = 3) -> str:
        """``agentrace: progress: 3/12 runs done; running a[x-r1] 42 s, b[x-r1] 3 s; ETA 5 min``."""
        running = sorted(self.running.items(), key=lambda kv: kv[1])
        names = [f"{nodeid.rsplit('::', 1)[-1]} {now - start:.0f} s" for nodeid, start in running[:most]]
        more = f", {len(running) - most} more" if len(running) > most else ""
        what = f"; running {', '.join(names)}{more}" if names else ""
        return f"agentrace: progress: {self.counts()}{what}; {fmt_eta(self.eta(now))}"


class Progress:
    """The progress display of a session, owned by the controller (which forwards the hook calls); see the module
    docstring for the two modes. ``lock`` is held around pytest's own report writes (the controller's hook
    wrappers), so a plain line from the timer thread never lands inside one of pytest's lines."""

    def __init__(self, config: pytest.Config, agentrace: AgentraceSession):
        self.config, self.agentrace = config, agentrace  # the session object (plugin.session): settings, feed
        self.tr: Any = None
        self.out = None
        self.mode = "off"  # until the session starts and the terminal reporter is known
        self.printed: set[str] = set()
        self.deferred: set[str] = set()  # node ids whose -v prefix pytest writes with the result (``started``)
        self.live: LiveRun | None = None
        self.lock = threading.RLock()
        self.tracker = Tracker(_workers(config))
        self.stop = threading.Event()
        self.timer: threading.Thread | None = None

    def start(self) -> None:
        """Choose the mode (at session start, when the terminal reporter exists); start the plain lines' timer."""
        if self.config.get_verbosity() < -1:
            return
        self.tr = self.config.pluginmanager.get_plugin("terminalreporter")
        if self.tr is None:
            return
        if _workers(self.config) == 1 and not _xdist(self.config) and self.tr.isatty:
            try:  # a duplicate of the terminal's descriptor: pytest's fd capture redirects fd 1 during tests
                self.out = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1, encoding="utf-8", errors="replace")
            except (OSError, ValueError, AttributeError):
                self.out = None
        self.mode = "live" if self.out is not None else "plain"
        if self.mode == "live":
            self.agentrace.feed = self.feed
        else:
            interval = self.agentrace.settings.progress_seconds
            self.timer = threading.Thread(target=self._every, args=(interval,), daemon=True, name="agentrace-progress")
            self.timer.start()

    def collected(self, nodeids: list[str]) -> None:
        with self.lock:
            self.tracker.collected(nodeids)

    def feed(self, spec: Any) -> Callable[[bytes], None] | None:
        """The live display's feed for ``spec``'s agent output (None when nothing is shown)."""
        live = self.live
        return live.feed if live is not None and live.run_id == spec.id else None

    # -- live ------------------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def running(self, item: pytest.Item) -> Iterator[None]:
        """Around a run item's call phase (where its agent runs): tick the live status while it runs."""
        spec = item.run_spec if isinstance(item, RunItem) else None
        if self.mode != "live" or spec is None:
            yield
            return
        self.live = live = LiveRun(spec.id, spec.agent.id, spec.agent.adapter)
        name = None if self.config.get_verbosity() >= 1 else item.name  # under -v pytest's line names the item
        stop = threading.Event()
        ticker = threading.Thread(target=self._tick, args=(live, name, stop), daemon=True)
        ticker.start()
        try:
            yield
        finally:
            stop.set()
            ticker.join(timeout=2)
            self.live = None
            self._draw("")

    def status(self, live: LiveRun, name: str | None) -> str:
        """The live status: ``2/12 runs done · fix-add[claude-r1]: claude 12 s · 3 tool calls · ETA 5 min``."""
        now = time.monotonic()
        run = f"{name}: {live.status()}" if name else live.status()
        return f"{self.tracker.counts()} · {run} · {fmt_eta(self.tracker.eta(now))}"

    def _tick(self, live: LiveRun, name: str | None, stop: threading.Event) -> None:
        while not stop.wait(TICK_SECONDS):
            self._draw(self.status(live, name))

    def _draw(self, text: str) -> None:
        """Draw ``text`` after the cursor and put the cursor back (ESC 7 / ESC 8); erase what was there (ESC [K)."""
        tw = self.config.get_terminal_writer()
        room = max(0, tw.fullwidth - tw.width_of_current_line - 4)
        text = f" [{text}]"[:room] if text and room > 10 else ""
        try:
            self.out.write(f"\x1b7{text}\x1b[K\x1b8")
            self.out.flush()
        except (OSError, ValueError):
            pass

    # -- plain -----------------------------------------------------------------------------------------------

    def _every(self, interval: float) -> None:
        """The timer thread of plain mode: a progress line every ``interval`` seconds while runs are in progress."""
        while not self.stop.wait(interval):
            with self.lock:
                if self.tracker.running:
                    self._line(self.tracker.line(time.monotonic()))

    def _line(self, text: str) -> None:
        """A line of our own between pytest's lines, always from column 0: when pytest's dots or a ``-v`` node id
        are on the current line (``TerminalWriter.width_of_current_line``), ours starts on the next. It is written
        with output capture suspended (``CaptureManager.global_and_fixture_disabled``: a run's call phase is
        captured, and a serial session's lines were lost in it). Then the line is left for pytest to end: under
        ``-v`` its next ``write_ensure_prefix`` starts a new line (the line is marked open, as pytest-xdist does for
        its report lines); with a file prefix and dots (the default) the prefix is written again before the next
        dot (``before_report``); where pytest's letters follow whatever is on the line (``-q``, pytest-xdist) ours
        is ended here."""
        with self.lock, self._uncaptured():
            tw = self.tr._tw
            if tw.width_of_current_line:
                tw.line()
            tw.write(text)
            if self.tr.showlongtestinfo:
                self.tr.currentfspath = -2
            elif self.tr.showfspath and not _xdist(self.config):
                self.tr.currentfspath = None
            else:
                tw.line()
                self.tr.currentfspath = None
            tw.flush()

    def _uncaptured(self) -> contextlib.AbstractContextManager:
        capman = self.config.pluginmanager.get_plugin("capturemanager")
        return capman.global_and_fixture_disabled() if capman is not None else contextlib.nullcontext()

    def started(self, nodeid: str, location: tuple | None = None) -> None:
        """A test starts; under ``-v`` in plain mode a run item gets ``agentrace: started <name>``, and pytest's own
        ``<node id> `` prefix (which a progress line would interrupt, after which pytest writes it again with the
        result) is left for its result line: the node id is printed once."""
        with self.lock:
            self.tracker.started(nodeid, time.monotonic())
            if self.mode == "plain" and self.config.get_verbosity() >= 1 and is_run_item(nodeid):
                self._line(f"agentrace: started {nodeid.rsplit('::', 1)[-1]}")
                prefix = self._prefix(nodeid, location)
                if prefix is not None:  # pytest's logstart writes its prefix only when the line does not hold it
                    self.tr.currentfspath = prefix
                    self.deferred.add(nodeid)

    def _prefix(self, nodeid: str, location: tuple | None) -> str | None:
        """The ``<node id> `` prefix pytest writes for a test under ``-v`` when it starts (its ``_locationline``;
        under pytest-xdist it writes it too, and the result line names the node again), or None when pytest has
        no such method."""
        locationline = getattr(self.tr, "_locationline", None)
        if location is None or not self.tr.showlongtestinfo or locationline is None:
            return None
        try:
            return str(locationline(nodeid, *location))
        except (TypeError, ValueError):
            return None

    def before_report(self, report: pytest.TestReport) -> None:
        """Before pytest writes a report it shows (the call phase, or a setup or teardown that did not pass): a
        ``-v`` node id left out at its start is written with its result (the line is marked open, so pytest's
        ``write_ensure_prefix`` starts a new line with it); under dots, a file prefix a progress line came after is
        written again, so the dot does not land on the progress line."""
        if self.mode != "plain" or self.tr is None or not (report.when == "call" or not report.passed):
            return
        with self.lock:
            if report.nodeid in self.deferred:
                self.deferred.discard(report.nodeid)
                self.tr.currentfspath = -2
            elif (self.tr.showfspath and not self.tr.showlongtestinfo and not _xdist(self.config)
                  and self.tr.currentfspath is None and is_run_item(report.nodeid)):
                self.tr.write_fspath_result(report.nodeid, "")

    def finished(self, nodeid: str) -> None:
        with self.lock:
            self.tracker.finished(nodeid, time.monotonic())

    def reported(self, report: pytest.TestReport, outcome: Outcome | None) -> None:
        """A test report, after pytest wrote it; ``outcome`` is its run's, when known. Under ``-v`` in plain mode one
        line after the report pytest shows the result for (the call phase, or a failed setup)."""
        if report.when == "setup" and report.skipped:
            self.tracker.skipped.add(report.nodeid)
        if self.mode != "plain" or self.config.get_verbosity() < 1 or outcome is None or report.nodeid in self.printed:
            return
        if report.when != "call" and not (report.when == "setup" and not report.passed):
            return
        self.printed.add(report.nodeid)
        u = outcome.usage
        status = fmt_status(outcome.agent, outcome.seconds, len(u.tool_calls), u.total_tokens)
        self._line(f"agentrace: {outcome.run_id}: {outcome.status} ({status})")

    def close(self) -> None:
        self.stop.set()
        if self.timer is not None:
            self.timer.join(timeout=2)
        if self.out is not None:
            try:
                self.out.close()
            except OSError:
                pass


def _xdist(config: pytest.Config) -> bool:
    return getattr(config.option, "dist", "no") != "no" or bool(getattr(config.option, "numprocesses", None))


def _workers(config: pytest.Config) -> int:
    """How many runs go at once: pytest-xdist's worker count (1 without it)."""
    try:
        return max(1, int(getattr(config.option, "numprocesses", None) or 1))
    except (TypeError, ValueError):
        return 1


def is_run_item(nodeid: str) -> bool:
    """Run items are named ``case[...-rN]`` inside a task/trial file (xdist gives the controller only node ids)."""
    head, _, name = nodeid.rpartition("::")
    return head.endswith((".yaml", ".yml", ".toml")) and name.endswith("]") and "-r" in name
