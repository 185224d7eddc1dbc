"""Where the SQLite history store (``record.store``) lives: ``$AGENTRACE_DB`` when set, else
``<rootdir>/.agentrace/history.db`` (the CLI: the nearest such file from the current folder up to the project's top,
``cli_root``, as pytest writes it from a subfolder); ``--agentrace-db PATH`` (``--db``) wins over both where it is
given.

Standard library only: ``options`` names these in its help, and it is read at every pytest start (``record.store``
imports ``sqlite3`` and is loaded only when a history is opened).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

ENV_VAR = "AGENTRACE_DB"
DEFAULT_NAME = "history.db"


PROJECT_MARKERS = ("pytest.ini", ".pytest.ini", "pyproject.toml", "setup.cfg", "tox.ini", ".git")


def default_path(rootdir: Path | str | None = None) -> Path:
    """``$AGENTRACE_DB`` (user-expanded, resolved) when set, else ``<rootdir>/.agentrace/history.db``; without
    ``rootdir`` (the CLI) ``cli_root()``'s."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser().resolve()
    return Path(rootdir or cli_root()) / ".agentrace" / DEFAULT_NAME


def default_results(start: Path | None = None) -> Path | None:
    """The results folder a command run in ``start`` (default: the current folder) reads when it is given none: the
    nearest ``.agentrace/`` holding ``runs/`` from ``start`` upward, looked for up to the project's top (as
    ``cli_root``); None when there is none."""
    found = _nearest(start, lambda folder: (folder / ".agentrace" / "runs").is_dir())
    return found / ".agentrace" if found is not None else None


def cli_root(start: Path | None = None) -> Path:
    """The folder whose ``.agentrace/history.db`` a command run in ``start`` (default: the current folder) reads:
    the nearest folder from ``start`` upward that holds one, looked for up to the project's top (the first folder
    with a ``PROJECT_MARKERS`` entry: pytest's rootdir is there or below, so a session started in a subfolder wrote
    it there); ``start`` itself when none does."""
    found = _nearest(start, lambda folder: (folder / ".agentrace" / DEFAULT_NAME).is_file())
    return found if found is not None else Path(start or Path.cwd()).absolute()


def _nearest(start: Path | None, holds: Callable[[Path], bool]) -> Path | None:
    """The nearest folder from ``start`` (default: the current folder) upward for which ``holds`` is true, looked for
    up to the project's top (the first folder with a ``PROJECT_MARKERS`` entry, itself included); None when none is."""
    here = Path(start or Path.cwd()).absolute()
    for folder in (here, *here.parents):
        if holds(folder):
            return folder
        if any((folder / marker).exists() for marker in PROJECT_MARKERS):
            break
    return None
