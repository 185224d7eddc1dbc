"""Claude Code: ``claude -p <prompt> --output-format stream-json --verbose`` (JSON lines).

Invocation (Claude Code docs, "CLI reference" and "Permission modes"; behaviour of 2.1.197 in
``model-double.md``): ``--verbose`` is required for stream-json with ``-p``. Without a permission flag every
tool is denied in ``-p`` mode while the run still exits 0, and ``bypassPermissions`` refuses to run as root,
so edits use ``--permission-mode acceptEdits`` (Write/Edit) plus ``--allowedTools Bash`` (commands, e.g. the
tests); read-only runs use ``--permission-mode plan`` (reads only). ``--model`` when the agent names one.

Parsing (``cli-formats.md``, samples ``captured-2.1.197-*``):
- totals come from the **last** ``result`` event only: ``usage.input_tokens`` (uncached),
  ``cache_read_input_tokens``, ``cache_creation_input_tokens`` (cache writes), ``output_tokens``; the cost is
  ``total_cost_usd`` (reported), turns ``num_turns``, the answer ``result``;
- ``assistant`` lines repeat one API message per content block with the same id and a start-of-stream usage
  snapshot, so they are never summed; they give the tool calls (``tool_use`` blocks, deduplicated by id) and
  the model served (``message.model``);
- ``--output-format json`` prints one result object, or in some versions a JSON array of all events;
- ``is_error: true`` or an ``error_*`` subtype is a failed run; no ``result`` at all is an incomplete run;
- ``permission_denials`` lists tools the CLI refused (the run still ends ``success``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

from pytest_agentrace.agents import auth
from pytest_agentrace.agents.base import RunContext
from pytest_agentrace.agents.cliadapter import CliAdapter
from pytest_agentrace.agents.parsing import (
    Collector,
    FinalText,
    add,
    as_float,
    as_int,
    load_events,
    mapping,
    summarize,
)
from pytest_agentrace.model_double.environment import claude_env
from pytest_agentrace.record.model import AgentStatus, CostSource, Usage

KNOWN_EVENTS = {"system", "assistant", "user", "result", "control_request", "control_response", "stream_event"}


class Claude(CliAdapter):
    """Claude Code CLI (see the module docstring for argv and output format)."""

    name: ClassVar[str] = "claude"
    env_keep: ClassVar[tuple[str, ...]] = ("ANTHROPIC_", "CLAUDE_", "DISABLE_", "MCP_", "MAX_THINKING_TOKENS", "BASH_DEFAULT_TIMEOUT_MS", "BASH_MAX_", "AWS_", "CLOUD_ML_REGION", "VERTEX_REGION_")
    executable: ClassVar[str] = "claude"
    offline = staticmethod(claude_env)  # how the model double drives it
    user_config_vars: ClassVar[tuple[str, ...]] = ("CLAUDE_CONFIG_DIR",)

    def argv(self, ctx: RunContext) -> list[str]:
        perms = ["--permission-mode", "acceptEdits", "--allowedTools", "Bash"] if ctx.edits else ["--permission-mode", "plan"]
        opts = ["--output-format", "stream-json", "--verbose", *perms, *self.model_args(ctx)]
        if ctx.prompt.startswith("-"):  # --allowedTools takes several values: end options before the prompt
            return [self.executable, "-p", *opts, "--", ctx.prompt]
        return [self.executable, "-p", ctx.prompt, *opts]

    def parse_output(self, stdout: str, stderr: str, side: Mapping[str, str] | None = None) -> Usage:
        return parse_claude(stdout, stderr)


def parse_claude(stdout: str, stderr: str = "") -> Usage:
    """Parse Claude Code stream-json / json output into a ``Usage`` (see the module docstring)."""
    loaded = load_events(stdout)
    col = Collector(loaded.warnings)
    init: dict[str, Any] = {}
    result: dict[str, Any] | None = None
    served_model = None
    final = FinalText("\n")
    for event in loaded.events:
        kind = event.get("type")
        if kind == "system" and event.get("subtype") == "init":
            init = event
        elif kind == "assistant":
            msg = mapping(event.get("message"))
            top = event.get("parent_tool_use_id") is None
            if top and isinstance(msg.get("model"), str):
                served_model = msg["model"]
            for block in msg.get("content") or ():
                block = mapping(block)
                if block.get("type") == "tool_use":
                    col.tool(block.get("name", "?"), block.get("input"), block.get("id"))
                    if top:
                        final.tool()
                elif block.get("type") == "text" and top:
                    final.add(block.get("text"))
        elif kind == "result":
            result = event
        elif kind not in KNOWN_EVENTS:
            col.unknown("event type", kind)
    fields: dict[str, Any] = {
        "model": served_model or init.get("model"),
        "cli_version": init.get("claude_code_version"),
    }
    if fields["model"] is None and result is not None and len(mapping(result.get("modelUsage"))) == 1:
        fields["model"] = next(iter(result["modelUsage"]))
    if result is None:
        status, error = AgentStatus.INCOMPLETE, "no result event in the output (the run was cut off or crashed)"
        fields["answer"] = final.text()
    else:
        usage = mapping(result.get("usage"))
        fields.update(
            input_tokens=as_int(usage.get("input_tokens")),
            output_tokens=as_int(usage.get("output_tokens")),
            cache_read_tokens=as_int(usage.get("cache_read_input_tokens")),
            cache_write_tokens=as_int(usage.get("cache_creation_input_tokens")),
            turns=as_int(result.get("num_turns")),
            answer=result["result"] if isinstance(result.get("result"), str) else final.text(),
            permission_denials=tuple(
                f"{d.get('tool_name', '?')}: {summarize(d.get('tool_input'))}".rstrip(": ")
                for d in map(mapping, result.get("permission_denials") or ())
            ),
            model_usage=_model_usage(result.get("modelUsage")),
        )
        cost = as_float(result.get("total_cost_usd"))
        if cost is not None:
            fields.update(cost_usd=cost, cost_source=CostSource.REPORTED)
        elif "cost_usd" in result:
            col.warn("result has cost_usd but no total_cost_usd; cost not read")
        subtype = str(result.get("subtype") or "")
        if result.get("is_error") is True or subtype.startswith("error"):
            status = AgentStatus.FAILED
            detail = result.get("result") if isinstance(result.get("result"), str) else None
            error = detail or f"result subtype {subtype or 'unknown'}"
        else:
            status, error = AgentStatus.COMPLETED, None
    status, error = auth.settle(status, error, [stderr, *loaded.text_lines])
    return col.usage(status=status, error=error, **fields)


MODEL_LABEL = re.compile(r"\[[0-9a-z]+\]$")  # "claude-opus-4-8[1m]": Claude Code's label for the 1M context window


def _model_usage(value: Any) -> dict[str, dict[str, int | None]]:
    """``result.modelUsage`` (camelCase, per model) in this package's token names, keyed by the model served:
    Claude Code 2.1.197 keys it ``<model>[1m]`` when it used the 1M-token context window (the request's
    ``model`` has no such suffix), so the label is dropped (counts of one model under both keys are added)."""
    out: dict[str, dict[str, int | None]] = {}
    for model, u in mapping(value).items():
        u = mapping(u)
        counts = {
            "input_tokens": as_int(u.get("inputTokens")),
            "output_tokens": as_int(u.get("outputTokens")),
            "cache_read_tokens": as_int(u.get("cacheReadInputTokens")),
            "cache_write_tokens": as_int(u.get("cacheCreationInputTokens")),
        }
        key = MODEL_LABEL.sub("", str(model))
        old = out.get(key)
        out[key] = counts if old is None else {k: add(old[k], v) for k, v in counts.items()}
    return out
