"""Shared helpers for the CLI adapters' parsers: JSON lines, numbers, tool-call summaries, warnings.

Every parser reads a finished run's captured output and builds a ``Usage``; none of them raises for bad
output. ``load_events`` splits stdout into JSON events (one per line, or one whole JSON document: an object
or an array of events), ``Collector`` gathers tool calls (deduplicated by call id, in first-seen order) and
parse warnings (deduplicated, with counts), and ``Collector.usage`` fills ``total_tokens`` from the parts.

Token convention for every adapter (so that pricing can multiply each kind by its own rate):
``input_tokens`` are input tokens neither read from nor written to a prompt cache, ``cache_read_tokens`` and
``cache_write_tokens`` are the cached shares, ``output_tokens`` include reasoning/thinking tokens, and
``total_tokens`` is their sum. CLIs whose counters nest (OpenAI style: input includes cached input) are
converted by their adapter, which says so in its docstring.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pytest_agentrace import untrusted
from pytest_agentrace.agents.base import last_text
from pytest_agentrace.record.model import ToolCall, Usage
from pytest_agentrace.run.process import CUT_RE

ANSWER_LIMIT = 20000  # characters of the final answer kept (the end of it)
SUMMARY_LIMIT = 120  # characters of a tool call's argument summary
# argument keys that best describe a tool call, in order of preference
SUMMARY_KEYS = ("command", "cmd", "file_path", "filePath", "path", "notebook_path", "pattern", "query", "url", "prompt", "description")


@dataclass
class Events:
    """``events``: the JSON objects in order; ``text_lines``: lines that were not JSON; ``warnings``."""

    events: list[dict[str, Any]] = field(default_factory=list)
    text_lines: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def load_events(text: str) -> Events:
    """Parse CLI output into JSON events.

    Accepts JSON lines (one object per line), one JSON object (possibly pretty-printed over many lines) or a
    JSON array of objects (``claude --output-format json`` in some versions). A line that starts like JSON
    but does not parse is a warning (``line N: malformed JSON``); other non-JSON lines are kept in
    ``text_lines`` and counted in one warning. The marker line of a cut capture (``process.CUT_MARKER``) is
    skipped: the run record already says what was cut. Never raises.
    """
    out = Events()
    stripped = (text or "").strip()
    if not stripped:
        return out
    if stripped[0] in "[{":
        rest = ""
        try:
            whole = untrusted.loads(stripped)
        except ValueError:
            # one document followed by plain text (a CLI's trailing notice); JSON lines are left to the loop below
            try:
                whole, end = untrusted.raw_decode(stripped)
                rest = stripped[end:].strip()
            except ValueError:
                whole = None
            if rest[:1] in ("{", "[") or (isinstance(whole, dict) and "\n" not in stripped[:end]):
                whole = None
        if whole is not None and rest:
            out.text_lines.extend(line for line in rest.splitlines() if line.strip())
            out.warnings.append(f"{len(out.text_lines)} non-JSON line(s) ignored")
        if isinstance(whole, dict):
            out.events.append(whole)
            return out
        if isinstance(whole, list):
            for i, item in enumerate(whole):
                if isinstance(item, dict):
                    out.events.append(item)
                else:
                    out.warnings.append(f"array item {i}: not a JSON object")
            return out
    for n, line in enumerate(stripped.splitlines(), 1):
        s = line.strip()
        if not s or (s.startswith("[agentrace: output cut here:") and CUT_RE.match(s)):
            continue
        if s[0] in "{[":
            try:
                value = untrusted.loads(s)
            except ValueError:
                out.warnings.append(f"line {n}: malformed JSON: {one_line(s, 60)}")
                continue
            if isinstance(value, dict):
                out.events.append(value)
            else:
                out.warnings.append(f"line {n}: JSON that is not an object")
        else:
            out.text_lines.append(line)
    if out.text_lines:
        out.warnings.append(f"{len(out.text_lines)} non-JSON line(s) ignored")
    return out


def as_int(value: Any) -> int | None:
    """An integer token count from a JSON value (int, integral float or digit string); ``None`` otherwise."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return None


