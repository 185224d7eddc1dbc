"""Shared checks for the strict task and trial loaders (keys, types, paths, agent specs)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from pytest_agentrace.errors import SpecError, did_you_mean

_TYPE_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "true/false", list: "a list", dict: "a mapping"}


def check_keys(path: Path, where: str, data: Mapping[str, Any], allowed: Iterable[str], required: Iterable[str] = ()) -> None:
    """Raise ``SpecError`` for an unknown key (with the nearest valid one) or a missing required key.

    ``where`` names the table (``""`` for the top level, ``"agents[2]"``, ``"[[arms]] 'docs'"``).
    """
    allowed = list(allowed)
    prefix = f"{where}." if where else ""
    for key in data:
        if key not in allowed:
            raise SpecError(path, f"{prefix}{key}", f"unknown key{did_you_mean(str(key), allowed)}; valid keys: {', '.join(allowed)}")
    for key in required:
        if key not in data or data[key] is None:
            raise SpecError(path, f"{prefix}{key}", "required key is missing; add it")


def typed(path: Path, key: str, value: Any, *types: type, fix: str = "") -> Any:
    """Return ``value`` when it is one of ``types`` (bool is never an int/float), else raise ``SpecError``."""
    ok = any(isinstance(value, t) for t in types)
    if isinstance(value, bool) and bool not in types:
        ok = False
    if not ok:
        want = " or ".join(_TYPE_NAMES.get(t, t.__name__) for t in types)
        got = type(value).__name__
        hint = f"; {fix}" if fix else ""
        raise SpecError(path, key, f"must be {want}, not {got} {value!r}{hint}")
    return value


def str_list(path: Path, key: str, value: Any, allow_str: bool = True) -> tuple[str, ...]:
    """A list of strings; a single string becomes a one-item list when ``allow_str``."""
    if isinstance(value, str) and allow_str:
        return (value,)
    typed(path, key, value, list, fix="write a YAML/TOML list")
    for i, item in enumerate(value):
        typed(path, f"{key}[{i}]", item, str)
    return tuple(value)


def positive_number(path: Path, key: str, value: Any) -> float:
    typed(path, key, value, int, float, fix=f"write a number without quotes, e.g. {key}: 300")
    import math

    if not math.isfinite(value) or value <= 0:
        raise SpecError(path, key, f"must be greater than 0, not {value}")
    return float(value)


def str_mapping(path: Path, key: str, value: Any) -> dict[str, str]:
    """A mapping of string keys to string values (environment, files)."""
    typed(path, key, value, dict)
    out = {}
    for k, v in value.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool) and key.endswith("env"):
            v = str(v)
        typed(path, f"{key}.{k}", v, str)
        out[str(k)] = v
    return out


def relative_file(path: Path, key: str, rel: str) -> str:
    """A workspace-relative POSIX path that stays inside the workspace; raises ``SpecError`` otherwise."""
    p = PurePosixPath(rel)
    if not rel or p.is_absolute() or rel.startswith("~") or re.match(r"^[A-Za-z]:", rel):
        raise SpecError(path, key, f"path {rel!r} must be relative to the workspace (e.g. tests/test_hidden.py)")
    if ".." in p.parts:
        raise SpecError(path, key, f"path {rel!r} escapes the workspace; remove '..'")
    return str(p)


def resolve_source(path: Path, value: str) -> str:
    """Resolve a local path relative to the spec file; URLs (``scheme://``, ``user@host:``) are kept."""
    if re.match(r"^[a-z][a-z0-9+.-]*://", value) or re.match(r"^[\w.-]+@[\w.-]+:", value):
        if value.startswith("file://"):
            return str((path.parent / value[len("file://"):]).resolve())
        return value
    return str((path.parent / Path(value).expanduser()).resolve())


_ID_UNSAFE = re.compile(r"[^A-Za-z0-9_.:+-]+")
PLACEHOLDERS = ("{prompt}", "{prompt_file}", "{model}", "{workspace}", "{run_dir}")
AGENT_KEYS = ("name", "command", "kind", "model", "env", "args", "edits", "sandbox", "model_double", "expect")


@dataclass(frozen=True)
class AgentSpec:
    """An agent under test: adapter ``name`` (or a custom label), optional ``model``, ``command`` template.

    ``id`` is the agent's key in node ids, run ids and result folders (unique within one file).
    ``kind`` names the adapter whose parser reads a custom command's output (default ``plain``).
    ``edits``: allow file changes (None: the adapter's default for the file type).
    ``expect``: ``"fail"`` marks a baseline expected to fail (xfail), ``noop`` has it by default.
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


def parse_agent(path: Path, key: str, value: Any, base: Path | None = None, check_known: bool = True) -> AgentSpec:
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
        from pytest_agentrace.agents import ADAPTERS

        if kind not in ADAPTERS:
            raise SpecError(path, f"{key}.kind", f"unknown output kind {kind!r}{did_you_mean(kind, ADAPTERS)}; valid: {', '.join(sorted(ADAPTERS))}")
    edits = value.get("edits")
    if edits is not None:
        typed(path, f"{key}.edits", edits, bool)
    sandbox = value.get("sandbox")
    if sandbox is not None:
        typed(path, f"{key}.sandbox", sandbox, str)
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
        env=str_mapping(path, f"{key}.env", value.get("env") or {}),
        args=str_list(path, f"{key}.args", value.get("args") or [], allow_str=False),
        edits=edits,
        sandbox=sandbox,
        model_double=md,
        expect=expect,
    )


def flow_mapping(path: Path, key: str, text: str) -> dict[str, Any]:
    """``{name: x, command: 'my-agent {prompt}'}`` (YAML flow mapping) -> a dict; ``SpecError`` when the text is
    not valid YAML or not a mapping (with the quoting fix: a value holding ``{prompt}`` or ``,`` needs quotes)."""
    import yaml

    fix = "write e.g. '{name: mine, command: \"my-agent {prompt}\"}' (quote values holding {placeholders}, ',' or ':')"
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or exc
        raise SpecError(path, key, f"not a valid YAML flow mapping: {problem}; {fix}") from None
    if not isinstance(data, dict):
        raise SpecError(path, key, f"not a YAML flow mapping ({type(data).__name__}); {fix}")
    return data


def known_agent(path: Path, key: str, name: str) -> None:
    """Raise ``SpecError`` unless ``name`` is a built-in agent (an adapter, ``noop`` or ``oracle``): an agent of
    one's own needs a ``command``. A misspelt name is an error, not a skip like a CLI that is not installed."""
    from pytest_agentrace.agents import ADAPTERS

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
