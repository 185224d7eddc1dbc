"""Strict loader for coderace-style task files (YAML).

A task file is a YAML mapping with at least ``description`` and ``test_command`` (coderace's format:
https://github.com/mikiships/coderace task files load unchanged). Keys are listed in ``TASK_KEYS``; any
other key, a wrong type or a path escaping the workspace raises ``SpecError`` naming file and key.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_agentrace.errors import SpecError
from pytest_agentrace.run.inputs import is_patch_file_name
from pytest_agentrace.run.limits import Limits
from pytest_agentrace.run.machinery import command_machinery, machinery_patterns, pattern_problem
from pytest_agentrace.run.network import NetworkSpec, parse_network
from pytest_agentrace.run.sandbox import BoxSpec
from pytest_agentrace.spec.common import AGENT_KEYS, AgentSpec, parse_agent, parse_box, parse_limits, unique_agent_ids
from pytest_agentrace.spec.lines import (
    BOX,
    DRAFT,
    ENV,
    LIMITS,
    NETWORK,
    STR,
    STR_MAP,
    STR_OR_STRS,
    agent_schema,
    every_error,
    schema_table,
)
from pytest_agentrace.strict import (
    check_keys,
    file_env,
    positive_number,
    relative_file,
    resolve_source,
    str_list,
    str_mapping,
    typed,
    yaml_error_place,
)

TASK_KEYS = (
    "name", "description", "repo", "test_command", "lint_command", "verify_command", "verify_files",
    "timeout", "agents", "scoring", "pricing", "difficulty", "setup", "solution_files", "solution_patch",
    "protected", "test_machinery", "env", "limits", "network", "binary_diffs", "sandbox",
)
REQUIRED = ("name", "description", "test_command")
SCORE_KEYS = ("tests", "verify", "exit", "lint", "time", "lines")
# coderace's canonical score keys (coderace/types.py DEFAULT_WEIGHTS) -> the short aliases used here
CANONICAL_SCORE_KEYS = {
    "tests_pass": "tests", "verify_passed": "verify", "exit_clean": "exit", "lint_clean": "lint",
    "wall_time": "time", "lines_changed": "lines",
}
PRICE_KEYS = ("input", "output", "cache_read", "cache_write")
PER_1M = "_per_1m"  # coderace writes input_per_1m / output_per_1m; every kind may carry the suffix
DEFAULT_TIMEOUT = 300.0


@dataclass(frozen=True)
class Task:
    """A loaded task. ``repo`` is an absolute path or URL (None: start from an empty repository).

    ``timeout`` is seconds per command (agent and each check). ``verify_files`` and ``solution_files``
    map workspace-relative paths to file contents. ``scoring`` holds raw weights (not normalised) under the
    short keys ``SCORE_KEYS`` (coderace's canonical ``tests_pass`` ... are stored as ``tests`` ...).
    ``pricing`` maps an agent or model name to USD per 1M tokens by kind (``input``, ``output``, ...; coderace's
    ``input_per_1m`` is stored as ``input``). ``difficulty`` is a free-form level as written (``medium-hard``).
    """

    path: Path
    name: str
    description: str
    test_command: str
    repo: str | None = None
    lint_command: str | None = None
    verify_command: str | None = None
    verify_files: dict[str, str] = field(default_factory=dict)
    timeout: float = DEFAULT_TIMEOUT
    agents: tuple[AgentSpec, ...] = ()
    scoring: dict[str, float] = field(default_factory=dict)
    pricing: dict[str, dict[str, float]] = field(default_factory=dict)
    difficulty: str | None = None
    setup: tuple[str, ...] = ()
    solution_files: dict[str, str] = field(default_factory=dict)
    solution_patch: str | None = None
    protected: tuple[str, ...] = ()
    test_machinery: tuple[str, ...] = ()  # patterns added to run.machinery.DEFAULT_MACHINERY
    test_machinery_replaces: bool = False  # ``test_machinery: {replace: [...]}``: the patterns alone
    env: dict[str, str] = field(default_factory=dict)
    limits: Limits | None = None  # resource limits of the task's runs (over the session's)
    network: NetworkSpec | None = None  # network mode / allow-list of the task's runs and checks (run.network)
    binary_diffs: bool = False  # diff.patch holds binary files' bytes (else path, size and sha256 only)
    box: BoxSpec | None = None  # ``sandbox: {read, write}``: more the sandbox shows the task's runs and checks
    content_hash: str = ""
    harbor: Any = None  # spec.harbor.HarborLayout when the task is a Harbor task folder (task.toml + instruction.md)

    def solution_patch_text(self) -> str | None:
        """The reference patch text: inline, or read from a ``.patch``/``.diff`` path next to the task file
        (``SpecError`` when that file is missing)."""
        patch = self.solution_patch
        if patch is None:
            return None
        if (p := self.solution_patch_file()) is not None:
            if not p.is_file():
                raise SpecError(self.path, "solution_patch", f"patch file {p} not found")
            return p.read_text(encoding="utf-8")
        return patch

    def solution_patch_file(self) -> Path | None:
        """The path of the reference patch file when ``solution_patch`` names one (a ``.patch``/``.diff`` path next
        to the task file, existing or not), else None."""
        patch = self.solution_patch
        if patch is not None and is_patch_file_name(patch):
            return self.path.parent / patch.strip()
        return None

    @property
    def machinery(self) -> tuple[str, ...]:
        """The test machinery patterns of the task's checks (``run.machinery.machinery_patterns``): the defaults, the
        files the check commands run through (``run.machinery.command_machinery``: a ``Makefile`` for ``make test``)
        and ``test_machinery``; ``test_machinery: {replace: [...]}`` alone."""
        if self.test_machinery_replaces:
            return machinery_patterns(replace=self.test_machinery)
        ran = command_machinery((self.test_command, self.lint_command, self.verify_command))
        return machinery_patterns((*ran, *self.test_machinery))

    @property
    def protected_globs(self) -> tuple[str, ...]:
        """``protected`` plus every ``verify_files`` path (always protected)."""
        return tuple(dict.fromkeys((*self.protected, *self.verify_files)))


_TASK_ONLY_KEYS = {"test_command", "verify_command", "lint_command", "verify_files", "solution_files", "solution_patch"}


def is_task_data(data: Any) -> bool:
    """True when parsed YAML looks like a task file: a mapping with ``description`` and ``test_command``
    (coderace's rule), or one with three or more task keys of which one is task-specific (a check command,
    verify or solution files) or a near miss of one (``test_comand``) — so a misspelt ``descripton`` or
    ``test_comand`` is reported as an error, not skipped."""
    if not isinstance(data, Mapping):
        return False
    if "description" in data and "test_command" in data:
        return True
    import difflib

    keys = set(map(str, data))
    return len(keys & set(TASK_KEYS)) >= 3 and (bool(keys & _TASK_ONLY_KEYS) or any(
        difflib.get_close_matches(k, _TASK_ONLY_KEYS, n=1, cutoff=0.8) for k in keys - set(TASK_KEYS)))


class _DuplicateKey(Exception):
    def __init__(self, key: Any, first: int, second: int):
        super().__init__(key)
        self.key, self.first, self.second = key, first, second


def _strict_loader() -> Any:
    """A ``yaml.SafeLoader`` that raises ``_DuplicateKey`` for a mapping key given twice (PyYAML keeps the last)."""
    import yaml

    class StrictLoader(yaml.SafeLoader):
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: dict[Any, int] = {}
            for key_node, _value in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=deep)
                line = key_node.start_mark.line + 1
                try:
                    if key in seen:
                        raise _DuplicateKey(key, seen[key], line)
                    seen[key] = line
                except TypeError:  # an unhashable key: the base constructor reports it
                    pass
            return super().construct_mapping(node, deep=deep)

    return StrictLoader


def read_yaml(path: Path) -> Any:
    """Parse a YAML file; raises ``SpecError`` with the line for a syntax error or a key given twice."""
    import yaml

    text = path.read_text(encoding="utf-8")
    try:
        return yaml.load(text, Loader=_strict_loader())  # noqa: S506 - a SafeLoader subclass
    except _DuplicateKey as dup:
        raise SpecError(path, str(dup.key), f"given twice (lines {dup.first} and {dup.second}); YAML would keep only the second: keep one") from None
    except yaml.YAMLError as exc:
        raise SpecError(path, None, f"not valid YAML{yaml_error_place(exc)}") from None


def load_task(path: Path, data: Any = None) -> Task:
    """Load and validate a task file. ``data`` is the already-parsed YAML, if at hand.

    Raises ``SpecError`` (file, key, fix) for the first violation the loader meets, with its line and every other
    key or type error of the file (``spec.schema.every_error``: one per line, with line numbers).
    """
    path = Path(path)
    if data is None:
        data = read_yaml(path)
    try:
        return _load_task(path, data)
    except SpecError as first:
        if not isinstance(data, Mapping):
            raise
        raise every_error(first, path, "task", data, task_schema()) from None


def _load_task(path: Path, data: Any) -> Task:
    raw = path.read_bytes()
    if not isinstance(data, Mapping):
        raise SpecError(path, None, "a task file must be a YAML mapping with name, description and test_command")
    check_keys(path, "", data, TASK_KEYS, REQUIRED)
    name = typed(path, "name", data["name"], str)
    if not name.strip() or any(c in name for c in "/\\[]") or name in (".", ".."):
        raise SpecError(path, "name", f"{name!r} cannot be used as a task name; use letters, digits, '-', '_' or '.'")
    for key in ("description", "test_command"):
        if not typed(path, key, data[key], str).strip():
            raise SpecError(path, key, "is empty; give the prompt / the command that runs the tests")
    kw: dict[str, Any] = {
        "path": path,
        "name": name,
        "description": data["description"],
        "test_command": data["test_command"],
        "content_hash": hashlib.sha256(raw).hexdigest(),
    }
    if data.get("repo") is not None:
        if not typed(path, "repo", data["repo"], str).strip():
            raise SpecError(path, "repo", "is empty; give the starter repository's path, or leave the key out for an empty repository")
        kw["repo"] = resolve_source(path, data["repo"])
    for key in ("lint_command", "verify_command", "solution_patch"):
        if data.get(key) is not None:
            kw[key] = typed(path, key, data[key], str)
    if data.get("timeout") is not None:
        kw["timeout"] = positive_number(path, "timeout", data["timeout"])
    if data.get("difficulty") is not None:
        kw["difficulty"] = _difficulty(path, data["difficulty"])
    if data.get("limits") is not None:
        kw["limits"] = parse_limits(path, "limits", data["limits"])
    if data.get("network") is not None:
        kw["network"] = parse_network(path, "network", data["network"])
    if data.get("sandbox") is not None:
        kw["box"] = parse_box(path, "sandbox", data["sandbox"])
    for key in ("verify_files", "solution_files"):
        files = str_mapping(path, key, data.get(key) or {})
        kw[key] = {relative_file(path, f"{key}.{k}", k): v for k, v in files.items()}
    if kw["verify_files"] and not kw.get("verify_command"):
        raise SpecError(path, "verify_command", "verify_files are given but no verify_command runs them; add verify_command")
    if data.get("agents") is not None:
        agents = typed(path, "agents", data["agents"], list, fix="write a list, e.g. agents: [claude, codex]")
        kw["agents"] = unique_agent_ids(parse_agent(path, f"agents[{i}]", a) for i, a in enumerate(agents))
    if data.get("scoring") is not None:
        kw["scoring"] = _scoring(path, data["scoring"])
    if data.get("pricing") is not None:
        kw["pricing"] = _pricing(path, data["pricing"])
    for key in ("setup", "protected"):
        if data.get(key) is not None:
            kw[key] = str_list(path, key, data[key])
    if kw.get("protected"):
        kw["protected"] = tuple(relative_file(path, "protected", g) for g in kw["protected"])
    if data.get("test_machinery") is not None:
        kw["test_machinery"], kw["test_machinery_replaces"] = _machinery(path, data["test_machinery"])
    if data.get("env") is not None:
        kw["env"] = file_env(path, "env", data["env"])
    if data.get("binary_diffs") is not None:
        kw["binary_diffs"] = typed(path, "binary_diffs", data["binary_diffs"], bool,
                                   fix="write true (keep binary files' bytes in diff.patch) or false")
    return Task(**kw)


def _machinery(path: Path, value: Any) -> tuple[tuple[str, ...], bool]:
    """``test_machinery``: a list of patterns added to the default set, or ``{replace: [...]}`` for a set of its
    own (``[]``: nothing is machinery). A pattern is a file name glob (any depth), ``name/`` (a folder at any
    depth), a path glob with ``/`` (from the tree's root), a part of a shared file (``pyproject.toml [tool.X]``,
    ``setup.cfg [section]``) or the rule ``<shadowing modules>`` (``run.machinery``)."""
    fix = "write a list of patterns (added to the defaults), or {replace: [patterns]} to use only yours"
    if isinstance(value, Mapping):
        check_keys(path, "test_machinery", value, ("replace",), ("replace",))
        patterns, replaces = str_list(path, "test_machinery.replace", value["replace"]), True
    else:
        typed(path, "test_machinery", value, list, fix=fix)
        patterns, replaces = str_list(path, "test_machinery", value), False
    for pattern in patterns:
        problem = pattern_problem(pattern)
        if problem is not None:
            raise SpecError(path, "test_machinery", f"{pattern!r} {problem}; write e.g. conftest.py, fixtures/, "
                                                    "tests/data/*.json or 'setup.cfg [flake8]'")
    return tuple(patterns), replaces


def _difficulty(path: Path, value: Any) -> str:
    """A free-form difficulty level as written (``easy``, ``medium-hard``, ``expert``); a number is kept as its
    text, as coderace does (``str(difficulty)``). Selection by ``--agentrace-difficulty`` is by name
    (``spec.builtin.same_level``)."""
    typed(path, "difficulty", value, str, int, float, fix="write a level such as easy, medium, hard or medium-hard")
    level = str(value).strip()
    if not level or "," in level:
        raise SpecError(path, "difficulty", f"{value!r} cannot be a level: give a non-empty name without commas, "
                                            "e.g. medium-hard")
    return level


def _scoring(path: Path, value: Any) -> dict[str, float]:
    """Raw weights by short key. coderace's canonical keys (``tests_pass``, ``verify_passed``, ``exit_clean``,
    ``lint_clean``, ``wall_time``, ``lines_changed``) are accepted beside the short ones and mean the same
    component; naming one component both ways is an error."""
    typed(path, "scoring", value, dict)
    check_keys(path, "scoring", value, (*SCORE_KEYS, *CANONICAL_SCORE_KEYS))
    out: dict[str, float] = {}
    written: dict[str, str] = {}
    for k, v in value.items():
        typed(path, f"scoring.{k}", v, int, float)
        if v < 0:
            raise SpecError(path, f"scoring.{k}", f"weight must be 0 or more, not {v}")
        short = CANONICAL_SCORE_KEYS.get(k, k)
        if short in written:
            raise SpecError(path, f"scoring.{k}", f"the same weight as scoring.{written[short]}; keep one of the two")
        written[short] = k
        out[short] = float(v)
    if out and sum(out.values()) <= 0:
        raise SpecError(path, "scoring", "weights sum to 0; give at least one positive weight")
    return out


def _pricing(path: Path, value: Any) -> dict[str, dict[str, float]]:
    """``{agent or model name: {kind: USD per 1M tokens}}``. A kind is written ``input`` or, as coderace does,
    ``input_per_1m`` (likewise ``output``, ``cache_read``, ``cache_write``); rates are 0 or more."""
    typed(path, "pricing", value, dict)
    allowed = [*PRICE_KEYS, *(k + PER_1M for k in PRICE_KEYS)]
    out = {}
    for name, prices in value.items():
        key = f"pricing.{name}"
        typed(path, key, prices, dict, fix="give USD per 1M tokens, e.g. {input_per_1m: 3, output_per_1m: 15}")
        check_keys(path, key, prices, allowed)
        rates: dict[str, float] = {}
        for k, v in prices.items():
            typed(path, f"{key}.{k}", v, int, float)
            kind = k.removesuffix(PER_1M)
            if kind in rates:
                other = kind if k != kind else kind + PER_1M
                raise SpecError(path, f"{key}.{k}", f"the same rate as {key}.{other}; keep one of the two")
            if not v >= 0 or v == float("inf"):
                raise SpecError(path, f"{key}.{k}", f"must be a price of 0 or more (USD per 1M tokens), not {v}")
            rates[kind] = float(v)
        out[str(name)] = rates
    return out


def task_schema() -> dict[str, Any]:
    """The JSON Schema of a task file (``spec.task``; coderace's format)."""
    rates = {k: {"type": "number", "minimum": 0} for k in (*PRICE_KEYS, *(p + PER_1M for p in PRICE_KEYS))}
    props = {
        "name": STR, "description": STR, "repo": STR, "test_command": STR, "lint_command": STR,
        "verify_command": STR, "verify_files": STR_MAP, "timeout": {"type": "number", "exclusiveMinimum": 0},
        "agents": {"type": "array", "items": agent_schema(AGENT_KEYS, with_string=True)},
        "scoring": {"type": "object", "properties": {k: {"type": "number", "minimum": 0}
                                                     for k in (*SCORE_KEYS, *CANONICAL_SCORE_KEYS)},
                    "additionalProperties": False},
        "pricing": {"type": "object", "additionalProperties": {"type": "object", "properties": rates,
                                                               "additionalProperties": False}},
        "difficulty": {"type": ["string", "number"]}, "setup": STR_OR_STRS, "solution_files": STR_MAP,
        "solution_patch": STR, "protected": STR_OR_STRS, "env": ENV, "limits": LIMITS,
        "binary_diffs": {"type": "boolean"},
        "test_machinery": {"anyOf": [{"type": "array", "items": STR}, {
            "type": "object", "properties": {"replace": {"type": "array", "items": STR}},
            "required": ["replace"], "additionalProperties": False}]},
        "network": NETWORK, "sandbox": BOX,
    }
    return {"$schema": DRAFT, "$id": "https://pytest-agentrace/schemas/task.schema.json",
            "title": "pytest-agentrace task file (YAML)", **schema_table(props, TASK_KEYS, REQUIRED)}
