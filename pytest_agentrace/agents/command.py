"""Custom agents: an argv template with ``{prompt}``, ``{prompt_file}`` and ``{model}`` placeholders.

The ``plain`` kind reads no structure: the final answer is the command's stdout. With ``kind: claude``
(or any adapter name) the command is built from the template and parsed by that adapter.
"""

from __future__ import annotations

from typing import ClassVar

from ..errors import AgentError
from .base import Adapter, Invocation, RunContext


def expand_template(template: tuple[str, ...] | list[str], ctx: RunContext) -> list[str]:
    """Replace ``{prompt}``, ``{prompt_file}``, ``{model}``, ``{workspace}`` in each argv item (no shell).

    Raises ``AgentError`` when ``{model}`` is used but the agent has no model.
    """
    values = {
        "{prompt}": ctx.prompt,
        "{prompt_file}": str(ctx.prompt_file),
        "{workspace}": str(ctx.workspace),
        "{run_dir}": str(ctx.run_dir),
    }
    argv = []
    for item in template:
        if "{model}" in item:
            if not ctx.model:
                raise AgentError(f"command uses {{model}} but agent {ctx.agent.label!r} has no model")
            item = item.replace("{model}", ctx.model)
        for k, v in values.items():
            item = item.replace(k, v)
        argv.append(item)
    return argv


class Plain(Adapter):
    """A custom command whose stdout is the answer; no tokens or cost are known."""

    name: ClassVar[str] = "plain"

    def invocation(self, ctx: RunContext) -> Invocation:
        return Invocation(expand_template(ctx.agent.command, ctx), dict(ctx.env))
