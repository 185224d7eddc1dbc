"""The outcome record and the words the rest of the package shares.

Everything that crosses a process boundary (pytest-xdist workers -> controller, run.json on disk,
JUnit properties) is a plain JSON dict made by ``to_dict`` and read back by ``from_dict``; enums are
``StrEnum`` so their values are ordinary strings.

``run.json`` schema (``SCHEMA_VERSION`` 2), one object per run::

    schema_version  int        2 (version 1 kept the five score/statistics inputs below in ``extra``; they are
                               read from there)
    run_id          str        RunSpec id: "<kind>:<case>/<arm>/<agent>/r<rep>"
    kind            str        "task" | "trial"
    source          str        path of the task/trial file (as given to pytest)
    content_hash    str        sha256 of the task/trial file content (for resume)
    case, arm, agent, model, rep
    status          str        Status value
    reason          str|None   why a run is not ``passed`` (one line)
    started         str        ISO-8601 UTC
    seconds         float      agent wall time (seconds)
    total_seconds   float      whole run incl. clone, setup and checks (seconds)
    exit_code       int|None   agent process exit code (None: no process / killed)
    timed_out       bool
    checks          {name: CheckResult dict}   name in tests | verify | lint | setup; a counted check (pytest)
                               adds counted, tests {ran, passed, failed, errors, skipped} and count_failure
    lines_added, lines_removed, lines_changed, files_changed   int
    tampered        [str]      protected paths the agent created/changed/deleted
    machinery       [{path, change, verdict}]  the agent's changes the checks' clean tree did not take as left
                               (``run.cleantree``): change added|changed|deleted; verdict reset (test machinery:
                               the source's version used), merged (setup.cfg / pyproject.toml: the source's pytest
                               part put back), dropped (a link leading out of the tree, a submodule)
    has_verify      bool       the case has a hidden verify check (score weights; validation's noop rule)
    has_lint        bool       the task has a lint command (score: lint counts only then)
    scoring         dict|None  the task's own score weights {component: points}
    difficulty      str|None   the task's difficulty
    baseline_arm    str|None   the trial's [defaults] baseline arm (relative cost is against it)
    usage           Usage dict (tokens, cost, tool calls, answer)
    answer_score    dict|None  trial answer key result {correct, recall, missing, forbidden}
    used_tool       bool|None  trial arm ``uses`` regex matched a tool call
    claim           dict|None  trial verification claim
    score           float|None composite score (tasks, 0..100): relative to the other runs of the same task and
                               rep, so the controller computes it at session end (tables, JUnit agentrace.score,
                               exports, `agentrace report`); run.json and agentrace.outcome keep null
    reused          bool       outcome read back from disk by --agentrace-resume
    session_id      str
    extra           dict       informational fields (JSON primitives only): trial, repo, commit, edits, uses,
                               claim_requested, output_bytes {stdout, stderr}, change_error, rescored
"""

from __future__ import annotations

import dataclasses
import enum
import functools
from dataclasses import dataclass, field
from typing import Any


@functools.cache
def field_names(cls: type) -> frozenset[str]:
    """The names of the dataclass ``cls``'s ``__init__`` fields (computed once per class: ``from_dict`` runs once per
    record)."""
    return frozenset(f.name for f in dataclasses.fields(cls) if f.init)


Shared = dict[Any, Any]  # equal strings (and tool calls) of many records -> one object: ``from_dict``'s ``share``
_REQUIRED = object()


@functools.cache
def _plan(cls: type) -> tuple[tuple[str, Any, Any, Any, bool], ...]:
    """Per field of the frozen, slotted dataclass ``cls``: ``(name, its slot's setter, default or _REQUIRED, default
    factory or None, init)`` (``build``'s plan, computed once per class)."""
    out = []
    for f in dataclasses.fields(cls):
        factory = None if f.default_factory is dataclasses.MISSING else f.default_factory
        default = _REQUIRED if f.default is dataclasses.MISSING and factory is None else f.default
        out.append((f.name, cls.__dict__[f.name].__set__, default, factory, f.init))
    return tuple(out)


