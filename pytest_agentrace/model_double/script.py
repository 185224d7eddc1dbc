"""Model scripts: what the model double answers, turn by turn, in provider-neutral terms (YAML).

A script file::

    name: solve-fibonacci            # optional label (default: the file name)
    usage: {input: 1000, output: 50} # default per-turn usage (default 1000 / 50)
    side:                            # answers to side requests (titles, routers, probes)
      text: Scripted title           # default "Scripted title"
      usage: {input: 300, output: 5} # default 300 / 5
    loop: false                      # true: after the last step start again (a model that never stops)
    steps:
      - write: {path: fib.py, content: "def fib(n): ..."}
        usage: {input: 1000, output: 50, cache_read: 0, cache_write: 0}
      - shell: python -m pytest -q
        delay: 0.5                   # seconds to wait before answering
      - text: "DONE: fib.py written, tests pass"

Each step is exactly one of ``shell: <command>`` (``{turn}`` in it becomes the number of tool results so far),
``write: {path, content}`` (workspace-relative path) or
``text: <final answer>``; ``turns`` is accepted as a synonym of ``steps``. A step may add ``usage``,
``delay`` (seconds), ``error: {status: 429|500|..., message, times, retry_after}`` (answer the request with
that HTTP error instead; ``times`` bounds how often per conversation, default every time) and
``malformed: true`` (the streamed answer breaks off with a line that is not valid JSON).

The step answered for a request is chosen from the request alone: step ``k`` where ``k`` is the number of
tool results the request already holds (see ``tools.count_tool_results``). Without ``loop`` the last step
must be a ``text`` step, so every conversation ends.

Usage semantics (tokens): ``input`` is input read neither from nor into a prompt cache, ``cache_read`` and
``cache_write`` are the cached shares, ``output`` includes any reasoning. Each wire format carries them in
its own fields (``server.py``); on the OpenAI and Gemini wires, which have no cache-write counter,
``cache_write`` is sent as plain input.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_agentrace.errors import SpecError
from pytest_agentrace.strict import check_keys, relative_file, typed

SCRIPT_KEYS = ("name", "usage", "side", "loop", "steps", "turns")
STEP_KINDS = ("shell", "write", "text")
STEP_KEYS = (*STEP_KINDS, "usage", "delay", "error", "malformed")
USAGE_KEYS = ("input", "output", "cache_read", "cache_write")
ERROR_KEYS = ("status", "message", "times", "retry_after")
DEFAULT_USAGE = {"input": 1000, "output": 50}
DEFAULT_SIDE_USAGE = {"input": 300, "output": 5}
DEFAULT_SIDE_TEXT = "Scripted title"


@dataclass(frozen=True)
class TurnUsage:
    """Tokens one answer reports: ``input`` (uncached), ``output``, ``cache_read``, ``cache_write``."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0

    def __add__(self, other: TurnUsage) -> TurnUsage:
        return TurnUsage(*(a + b for a, b in zip(self.as_tuple(), other.as_tuple(), strict=True)))

    def as_tuple(self) -> tuple[int, int, int, int]:
        return (self.input, self.output, self.cache_read, self.cache_write)

    @property
    def total(self) -> int:
        return sum(self.as_tuple())

    def to_dict(self) -> dict[str, int]:
        return {"input": self.input, "output": self.output, "cache_read": self.cache_read, "cache_write": self.cache_write}


@dataclass(frozen=True)
class HttpError:
    """An HTTP error answer: ``status`` code, ``message``, at most ``times`` per conversation (None: always),
    ``retry_after`` seconds (sent as ``retry-after`` / ``retry-after-ms``; None: the server's default)."""

    status: int
    message: str
    times: int | None = None
    retry_after: float | None = None


