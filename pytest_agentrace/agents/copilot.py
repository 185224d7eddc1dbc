"""GitHub Copilot CLI: ``copilot -p <prompt> --output-format json --allow-all-tools`` (JSON lines) + OTel file.

Invocation (GitHub docs "Copilot CLI programmatic reference", "Allowing and denying tool use",
"OpenTelemetry monitoring"; behaviour of 1.0.102 in ``model-double.md``): ``--allow-all-tools`` is required in
non-interactive mode; read-only runs add ``--deny-tool write --deny-tool shell`` (deny rules win over allow
rules; the read-only view/grep/glob tools stay). ``--model`` when given. Its JSON has no token counts, so the
OTel file exporter is switched on (``COPILOT_OTEL_ENABLED=true``, ``COPILOT_OTEL_EXPORTER_TYPE=file``,
``COPILOT_OTEL_FILE_EXPORTER_PATH=<outbox>/copilot-otel.jsonl``; a local file, no network; the record keeps it as
``outbox/copilot-otel.jsonl``, the agent's file).

Parsing (samples ``captured-1.0.102-output-json-bash-tool.jsonl`` and ``captured-1.0.102-otel-export.jsonl``):
- stdout events ``{type, data}``: ``assistant.message {content, toolRequests[], model}``,
  ``tool.execution_start {toolCallId, toolName, arguments}``, ``assistant.turn_start`` (one per model call),
  and last ``result {exitCode, usage{premiumRequests, ...}}``; many others are progress only;
- OTel file (one JSON span or metric per line): each ``chat <model>`` span carries
  ``gen_ai.usage.input_tokens`` (cached included, per the GenAI conventions) and ``output_tokens`` of one
  model call, and ``gen_ai.response.model``; the run's tokens are the sum over chat spans (per model in
  ``model_usage``), falling back to root ``invoke_agent`` spans. Cache reads/writes come from the span
  attributes ``gen_ai.usage.cache_read.input_tokens``/``cache_creation.input_tokens`` or the
  ``gen_ai.client.inference.usage.cache_*`` metrics, and are subtracted from the input. Turns come from
  ``github.copilot.turn_count`` (else the ``assistant.turn_start`` events). ``service.version`` is the CLI
  version. Copilot's "premium requests" are not dollars: no cost is reported.
- ``result.exitCode`` 0 is a completed run, another code a failed one; no ``result`` is an incomplete one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from pytest_agentrace.agents import auth
from pytest_agentrace.agents.base import RunContext
from pytest_agentrace.agents.cliadapter import CliAdapter
from pytest_agentrace.agents.parsing import (
    Collector,
    add,
    as_int,
    load_events,
    mapping,
    one_line,
    sub,
)
from pytest_agentrace.model_double.environment import copilot_env
from pytest_agentrace.record.model import AgentStatus, Usage

OTEL_FILE = "copilot-otel.jsonl"
EVENT_PREFIXES = ("session.", "assistant.", "tool.", "model.", "user.", "subagent.", "hook.", "skill.", "permission.")
CACHE_READ = ("gen_ai.usage.cache_read.input_tokens", "gen_ai.usage.cache_read_input_tokens")
CACHE_WRITE = ("gen_ai.usage.cache_creation.input_tokens", "gen_ai.usage.cache_write.input_tokens", "gen_ai.usage.cache_creation_input_tokens")


class Copilot(CliAdapter):
    """GitHub Copilot CLI, executable ``copilot`` (see the module docstring)."""

    name: ClassVar[str] = "copilot"
    env_keep: ClassVar[tuple[str, ...]] = ("COPILOT_", "GH_TOKEN", "GH_HOST", "GITHUB_TOKEN", "GH_ENTERPRISE_TOKEN", "GITHUB_ENTERPRISE_TOKEN")
    executable: ClassVar[str] = "copilot"
    offline = staticmethod(copilot_env)  # how the model double drives it
    user_config_vars: ClassVar[tuple[str, ...]] = ("COPILOT_HOME",)
    side_files: ClassVar[dict[str, str]] = {"otel": OTEL_FILE}

    def argv(self, ctx: RunContext) -> list[str]:
        deny = [] if ctx.edits else ["--deny-tool", "write", "--deny-tool", "shell"]
        return [self.executable, "-p", ctx.prompt, "--output-format", "json", "--allow-all-tools", *deny, *self.model_args(ctx)]

    def cli_env(self, ctx: RunContext) -> dict[str, str]:
        return {
            "COPILOT_OTEL_ENABLED": "true",
            "COPILOT_OTEL_EXPORTER_TYPE": "file",
            "COPILOT_OTEL_FILE_EXPORTER_PATH": str(ctx.agent_dir / OTEL_FILE),
        }

    def parse_output(self, stdout: str, stderr: str, side: Mapping[str, str] | None = None) -> Usage:
        return parse_copilot(stdout, stderr, (side or {}).get("otel"))


def parse_copilot(stdout: str, stderr: str = "", otel: str | None = None) -> Usage:
    """Parse Copilot's ``--output-format json`` stdout plus its OTel file export (``otel`` text, optional)."""
    loaded = load_events(stdout)
    col = Collector(loaded.warnings)
    result: dict[str, Any] | None = None
    answer = model = None
    turn_starts = 0
    errors: list[str] = []
    for event in loaded.events:
        kind = str(event.get("type") or "")
        data = mapping(event.get("data"))
        if kind == "assistant.message":
            for req in map(mapping, data.get("toolRequests") or ()):
                col.tool(req.get("name") or "?", req.get("arguments"), req.get("toolCallId"))
            if isinstance(data.get("content"), str) and data["content"].strip():
                answer = data["content"]
            if isinstance(data.get("model"), str):
                model = data["model"]
        elif kind == "tool.execution_start":
            col.tool(data.get("toolName") or "?", data.get("arguments"), data.get("toolCallId"))
        elif kind == "assistant.turn_start":
            turn_starts += 1
        elif kind == "result":
            result = event
        elif kind.endswith(".error") or kind == "error":
            message = one_line(data.get("message") or event.get("message") or kind, 300)
            errors.append(message)
            col.warn(f"copilot {kind}: {message}")
        elif not kind.startswith(EVENT_PREFIXES):
            col.unknown("event type", kind)
    fields: dict[str, Any] = {"answer": answer, "model": model, "turns": turn_starts or None}
    if otel is not None:
        fields.update({k: v for k, v in _otel(otel, col).items() if v is not None})
    elif loaded.events:
        col.warn("no OTel export read: copilot's token counts are unknown")
    if result is None:
        status, error = AgentStatus.INCOMPLETE, "no result event in the output (the run was cut off or crashed)"
    elif as_int(result.get("exitCode")) == 0:
        status, error = AgentStatus.COMPLETED, None
    else:
        status, error = AgentStatus.FAILED, (errors[-1] if errors else f"copilot exit code {result.get('exitCode')}")
    status, error = auth.settle(status, error, [*errors, stderr, *loaded.text_lines])
    return col.usage(status=status, error=error, **fields)


