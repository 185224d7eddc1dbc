"""Agent adapters: one module per CLI behind the ``Adapter`` interface in ``base``.

``ADAPTERS`` maps an adapter name to its class.
"""

from __future__ import annotations

from pytest_agentrace.agents.aider import Aider
from pytest_agentrace.agents.base import Adapter
from pytest_agentrace.agents.builtin import Noop, Oracle
from pytest_agentrace.agents.claude import Claude
from pytest_agentrace.agents.cliadapter import CliAdapter
from pytest_agentrace.agents.codex import Codex
from pytest_agentrace.agents.command import Plain
from pytest_agentrace.agents.copilot import Copilot
from pytest_agentrace.agents.cursor import Cursor
from pytest_agentrace.agents.gemini import Gemini
from pytest_agentrace.agents.opencode import OpenCode

# the one list of agents: each adapter class declares its name, executable, argv/read-only flags, parser and
# model double settings; the CLI agents are the ones started as a subprocess
ADAPTERS: dict[str, type[Adapter]] = {cls.name: cls for cls in (Noop, Oracle, Plain, Claude, Codex, Aider, Gemini, OpenCode, Cursor, Copilot)}
CLI_AGENTS: tuple[str, ...] = tuple(sorted(n for n, cls in ADAPTERS.items() if issubclass(cls, CliAdapter)))


def get_adapter(name: str) -> Adapter:
    """Return a new adapter instance for ``name``; raises ``KeyError`` for an unknown name."""
    return ADAPTERS[name]()
