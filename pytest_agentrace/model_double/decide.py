"""The model double's choice of answer: from the request alone (its protocol, the tools it offers, the number of
tool results it carries) and the route's script, plus the ``error.times`` counters per conversation and step."""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any

from pytest_agentrace.model_double import tools
from pytest_agentrace.model_double.routes import Route
from pytest_agentrace.model_double.script import Step, TurnUsage
from pytest_agentrace.model_double.tools import CHAT, GEMINI
from pytest_agentrace.model_double.wire import Answer


def fill_schema(schema: Any) -> Any:
    """A minimal value fitting a JSON schema (Gemini's upper-case ``type`` names too): strings
    ``"scripted"``, integers 1, numbers 0, booleans false, arrays empty, enums their ``"user"`` value when
    present (Gemini's next-speaker check) else the first, objects with every listed property."""
    if not isinstance(schema, Mapping):
        return "scripted"
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return "user" if "user" in schema["enum"] else schema["enum"][0]
    kind = str(schema.get("type", "object" if "properties" in schema else "string")).lower()
    if kind == "object":
        return {k: fill_schema(v) for k, v in (schema.get("properties") or {}).items()}
    if kind == "array":
        return []
    if kind == "integer":
        return 1
    if kind == "number":
        return 0
    if kind == "boolean":
        return False
    return "scripted"


class Decider:
    """Chooses the ``Answer`` for a request from the request alone (plus ``error.times`` counters)."""

    def __init__(self) -> None:
        self._failures: dict[tuple[str, str, int], int] = {}
        self._lock = threading.Lock()

    def _should_fail(self, route: Route, conv: str, index: int, step: Step) -> bool:
        if step.error is None:
            return False
        if step.error.times is None:
            return True
        key = (route.token, conv, index)
        with self._lock:
            n = self._failures.get(key, 0)
            if n >= step.error.times:
                return False
            self._failures[key] = n + 1
            return True

    def decide(self, route: Route, protocol: str, path: str, body: Mapping[str, Any], headers: Mapping[str, str]) -> Answer:
        script = route.script
        side = Answer("side", script.side_usage, text=script.side_text)
        gen = body.get("generationConfig") if protocol == GEMINI else None
        if isinstance(gen, Mapping) and gen.get("responseMimeType") == "application/json":
            schema = gen.get("responseJsonSchema") or gen.get("responseSchema")
            return Answer("json", script.side_usage, text=json.dumps(fill_schema(schema)))
        offered = tools.offered_tools(body)
        if not offered:
            fmt = tools.edit_format(body) if protocol == CHAT else None
            if fmt is None:
                return side
            return self._aider(route, fmt, body, headers)
        index = tools.count_tool_results(protocol, body)
        step = script.step_for(index)
        step_no = index % len(script.steps) if script.loop else min(index, len(script.steps) - 1)
        common = {"step": step_no, "malformed": step.malformed, "delay": step.delay}
        if self._should_fail(route, tools.conversation_key(headers, body), index, step):
            return Answer("error", TurnUsage(), error=step.error, step=step_no, delay=step.delay)
        if step.kind == "text":
            return Answer("text", step.usage, text=step.text, **common)
        call = tools.tool_call(step, offered, tools.workspace_dir(body), index)
        if call is None:
            note = f"scripted model: step {step_no} ({step.describe()}) needs a shell tool; offered: {', '.join(offered)}"
            return Answer("none", step.usage, text=note, **common)
        return Answer("tool", step.usage, tool=call, **common)

    def _aider(self, route: Route, fmt: str, body: Mapping[str, Any], headers: Mapping[str, str]) -> Answer:
        """Aider sends no tools: every write step goes into one edit reply carrying the script's whole usage;
        a later request that already holds that reply gets the final text with the side usage."""
        script = route.script
        reply = tools.aider_reply(script.steps, fmt, body, script.final_text)
        first = script.steps[0]
        if tools.is_aider_followup(body, reply):
            return Answer("side", script.side_usage, text=script.final_text or "Done.")
        if self._should_fail(route, tools.conversation_key(headers, body), 0, first):
            return Answer("error", TurnUsage(), error=first.error, step=0, delay=first.delay)
        return Answer("edit", script.total_usage(), text=reply, step=0, malformed=first.malformed, delay=first.delay)