def build(cls: type, kw: dict[str, Any]) -> Any:
    """``cls(**kw)`` for a frozen, slotted dataclass without ``__post_init__`` whose ``kw`` holds only names of its
    ``__init__`` fields (``field_names``): each slot set through its descriptor, in about a quarter of the time of
    the generated ``__init__`` (which calls ``object.__setattr__`` by name per field); a field missing from ``kw``
    takes its default (or its factory's value) as ``__init__`` gives it, and a required one missing raises
    ``TypeError`` as ``__init__`` does. For records read by the hundred thousand (``from_dict``)."""
    obj = object.__new__(cls)
    for name, put, default, factory, init in _plan(cls):
        if init and name in kw:
            put(obj, kw[name])
        elif factory is not None:
            put(obj, factory())
        elif default is _REQUIRED:
            raise TypeError(f"{cls.__name__}.__init__() missing required argument: {name!r}")
        else:
            put(obj, default)
    return obj


def _known(cls: type, d: dict[str, Any]) -> dict[str, Any]:
    """The items of ``d`` whose keys are ``cls``'s ``__init__`` fields (a copy of ``d`` when every key is one)."""
    known = field_names(cls)
    return dict(d) if known.issuperset(d) else {k: v for k, v in d.items() if k in known}


def _share(kw: dict[str, Any], names: tuple[str, ...], share: Shared) -> None:
    """Replace each string ``kw[name]`` (``name`` in ``names``) by the equal string ``share`` already holds (or
    keep it there): the fields whose values repeat across the records of a folder."""
    keep = share.setdefault
    for name in names:
        value = kw.get(name)
        if type(value) is str:
            kw[name] = keep(value, value)

SCHEMA_VERSION = 2
TYPED_FROM_EXTRA = ("has_verify", "has_lint", "scoring", "difficulty", "baseline_arm")  # version 1 kept these in extra


class Status(enum.StrEnum):
    """Status of one run. ``ERROR`` is an infrastructure fault (ours), never a sample."""

    PASSED = "passed"
    FAILED = "failed"
    TIMEOUT = "timeout"
    ERROR = "error"
    STOPPED = "stopped"  # race mode: stopped after another agent won and the grace window ran out; never a sample


class CostSource(enum.StrEnum):
    """Where ``Usage.cost_usd`` came from."""

    REPORTED = "reported"  # the CLI's own figure
    PRICED = "priced"  # tokens x pricing table (ours or the task's ``pricing:``); the model double's model at 0
    HARNESS_PRICED = "harness-priced"  # the CLI's figure from a per-token price the harness gave it (aider's metadata)
    ESTIMATED = "estimated"  # from input/output sizes; only when tokens are unknown
    NONE = "none"


class AgentStatus(enum.StrEnum):
    """How the agent's own output says its run ended (from the adapter's parser)."""

    COMPLETED = "completed"
    FAILED = "failed"
    INCOMPLETE = "incomplete"
    ERROR = "error"  # not the agent's fault: login/auth missing, CLI misconfigured (run status ``error``)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call of an agent: tool ``name`` and a short ``summary`` of its arguments."""

    name: str
    summary: str = ""


