"""The session's state every part of the pytest layer reads: its settings (resolved once per process), its id
(shared by xdist workers) and the options its runs share. Kept in ``config.stash``."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_agentrace import options as _options
from pytest_agentrace.agents.base import RunOptions

SETTINGS_KEY = pytest.StashKey[_options.Settings]()
SESSION_ID_KEY = pytest.StashKey[str]()
RUN_OPTIONS_KEY = pytest.StashKey[RunOptions]()
SANDBOX_WHY_KEY = pytest.StashKey[str]()  # why the session runs without a sandbox (--agentrace-sandbox auto)


def settings(config: pytest.Config) -> _options.Settings:
    """This session's settings (resolved once; raises ``pytest.UsageError`` for an ini value that does not convert)."""
    found = config.stash.get(SETTINGS_KEY, None)
    if found is None:
        try:
            found = _options.resolve(config.getoption, lambda name: _getini(config, name))
        except ValueError as exc:
            raise pytest.UsageError(str(exc)) from None
        config.stash[SETTINGS_KEY] = found
    return found


def _getini(config: pytest.Config, name: str) -> object:
    """``config.getini``, with pytest 9.2's ``UsageError`` for a value of the wrong type as a ``ValueError`` (so that
    ``options.resolve`` names the key, as on earlier pytests)."""
    try:
        return config.getini(name)
    except pytest.UsageError as exc:
        raise ValueError(str(exc)) from None


def enabled(config: pytest.Config) -> bool:
    """Whether ``--agentrace`` was given (on the command line or through ``addopts``)."""
    return bool(config.getoption("agentrace", default=False))


def is_worker(config: pytest.Config) -> bool:
    """True inside a pytest-xdist worker (which must never aggregate or set the exit status)."""
    return hasattr(config, "workerinput")


def out_dir(config: pytest.Config) -> Path:
    """The session's results folder (``options.out_dir`` of ``--agentrace-out``)."""
    return _options.out_dir(config, settings(config).out)


def report_path(config: pytest.Config, value: str) -> Path:
    """A report file option's path, relative to the folder pytest was started in."""
    path = Path(value).expanduser()
    return path if path.is_absolute() else Path(config.invocation_params.dir) / path
