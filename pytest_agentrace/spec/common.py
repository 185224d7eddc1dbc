"""Agent entries of task and trial files: ``AgentSpec`` and its strict loader, checked against the agent registry
(``agents.ADAPTERS``)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_agentrace.agents import ADAPTERS
from pytest_agentrace.argtypes import byte_size, limit_count, limit_seconds
from pytest_agentrace.errors import SpecError, did_you_mean
from pytest_agentrace.run.limits import Limits
from pytest_agentrace.run.network import NetworkSpec, parse_network
from pytest_agentrace.run.sandbox import BoxSpec
from pytest_agentrace.strict import check_keys, file_env, str_list, str_mapping, typed

_ID_UNSAFE = re.compile(r"[^A-Za-z0-9_.:+-]+")
PLACEHOLDERS = ("{prompt}", "{prompt_file}", "{model}", "{workspace}", "{run_dir}")
AGENT_KEYS = ("name", "command", "kind", "model", "env", "args", "edits", "sandbox", "model_double", "expect",
              "isolate", "limits", "network")
# a ``limits`` mapping's keys (named like the options --agentrace-memory ...) -> (Limits field, parser, example)
LIMIT_KEYS = {
    "memory": ("memory", byte_size, "4G or 512M"),
    "max_procs": ("processes", limit_count, "512"),
    "disk": ("disk", byte_size, "2G"),
    "cpu_time": ("cpu_time", limit_seconds, "600 (seconds)"),
}


@dataclass(frozen=True)
class AgentSpec:
    """An agent under test: adapter ``name`` (or a custom label), optional ``model``, ``command`` template.

    ``id`` is the agent's key in node ids, run ids and result folders (unique within one file).
    ``kind`` names the adapter whose parser reads a custom command's output (default ``plain``).
    ``edits``: allow file changes (None: the adapter's default for the file type).
    ``expect``: ``"fail"`` marks a baseline expected to fail (xfail), ``noop`` has it by default.
    ``isolate``: folders (absolute) hidden from the agent's sandbox besides the ones every run hides.
    ``limits``: the agent's own resource limits (``parse_limits``), over its file's and the session's.
    ``network``: the agent's own network mode and allow-list (``run.network.parse_network``), over its file's.
    ``sandbox``: a string is the CLI's own sandbox mode; a mapping ``{read, write}`` is ``box`` (``parse_box``).
    ``calls_model``: False for an agent that runs a script and no model (a Harbor task's oracle running its
    ``solution/solve.sh``): no model double, recorder or replayer is put in front of it; no file can set it.
    """

    name: str
    id: str
    model: str | None = None
    command: tuple[str, ...] | None = None
    kind: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    args: tuple[str, ...] = ()
    edits: bool | None = None
    sandbox: str | None = None
    model_double: str | None = None
    expect: str | None = None
    isolate: tuple[str, ...] = ()  # more host folders the agent must not see (absolute paths)
    limits: Limits | None = None  # this agent's resource limits (over its file's and the session's)
    network: NetworkSpec | None = None  # this agent's network mode / allow-list (run.network; over its file's)
    box: BoxSpec | None = None  # ``sandbox: {read, write}``: more the harness's sandbox shows this agent's runs
    calls_model: bool = True

    @property
    def adapter(self) -> str:
        """Name of the adapter that builds argv and parses output."""
        if self.command is not None:
            return self.kind or "plain"
        return self.name

    @property
    def label(self) -> str:
        """Human label: ``name`` or ``name:model``."""
        return f"{self.name}:{self.model}" if self.model else self.name


def parse_agent(path: Path, key: str, value: Any, base: Path | None = None, check_known: bool = True,
                trusted: bool = False) -> AgentSpec:
    """Parse ``name``, ``name:model`` or a mapping (see ``AGENT_KEYS``) into an ``AgentSpec``.

    A string that starts with ``{`` is a YAML flow mapping (``{name: mine, command: 'my-agent {prompt}'}``, as
    written on the command line after ``--agentrace-agent``) and is read as that mapping. Raises ``SpecError``
    naming ``key`` for a wrong type, an unknown mapping key, a flow mapping that is not valid YAML, or
    (``check_known``) a name without ``command`` that is no built-in agent (``known_agent``).
    """
    if isinstance(value, str) and value.lstrip().startswith("{"):
        value = flow_mapping(path, key, value)
    if isinstance(value, str):
        name, sep, model = value.strip().partition(":")
        if not name.strip("."):
            raise SpecError(path, key, f"empty agent name in {value!r}; write e.g. claude or codex:gpt-5.4")
        if sep and not model.strip():
            raise SpecError(path, key, f"empty model after ':' in {value!r}; write e.g. codex:gpt-5.4, or just {name}")
        if check_known:
            known_agent(path, key, name)
        return AgentSpec(name=name, id=value.strip(), model=model or None)
    typed(path, key, value, str, dict, fix="write an agent name such as 'claude' or a mapping {name, command, kind}")
    check_keys(path, key, value, AGENT_KEYS, required=("name",))
    name = typed(path, f"{key}.name", value["name"], str)
    if not name.strip(".").strip():
        raise SpecError(path, f"{key}.name", f"{name!r} cannot name an agent; use letters, digits, '-' or '_'")
    command = value.get("command")
    if command is not None:
        if isinstance(command, str):
            import shlex

            try:
                command = tuple(shlex.split(command))
            except ValueError as exc:
                raise SpecError(path, f"{key}.command", f"cannot split {command!r}: {exc}") from None
        else:
            command = str_list(path, f"{key}.command", command, allow_str=False)
        if not command:
            raise SpecError(path, f"{key}.command", "is empty; give an argv template such as 'my-agent {prompt}'")
        for item in command:
            for ph in re.findall(r"\{[^{}]*\}", item):
                if ph not in PLACEHOLDERS:
                    raise SpecError(path, f"{key}.command", f"unknown placeholder {ph}{did_you_mean(ph, PLACEHOLDERS)}; valid: {', '.join(PLACEHOLDERS)}")
    model = value.get("model")
    if model is not None:
        typed(path, f"{key}.model", model, str)
    kind = value.get("kind")
    if kind is not None:
        typed(path, f"{key}.kind", kind, str)

        if kind not in ADAPTERS:
            raise SpecError(path, f"{key}.kind", f"unknown output kind {kind!r}{did_you_mean(kind, ADAPTERS)}; valid: {', '.join(sorted(ADAPTERS))}")
    edits = value.get("edits")
    if edits is not None:
        typed(path, f"{key}.edits", edits, bool)
    sandbox, box = value.get("sandbox"), None
    if isinstance(sandbox, dict):  # the harness's box: paths it shows besides the default
        sandbox, box = None, parse_box(path, f"{key}.sandbox", value["sandbox"], base)
    elif sandbox is not None:  # the CLI's own sandbox mode (codex --sandbox, cursor --sandbox)
        typed(path, f"{key}.sandbox", sandbox, str, dict, fix="write the CLI's mode (a string) or {read: [...], write: [...]}")
    expect = value.get("expect")
    if expect is not None and expect not in ("pass", "fail"):
        raise SpecError(path, f"{key}.expect", f"must be 'pass' or 'fail', not {expect!r}")
    if command is None and check_known:
        known_agent(path, f"{key}.name", name)
    md = value.get("model_double")
    if md is not None:
        typed(path, f"{key}.model_double", md, str)
        md = str(((base or path.parent) / md).resolve())
    return AgentSpec(
        name=name,
        id=name + (f":{model}" if model else ""),
        model=model,
        command=command,
        kind=kind,
        env=(str_mapping if trusted else file_env)(path, f"{key}.env", value.get("env") or {}),
        args=str_list(path, f"{key}.args", value.get("args") or [], allow_str=False),
        edits=edits,
        sandbox=sandbox,
        model_double=md,
        expect=expect,
        isolate=tuple(str(((base or path.parent) / Path(p).expanduser()).resolve())
                      for p in str_list(path, f"{key}.isolate", value.get("isolate") or [], allow_str=False)),
        limits=parse_limits(path, f"{key}.limits", value["limits"]) if value.get("limits") is not None else None,
        network=parse_network(path, f"{key}.network", value["network"]) if value.get("network") is not None else None,
        box=box,
    )


def parse_box(path: Path, key: str, value: Any, base: Path | None = None) -> BoxSpec:
    """A ``sandbox`` mapping (``read``, ``write``: lists of paths; relative ones resolve against the file's folder,
    ``~`` is the user's HOME) -> ``BoxSpec``. Raises ``SpecError`` naming ``key`` for a wrong type or key."""
    typed(path, key, value, dict, fix="write {read: [PATH, ...], write: [PATH, ...]}")
    check_keys(path, key, value, ("read", "write"))
    folder = base or path.parent

    def paths(name: str) -> tuple[str, ...]:
        items = str_list(path, f"{key}.{name}", value.get(name) or [], allow_str=True)
        return tuple(str((folder / Path(p).expanduser()).resolve()) for p in items)

    return BoxSpec(read=paths("read"), write=paths("write"))


def parse_limits(path: Path, key: str, value: Any) -> Limits:
    """A ``limits`` mapping (``memory``, ``max_procs``, ``disk``, ``cpu_time``; sizes as bytes or ``512M``/``4G``,
    ``0`` or ``"none"`` for no limit) -> ``Limits`` with the keys given. Raises ``SpecError`` naming ``key`` for a
    value that is no mapping, an unknown key, or a value that does not convert (with an example of a good one)."""
    typed(path, key, value, dict,
          fix="write a mapping, e.g. limits: {memory: 4G, max_procs: 512, disk: 2G, cpu_time: 600}")
    check_keys(path, key, value, LIMIT_KEYS)
    given: dict[str, Any] = {}
    for name, raw in value.items():
        field_name, parse, example = LIMIT_KEYS[name]
        if isinstance(raw, bool) or not isinstance(raw, (str, int, float, type(None))):
            raise SpecError(path, f"{key}.{name}", f"must be a number or a string, not {type(raw).__name__} {raw!r}; "
                                                   f"write e.g. {example}")
        try:
            given[field_name] = parse("none" if raw is None else str(raw))
        except argparse.ArgumentTypeError as exc:
            fix = "" if "write e.g." in str(exc) else f"; write e.g. {example}, or 0 for no limit"
            raise SpecError(path, f"{key}.{name}", f"{exc}{fix}") from None
    return Limits(**given)


def flow_mapping(path: Path, key: str, text: str) -> dict[str, Any]:
    """``{name: x, command: 'my-agent {prompt}'}`` (YAML flow mapping) -> a dict; ``SpecError`` when the text is
    not valid YAML or not a mapping (with the quoting fix: a value holding ``{prompt}`` or ``,`` needs quotes), or
    when a key holds a ':' and has no value (``{name:mine}`` is the one key ``'name:mine'``: YAML needs a space after
    the ':')."""
    import yaml

    fix = "write e.g. '{name: mine, command: \"my-agent {prompt}\"}' (quote values holding {placeholders}, ',' or ':')"
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or exc
        raise SpecError(path, key, f"not a valid YAML flow mapping: {problem}; {fix}") from None
    if not isinstance(data, dict):
        raise SpecError(path, key, f"not a YAML flow mapping ({type(data).__name__}); {fix}")
    for name, value in data.items():
        if value is None and isinstance(name, str) and ":" in name and name not in AGENT_KEYS:
            head, _, tail = name.partition(":")
            raise SpecError(path, f"{key}.{name}", f"unknown key{did_you_mean(head, AGENT_KEYS)}: YAML flow mappings "
                                                   f"need a space after ':' (write {head}: {tail}); {fix}")
    return data


def known_agent(path: Path, key: str, name: str) -> None:
    """Raise ``SpecError`` unless ``name`` is a built-in agent (an adapter, ``noop`` or ``oracle``): an agent of
    one's own needs a ``command``. A misspelt name is an error, not a skip like a CLI that is not installed."""
    names = sorted(set(ADAPTERS) - {"plain"})
    if name not in names:
        raise SpecError(path, key, f"unknown agent {name!r}{did_you_mean(name, names)}; built-in agents: {', '.join(names)}; "
                                   "for an agent of your own give a command, e.g. {name: mine, command: 'my-agent {prompt}'}")


def unique_agent_ids(agents: Iterable[AgentSpec]) -> tuple[AgentSpec, ...]:
    """Make ``id``s safe for node ids and paths (``/`` and spaces become ``_``) and unique (``~2``, ``~3``)."""
    import dataclasses

    seen: dict[str, int] = {}
    out = []
    for a in agents:
        base = _ID_UNSAFE.sub("_", a.id).strip("_") or "agent"
        n = seen.get(base, 0) + 1
        seen[base] = n
        out.append(dataclasses.replace(a, id=base if n == 1 else f"{base}~{n}"))
    return tuple(out)
