"""Custom agents: an argv template with ``{prompt}``, ``{prompt_file}`` and ``{model}`` placeholders.

The ``plain`` kind reads no structure: the final answer is the command's stdout. With ``kind: claude``
(or any adapter name) the command is built from the template and parsed by that adapter.
"""

from __future__ import annotations

import re
from typing import ClassVar

from pytest_agentrace.agents.base import Adapter, Invocation, RunContext, last_text
from pytest_agentrace.errors import AgentError
from pytest_agentrace.record.model import Usage

PLAIN_TOKENS_NOTE = "a plain command reports no token counts (kind: plain reads only its stdout)"

_PLACEHOLDER = re.compile(r"\{(prompt|prompt_file|model|workspace|run_dir)\}")


def expand_template(template: tuple[str, ...] | list[str], ctx: RunContext) -> list[str]:
    """Replace ``{prompt}``, ``{prompt_file}``, ``{model}``, ``{workspace}``, ``{run_dir}`` in each argv item (no shell).

    One pass over the template: text that a placeholder inserts (a prompt mentioning ``{workspace}``, say) is
    passed on as is, never expanded again. Raises ``AgentError`` when ``{model}`` is used but the agent has no model.
    """
    values = {
        "prompt": ctx.prompt,
        "prompt_file": str(ctx.prompt_file),
        "workspace": str(ctx.workspace),
        "run_dir": str(ctx.agent_dir),
        "model": ctx.model,
    }
    if not ctx.model and any("{model}" in item for item in template):
        raise AgentError(f"command uses {{model}} but agent {ctx.agent.label!r} has no model")
    return [_PLACEHOLDER.sub(lambda m: values[m.group(1)] or "", item) for item in template]


class Plain(Adapter):
    """A custom command whose stdout is the answer; no tokens or cost are known."""

    name: ClassVar[str] = "plain"

    def invocation(self, ctx: RunContext) -> Invocation:
        return Invocation(expand_template(ctx.agent.command, ctx), dict(ctx.env))

    def parse(self, stdout: str, stderr: str, ctx: RunContext | None = None) -> Usage:
        """The answer is the stdout; tokens are unknown, and ``tokens_note`` says why."""
        full = stdout.strip()
        return Usage(answer=last_text(stdout), answer_chars=len(full) if full else None, tokens_note=PLAIN_TOKENS_NOTE)