def _otel(text: str, col: Collector) -> dict[str, Any]:
    """Tokens, model, version and turns from Copilot's OTel JSON-lines export."""
    records = load_events(text)
    for w in records.warnings:
        col.warn(f"otel: {w}")
    chats: list[dict[str, Any]] = []
    roots: list[dict[str, Any]] = []
    metrics: dict[str, int] = {}
    version = turns = None
    for rec in records.events:
        resource = mapping(mapping(rec.get("resource")).get("attributes"))
        if isinstance(resource.get("service.version"), str):
            version = resource["service.version"]
        if rec.get("type") == "span":
            attrs = mapping(rec.get("attributes"))
            op = attrs.get("gen_ai.operation.name")
            if op == "chat":
                chats.append(attrs)
            elif op == "invoke_agent" and not rec.get("parentSpanId"):
                roots.append(attrs)
                turns = add(turns, as_int(attrs.get("github.copilot.turn_count")))
        elif rec.get("type") == "metric":
            for point in map(mapping, rec.get("dataPoints") or ()):
                value = as_int(point.get("value"))
                if value is not None:
                    metrics[str(rec.get("name"))] = metrics.get(str(rec.get("name")), 0) + value
    spans = chats or roots
    per_model: dict[str, dict[str, int | None]] = {}
    for attrs in spans:
        name = str(attrs.get("gen_ai.response.model") or attrs.get("gen_ai.request.model") or "?")
        cached = _first(attrs, CACHE_READ)
        written = _first(attrs, CACHE_WRITE)
        row = {
            "input_tokens": sub(as_int(attrs.get("gen_ai.usage.input_tokens")), cached, written),
            "output_tokens": as_int(attrs.get("gen_ai.usage.output_tokens")),
            "cache_read_tokens": cached,
            "cache_write_tokens": written,
        }
        old = per_model.get(name)
        per_model[name] = row if old is None else {k: add(old[k], row[k]) for k in row}
    out: dict[str, Any] = {"cli_version": version, "turns": turns}
    if not per_model:
        col.warn("otel: no chat or invoke_agent spans with token counts")
        return out
    keys = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
    out.update({k: add(*(m[k] for m in per_model.values())) for k in keys})
    if all(m["cache_read_tokens"] is None for m in per_model.values()):
        # spans without cache attributes: the session metrics have the cached shares
        cached = metrics.get("gen_ai.client.inference.usage.cache_read.input_tokens")
        written = metrics.get("gen_ai.client.inference.usage.cache_write.input_tokens")
        if cached is not None or written is not None:
            out["input_tokens"] = sub(out["input_tokens"], cached, written)
            out["cache_read_tokens"], out["cache_write_tokens"] = cached, written
            if len(per_model) == 1:
                only = next(iter(per_model.values()))
                only.update(input_tokens=out["input_tokens"], cache_read_tokens=cached, cache_write_tokens=written)
    out["model_usage"] = per_model
    out["model"] = max(per_model, key=lambda m: (add(*per_model[m].values()) or 0, m))
    return out


def _first(attrs: dict[str, Any], keys: tuple[str, ...]) -> int | None:
    for k in keys:
        if k in attrs:
            return as_int(attrs[k])
    return None
