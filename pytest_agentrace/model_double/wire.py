"""Wire encoders: one ``Answer`` (a tool call or text plus its usage) as each provider's JSON or SSE.

Shapes and event sequences are the ones the real CLIs accepted (``model-double.md`` and
``samples/model-double-requests/server-wire-examples.txt``):

- Anthropic Messages: ``message_start`` (usage: input, cache tokens, output 1) -> ``content_block_start`` ->
  one ``content_block_delta`` (``input_json_delta`` with the whole arguments, or ``text_delta``) ->
  ``content_block_stop`` -> ``message_delta`` (stop_reason, usage.output_tokens) -> ``message_stop``;
  each SSE event is ``event: X`` + ``data: {json}``.
- OpenAI Responses: ``response.created`` -> ``response.output_item.added`` -> (``response.output_text.delta``)
  -> ``response.output_item.done`` -> ``response.completed`` with usage (input_tokens includes cached).
- OpenAI Chat Completions: ``chat.completion.chunk`` data lines (tool call in one chunk), a finish chunk, a
  usage chunk with ``choices: []`` only when ``stream_options.include_usage``, then ``data: [DONE]``.
- Gemini: ``{candidates: [{content: {role: model, parts}, finishReason: STOP}], usageMetadata}``, the same
  object as the JSON body and as the single ``data:`` line of ``?alt=sse``.

Error bodies follow each provider's documented error object (Anthropic ``{type: error, error: {type,
message}}``, OpenAI ``{error: {message, type, code}}``, Google ``{error: {code, message, status}}``).
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

from pytest_agentrace.model_double.script import HttpError, TurnUsage
from pytest_agentrace.model_double.tools import (
    ANTHROPIC,
    CHAT,
    GEMINI,
    RESPONSES,
    ToolCall,
)

MAX_REQUEST = 32 * 1024 * 1024  # bytes of a request body the double and the recording proxy read (the Messages API refuses larger ones)
# The line a ``malformed: true`` step breaks off with: a data line whose JSON never closes.
MALFORMED_DATA = b'data: {"type": "scripted-malformed", "delta": {"text": "broken\n\n'


@dataclass(frozen=True)
class Answer:
    """What the double answers one request with.

    ``kind``: ``tool`` (``tool`` set), ``text`` (a scripted final answer), ``side`` (title/probe text),
    ``json`` (a JSON-schema side answer, in ``text``), ``edit`` (aider's edit reply, in ``text``), ``error``
    (``error`` set), ``none`` (the step needs a tool the CLI did not offer; ``text`` says so).
    ``step``: the script step index (None for side answers). ``usage``: tokens the answer reports.
    """

    kind: str
    usage: TurnUsage
    text: str = ""
    tool: ToolCall | None = None
    step: int | None = None
    error: HttpError | None = None
    malformed: bool = False
    delay: float = 0.0

    def to_log(self) -> dict[str, Any]:
        """JSON record of the answer for the request log."""
        d: dict[str, Any] = {"kind": self.kind, "step": self.step, "usage": self.usage.to_dict()}
        if self.tool is not None:
            d["tool"] = self.tool.name
            d["arguments"] = self.tool.arguments
        if self.text:
            d["text"] = self.text if len(self.text) <= 2000 else self.text[:2000] + f"...<{len(self.text)} chars>"
        if self.error is not None:
            d["status"] = self.error.status
            d["error"] = self.error.message
        if self.malformed:
            d["malformed"] = True
        return d


def _id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:24]}"


def sse(event: str | None, data: dict[str, Any]) -> bytes:
    """One SSE event: optional ``event:`` line, one ``data:`` line of compact JSON, blank line."""
    head = f"event: {event}\n" if event else ""
    return (head + "data: " + json.dumps(data, separators=(",", ":")) + "\n\n").encode()


# --- Anthropic Messages ------------------------------------------------------------------------------------


def _anthropic_usage(u: TurnUsage, output: int) -> dict[str, int]:
    return {
        "input_tokens": u.input, "output_tokens": output,
        "cache_creation_input_tokens": u.cache_write, "cache_read_input_tokens": u.cache_read,
    }


def anthropic_json(a: Answer, model: str) -> dict[str, Any]:
    """A non-streamed Messages API response."""
    if a.tool is not None:
        content = [{"type": "tool_use", "id": _id("toolu"), "name": a.tool.name, "input": a.tool.arguments}]
        stop = "tool_use"
    else:
        content, stop = [{"type": "text", "text": a.text}], "end_turn"
    return {
        "id": _id("msg"), "type": "message", "role": "assistant", "model": model, "content": content,
        "stop_reason": stop, "stop_sequence": None, "usage": _anthropic_usage(a.usage, a.usage.output),
    }


def anthropic_stream(a: Answer, model: str) -> list[bytes]:
    """The SSE events of a streamed Messages API response."""
    msg = anthropic_json(a, model)
    start = {**msg, "content": [], "stop_reason": None, "usage": _anthropic_usage(a.usage, 1)}
    out = [sse("message_start", {"type": "message_start", "message": start})]
    if a.tool is not None:
        block = {**msg["content"][0], "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(a.tool.arguments)}
    else:
        block, delta = {"type": "text", "text": ""}, {"type": "text_delta", "text": a.text}
    out.append(sse("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}))
    if a.malformed:
        return out + [b"event: content_block_delta\n" + MALFORMED_DATA]
    out += [
        sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
        sse("message_delta", {
            "type": "message_delta", "delta": {"stop_reason": msg["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": a.usage.output},
        }),
        sse("message_stop", {"type": "message_stop"}),
    ]
    return out


# --- OpenAI Responses --------------------------------------------------------------------------------------


def _responses_item(a: Answer, status: str) -> dict[str, Any]:
    if a.tool is not None:
        return {
            "type": "function_call", "id": _id("fc"), "call_id": _id("call"), "name": a.tool.name,
            "arguments": json.dumps(a.tool.arguments), "status": status,
        }
    return {
        "type": "message", "id": _id("msg"), "role": "assistant", "status": status,
        "content": [{"type": "output_text", "text": a.text, "annotations": []}],
    }


def _responses_usage(u: TurnUsage) -> dict[str, Any]:
    prompt = u.input + u.cache_read + u.cache_write
    return {
        "input_tokens": prompt, "input_tokens_details": {"cached_tokens": u.cache_read},
        "output_tokens": u.output, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": prompt + u.output,
    }


def responses_json(a: Answer, model: str) -> dict[str, Any]:
    """A non-streamed Responses API response object."""
    return {
        "id": _id("resp"), "object": "response", "created_at": int(time.time()), "model": model,
        "status": "completed", "output": [_responses_item(a, "completed")], "usage": _responses_usage(a.usage),
    }


def responses_stream(a: Answer, model: str) -> list[bytes]:
    """The SSE events of a streamed Responses API response."""
    done = responses_json(a, model)
    item = done["output"][0]
    created = {**done, "status": "in_progress", "output": []}
    created.pop("usage")
    out = [
        sse("response.created", {"type": "response.created", "response": created}),
        sse("response.output_item.added", {"type": "response.output_item.added", "output_index": 0, "item": {**item, "status": "in_progress"}}),
    ]
    if a.malformed:
        return out + [b"event: response.output_text.delta\n" + MALFORMED_DATA]
    if a.tool is None:
        out.append(sse("response.output_text.delta", {
            "type": "response.output_text.delta", "item_id": item["id"], "output_index": 0, "content_index": 0, "delta": a.text,
        }))
    out += [
        sse("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}),
        sse("response.completed", {"type": "response.completed", "response": done}),
    ]
    return out


# --- OpenAI Chat Completions -------------------------------------------------------------------------------


def _chat_usage(u: TurnUsage) -> dict[str, Any]:
    prompt = u.input + u.cache_read + u.cache_write
    d: dict[str, Any] = {"prompt_tokens": prompt, "completion_tokens": u.output, "total_tokens": prompt + u.output}
    if u.cache_read:
        d["prompt_tokens_details"] = {"cached_tokens": u.cache_read}
    return d


def _chat_tool_calls(a: Answer) -> list[dict[str, Any]]:
    assert a.tool is not None
    return [{"index": 0, "id": _id("call"), "type": "function", "function": {"name": a.tool.name, "arguments": json.dumps(a.tool.arguments)}}]


def chat_json(a: Answer, model: str) -> dict[str, Any]:
    """A non-streamed ``chat.completion``."""
    if a.tool is not None:
        calls = [{k: v for k, v in c.items() if k != "index"} for c in _chat_tool_calls(a)]
        message, finish = {"role": "assistant", "content": None, "tool_calls": calls}, "tool_calls"
    else:
        message, finish = {"role": "assistant", "content": a.text}, "stop"
    return {
        "id": _id("chatcmpl"), "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": _chat_usage(a.usage),
    }


def chat_stream(a: Answer, model: str, include_usage: bool) -> list[bytes]:
    """``chat.completion.chunk`` data lines; the usage chunk only when ``include_usage``."""
    base = {"id": _id("chatcmpl"), "object": "chat.completion.chunk", "created": int(time.time()), "model": model}
    if a.tool is not None:
        delta: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": _chat_tool_calls(a)}
        finish = "tool_calls"
    else:
        delta, finish = {"role": "assistant", "content": a.text}, "stop"
    if a.malformed:
        return [sse(None, {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}), MALFORMED_DATA]
    out = [
        sse(None, {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}),
        sse(None, {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}),
    ]
    if include_usage:
        out.append(sse(None, {**base, "choices": [], "usage": _chat_usage(a.usage)}))
    out.append(b"data: [DONE]\n\n")
    return out


# --- Gemini ------------------------------------------------------------------------------------------------


def gemini_json(a: Answer, model: str = "scripted") -> dict[str, Any]:
    """A ``GenerateContentResponse`` (the JSON body, and each ``?alt=sse`` data line)."""
    if a.tool is not None:
        parts: list[dict[str, Any]] = [{"functionCall": {"name": a.tool.name, "args": a.tool.arguments}}]
    else:
        parts = [{"text": a.text}]
    u = a.usage
    prompt = u.input + u.cache_read + u.cache_write
    meta: dict[str, Any] = {"promptTokenCount": prompt, "candidatesTokenCount": u.output, "totalTokenCount": prompt + u.output}
    if u.cache_read:
        meta["cachedContentTokenCount"] = u.cache_read
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": meta, "modelVersion": model,
    }


def gemini_stream(a: Answer, model: str = "scripted") -> list[bytes]:
    """The ``?alt=sse`` stream: one ``data:`` line holding the whole response."""
    if a.malformed:
        return [MALFORMED_DATA]
    return [sse(None, gemini_json(a, model))]


# --- errors ------------------------------------------------------------------------------------------------

_ANTHROPIC_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error", 429: "rate_limit_error", 529: "overloaded_error"}
_GOOGLE_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 503: "UNAVAILABLE"}


def error_body(protocol: str, status: int, message: str) -> dict[str, Any]:
    """The provider's error object for HTTP ``status``."""
    if protocol == ANTHROPIC:
        return {"type": "error", "error": {"type": _ANTHROPIC_TYPES.get(status, "api_error"), "message": message}}
    if protocol == GEMINI:
        return {"error": {"code": status, "message": message, "status": _GOOGLE_STATUS.get(status, "INTERNAL")}}
    kind = "rate_limit_exceeded" if status == 429 else ("server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": kind, "param": None, "code": kind}}


def encode(protocol: str, a: Answer, model: str, stream: bool, include_usage: bool = True) -> tuple[dict[str, Any] | None, list[bytes]]:
    """``(json_body, [])`` for a non-streamed answer, ``(None, sse_chunks)`` for a streamed one."""
    if protocol == ANTHROPIC:
        return (None, anthropic_stream(a, model)) if stream else (anthropic_json(a, model), [])
    if protocol == RESPONSES:
        return (None, responses_stream(a, model)) if stream else (responses_json(a, model), [])
    if protocol == CHAT:
        return (None, chat_stream(a, model, include_usage)) if stream else (chat_json(a, model), [])
    if protocol == GEMINI:
        return (None, gemini_stream(a, model)) if stream else (gemini_json(a, model), [])
    raise ValueError(f"unknown protocol {protocol!r}")
