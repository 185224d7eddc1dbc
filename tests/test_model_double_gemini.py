"""The model double's Gemini API against Gemini CLI 0.61.0's recorded requests (router, two streamed turns)."""

from __future__ import annotations

import json

import pytest
from helpers.double import call, recorded, script, url_and_path

from pytest_agentrace.model_double.decide import fill_schema
from pytest_agentrace.model_double.server import ModelDouble

GEMINI = recorded("gemini-cli-0.61.0")


@pytest.fixture
def double():
    with ModelDouble(script()) as d:
        yield d


def test_router_request_gets_json_text_that_fits_its_schema(double) -> None:
    router = GEMINI[0]
    assert router["path"].endswith(":generateContent")
    reply = call(double.url, url_and_path(router), router["body"]).json()
    text = reply["candidates"][0]["content"]["parts"][0]["text"]
    value = json.loads(text)
    assert set(value) == {"complexity_reasoning", "complexity_score"}
    assert isinstance(value["complexity_reasoning"], str) and isinstance(value["complexity_score"], int)
    assert reply["usageMetadata"] == {"promptTokenCount": 300, "candidatesTokenCount": 5, "totalTokenCount": 305}


def test_streamed_turns_give_a_function_call_then_text(double) -> None:
    first = call(double.url, url_and_path(GEMINI[1]), GEMINI[1]["body"])
    assert GEMINI[1]["query"] == {"alt": ["sse"]}
    events = first.events()
    assert len(events) == 1 and events[0][0] is None  # one data line, no event name
    cand = events[0][1]["candidates"][0]
    assert cand["content"]["parts"] == [{"functionCall": {"name": "run_shell_command", "args": {"command": "printf 'hi\\n' > hello.txt", "description": "Run printf 'hi\\n' > hello.txt"}}}]
    assert cand["finishReason"] == "STOP" and events[0][1]["usageMetadata"]["candidatesTokenCount"] == 50
    second = call(double.url, url_and_path(GEMINI[2]), GEMINI[2]["body"]).events()
    assert second[0][1]["candidates"][0]["content"]["parts"] == [{"text": "DONE: created hello.txt"}]
    assert second[0][1]["usageMetadata"] == {"promptTokenCount": 1200, "candidatesTokenCount": 10, "totalTokenCount": 1210}


def test_non_streamed_generate_content_and_count_tokens(double) -> None:
    body = GEMINI[1]["body"]
    reply = call(double.url, "/v1beta/models/m:generateContent", body).json()
    assert reply["candidates"][0]["content"]["parts"][0]["functionCall"]["name"] == "run_shell_command"
    assert call(double.url, "/v1beta/models/m:countTokens", {"contents": []}).json() == {"totalTokens": 300}


def test_fill_schema_covers_every_type_and_prefers_user_in_enums() -> None:
    schema = {
        "type": "OBJECT",
        "properties": {
            "s": {"type": "STRING"}, "i": {"type": "INTEGER"}, "n": {"type": "NUMBER"}, "b": {"type": "BOOLEAN"},
            "a": {"type": "ARRAY", "items": {"type": "STRING"}}, "next_speaker": {"type": "STRING", "enum": ["model", "user"]},
            "o": {"type": "object", "properties": {"k": {"type": "string", "enum": ["x", "y"]}}},
        },
    }
    assert fill_schema(schema) == {"s": "scripted", "i": 1, "n": 0, "b": False, "a": [], "next_speaker": "user", "o": {"k": "x"}}
