"""Cursor agent: ``cursor-agent -p --force --output-format stream-json <prompt>`` (JSON lines).

Invocation (Cursor docs "CLI parameters", "Headless"): ``--force`` allows commands and file edits and also
passes the workspace-trust gate of a headless run. Read-only runs use ``--mode ask`` (answers only, no
changes) and ``--trust`` instead (without it an untrusted folder is refused, with exit 0 and a
"Workspace Trust Required" text, which this parser reports as a setup error). An agent's ``sandbox:`` value is
passed as ``--sandbox`` (``enabled``/``disabled``). ``--model`` when given.

Parsing (``cli-formats.md``; real 2026.01.28 captures published by reifying/cursor-hack, and a hand-written
sample from the documented schema):
- events ``system/init {model}``, ``user``, ``thinking``, ``assistant {message.content[]}``, ``tool_call
  {subtype started|completed, call_id, tool_call{<kind>ToolCall{args, result?}}}``, ``result {is_error,
  result, usage{inputTokens, outputTokens, cacheReadTokens, cacheWriteTokens}}``;
- ``result.usage`` is camelCase; the counts are taken as reported (disjoint, Anthropic style) and summed for
  the total. No cost, no turn count and no served model are reported (``init.model`` is the requested one; "Auto"
  says the router chose, so it is not recorded);
- ``result.result`` joins every assistant text of the run: the final answer is the last ``assistant`` event
  instead (stream-json prints one event per whole message, "Output format" docs); tool calls are correlated by ``call_id`` (parallel calls start before completing);
- ``is_error: true`` is a failed run; no ``result`` is an incomplete one;
- 2026.01.28's ``result`` has no ``usage`` at all (the real captures): the tokens are unknown, and
  ``tokens_note`` says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from pytest_agentrace.agents import auth
from pytest_agentrace.agents.base import RunContext
from pytest_agentrace.agents.cliadapter import CliAdapter, prompt_positional
from pytest_agentrace.agents.parsing import (
    Collector,
    FinalText,
    as_int,
    load_events,
    mapping,
    one_line,
)
from pytest_agentrace.record.model import AgentStatus, Usage

KNOWN_EVENTS = {"system", "user", "thinking", "assistant", "tool_call", "result"}


class Cursor(CliAdapter):
    """Cursor's agent CLI, executable ``cursor-agent`` (see the module docstring)."""

    name: ClassVar[str] = "cursor"
    env_keep: ClassVar[tuple[str, ...]] = ("CURSOR_",)
    executable: ClassVar[str] = "cursor-agent"
    offline: ClassVar[str] = "cursor-agent has no setting for a custom model endpoint, so the model double cannot drive it"
    sandbox_flag: ClassVar[str] = "--sandbox"

    def argv(self, ctx: RunContext) -> list[str]:
        mode = ["--force"] if ctx.edits else ["--trust", "--mode", "ask"]
        return [
            self.executable, "-p", *mode, "--output-format", "stream-json", *self.sandbox_args(ctx),
            *self.model_args(ctx), *prompt_positional(ctx.prompt),
        ]

    def parse_output(self, stdout: str, stderr: str, side: Mapping[str, str] | None = None) -> Usage:
        return parse_cursor(stdout, stderr)


def parse_cursor(stdout: str, stderr: str = "") -> Usage:
    """Parse ``cursor-agent --output-format stream-json`` output into a ``Usage`` (module docstring)."""
    loaded = load_events(stdout)
    col = Collector(loaded.warnings)
    init: dict[str, Any] = {}
    result: dict[str, Any] | None = None
    final = FinalText()
    for event in loaded.events:
        kind = event.get("type")
        if kind == "system" and event.get("subtype") == "init":
            init = event
        elif kind == "assistant":
            final.boundary()  # one event per whole message (cursor's output-format docs): the answer is the last
            for block in mapping(event.get("message")).get("content") or ():
                if mapping(block).get("type") == "text":
                    final.add(block.get("text"))
        elif kind == "tool_call":
            final.tool()
            calls = mapping(event.get("tool_call"))
            for key, call in calls.items():
                if key.endswith("ToolCall"):
                    col.tool(key[: -len("ToolCall")] or key, mapping(call).get("args"), event.get("call_id"))
                    break
            else:
                col.unknown("tool call shape", sorted(calls))
        elif kind == "result":
            result = event
        elif kind not in KNOWN_EVENTS:
            col.unknown("event type", kind)
    model = init.get("model") if isinstance(init.get("model"), str) and init["model"].lower() != "auto" else None
    fields: dict[str, Any] = {"answer": final.text(), "model": model}
    if result is None:
        status, error = AgentStatus.INCOMPLETE, "no result event in the output (the run was cut off, crashed or was refused)"
    else:
        usage = mapping(result.get("usage"))
        if not usage:
            fields["tokens_note"] = "cursor-agent's result event has no usage (as in its 2026.01.28 release)"
        fields.update(
            input_tokens=as_int(usage.get("inputTokens")),
            output_tokens=as_int(usage.get("outputTokens")),
            cache_read_tokens=as_int(usage.get("cacheReadTokens")),
            cache_write_tokens=as_int(usage.get("cacheWriteTokens")),
        )
        if fields["answer"] is None and isinstance(result.get("result"), str):
            fields["answer"] = result["result"]
        if result.get("is_error") is True or (result.get("subtype") not in (None, "success")):
            status = AgentStatus.FAILED
            error = one_line(result.get("result") or f"result subtype {result.get('subtype')!r}", 300)
        else:
            status, error = AgentStatus.COMPLETED, None
    status, error = auth.settle(status, error, [stderr, *loaded.text_lines])
    return col.usage(status=status, error=error, **fields)
