"""Gemini CLI: ``gemini -p <prompt> --output-format stream-json --yolo`` (JSON lines).

Invocation (Gemini CLI docs "Headless mode", "CLI reference"; behaviour of 0.61.0 in ``model-double.md``):
``--yolo`` approves every tool; read-only runs use ``--approval-mode default`` instead, under which a headless
run refuses the tools that need approval (shell, write, edit). The workspace must be trusted or the CLI exits
55 and overrides ``--yolo``: ``GEMINI_CLI_TRUST_WORKSPACE=true`` is set. ``--model`` when given (it also
skips the "auto" router).

Parsing (``cli-formats.md``; sample ``captured-0.61.0-stream-json-shell-tool.jsonl``; gemini-cli source
``StreamJsonFormatter.convertToStreamStats`` and ``uiTelemetry``):
- stream-json events: ``init {model}``, ``message {role, content, delta?}``, ``tool_use {tool_name, tool_id,
  parameters}``, ``tool_result {tool_id, status}``, ``error {severity, message}``, ``result {status, error?,
  stats}``. ``stats.models`` maps each model served (the router included) to ``{total_tokens, input_tokens
  (prompt, cached included), output_tokens (candidates), cached, input (prompt - cached)}``: the run's figures
  are the **sum over models**; without ``models`` (or when it is null) the top-level figures are used.
- ``--output-format json`` prints one object ``{response, stats: {models: {m: {tokens: {prompt, candidates,
  total, cached, thoughts, tool}}}, tools}, error?}``; ``stats.models`` may be null.
- mapping: input = prompt - cached, cache read = cached (Gemini reports no cache writes), output = the rest
  of each model's total (candidates + thinking tokens, which Gemini bills as output), total = total. No cost and
  no turn count are reported: turns are counted from the stream, one model response per run of ``tool_use``
  and assistant ``message`` events between tool results (a response that calls tools in parallel gives
  several ``tool_use`` events before their ``tool_result`` events). The final answer is the assistant text after
  the last tool call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from pytest_agentrace.agents import auth
from pytest_agentrace.agents.base import RunContext
from pytest_agentrace.agents.cliadapter import CliAdapter
from pytest_agentrace.agents.parsing import (
    Collector,
    FinalText,
    add,
    as_int,
    load_events,
    mapping,
    one_line,
    sub,
)
from pytest_agentrace.model_double.environment import gemini_env
from pytest_agentrace.record.model import AgentStatus, Usage

KNOWN_EVENTS = {"init", "message", "tool_use", "tool_result", "error", "result"}


class Gemini(CliAdapter):
    """Google Gemini CLI (see the module docstring for argv and output format)."""

    name: ClassVar[str] = "gemini"
    env_keep: ClassVar[tuple[str, ...]] = ("GEMINI_", "GOOGLE_")
    executable: ClassVar[str] = "gemini"
    offline = staticmethod(gemini_env)  # how the model double drives it

    def argv(self, ctx: RunContext) -> list[str]:
        prompt = [f"--prompt={ctx.prompt}"] if ctx.prompt.startswith("-") else ["-p", ctx.prompt]
        approval = ["--yolo"] if ctx.edits else ["--approval-mode", "default"]
        return [self.executable, *prompt, "--output-format", "stream-json", *approval, *self.model_args(ctx)]

    def cli_env(self, ctx: RunContext) -> dict[str, str]:
        return {"GEMINI_CLI_TRUST_WORKSPACE": "true"}

    def parse_output(self, stdout: str, stderr: str, side: Mapping[str, str] | None = None) -> Usage:
        return parse_gemini(stdout, stderr)


def parse_gemini(stdout: str, stderr: str = "") -> Usage:
    """Parse Gemini CLI stream-json or json output into a ``Usage`` (see the module docstring)."""
    loaded = load_events(stdout)
    col = Collector(loaded.warnings)
    events = loaded.events
    if len(events) == 1 and "type" not in events[0] and ("response" in events[0] or "stats" in events[0] or "error" in events[0]):
        return _parse_json_object(events[0], col, stderr, loaded.text_lines)
    init: dict[str, Any] = {}
    result: dict[str, Any] | None = None
    final = FinalText()
    errors: list[str] = []
    responses, in_response = 0, False  # model responses: runs of tool_use / assistant message between tool results
    for event in events:
        kind = event.get("type")
        if kind in ("tool_use", "message") and (kind == "tool_use" or event.get("role") == "assistant"):
            responses += not in_response
            in_response = True
        elif kind == "tool_result":
            in_response = False
        if kind == "init":
            init = event
        elif kind == "message":
            if event.get("role") == "assistant":
                final.add(event.get("content"))
        elif kind == "tool_use":
            col.tool(event.get("tool_name") or "?", event.get("parameters"), event.get("tool_id"))
            final.tool()
        elif kind == "error":
            message = one_line(event.get("message") or "", 300)
            errors.append(message)
            col.warn(f"gemini {event.get('severity') or 'error'} event: {message}")
        elif kind == "result":
            result = event
        elif kind != "tool_result":
            col.unknown("event type", kind)
    fields: dict[str, Any] = {"answer": final.text(), "turns": responses or None}
    if result is None:
        status, error = AgentStatus.INCOMPLETE, "no result event in the output (the run was cut off or crashed)"
    else:
        fields.update(_stats_tokens(mapping(result.get("stats")), col))
        if result.get("status") == "success":
            status, error = AgentStatus.COMPLETED, None
        else:
            status = AgentStatus.FAILED
            err = mapping(result.get("error"))
            error = one_line(err.get("message") or f"result status {result.get('status')!r}", 300)
    if fields.get("model") is None and isinstance(init.get("model"), str) and init["model"].lower() != "auto":
        fields["model"] = init["model"]
    status, error = auth.settle(status, error, [*errors, stderr, *loaded.text_lines])
    return col.usage(status=status, error=error, **fields)


def _stats_tokens(stats: dict[str, Any], col: Collector) -> dict[str, Any]:
    """Tokens from a stream-json ``result.stats``: the sum over ``stats.models``, else the top-level figures."""
    per_model: dict[str, dict[str, int | None]] = {}
    for model, m in mapping(stats.get("models")).items():
        m = mapping(m)
        prompt, cached, total = as_int(m.get("input_tokens")), as_int(m.get("cached")), as_int(m.get("total_tokens"))
        per_model[str(model)] = _split(prompt, cached, as_int(m.get("output_tokens")), total)
    if not per_model:
        top = _split(as_int(stats.get("input_tokens")), as_int(stats.get("cached")), as_int(stats.get("output_tokens")), as_int(stats.get("total_tokens")))
        if top["input_tokens"] is None and top["output_tokens"] is None:
            return {}
        return {**top, "total_tokens": as_int(stats.get("total_tokens"))}
    return _sum_models(per_model)


def _split(prompt: int | None, cached: int | None, candidates: int | None, total: int | None) -> dict[str, int | None]:
    """One model's disjoint counts: output is total - prompt when the total is known (thinking included)."""
    output = candidates
    if total is not None and prompt is not None and total >= prompt + (candidates or 0):
        output = total - prompt
    return {"input_tokens": sub(prompt, cached), "output_tokens": output, "cache_read_tokens": cached, "cache_write_tokens": None}


