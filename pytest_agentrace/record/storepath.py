"""Where the SQLite history store (``record.store``) lives: ``$AGENTRACE_DB`` when set, else
``<rootdir>/.agentrace/history.db`` (the CLI: the current folder in place of the rootdir); ``--agentrace-db PATH``
(``--db``) wins over both where it is given.

Standard library only: ``options`` names these in its help, and it is read at every pytest start (``record.store``
imports ``sqlite3`` and is loaded only when a history is opened).
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "AGENTRACE_DB"
DEFAULT_NAME = "history.db"


def default_path(rootdir: Path | str | None = None) -> Path:
    """``$AGENTRACE_DB`` (user-expanded, resolved) when set, else ``<rootdir or cwd>/.agentrace/history.db``."""
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser().resolve()
    return Path(rootdir or Path.cwd()) / ".agentrace" / DEFAULT_NAME
