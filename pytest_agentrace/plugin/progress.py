"""Progress of long runs under ``-v``: a live status after each running agent item, or plain lines.

Two modes, chosen once per session on the controller (``Progress.mode``):

- ``live`` (a terminal, no pytest-xdist): while an item's agent runs, a status is drawn after pytest's own
  ``path::item`` prefix - agent, elapsed seconds, and the tool calls and tokens seen so far when the agent's
  output streams them (the adapter's parser is run on the output received so far, at most once a second). It
  is drawn with save/restore-cursor escapes on a duplicate of the terminal's file descriptor (so pytest's output
  capture does not swallow it) and erased before pytest writes the result, so the reporter's own line is intact.
- ``plain`` (not a terminal, or under xdist, where the controller sees items start and finish on workers):
  a line ``agentrace: started <run id>`` when an item starts and ``agentrace: <run id>: <status> in <s> s,
  <n> tool calls, <tokens> tokens`` when its outcome arrives.

Without ``-v`` (or without ``--agentrace``) nothing is printed. Figures are seconds and tokens; nothing here
changes an outcome.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from pytest_agentrace.agents import get_adapter
from pytest_agentrace.plugin.collect import FEED_KEY, RUNSPEC_KEY
from pytest_agentrace.record.model import Outcome

TICK_SECONDS = 0.5
PARSE_EVERY = 1.0  # seconds between parses of the partial output
MAX_BUFFER = 4 * 1024 * 1024  # bytes of streamed output kept for the live parse


def fmt_status(agent: str, seconds: float, tool_calls: int | None = None, tokens: int | None = None) -> str:
    """``"alpha 12 s · 3 tool calls · 1,234 tokens"`` (unknown figures left out; seconds to 0.1 below 10 s)."""
    parts = [f"{agent} {seconds:.1f} s" if seconds < 10 else f"{agent} {seconds:.0f} s"]
    if tool_calls:
        parts.append(f"{tool_calls} tool call{'s' if tool_calls != 1 else ''}")
    if tokens:
        parts.append(f"{tokens:,} tokens")
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


class Progress:
    """The progress display of a session, owned by the controller (which forwards the hook calls); see the module
    docstring for the two modes. Without ``-v`` it is off."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.tr: Any = None
        self.out = None
        self.mode = "off"  # until the session starts and the terminal reporter is known
        self.printed: set[str] = set()
        self.live: LiveRun | None = None

    def start(self) -> None:
        """Choose the mode (at session start, when the terminal reporter exists)."""
        if self.config.get_verbosity() < 1:
            return
        self.tr = self.config.pluginmanager.get_plugin("terminalreporter")
        if self.tr is None:
            return
        xdist = getattr(self.config.option, "dist", "no") != "no" or bool(getattr(self.config.option, "numprocesses", None))
        if not xdist and self.tr.isatty:
            try:  # a duplicate of the terminal's descriptor: pytest's fd capture redirects fd 1 during tests
                self.out = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1, encoding="utf-8", errors="replace")
            except (OSError, ValueError, AttributeError):
                self.out = None
        self.mode = "live" if self.out is not None else "plain"
        if self.mode == "live":
            self.config.stash[FEED_KEY] = self.feed

    def feed(self, spec: Any) -> Callable[[bytes], None] | None:
        """The live display's feed for ``spec``'s agent output (None when nothing is shown)."""
        live = self.live
        return live.feed if live is not None and live.run_id == spec.id else None

    # -- live ------------------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def running(self, item: pytest.Item) -> Iterator[None]:
        """Around an item's setup (where its agent runs): tick the live status while it runs."""
        spec = item.stash.get(RUNSPEC_KEY, None)
        if self.mode != "live" or spec is None:
            yield
            return
        self.live = live = LiveRun(spec.id, spec.agent.id, spec.agent.adapter)
        stop = threading.Event()
        ticker = threading.Thread(target=self._tick, args=(live, stop), daemon=True)
        ticker.start()
        try:
            yield
        finally:
            stop.set()
            ticker.join(timeout=2)
            self.live = None
            self._draw("")

    def _tick(self, live: LiveRun, stop: threading.Event) -> None:
        while not stop.wait(TICK_SECONDS):
            self._draw(live.status())

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

    def _line(self, text: str) -> None:
        """A line of our own between pytest's lines: end pytest's open line, write ours, and mark the line as
        open (as pytest-xdist does for its report lines) so the reporter starts its next output on a new line."""
        self.tr.ensure_newline()
        self.tr.write(text)
        self.tr.currentfspath = -2

    def started(self, nodeid: str) -> None:
        if self.mode == "plain" and is_run_item(nodeid):
            self._line(f"agentrace: started {nodeid.rsplit('::', 1)[-1]}")

    def reported(self, report: pytest.TestReport, outcome: Outcome | None) -> None:
        """A test report; ``outcome`` is its run's, when known. One line beside the report pytest shows the result
        for (the call phase, or a failed setup)."""
        if self.mode != "plain" or outcome is None or report.nodeid in self.printed:
            return
        if report.when != "call" and not (report.when == "setup" and not report.passed):
            return
        self.printed.add(report.nodeid)
        u = outcome.usage
        status = fmt_status(outcome.agent, outcome.seconds, len(u.tool_calls), u.total_tokens)
        self._line(f"agentrace: {outcome.run_id}: {outcome.status} ({status})")

    def close(self) -> None:
        if self.out is not None:
            try:
                self.out.close()
            except OSError:
                pass


def is_run_item(nodeid: str) -> bool:
    """Run items are named ``case[...-rN]`` inside a task/trial file (xdist gives the controller only node ids)."""
    head, _, name = nodeid.rpartition("::")
    return head.endswith((".yaml", ".yml", ".toml")) and name.endswith("]") and "-r" in name