@dataclass(frozen=True, slots=True)
class Usage:
    """What an agent's machine-readable output says about its run.

    Token counts are integers (tokens) or ``None`` when the output does not say: never invented.
    ``cost_usd`` is US dollars with ``cost_source`` telling where it came from. ``turns`` counts model
    round-trips. ``status`` is the agent's own view (``completed`` / ``failed`` / ``incomplete``) and
    ``error`` its reason when not completed. ``parse_warnings`` lists unknown events and malformed lines.
    ``tokens_note`` says why the token counts are unknown when the adapter knows (e.g. a ``plain`` command
    reports none); None otherwise.
    """

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    total_tokens: int | None = None
    cost_usd: float | None = None
    cost_source: str = CostSource.NONE
    turns: int | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    answer: str | None = None
    cli_version: str | None = None
    model: str | None = None
    status: str = AgentStatus.COMPLETED
    error: str | None = None
    permission_denials: tuple[str, ...] = ()
    parse_warnings: tuple[str, ...] = ()
    # per model served: {model: {input_tokens, output_tokens, cache_read_tokens, cache_write_tokens}} (for pricing)
    model_usage: dict[str, dict[str, int | None]] = field(default_factory=dict)
    tokens_note: str | None = None
    answer_chars: int | None = None  # characters of the whole final answer (``answer`` keeps at most its end)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["tool_calls"] = [{"name": t.name, "summary": t.summary} for t in self.tool_calls]
        d["permission_denials"] = list(self.permission_denials)
        d["parse_warnings"] = list(self.parse_warnings)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None, share: Shared | None = None) -> Usage:
        """Build from a ``to_dict`` payload (unknown keys ignored). ``share``: a dict kept across many records; their
        equal strings and tool calls become one object each (``Outcome.from_dict``)."""
        if not d:
            return cls()
        kw = _known(cls, d)
        if share is None:
            kw["tool_calls"] = tuple(ToolCall(t.get("name", ""), t.get("summary", "")) for t in d.get("tool_calls") or ())
        else:
            calls = []
            for t in d.get("tool_calls") or ():
                name, summary = t.get("name", ""), t.get("summary", "")
                key = (name, summary) if type(name) is str and type(summary) is str else None
                call = share.get(key) if key is not None else None
                if call is None:
                    call = ToolCall(name, summary)
                    if key is not None:
                        share[key] = call
                calls.append(call)
            kw["tool_calls"] = tuple(calls)
            _share(kw, _USAGE_SHARED, share)
        kw["permission_denials"] = tuple(d.get("permission_denials") or ())
        kw["parse_warnings"] = tuple(d.get("parse_warnings") or ())
        return build(cls, kw)