@dataclass(frozen=True)
class Step:
    """One scripted turn. ``kind`` is ``shell`` (``command``), ``write`` (``path``, ``content``) or ``text``."""

    kind: str
    usage: TurnUsage
    command: str = ""
    path: str = ""
    content: str = ""
    text: str = ""
    delay: float = 0.0
    error: HttpError | None = None
    malformed: bool = False

    @property
    def is_tool(self) -> bool:
        return self.kind != "text"

    def describe(self) -> str:
        """Short label for logs: ``shell: <command>``, ``write: <path>``, ``text: <start>``."""
        if self.kind == "shell":
            return f"shell: {self.command[:80]}"
        if self.kind == "write":
            return f"write: {self.path}"
        return f"text: {self.text[:80]}"


@dataclass(frozen=True)
class Script:
    """A loaded model script (see the module docstring). ``id`` is a short content hash."""

    name: str
    steps: tuple[Step, ...]
    side_text: str = DEFAULT_SIDE_TEXT
    side_usage: TurnUsage = field(default_factory=lambda: TurnUsage(**DEFAULT_SIDE_USAGE))
    loop: bool = False
    path: str | None = None
    id: str = ""

    def step_for(self, turn: int) -> Step:
        """The step answering a request that already holds ``turn`` tool results (turn counts from 0).

        Past the end: with ``loop`` the steps repeat; otherwise the final ``text`` step answers again.
        """
        if turn < len(self.steps):
            return self.steps[turn]
        if self.loop:
            return self.steps[turn % len(self.steps)]
        return self.steps[-1]

    @property
    def tool_steps(self) -> tuple[Step, ...]:
        return tuple(s for s in self.steps if s.is_tool)

    @property
    def final_text(self) -> str | None:
        """The answer the script ends with (None for a looping script without a text step)."""
        return self.steps[-1].text if self.steps[-1].kind == "text" else None

    def total_usage(self) -> TurnUsage:
        """Sum of every step's usage (tokens): what a CLI reports when each step is answered once."""
        total = TurnUsage()
        for s in self.steps:
            total = total + s.usage
        return total


def _usage(path: Path, key: str, value: Any, default: TurnUsage) -> TurnUsage:
    if value is None:
        return default
    typed(path, key, value, dict, fix="write e.g. usage: {input: 1000, output: 50}")
    check_keys(path, key, value, USAGE_KEYS)
    kw = default.to_dict()
    for k, v in value.items():
        typed(path, f"{key}.{k}", v, int, fix="write a whole number of tokens")
        if v < 0:
            raise SpecError(path, f"{key}.{k}", f"token count must be 0 or more, not {v}")
        kw[k] = v
    return TurnUsage(**kw)


def _error(path: Path, key: str, value: Any) -> HttpError:
    typed(path, key, value, dict, fix="write e.g. error: {status: 500, message: overloaded}")
    check_keys(path, key, value, ERROR_KEYS, required=("status",))
    status = typed(path, f"{key}.status", value["status"], int)
    if not 400 <= status <= 599:
        raise SpecError(path, f"{key}.status", f"must be an HTTP error status 400-599, not {status}")
    times = value.get("times")
    if times is not None and (typed(path, f"{key}.times", times, int) < 1):
        raise SpecError(path, f"{key}.times", f"must be 1 or more, not {times}")
    retry_after = value.get("retry_after")
    if retry_after is not None:
        retry_after = float(typed(path, f"{key}.retry_after", retry_after, int, float))
    message = typed(path, f"{key}.message", value.get("message") or f"scripted HTTP {status}", str)
    return HttpError(status, message, times, retry_after)


