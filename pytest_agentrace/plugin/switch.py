"""What every pytest process needs of the plugin, with or without ``--agentrace``: whether it is on (``enabled``),
the session object's stash key (``session_of``), the markers of the run items (registered in any session, so
``--strict-markers`` stays clean) and ``--agentrace-builtin``'s early check. Standard library and ``options`` only.

The session itself (``plugin.session``, and through it collection, the run pipeline, the controller, statistics and
reports) is imported by name (``session_module``) only when ``--agentrace`` is on or built-in tasks are asked for,
as pytest-xdist's plugin imports its ``DSession`` inside ``pytest_configure`` and ``agents.REGISTRY`` loads an
adapter: a plain ``pytest`` run, and ``pytest --help``, load a handful of small modules of this package
(``tests/test_startup_imports.py``).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import pytest

from pytest_agentrace import options as _options

if TYPE_CHECKING:
    from pytest_agentrace.plugin.session import AgentraceSession

SESSION_MODULE = "pytest_agentrace.plugin.session"
SANDBOX_MODULE = "pytest_agentrace.run.sandbox"
SESSION_KEY = pytest.StashKey["AgentraceSession"]()
MARKERS = {
    "agentrace": "a run of pytest-agentrace (every run item); keyword arguments kind, case, arm, agent (its id, e.g. "
                 "codex:gpt-5), agent_name (claude, codex, ...) and rep select runs: -m \"agentrace(agent='claude')\"",
    "agentrace_task": "a run of a task file (the same keyword arguments as agentrace)",
    "agentrace_trial": "a run of a trial file (the same keyword arguments as agentrace)",
}


def enabled(config: pytest.Config) -> bool:
    """Whether ``--agentrace`` was given (on the command line or through ``addopts``)."""
    return bool(config.getoption("agentrace", default=False))


def session_of(config: pytest.Config) -> AgentraceSession | None:
    """The session object of ``config`` (None without ``--agentrace``; ``AgentraceSession.start`` stores it)."""
    return config.stash.get(SESSION_KEY, None)


def session_module() -> ModuleType:
    """``pytest_agentrace.plugin.session``, imported on first use (later calls: the module already loaded)."""
    return importlib.import_module(SESSION_MODULE)


def probe_ahead(config: pytest.Config) -> None:
    """Under ``--agentrace`` unless ``--agentrace-sandbox off`` is on the command line: the sandbox's probes started
    on a thread (``run.sandbox.probe_ahead``) before the session module is imported, so bwrap's test boxes (about 50
    ms each) run beside those imports instead of after them. The overlay probe only where runs execute (not on a
    pytest-xdist controller). Only the command line is read: the ini file is the session's to read and report on
    (pytest 9.2 keeps a typed ini key's failed conversion, so a read here would take the key's name from its error)."""
    if config.getoption("agentrace_sandbox", default=None) == "off":
        return
    offline = bool(config.getoption("agentrace_offline", default=None))
    runs_here = hasattr(config, "workerinput") or not config.getoption("numprocesses", default=None)
    importlib.import_module(SANDBOX_MODULE).probe_ahead(offline, overlay=runs_here)


def builtin_args(early_config: pytest.Config) -> list[str]:
    """``--agentrace-builtin NAME`` (or the ini key ``agentrace_builtin`` under ``--agentrace``): the built-in tasks'
    ``task.yaml`` paths to append to the command line (``session.builtin_paths``); ``[]`` when none are asked for,
    without importing the session. Raises ``pytest.UsageError`` for the option without ``--agentrace``, and (from
    ``builtin_paths``) for an unknown name or a difficulty no such task has."""
    namespace = early_config.known_args_namespace
    on = getattr(namespace, "agentrace", False)
    groups = getattr(namespace, "agentrace_builtin", None)
    if not groups and on:  # the ini key counts only for an agentrace session
        groups = _options.BY_NAME["builtin"].from_ini(early_config.getini("agentrace_builtin") or [])
    if not groups:
        return []
    if not on:
        raise pytest.UsageError("--agentrace-builtin needs --agentrace (e.g. pytest --agentrace --agentrace-builtin fibonacci)")
    names = [n for group in groups for n in group]
    return session_module().builtin_paths(names, getattr(namespace, "agentrace_difficulty", None))


def forgotten_flag(config: pytest.Config) -> list[str]:
    """The command-line arguments of a session without ``--agentrace`` that name a task file, a trial file, a Harbor
    task folder or a folder holding a task or trial file (``_holds_spec``), which pytest alone does not collect
    (``not found``, ``no tests ran``), for a hint. Only ``.yaml``/``.yml``/``.toml`` files are read; one that does
    not parse is none."""
    found = []
    for arg in config.args:
        path = Path(config.invocation_params.dir, str(arg).split("::", 1)[0])
        if path.is_dir():
            harbor = (path / "task.toml").is_file() and (path / "instruction.md").is_file()
            if harbor or _holds_spec(path):
                found.append(str(arg))
        elif _is_spec(path):
            found.append(str(arg))
    return found


FOLDER_LOOK = 200  # candidate files of a folder argument read for a hint, at most (three levels deep)


def _holds_spec(folder: Path) -> bool:
    """Whether ``folder`` holds a task or trial file within three levels (the first ``FOLDER_LOOK`` candidates)."""
    candidates = (p for depth in ("*", "*/*", "*/*/*") for p in sorted(folder.glob(depth))
                  if p.suffix in (".yaml", ".yml", ".toml") and p.name != "pyproject.toml")
    return any(_is_spec(p) for _, p in zip(range(FOLDER_LOOK), candidates, strict=False))


def _is_spec(path: Path) -> bool:
    """Whether ``path`` is a task or trial file (parsed; one that cannot be read or parsed is none)."""
    try:
        if path.suffix in (".yaml", ".yml") and path.is_file():
            import yaml

            from pytest_agentrace.spec.task import is_task_data

            return bool(is_task_data(yaml.safe_load(path.read_text(encoding="utf-8"))))
        if path.suffix == ".toml" and path.is_file():
            import tomllib

            from pytest_agentrace.spec.trial import is_trial_data

            return bool(is_trial_data(tomllib.loads(path.read_text(encoding="utf-8"))))
    except Exception:  # noqa: BLE001 - a file that cannot be read or parsed is no task or trial file for a hint
        return False
    return False
    return False