@dataclass(frozen=True, slots=True)
class CheckResult:
    """One check command (tests / verify / lint / setup / prepare): exit code, wall ``seconds``, log path, and
    ``missing``: the tool the command could not run (``checks.missing_tool``; the run is then an ``error``);
    ``limit``: the resource limit it hit (``run.limits.Hit.reason``: ``resource limit: memory (...)``), or None.
    A counted check (a pytest command, ``run.counting``) also has ``tests`` (``{ran, passed, failed, errors,
    skipped}`` from the harness's own report; None: no report, or not counted) and ``count_failure``: why its report
    fails it (``no test report``, ``no test ran``, ``N of M tests failed``, ``N of M hidden tests ran``), or None."""

    name: str
    command: str
    exit_code: int | None
    seconds: float
    log: str | None = None
    timed_out: bool = False
    missing: str | None = None
    limit: str | None = None
    counted: bool = False
    tests: dict[str, int] | None = None
    count_failure: str | None = None

    @property
    def passed(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and self.count_failure is None

    @property
    def why(self) -> str:
        """Short status for reasons: ``"timed out"``, ``"exit N"``, or the count's failure when it exited 0."""
        if self.timed_out:
            return "timed out"
        return self.count_failure if self.exit_code == 0 and self.count_failure else f"exit {self.exit_code}"

    @property
    def reason(self) -> str:
        """Why this check failed, for a run's reason: ``tests failed (exit 1)``, or for a counted check that exited
        0, ``tests: no test report`` / ``verify: 3 of 4 hidden tests ran``."""
        if not self.timed_out and self.exit_code == 0 and self.count_failure:
            return f"{self.name}: {self.count_failure}"
        return f"{self.name} failed ({self.why})"

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["passed"] = self.passed
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any], share: Shared | None = None) -> CheckResult:
        """Build from a ``to_dict`` payload; raises ``KeyError`` without ``name``. ``share``: as ``Usage.from_dict``."""
        get = d.get
        tests = get("tests")
        kw = {"name": d["name"], "command": get("command", ""), "log": get("log"), "missing": get("missing"),
              "limit": get("limit"), "count_failure": get("count_failure")}
        if share is not None:
            _share(kw, _CHECK_SHARED, share)
        kw.update(exit_code=get("exit_code"), seconds=float(get("seconds") or 0.0), timed_out=bool(get("timed_out", False)),
                  counted=bool(get("counted", False)), tests=tests if isinstance(tests, dict) else None)
        return build(cls, kw)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one run measured. See the module docstring for the JSON shape (``run.json``).

    Slotted (no ``__dict__``: a record of 38 fields takes about a fifth of the memory a dict would), so a report
    over 100,000 runs holds them all at once."""

    run_id: str
    kind: str
    source: str
    case: str
    arm: str
    agent: str
    rep: int
    status: str
    model: str | None = None
    content_hash: str = ""
    reason: str | None = None
    started: str = ""
    seconds: float = 0.0
    total_seconds: float = 0.0
    exit_code: int | None = None
    timed_out: bool = False
    checks: dict[str, CheckResult] = field(default_factory=dict)
    lines_added: int = 0
    lines_removed: int = 0
    lines_changed: int = 0
    files_changed: int = 0
    tampered: tuple[str, ...] = ()
    machinery: tuple[dict[str, str], ...] = ()
    has_verify: bool = False
    has_lint: bool = False
    scoring: dict[str, float] | None = None
    difficulty: str | None = None
    baseline_arm: str | None = None
    usage: Usage = field(default_factory=Usage)
    answer_score: dict[str, Any] | None = None
    used_tool: bool | None = None
    claim: dict[str, Any] | None = None
    score: float | None = None
    reused: bool = False
    session_id: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION
    _record: dict[str, Any] | None = field(default=None, init=False, repr=False, compare=False)  # ``record``, once

    @property
    def is_sample(self) -> bool:
        """True when the run counts for statistics (every status but ``error`` and ``stopped``: a run stopped by
        race mode is neither a failure nor a success, so counting it either way would bias the pass rate)."""
        return self.status not in _NOT_SAMPLES

    def check(self, name: str) -> CheckResult | None:
        return self.checks.get(name)

    def replace(self, **changes: Any) -> Outcome:
        return dataclasses.replace(self, **changes)

    @property
    def record(self) -> dict[str, Any]:
        """``to_dict()``, made once per outcome and kept on it: the one dict of the record that its ``run.json``,
        the payload its item sends to the controller (``report.junit.run_properties``) and the history store
        are written from. Read it, never change it (a changed outcome is a new one: ``replace``)."""
        if self._record is None:
            object.__setattr__(self, "_record", self.to_dict())
        return self._record  # type: ignore[return-value]

    def to_dict(self) -> dict[str, Any]:
        d = {name: getattr(self, name) for name in _OUTCOME_FIELDS}
        d["checks"] = {k: v.to_dict() for k, v in self.checks.items()}
        d["usage"] = self.usage.to_dict()
        d["tampered"] = list(self.tampered)
        d["machinery"] = [dict(m) for m in self.machinery]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any], validate: bool = False, share: Shared | None = None) -> Outcome:
        """Build from a ``to_dict`` payload (keys that are no field ignored).

        Raises ``ValueError`` for a newer ``schema_version`` than this package knows, and with ``validate`` (used
        for files read from disk) for a field of the wrong type; ``TypeError``, ``KeyError`` or ``AttributeError``
        for a payload of the wrong shape. ``share``: a dict the caller keeps across many records, so that their
        equal strings (names, sources, statuses, commands, models) and tool calls are one object each: a report
        over a folder holds every outcome at once, and most of their strings repeat.
        """
        version = int(d.get("schema_version", 1))
        if version > SCHEMA_VERSION:
            raise ValueError(f"run record schema_version {version} is newer than supported {SCHEMA_VERSION}")
        kw = _known(cls, d)
        if version < 2 and isinstance(d.get("extra"), dict):
            extra = dict(d["extra"])
            kw.update({k: extra.pop(k) for k in TYPED_FROM_EXTRA if k in extra})
            kw["extra"] = extra
        kw["schema_version"] = SCHEMA_VERSION
        kw["checks"] = {k: CheckResult.from_dict(v, share) for k, v in (d.get("checks") or {}).items()}
        kw["usage"] = Usage.from_dict(d.get("usage"), share)
        kw["tampered"] = tuple(d.get("tampered") or ())
        kw["machinery"] = tuple(dict(m) for m in d.get("machinery") or () if isinstance(m, dict))
        if share is not None:
            _share(kw, _OUTCOME_SHARED, share)
        if validate:
            _check_types(kw)
        return build(cls, kw)


_NOT_SAMPLES = (Status.ERROR.value, Status.STOPPED.value)
_OUTCOME_FIELDS = tuple(f.name for f in dataclasses.fields(Outcome) if f.init)  # to_dict's keys, in field order
_OUTCOME_SHARED = ("kind", "source", "case", "arm", "agent", "status", "model", "content_hash", "reason", "started",
                   "difficulty", "baseline_arm", "session_id")
_USAGE_SHARED = ("cost_source", "cli_version", "model", "status", "error", "tokens_note")
_CHECK_SHARED = ("name", "command", "log", "missing", "limit", "count_failure")

_STR_FIELDS = ("run_id", "kind", "source", "case", "arm", "agent", "status")
_NUM_FIELDS = ("seconds", "total_seconds", "score")
_INT_FIELDS = ("rep", "lines_added", "lines_removed", "lines_changed", "files_changed", "exit_code")
_TOKEN_FIELDS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "total_tokens")


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _check_types(kw: dict[str, Any]) -> None:
    """Raise ``ValueError`` naming the field when a record's value has the wrong type (a hand-edited or foreign
    ``run.json``), so readers skip it with a reason instead of crashing later in arithmetic."""
    for name in _STR_FIELDS:
        if not isinstance(kw.get(name), str):
            raise ValueError(f"field {name!r} must be a string, not {kw.get(name)!r}")
    if kw["status"] not in set(Status):
        raise ValueError(f"field 'status' must be one of {', '.join(Status)}, not {kw['status']!r}")
    for name in _NUM_FIELDS:
        if name in kw and kw[name] is not None and not _is_num(kw[name]):
            raise ValueError(f"field {name!r} must be a number, not {kw[name]!r}")
    for name in _INT_FIELDS:
        if name in kw and kw[name] is not None and not (isinstance(kw[name], int) and not isinstance(kw[name], bool)):
            raise ValueError(f"field {name!r} must be an integer, not {kw[name]!r}")
    usage = kw["usage"]
    for name in _TOKEN_FIELDS:
        v = getattr(usage, name)
        if v is not None and not (isinstance(v, int) and not isinstance(v, bool)):
            raise ValueError(f"field 'usage.{name}' must be an integer or null, not {v!r}")
    if usage.cost_usd is not None and not _is_num(usage.cost_usd):
        raise ValueError(f"field 'usage.cost_usd' must be a number or null, not {usage.cost_usd!r}")


def contradictions(outcome: Outcome) -> list[str]:
    """Why ``outcome``'s status contradicts its own evidence (empty: it does not)."""
    if outcome.status != Status.PASSED:
        return []
    why = []
    if outcome.tampered:
        why.append(f"passed while tampered ({', '.join(outcome.tampered)})")
    why += [f"passed while its {name} check failed" for name in ("tests", "verify")
            if (c := outcome.checks.get(name)) is not None and not c.passed]
    if isinstance(outcome.answer_score, dict) and outcome.answer_score.get("correct") is False:
        why.append("passed while its answer was scored incorrect")
    if outcome.timed_out:
        why.append("passed while the agent timed out")
    return why
