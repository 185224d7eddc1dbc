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
    """The results folder a command run in ``start`` (default: the current folder) reads when it is given none,
    from ``start`` upward up to the project's top (as ``cli_root``): in the nearest folder with either, the folder its
    pytest ini file names in ``agentrace_out`` (``ini_results``: where its sessions write), else its ``.agentrace/``
    holding ``runs/``; None when there is neither."""
    named: dict[Path, Path | None] = {}  # each folder's ini file read once

    def holds(folder: Path) -> bool:
        named[folder] = ini_results(folder)
        return named[folder] is not None or (folder / ".agentrace" / "runs").is_dir()

    found = _nearest(start, holds)
    return None if found is None else named[found] or found / ".agentrace"


INI_FILES = (("pytest.ini", "pytest"), (".pytest.ini", "pytest"), ("pyproject.toml", None), ("tox.ini", "pytest"),
             ("setup.cfg", "tool:pytest"))


def ini_results(folder: Path) -> Path | None:
    """``agentrace_out`` of the pytest ini file in ``folder`` (``pytest.ini``, ``pyproject.toml``'s
    ``[tool.pytest.ini_options]`` or ``[tool.pytest]``, ``tox.ini``, ``setup.cfg``; the first that is a pytest
    configuration, as pytest chooses), relative to ``folder``; None when it names none or is unreadable."""
    import configparser  # here: a command without OUT needs them, not every pytest start
    import tomllib

    for name, section in INI_FILES:
        path = folder / name
        if not path.is_file():
            continue
        try:
            if section is None:
                tool = tomllib.loads(path.read_text(encoding="utf-8")).get("tool", {}).get("pytest")
                if not isinstance(tool, dict):
                    continue
                table = tool.get("ini_options", tool)
                value = table.get("agentrace_out") if isinstance(table, dict) else None
            else:
                parser = configparser.ConfigParser(interpolation=None)
                parser.read_string(path.read_text(encoding="utf-8"))
                if not parser.has_section(section):
                    continue
                value = parser.get(section, "agentrace_out", fallback=None)
        except (OSError, ValueError, configparser.Error):
            return None
        return (folder / str(value).strip()).resolve() if isinstance(value, str) and value.strip() else None
    return None


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