def as_float(value: Any) -> float | None:
    """A number (USD, seconds) from a JSON value; ``None`` for anything else (bools included)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def add(*values: int | None) -> int | None:
    """Sum of the known values; ``None`` when none is known."""
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def sub(value: int | None, *parts: int | None) -> int | None:
    """``value`` minus the known ``parts`` (never below 0); ``None`` when ``value`` is unknown."""
    if value is None:
        return None
    return max(0, value - sum(p for p in parts if p is not None))


def mapping(value: Any) -> dict[str, Any]:
    """``value`` when it is a dict, else an empty dict (for walking untrusted JSON)."""
    return value if isinstance(value, dict) else {}


def one_line(text: str, limit: int = SUMMARY_LIMIT) -> str:
    """``text`` with whitespace runs collapsed to one space, cut to ``limit`` characters (``…`` marks a cut)."""
    text = re.sub(r"\s+", " ", str(text)).strip()
    return text if len(text) <= limit else text[: limit - 1] + "…"


def summarize(args: Any, limit: int = SUMMARY_LIMIT) -> str:
    """A short one-line summary of a tool call's arguments.

    A dict gives the value of its most telling key (``command``, ``file_path``, ``path``, ``pattern``, ...; an
    argv list is shell-joined), else its compact JSON; a JSON string is decoded first; other values are
    stringified. Always at most ``limit`` characters.
    """
    if args is None:
        return ""
    if isinstance(args, str):
        s = args.strip()
        if s[:1] in "{[":
            try:
                return summarize(untrusted.loads(s), limit)
            except ValueError:
                pass
        return one_line(s, limit)
    if isinstance(args, Mapping):
        for key in SUMMARY_KEYS:
            value = args.get(key)
            if value not in (None, "", []):
                return summarize(value, limit)
        return one_line(json.dumps(args, sort_keys=True, ensure_ascii=False), limit)
    if isinstance(args, (list, tuple)):
        if all(isinstance(a, str) for a in args):
            return one_line(shlex.join(args), limit)
        return one_line(json.dumps(args, ensure_ascii=False), limit)
    return one_line(str(args), limit)


def answer_text(text: str | None) -> str | None:
    """The final answer as kept in a record: stripped, its last ``ANSWER_LIMIT`` characters, None if empty."""
    return last_text(text or "", ANSWER_LIMIT)


class FinalText:
    """The final answer of a stream: assistant text after the last tool activity.

    ``add`` appends assistant text (whole messages or streamed deltas, joined with ``sep``), ``tool`` marks tool
    activity (the next text starts a new segment), ``text`` returns the last non-empty segment.
    """

    def __init__(self, sep: str = "") -> None:
        self.sep = sep
        self._segments: list[list[str]] = [[]]

    def add(self, text: Any) -> None:
        if isinstance(text, str) and text:
            self._segments[-1].append(text)

    def tool(self) -> None:
        """Tool activity: the next text starts a new segment."""
        self.boundary()

    def boundary(self) -> None:
        """End the current segment (tool activity, or the end of one whole message)."""
        if self._segments[-1]:
            self._segments.append([])

    def text(self) -> str | None:
        for seg in reversed(self._segments):
            if seg:
                return self.sep.join(seg)
        return None


COUNT_FIELDS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "total_tokens", "cost_usd", "turns")
MAX_COUNT = 2**53 - 1  # the largest count (tokens, turns) kept: every integer up to it is exact in a float64 and a JSON number


class Collector:
    """Accumulates tool calls and warnings while a parser walks events, then builds the ``Usage``."""

    def __init__(self, warnings: Iterable[str] = ()) -> None:
        self._tools: dict[str, ToolCall] = {}
        self._warnings: dict[str, int] = {}
        for w in warnings:
            self.warn(w)

    def tool(self, name: str, args: Any = None, call_id: str | None = None, summary: str | None = None) -> None:
        """Record a tool call once per ``call_id`` (a later sighting fills an empty summary)."""
        key = str(call_id) if call_id not in (None, "") else f"#{len(self._tools)}"
        text = summary if summary is not None else summarize(args)
        old = self._tools.get(key)
        if old is None:
            self._tools[key] = ToolCall(str(name or "?"), text)
        elif not old.summary and text:
            self._tools[key] = ToolCall(old.name, text)

    def has_tool(self, call_id: str) -> bool:
        return str(call_id) in self._tools

    def warn(self, message: str) -> None:
        """Add a parse warning; repeats are counted, not repeated."""
        self._warnings[message] = self._warnings.get(message, 0) + 1

    def unknown(self, what: str, value: Any) -> None:
        """Warn about an unknown event/item type (``unknown event type 'x'``)."""
        self.warn(f"unknown {what} {one_line(repr(value), 60)}")

    @property
    def warnings(self) -> tuple[str, ...]:
        return tuple(m if n == 1 else f"{m} (x{n})" for m, n in self._warnings.items())

    def usage(self, **fields: Any) -> Usage:
        """Build the ``Usage``: tool calls and warnings from here, ``total_tokens`` from the token parts when
        not given (None when neither input nor output tokens are known). A negative or non-finite count or cost,
        or a count or cost above ``MAX_COUNT``, is impossible output: it is dropped (None) with a parse warning, never
        summed, stored or priced."""
        import math

        for name in COUNT_FIELDS:
            value = fields.get(name)
            if value is not None and (not math.isfinite(value) or value < 0 or value > MAX_COUNT):
                self.warn(f"impossible {name} {value!r} ignored")
                fields[name] = None
        if fields.get("total_tokens") is None and (fields.get("input_tokens") is not None or fields.get("output_tokens") is not None):
            fields["total_tokens"] = add(
                fields.get("input_tokens"), fields.get("output_tokens"), fields.get("cache_read_tokens"), fields.get("cache_write_tokens"),
            )
        fields.setdefault("tool_calls", tuple(self._tools.values()))
        fields["parse_warnings"] = (*self.warnings, *fields.get("parse_warnings", ()))
        if "answer" in fields:
            full = (fields["answer"] or "").strip()
            fields["answer"] = answer_text(fields["answer"])
            fields.setdefault("answer_chars", len(full) if full else None)
        return Usage(**fields)
