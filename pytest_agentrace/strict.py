"""Strict checks shared by every input-file loader (task and trial files, model scripts): keys with a did-you-mean,
types, workspace-relative paths. Each raises ``SpecError`` naming the file and the key."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
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


# variables whose value sends an agent's traffic (and the provider key it carries) somewhere: a base URL of a model
# provider (``*_BASE_URL``, ``*_API_BASE``, ``*_ENDPOINT``: the run's network allow-list also lets their hosts through)
# or a proxy. A task, trial or Harbor file never sets them: they come from the user's environment or options.
ROUTING_SUFFIXES = ("_BASE_URL", "_API_BASE", "_API_BASE_URL", "_ENDPOINT")
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "FTP_PROXY", "NO_PROXY")


def routes_traffic(name: str) -> bool:
    """Whether the environment variable ``name`` routes network traffic (``ROUTING_SUFFIXES``, ``PROXY_VARIABLES``;
    case-insensitive, as the CLIs and curl read both cases)."""
    upper = name.upper()
    return upper.endswith(ROUTING_SUFFIXES) or upper in PROXY_VARIABLES


def file_env(path: Path, key: str, value: Any) -> dict[str, str]:
    """``str_mapping`` of an ``env`` key in a task, trial or Harbor file, without the variables that route traffic
    (``routes_traffic``): such a file could otherwise send the CLI, with the user's provider key, to a host of its
    choosing (the run's allow-list admits every base URL's host). Raises ``SpecError`` naming the variable."""
    env = str_mapping(path, key, value)
    for name in env:
        if routes_traffic(name):
            raise SpecError(path, f"{key}.{name}", "routes the agent's traffic, and the provider key it carries, so a "
                                                   "file may not set it; set it in your own environment or with "
                                                   "--agentrace-agent '{name: ..., env: {...}}'")
    return env


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


def yaml_error_place(exc: Any) -> str:
    """`` at line L, column C: PROBLEM`` for a PyYAML error, at the line where the fault is written.

    PyYAML's ``problem_mark`` is where the scanner gave up, often the next line (a key without its ``:`` on line 14
    is found missing on line 15); when the error has a ``context_mark`` (``while scanning a simple key``, ``while
    parsing a flow sequence``: the construct that is unfinished) that mark is the line the user wrote, and the
    problem's own place is added after it."""
    problem = getattr(exc, "problem", None) or str(exc)
    mark, context = getattr(exc, "problem_mark", None), getattr(exc, "context_mark", None)
    if context is not None and mark is not None and context.line != mark.line:
        return (f" at line {context.line + 1}, column {context.column + 1}: {exc.context}: {problem} "
                f"(noticed at line {mark.line + 1})")
    if mark is not None:
        return f" at line {mark.line + 1}, column {mark.column + 1}: {problem}"
    return f": {problem}"

