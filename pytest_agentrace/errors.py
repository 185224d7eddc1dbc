"""The package's few error types. Each message is one line a user can act on."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class AgentraceError(Exception):
    """Base of every error this package raises on purpose."""


class SpecError(AgentraceError):
    """A task or trial file is wrong: the message names the file, the key and the fix."""

    def __init__(self, path: object, key: str | None, message: str):
        self.path = str(path)
        self.key = key
        where = f"{self.path}: key '{key}'" if key else self.path
        super().__init__(f"{where}: {message}")


class WorkspaceError(AgentraceError):
    """Making a run's workspace failed (clone, copy, overlay, setup): an infrastructure error."""


class AgentError(AgentraceError):
    """An agent could not be started or configured (our side, not the agent's result)."""


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """Return `` (did you mean 'x'?)`` for the closest of ``choices`` to ``word``, or ``''``."""
    match = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{match[0]}'?)" if match else ""
