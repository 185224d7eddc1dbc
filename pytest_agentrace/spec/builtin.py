"""The built-in task suite: where it lives, listing it, and choosing tasks by name and difficulty.

The 20 built-in tasks are kept in the source tree at ``example_suites/builtin/<name>/task.yaml`` (each with
its starter ``repo/`` folder beside it), where people browse them as examples. They ship *inside* the
package as ``pytest_agentrace/builtin_tasks/``: in the source tree that path is a symlink to
``../example_suites/builtin``, and a wheel or sdist build follows the link and stores real files under
``pytest_agentrace/builtin_tasks/`` (package data, ``builtin_tasks/**`` in pyproject.toml). So an installed
package, an editable install and a plain checkout all find the tasks at the same place relative to this
module, with no copy to keep in sync and no network. Where the symlink is missing (a checkout on a system
without symlinks), the source-tree folder is used instead. Installs from a zip file are not supported:
the runs clone the starter folders, which must be real directories.

The option types of ``--agentrace-builtin`` and ``--agentrace-difficulty`` (``name_list``, ``difficulty_list``)
and the standard levels are in ``argtypes``, which ``options`` reads at every pytest start; this module (it reads
YAML) is imported only by a session that runs built-in tasks and by the CLI.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_agentrace.argtypes import DIFFICULTIES, difficulty_list
from pytest_agentrace.errors import did_you_mean
from pytest_agentrace.spec.task import read_yaml

TASK_FILE = "task.yaml"


def level_key(level: str) -> str:
    """The form in which levels are compared: trimmed and case-folded (coderace compares lower-cased names)."""
    return level.strip().casefold()


def same_level(difficulty: str | None, wanted: Sequence[str]) -> bool:
    """True when a task's free-form ``difficulty`` is one of the ``wanted`` levels, by name.

    A level is a name: ``medium-hard`` (coderace's state-machine task) is a level of its own, selected by
    ``medium-hard`` and by neither ``medium`` nor ``hard`` — the rule of coderace's ``--difficulty`` filter
    (exact, lower-cased). A task without a difficulty matches no level."""
    return difficulty is not None and level_key(difficulty) in {level_key(w) for w in wanted}


def level_rank(level: str | None) -> float:
    """Sort key of a level, easiest first: ``easy`` 0, ``medium`` 1, ``hard`` 2; a level made of two standard
    levels joined by ``-`` (``medium-hard``, ``easy-medium``) sits halfway between them (1.5); any other level
    comes after ``hard`` (3), and no level last (4)."""
    if level is None:
        return 4.0
    parts = level_key(level).split("-")
    if all(p in DIFFICULTIES for p in parts) and 1 <= len(parts) <= 2:
        return sum(DIFFICULTIES.index(p) for p in parts) / len(parts)
    return 3.0


def known_difficulty_list(value: str) -> tuple[str, ...]:
    """argparse ``type`` for ``agentrace tasks list --difficulty``: like ``difficulty_list``, but every level must
    be one the built-in tasks have (a did-you-mean for a near miss); raises ``argparse.ArgumentTypeError``."""
    levels = difficulty_list(value)
    known = levels_of(builtin_tasks())
    for level in levels:
        if not any(same_level(k, [level]) for k in known):
            raise argparse.ArgumentTypeError(f"unknown difficulty {level!r}{did_you_mean(level_key(level), known)}; "
                                             f"the built-in tasks have {', '.join(known)}")
    return levels


SAME_NAME_NOTE = "levels match by name: medium-hard is neither medium nor hard"


def sorted_levels(levels: Iterable[str]) -> list[str]:
    """Distinct levels, easiest first (``level_rank``), then by name."""
    return sorted(set(levels), key=lambda x: (level_rank(x), x))


def levels_of(tasks: Iterable[BuiltinTask]) -> list[str]:
    """The distinct difficulty levels of ``tasks`` (their ``task.yaml`` files), easiest first."""
    return sorted_levels(lv for t in tasks if (lv := _level_of(read_yaml(t.path))) is not None)


@dataclass(frozen=True)
class BuiltinTask:
    """A built-in task found on disk: ``name`` (its folder name) and ``path`` to its ``task.yaml``."""

    name: str
    path: Path


def builtin_root() -> Path:
    """The folder holding the built-in tasks (``<package>/builtin_tasks`` or the source tree's
    ``example_suites/builtin``). Raises ``FileNotFoundError`` when neither exists (a broken install)."""
    here = Path(__file__).resolve().parent.parent  # the package folder
    for candidate in (here / "builtin_tasks", here.parent / "example_suites" / "builtin"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"the built-in tasks are missing from this install (looked in {here / 'builtin_tasks'}); reinstall pytest-agentrace")


def node_path(path: Path, rootdir: Path, invocation: Path) -> str:
    """The node-id path (POSIX) of the task or trial file ``path`` as a session names it: relative to ``rootdir``
    (pytest's own) when under it; else ``agentrace-builtin/<task>/task.yaml`` for a built-in task; else relative to
    the ``invocation`` folder (``os.path.relpath``), where pytest would give an empty one. Paths are resolved.
    Raises ``FileNotFoundError`` for a file outside ``rootdir`` when the built-in tasks are missing
    (``builtin_root``)."""
    path = Path(path).resolve()
    if path.is_relative_to(Path(rootdir).resolve()):
        return path.relative_to(Path(rootdir).resolve()).as_posix()
    root = builtin_root().resolve()
    if path.is_relative_to(root):
        return "agentrace-builtin/" + path.relative_to(root).as_posix()
    return Path(os.path.relpath(path, invocation)).as_posix()


def builtin_tasks(root: Path | None = None) -> list[BuiltinTask]:
    """Every built-in task (a folder of ``root`` holding ``task.yaml``), sorted by name."""
    root = root or builtin_root()
    return [BuiltinTask(p.name, p / TASK_FILE) for p in sorted(root.iterdir()) if (p / TASK_FILE).is_file()]


def find_builtin(name: str, root: Path | None = None) -> BuiltinTask:
    """The built-in task called ``name``; raises ``KeyError`` with a did-you-mean and the valid names."""
    tasks = {t.name: t for t in builtin_tasks(root)}
    if name not in tasks:
        raise KeyError(f"no built-in task {name!r}{did_you_mean(name, tasks)}; built-in tasks: {', '.join(tasks)}")
    return tasks[name]


def select_builtin(names: Iterable[str], difficulties: Sequence[str] | None = None, root: Path | None = None) -> list[BuiltinTask]:
    """Built-in tasks by name (``all`` = every one), in the order asked, without duplicates, keeping only
    ``difficulties`` when given. Raises ``KeyError`` for an unknown name."""
    chosen: dict[str, BuiltinTask] = {}
    for name in names:
        for task in builtin_tasks(root) if name == "all" else [find_builtin(name, root)]:
            chosen.setdefault(task.name, task)
    if difficulties:
        chosen = {n: t for n, t in chosen.items() if same_level(_level_of(read_yaml(t.path)), difficulties)}
    return list(chosen.values())


def _level_of(data: Any) -> str | None:
    level = data.get("difficulty") if isinstance(data, dict) else None
    return None if level is None else str(level)


def keep_difficulty(difficulty: str | None, wanted: Sequence[str] | None) -> bool:
    """True when a task of ``difficulty`` passes the ``--agentrace-difficulty`` filter ``wanted`` (by name,
    ``same_level``; no filter keeps everything; a task without a difficulty is dropped by any filter)."""
    return not wanted or same_level(difficulty, wanted)
