"""The model double's OpenAI Responses API against Codex 0.171.0's recorded requests."""

from __future__ import annotations

import json

import pytest
from helpers.double import call, recorded, script

from pytest_agentrace.model_double.server import ModelDouble

CODEX = recorded("codex-0.171.0")


@pytest.fixture
def double():
    with ModelDouble(script()) as d:
        yield d


def test_turn_one_streams_an_exec_command_call(double) -> None:
    events = call(double.url, "/v1/responses", CODEX[0]["body"]).events()
    assert [name for name, _ in events] == ["response.created", "response.output_item.added", "response.output_item.done", "response.completed"]
    item = events[2][1]["item"]
    assert (item["type"], item["name"], item["status"]) == ("function_call", "exec_command", "completed")
    assert json.loads(item["arguments"]) == {"cmd": "printf 'hi\\n' > hello.txt"}
    assert item["call_id"].startswith("call_") and events[1][1]["item"]["status"] == "in_progress"
    done = events[3][1]["response"]
    assert done["status"] == "completed" and done["output"] == [item]
    assert done["usage"] == {
        "input_tokens": 1000, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 50,
        "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 1050,
    }


def test_turn_two_with_function_call_output_gets_the_text(double) -> None:
    assert sum(1 for i in CODEX[1]["body"]["input"] if i.get("type") == "function_call_output") == 1
    events = call(double.url, "/v1/responses", CODEX[1]["body"]).events()
    names = [name for name, _ in events]
    assert names == ["response.created", "response.output_item.added", "response.output_text.delta", "response.output_item.done", "response.completed"]
    assert events[2][1]["delta"] == "DONE: created hello.txt"
    message = events[3][1]["item"]
    assert message["content"] == [{"type": "output_text", "text": "DONE: created hello.txt", "annotations": []}]
    assert events[4][1]["response"]["usage"]["input_tokens"] == 1200


def test_cached_input_is_nested_in_input_tokens_as_openai_counts_it() -> None:
    s = script({"steps": [{"text": "ok", "usage": {"input": 100, "output": 7, "cache_read": 900}}]})
    with ModelDouble(s) as d:
        body = {**CODEX[0]["body"], "stream": False}
        resp = call(d.url, "/v1/responses", body).json()
    assert resp["object"] == "response" and resp["output"][0]["type"] == "message"
    assert resp["usage"]["input_tokens"] == 1000 and resp["usage"]["input_tokens_details"] == {"cached_tokens": 900}
    assert resp["usage"]["total_tokens"] == 1007


def test_models_list_is_served(double) -> None:
    data = call(double.url, "/v1/models", method="GET").json()
    assert data["object"] == "list" and data["data"][0]["id"] == "test"