def _sum_models(per_model: dict[str, dict[str, int | None]]) -> dict[str, Any]:
    keys = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
    out: dict[str, Any] = {k: add(*(m[k] for m in per_model.values())) for k in keys}
    out["model_usage"] = per_model
    # the model that did most of the work (the router's calls are small)
    out["model"] = max(per_model, key=lambda m: (add(*per_model[m].values()) or 0, m))
    return out


def _parse_json_object(obj: dict[str, Any], col: Collector, stderr: str, text_lines: list[str]) -> Usage:
    """``--output-format json``: one object with ``response`` and the full ``stats`` (or ``error``)."""
    stats = mapping(obj.get("stats"))
    per_model: dict[str, dict[str, int | None]] = {}
    for model, m in mapping(stats.get("models")).items():
        t = mapping(mapping(m).get("tokens"))
        prompt, cached = as_int(t.get("prompt")), as_int(t.get("cached"))
        candidates, thoughts, tool = as_int(t.get("candidates")), as_int(t.get("thoughts")), as_int(t.get("tool"))
        per_model[str(model)] = {
            "input_tokens": add(sub(prompt, cached), tool) if prompt is not None else None,
            "output_tokens": add(candidates, thoughts),
            "cache_read_tokens": cached,
            "cache_write_tokens": None,
        }
    fields: dict[str, Any] = _sum_models(per_model) if per_model else {}
    if stats.get("models", {}) is None:
        col.warn("gemini stats.models is null: no token counts")
    for name, info in mapping(mapping(stats.get("tools")).get("byName")).items():
        for _ in range(as_int(mapping(info).get("count")) or 0):
            col.tool(name, summary="")
    if mapping(mapping(stats.get("tools")).get("byName")):
        col.warn("gemini json output lists tool calls by name only (no order, no arguments)")
    if obj.get("error"):
        err = mapping(obj.get("error"))
        status, error = AgentStatus.FAILED, one_line(err.get("message") or str(obj["error"]), 300)
    else:
        status, error = AgentStatus.COMPLETED, None
    status, error = auth.settle(status, error, [stderr, *text_lines])
    return col.usage(answer=obj.get("response") if isinstance(obj.get("response"), str) else None, status=status, error=error, **fields)
