"""Agent adapters: one module per CLI behind the ``Adapter`` interface in ``base``.

``ADAPTERS`` maps an adapter name to ``"module:Class"``; modules are imported only when used.
"""

from __future__ import annotations

import importlib

from pytest_agentrace.agents.base import Adapter

ADAPTERS: dict[str, str] = {
    "noop": "pytest_agentrace.agents.builtin:Noop",
    "oracle": "pytest_agentrace.agents.builtin:Oracle",
    "plain": "pytest_agentrace.agents.command:Plain",
    "claude": "pytest_agentrace.agents.claude:Claude",
    "codex": "pytest_agentrace.agents.codex:Codex",
    "aider": "pytest_agentrace.agents.aider:Aider",
    "gemini": "pytest_agentrace.agents.gemini:Gemini",
    "opencode": "pytest_agentrace.agents.opencode:OpenCode",
    "cursor": "pytest_agentrace.agents.cursor:Cursor",
    "copilot": "pytest_agentrace.agents.copilot:Copilot",
}


def get_adapter(name: str) -> Adapter:
    """Return a new adapter instance for ``name``; raises ``KeyError`` for an unknown name."""
    target = ADAPTERS[name]
    module, _, cls = target.partition(":")
    return getattr(importlib.import_module(module), cls)()


def is_builtin(name: str) -> bool:
    """True for names that have an adapter (``noop``, ``oracle``, ``plain`` and the CLI adapters)."""
    return name in ADAPTERS
