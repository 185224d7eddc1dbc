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

This module is imported by ``options`` (for the option definitions below), so it imports nothing heavy and
nothing from pytest at module level.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_agentrace.errors import did_you_mean

DIFFICULTIES = ("easy", "medium", "hard")  # the same as spec.task.DIFFICULTIES (kept import-light here)
TASK_FILE = "task.yaml"


def difficulty_list(value: str) -> tuple[str, ...]:
    """argparse ``type`` for ``--agentrace-difficulty``: ``"easy,medium"`` -> ``("easy", "medium")``.

    Raises ``argparse.ArgumentTypeError`` (shown by pytest/argparse as a usage error) for an unknown level.
    """
    levels = tuple(dict.fromkeys(v.strip() for v in value.split(",") if v.strip()))
    if not levels:
        raise argparse.ArgumentTypeError(f"give one or more of {', '.join(DIFFICULTIES)} separated by commas")
    for level in levels:
        if level not in DIFFICULTIES:
            raise argparse.ArgumentTypeError(f"unknown difficulty {level!r}{did_you_mean(level, DIFFICULTIES)}; use {', '.join(DIFFICULTIES)}")
    return levels


def name_list(value: str) -> tuple[str, ...]:
    """argparse ``type`` for ``--agentrace-builtin``: ``"fibonacci,lru-cache"`` -> a tuple of names."""
    names = tuple(v.strip() for v in value.split(",") if v.strip())
    if not names:
        raise argparse.ArgumentTypeError("give a built-in task name (see `agentrace tasks list`) or 'all'")
    return names


# pytest options of the task suite (appended to ``options.OPTIONS``). ``--agentrace-validate`` is defined
# here too so that ``options`` never has to import the pytest-side ``validate`` module.
SUITE_OPTIONS: list[tuple[str, dict[str, Any]]] = [
    ("--agentrace-builtin", {
        "action": "append", "default": [], "type": name_list, "metavar": "NAME[,NAME]",
        "help": "run built-in tasks by name without a path (comma-separated, repeatable; 'all' for every one; "
                "see `agentrace tasks list`)",
    }),
    ("--agentrace-difficulty", {
        "default": None, "type": difficulty_list, "metavar": "LEVEL[,LEVEL]",
        "help": "keep only tasks of these difficulties (easy, medium, hard); others are deselected",
    }),
    ("--agentrace-validate", {
        "action": "store_true", "default": False,
        "help": "validate task files instead of racing: run only the oracle (reference solution) and noop agents and "
                "fail a task whose oracle does not pass every check or whose hidden checks pass without a change",
    }),
]


@dataclass(frozen=True)
class BuiltinTask:
    """A built-in task found on disk: ``name`` (its folder name) and ``path`` to its ``task.yaml``."""

    name: str
    path: Path


def builtin_root() -> Path:
    """The folder holding the built-in tasks (``<package>/builtin_tasks`` or the source tree's
    ``example_suites/builtin``). Raises ``FileNotFoundError`` when neither exists (a broken install)."""
    here = Path(__file__).parents[1]  # the package folder (this module is in spec/)
    for candidate in (here / "builtin_tasks", here.parent / "example_suites" / "builtin"):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"the built-in tasks are missing from this install (looked in {here / 'builtin_tasks'}); reinstall pytest-agentrace")


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
    from pytest_agentrace.spec.task import read_yaml

    chosen: dict[str, BuiltinTask] = {}
    for name in names:
        for task in builtin_tasks(root) if name == "all" else [find_builtin(name, root)]:
            chosen.setdefault(task.name, task)
    if difficulties:
        chosen = {n: t for n, t in chosen.items() if (read_yaml(t.path) or {}).get("difficulty") in difficulties}
    return list(chosen.values())


def extend_args(namespace: Any, args: list[str]) -> None:
    """Append the ``task.yaml`` paths of the tasks ``--agentrace-builtin`` names to pytest's ``args`` (in place).

    Called from ``pytest_load_initial_conftests``, the hook pytest documents for changing the command line
    before it is parsed, so pytest, pytest-xdist workers (which re-parse the same command line) and
    ``--collect-only`` all see the tasks as if their paths had been typed. Raises ``pytest.UsageError`` for an
    unknown name, or when the option is used without ``--agentrace``.
    """
    groups = getattr(namespace, "agentrace_builtin", None) or []
    if not groups:
        return
    import pytest

    if not getattr(namespace, "agentrace", False):
        raise pytest.UsageError("--agentrace-builtin needs --agentrace (e.g. pytest --agentrace --agentrace-builtin fibonacci)")
    names = [n for group in groups for n in group]
    try:
        tasks = select_builtin(names, getattr(namespace, "agentrace_difficulty", None))
    except (KeyError, FileNotFoundError) as exc:
        raise pytest.UsageError(f"--agentrace-builtin: {exc.args[0]}") from None
    if not tasks:
        wanted = ",".join(namespace.agentrace_difficulty)
        raise pytest.UsageError(f"--agentrace-builtin: no task among {', '.join(names)} has difficulty {wanted}; see `agentrace tasks list`")
    args.extend(str(t.path) for t in tasks)


def keep_difficulty(difficulty: str | None, wanted: Sequence[str] | None) -> bool:
    """True when a task of ``difficulty`` passes the ``--agentrace-difficulty`` filter ``wanted``
    (no filter keeps everything; a task without a difficulty is dropped by any filter)."""
    return not wanted or difficulty in wanted


def deselect_by_difficulty(config: Any, items: list[Any]) -> None:
    """``pytest_collection_modifyitems`` part of ``--agentrace-difficulty``: deselect the task runs whose
    task has another (or no) difficulty, through ``pytest_deselected`` so pytest reports them. Trial runs
    and ordinary tests are kept."""
    wanted = config.getoption("agentrace_difficulty", default=None)
    if not wanted:
        return
    from pytest_agentrace.plugin.collect import RUNSPEC_KEY

    keep, drop = [], []
    for item in items:
        spec = item.stash.get(RUNSPEC_KEY, None)
        if spec is not None and spec.kind == "task" and not keep_difficulty(spec.spec.difficulty, wanted):
            drop.append(item)
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
