"""Agent adapters: one module per CLI behind the ``Adapter`` interface in ``base``.

``ADAPTERS`` maps an adapter name to its class. It is a registry by name (``REGISTRY``: name ->
``module:Class`` under this package): an adapter's module is imported the first time its class is asked for, so a
session that runs only ``noop`` never imports the parsers of the CLIs.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping

from pytest_agentrace.agents.base import Adapter

# the one list of agents: each adapter class declares its name, executable, argv/read-only flags, parser and
# model double settings; the CLI agents are the ones started as a subprocess (subclasses of ``CliAdapter``)
REGISTRY: dict[str, str] = {
    "noop": "builtin:Noop", "oracle": "builtin:Oracle", "plain": "command:Plain", "claude": "claude:Claude",
    "codex": "codex:Codex", "aider": "aider:Aider", "gemini": "gemini:Gemini", "opencode": "opencode:OpenCode",
    "cursor": "cursor:Cursor", "copilot": "copilot:Copilot",
}
CLI_AGENTS: tuple[str, ...] = ("aider", "claude", "codex", "copilot", "cursor", "gemini", "opencode")


class _Adapters(Mapping[str, type[Adapter]]):
    """``{name: adapter class}`` over ``REGISTRY``; a class's module is imported on first access (``KeyError`` for
    an unknown name). Iterating and ``in`` read only the names."""

    def __getitem__(self, name: str) -> type[Adapter]:
        module, cls = REGISTRY[name].split(":")
        return getattr(importlib.import_module(f"{__name__}.{module}"), cls)

    def __iter__(self) -> Iterator[str]:
        return iter(REGISTRY)

    def __len__(self) -> int:
        return len(REGISTRY)

    def __contains__(self, name: object) -> bool:
        return name in REGISTRY


ADAPTERS: Mapping[str, type[Adapter]] = _Adapters()


def get_adapter(name: str) -> Adapter:
    """Return a new adapter instance for ``name``; raises ``KeyError`` for an unknown name."""
    return ADAPTERS[name]()