def _step(path: Path, key: str, value: Any, default_usage: TurnUsage) -> Step:
    typed(path, key, value, dict, fix="write e.g. - shell: python -m pytest -q")
    check_keys(path, key, value, STEP_KEYS)
    kinds = [k for k in STEP_KINDS if k in value]
    if len(kinds) != 1:
        raise SpecError(path, key, f"a step needs exactly one of {', '.join(STEP_KINDS)}; it has {', '.join(kinds) or 'none'}")
    kind = kinds[0]
    kw: dict[str, Any] = {"kind": kind, "usage": _usage(path, f"{key}.usage", value.get("usage"), default_usage)}
    if kind == "shell":
        kw["command"] = typed(path, f"{key}.shell", value["shell"], str)
        if not kw["command"].strip():
            raise SpecError(path, f"{key}.shell", "is empty; give the shell command the model runs")
    elif kind == "text":
        kw["text"] = typed(path, f"{key}.text", value["text"], str)
    else:
        w = typed(path, f"{key}.write", value["write"], dict, fix="write e.g. write: {path: fib.py, content: ...}")
        check_keys(path, f"{key}.write", w, ("path", "content"), required=("path", "content"))
        kw["path"] = relative_file(path, f"{key}.write.path", typed(path, f"{key}.write.path", w["path"], str))
        kw["content"] = typed(path, f"{key}.write.content", w["content"], str)
    if value.get("delay") is not None:
        delay = float(typed(path, f"{key}.delay", value["delay"], int, float))
        if delay < 0:
            raise SpecError(path, f"{key}.delay", f"must be 0 or more seconds, not {delay}")
        kw["delay"] = delay
    if value.get("error") is not None:
        kw["error"] = _error(path, f"{key}.error", value["error"])
    if value.get("malformed") is not None:
        kw["malformed"] = typed(path, f"{key}.malformed", value["malformed"], bool)
    return Step(**kw)


def parse_script(data: Any, path: Path | str = "<script>") -> Script:
    """Validate parsed YAML ``data`` into a ``Script``. Raises ``SpecError`` naming ``path`` and the key."""
    path = Path(path)
    if not isinstance(data, dict):
        raise SpecError(path, None, "a model script is a YAML mapping with a steps list")
    check_keys(path, "", data, SCRIPT_KEYS)
    if "steps" in data and "turns" in data:
        raise SpecError(path, "turns", "give steps or turns, not both")
    raw_steps = data.get("steps", data.get("turns"))
    if raw_steps is None:
        raise SpecError(path, "steps", "required key is missing; add e.g. steps: [{text: done}]")
    typed(path, "steps", raw_steps, list, fix="write a YAML list of steps")
    if not raw_steps:
        raise SpecError(path, "steps", "is empty; add at least one step (e.g. - text: done)")
    default_usage = _usage(path, "usage", data.get("usage"), TurnUsage(**DEFAULT_USAGE))
    steps = tuple(_step(path, f"steps[{i}]", s, default_usage) for i, s in enumerate(raw_steps))
    loop = bool(typed(path, "loop", data.get("loop", False), bool))
    if not loop and steps[-1].kind != "text":
        raise SpecError(path, f"steps[{len(steps) - 1}]", "the last step must be a text step (the final answer) unless loop: true")
    for i, s in enumerate(steps[:-1]):
        if s.kind == "text":
            raise SpecError(path, f"steps[{i}]", "a text step ends the conversation, so it can only be the last step")
    side = data.get("side") or {}
    typed(path, "side", side, dict, fix="write e.g. side: {text: title, usage: {input: 300, output: 5}}")
    check_keys(path, "side", side, ("text", "usage"))
    name = data.get("name")
    if name is not None:
        typed(path, "name", name, str)
    return Script(
        name=name or path.stem,
        steps=steps,
        side_text=typed(path, "side.text", side.get("text", DEFAULT_SIDE_TEXT), str),
        side_usage=_usage(path, "side.usage", side.get("usage"), TurnUsage(**DEFAULT_SIDE_USAGE)),
        loop=loop,
        path=str(path),
        id=hashlib.sha256(repr(sorted(data.items(), key=str)).encode()).hexdigest()[:12],
    )


def load_script(path: Path | str) -> Script:
    """Read and validate a model script file (YAML). Raises ``SpecError`` (file, key, fix) for bad input,
    also when the file is missing or not valid YAML."""
    import yaml

    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise SpecError(path, None, f"cannot read the model script: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(raw.decode("utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        from pytest_agentrace.strict import yaml_error_place

        raise SpecError(path, None, f"not a valid YAML model script{yaml_error_place(exc)}") from None
    import dataclasses

    script = parse_script(data, path)
    return dataclasses.replace(script, id=hashlib.sha256(raw).hexdigest()[:12])
