"""Schema pieces and error lines shared by the task and trial loaders: JSON Schema fragments (``schema_table``,
``agent_schema``) from which ``spec.task.task_schema`` and ``spec.trial.trial_schema`` are made out of the loaders'
own key tables, and ``every_error``, which lists every schema error of a file with its line.

YAML lines come from PyYAML's composed node tree (each key node's ``start_mark``); TOML lines from a light scan of
table headers and ``key =`` lines (tomllib keeps no positions; tomlkit is not a dependency). Needs ``jsonschema``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pytest_agentrace.errors import SpecError, did_you_mean
from pytest_agentrace.run.runspec import NETWORK_MODES
from pytest_agentrace.spec.common import LIMIT_KEYS

DRAFT = "https://json-schema.org/draft/2020-12/schema"
STR: dict[str, Any] = {"type": "string"}
STRS: dict[str, Any] = {"type": "array", "items": STR}
STR_OR_STRS: dict[str, Any] = {"anyOf": [STR, STRS]}
STR_MAP: dict[str, Any] = {"type": "object", "additionalProperties": STR}
ENV: dict[str, Any] = {"type": "object", "additionalProperties": {"type": ["string", "number"]}}
LIMIT_VALUE: dict[str, Any] = {"type": ["string", "number", "null"]}
LIMITS: dict[str, Any] = {"type": "object", "properties": dict.fromkeys(LIMIT_KEYS, LIMIT_VALUE),
                           "additionalProperties": False}


NETWORK: dict[str, Any] = {"anyOf": [{"enum": list(NETWORK_MODES)}, {
    "type": "object", "additionalProperties": False,
    "properties": {"mode": {"enum": list(NETWORK_MODES)}, "allow": {"type": "array", "items": STR}}}]}


BOX: dict[str, Any] = {"type": "object", "additionalProperties": False,
                       "properties": {"read": STR_OR_STRS, "write": STR_OR_STRS}}


def agent_schema(keys: Sequence[str], *, with_string: bool) -> dict[str, Any]:
    props = {
        "name": STR, "command": STR_OR_STRS, "kind": STR, "model": STR, "env": ENV, "args": STR_OR_STRS,
        "edits": {"type": "boolean"}, "sandbox": {"anyOf": [STR, BOX]}, "model_double": STR, "expect": {"enum": ["fail", "pass"]},
        "isolate": STR_OR_STRS, "limits": LIMITS, "network": NETWORK,
    }
    table = {"type": "object", "properties": {k: props[k] for k in keys}, "required": ["name"],
             "additionalProperties": False}
    return {"anyOf": [STR, table]} if with_string else table


def schema_table(props: dict[str, Any], keys: Sequence[str], required: Iterable[str] = ()) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": {k: props[k] for k in keys}, "additionalProperties": False}
    if required := list(required):
        out["required"] = required
    return out


def all_errors(schema: dict[str, Any], kind: str, text: str, data: Any) -> list[tuple[int | None, str, str]]:
    """Every ``schema`` error of a parsed file as ``(line or None, key path, message)``, in file order. ``kind`` is
    ``task`` (``text`` is YAML) or ``trial`` (TOML). An unknown key is reported at its own line with the nearest
    valid key. Needs ``jsonschema`` (a dependency)."""
    from jsonschema import Draft202012Validator

    line_of = _yaml_lines(text) if kind == "task" else _toml_lines(text)
    found: list[tuple[int | None, str, str]] = []
    _collect(Draft202012Validator(schema).iter_errors(data), line_of, found)
    return sorted(found, key=lambda e: (e[0] is None, e[0] or 0))


def _collect(errors: Iterable[Any], line_of: Any, found: list[tuple[int | None, str, str]]) -> None:
    for err in errors:
        where = list(err.absolute_path)
        if err.validator == "anyOf" and isinstance(err.instance, dict) and err.context:
            # a table where a string or a table may stand: the table branch's own errors say what is wrong
            branch = [e for e in err.context if e.schema.get("type") == "object" or e.validator == "additionalProperties"
                      or (e.relative_schema_path and e.relative_schema_path[0] == 1)]
            if branch:
                _collect(branch, line_of, found)
                continue
        if err.validator == "additionalProperties" and isinstance(err.instance, dict):
            allowed = list(err.schema.get("properties", {}))
            for key in err.instance:
                if key not in allowed:
                    found.append((line_of([*where, key]), _label([*where, key]),
                                  f"unknown key{did_you_mean(str(key), allowed)}; valid keys: {', '.join(allowed)}"))
            continue
        if err.validator == "required" and isinstance(err.instance, dict):  # named by the key, at its table's line
            for key in err.validator_value:
                if key not in err.instance:
                    found.append((line_of(where), _label([*where, key]), "required key is missing; add it"))
            continue
        if err.validator == "anyOf":  # a string or a table: say what the value is not
            message = f"{err.instance!r} is not {_wanted(err.schema)}"
        else:
            message = err.message
        found.append((line_of(where), _label(where), message))


def _wanted(schema: dict[str, Any]) -> str:
    kinds = [s.get("type", "a value") for s in schema.get("anyOf", [])]
    return " or ".join("a list of strings" if k == "array" else "a table" if k == "object" else f"a {k}" for k in kinds)


def _label(where: Sequence[Any]) -> str:
    out = ""
    for part in where:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def key_path(key: str) -> list[str | int]:
    """``agents[2].command`` -> ``["agents", 2, "command"]``, ``[defaults].reps`` -> ``["defaults", "reps"]``
    (a loader's key label; a trial's ``[[arms]] 'docs'`` keeps the label ``[[arms]] 'docs'``)."""
    out: list[str | int] = []
    for part in re.findall(r"\[\[[^\]]+\]\] (?:'[^']*'|#\d+)|\[\d+\]|\[[^\]]+\]|[^.\[\]]+", key):
        if re.fullmatch(r"\[\d+\]", part):
            out.append(int(part[1:-1]))
        elif part.startswith("[") and not part.startswith("[["):
            out.append(part[1:-1])
        else:
            out.append(part)
    return out


def _yaml_lines(text: str) -> Any:
    import yaml

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        root = None

    def line_of(where: Sequence[Any]) -> int | None:
        node, line = root, None
        for part in where:
            if isinstance(node, yaml.MappingNode):
                hit = next(((k, v) for k, v in node.value if k.value == str(part)), None)
                if hit is None:
                    break
                line, node = hit[0].start_mark.line + 1, hit[1]
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
                node = node.value[part]
                line = node.start_mark.line + 1
            else:
                break
        return line
    return line_of


_HEADER = re.compile(r"^\s*(\[\[?)\s*([A-Za-z0-9_.\-\"' ]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"^\s*([A-Za-z0-9_\-]+|\"[^\"]*\")\s*=")


def _toml_lines(text: str) -> Any:
    """Lines of a TOML file's tables and keys by a scan: ``[table]``, the n-th ``[[array]]`` and ``key =`` lines
    inside them (nested inline tables and dotted keys map to their enclosing key's line)."""
    keys: dict[tuple[Any, ...], int] = {}
    counts: dict[str, int] = {}
    current: tuple[Any, ...] = ()
    for n, line in enumerate(text.splitlines(), 1):
        if m := _HEADER.match(line):
            name = m.group(2).strip().strip("\"'")
            if m.group(1) == "[[":
                index = counts.get(name, -1) + 1
                counts[name] = index
                current = (name, index)
                keys.setdefault((name,), n)
            else:
                current = tuple(name.split("."))
            keys.setdefault(current, n)
        elif m := _KEY.match(line):
            keys.setdefault((*current, m.group(1).strip('"')), n)

    def line_of(where: Sequence[Any]) -> int | None:
        for end in range(len(where), 0, -1):
            if (hit := keys.get(tuple(where[:end]))) is not None:
                return hit
        return None
    return line_of


def trial_key_path(key: str, data: Any) -> list[Any]:
    """A trial loader's key label (``[[arms]] 'docs'.overlay``, ``[[questions]] #2.prompt``) -> a key path
    (``["arms", 0, "overlay"]``), looking a named entry up in ``data``."""
    m = re.match(r"^\[\[(\w+)\]\] (?:'([^']*)'|#(\d+))(.*)$", key)
    if not m:
        return key_path(key)
    table, name, number, rest = m.groups()
    entries = data.get(table) if isinstance(data, dict) else None
    index = int(number) - 1 if number else next(
        (i for i, e in enumerate(entries or []) if isinstance(e, dict) and name in (e.get("name"), e.get("id"))), 0)
    return [table, index, *key_path(rest.lstrip("."))]


def line_finder(kind: str, text: str) -> Any:
    """``line_of(key path) -> line or None`` for a task (YAML) or trial (TOML) file's text."""
    return _yaml_lines(text) if kind == "task" else _toml_lines(text)



def every_error(first: SpecError, path: Path, kind: str, data: Any, schema: dict[str, Any]) -> SpecError:
    """``first`` (the loader's error) with its line, followed by every other schema error of the file with theirs:
    ``FILE: key 'agents[0].comand': unknown key ... (line 9); 2 more errors:`` and one indented
    ``line N: key 'K': message`` line each. The error keeps ``first.key``."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return first
    line_of = line_finder(kind, text)
    where = key_path(first.key) if kind == "task" and first.key else (
        trial_key_path(first.key, data) if first.key else [])
    first_line = line_of(where) if where else None
    try:
        others = [e for e in all_errors(schema, kind, text, data) if e[1] not in (first.key, _label(where))]
    except ImportError:  # jsonschema missing: the first error alone
        others = []
    message = str(first).removeprefix(f"{first.path}: ").removeprefix(f"key '{first.key}': ")
    if first_line is not None:
        message += f" (line {first_line})"
    if others:
        message += f"; {len(others)} more error{'s' if len(others) > 1 else ''}:" + "".join(
            f"\n  {'line ' + str(line) if line else 'file'}: key '{key}': {text_}" for line, key, text_ in others)
    return SpecError(first.path, first.key, message)

