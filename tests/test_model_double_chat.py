"""The model double's OpenAI Chat Completions API against OpenCode 1.18.33, Copilot CLI 1.0.102 and Aider 0.86.2."""

from __future__ import annotations

import json

import pytest
from helpers.double import call, recorded, script

from pytest_agentrace.model_double.server import ModelDouble

OPENCODE = recorded("opencode-1.18.33")
COPILOT = recorded("copilot-1.0.102")
AIDER = recorded("aider-0.86.2")


@pytest.fixture
def double():
    with ModelDouble(script()) as d:
        yield d


def chunks(reply):
    return [data for _, data in reply.events()]


def test_opencode_title_request_is_a_side_request(double) -> None:
    assert "tools" not in OPENCODE[0]["body"]
    data = chunks(call(double.url, "/v1/chat/completions", OPENCODE[0]["body"]))
    assert data[0]["choices"][0]["delta"]["content"] == "Scripted title"
    assert data[-2] == {**data[-2], "choices": [], "usage": {"prompt_tokens": 300, "completion_tokens": 5, "total_tokens": 305}}
    assert data[-1] == "[DONE]"
    assert double.requests()[0]["answer"]["kind"] == "side"


@pytest.mark.parametrize("records", [OPENCODE[1:], COPILOT], ids=["opencode", "copilot"])
def test_tool_turn_then_text_turn_with_include_usage(double, records) -> None:
    first = chunks(call(double.url, "/v1/chat/completions", records[0]["body"]))
    call_ = first[0]["choices"][0]["delta"]["tool_calls"][0]
    assert call_["function"]["name"] == "bash" and call_["type"] == "function" and call_["index"] == 0
    assert json.loads(call_["function"]["arguments"])["command"] == "printf 'hi\\n' > hello.txt"
    assert first[1]["choices"][0]["finish_reason"] == "tool_calls"
    assert first[2]["usage"] == {"prompt_tokens": 1000, "completion_tokens": 50, "total_tokens": 1050}
    assert first[3] == "[DONE]"
    second = chunks(call(double.url, "/v1/chat/completions", records[1]["body"]))
    assert second[0]["choices"][0]["delta"]["content"] == "DONE: created hello.txt"
    assert second[1]["choices"][0]["finish_reason"] == "stop"
    assert second[2]["usage"]["prompt_tokens"] == 1200


def test_stream_without_include_usage_sends_no_usage_chunk(double) -> None:
    body = {k: v for k, v in COPILOT[0]["body"].items() if k != "stream_options"}
    data = chunks(call(double.url, "/v1/chat/completions", body))
    assert len(data) == 3 and data[-1] == "[DONE]"
    assert not any(isinstance(d, dict) and "usage" in d for d in data)


def test_aider_whole_format_gets_one_edit_reply_with_the_whole_script_usage(tmp_path) -> None:
    s = script({"steps": [
        {"write": {"path": "hello.txt", "content": "hi\n"}, "usage": {"input": 1000, "output": 50}},
        {"shell": "cat hello.txt", "usage": {"input": 1100, "output": 20}},
        {"text": "DONE: created hello.txt", "usage": {"input": 1200, "output": 10}},
    ]})
    body = AIDER[0]["body"]
    assert "stream" not in body and "tools" not in body
    with ModelDouble(s) as d:
        reply = call(d.url, "/v1/chat/completions", body).json()
        content = reply["choices"][0]["message"]["content"]
        assert content == "DONE: created hello.txt\n\nhello.txt\n```\nhi\n```\n"
        assert reply["usage"] == {"prompt_tokens": 3300, "completion_tokens": 80, "total_tokens": 3380}
        # aider comes back (e.g. to fix lint errors) with the reply in the chat: only the final text, side usage
        again = {**body, "messages": [*body["messages"], {"role": "assistant", "content": content}, {"role": "user", "content": "fix it"}]}
        follow = call(d.url, "/v1/chat/completions", again).json()
        assert follow["choices"][0]["message"]["content"] == "DONE: created hello.txt"
        assert follow["usage"]["prompt_tokens"] == 300
        assert [r["answer"]["kind"] for r in d.requests()] == ["edit", "side"]


def test_aider_diff_format_gets_search_replace_blocks_with_the_shown_content() -> None:
    s = script({"steps": [{"write": {"path": "app.py", "content": "x = 2\n"}}, {"write": {"path": "new.py", "content": "y = 1"}}, {"text": "Done."}]})
    body = {
        "model": "test",
        "messages": [
            {"role": "system", "content": "Describe each change with a *SEARCH/REPLACE block*"},
            {"role": "user", "content": "app.py\n```\nx = 1\n```"},
            {"role": "user", "content": "make x 2"},
        ],
    }
    with ModelDouble(s) as d:
        content = call(d.url, "/v1/chat/completions", body).json()["choices"][0]["message"]["content"]
    assert "app.py\n```\n<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n>>>>>>> REPLACE\n```" in content
    assert "new.py\n```\n<<<<<<< SEARCH\n=======\ny = 1\n>>>>>>> REPLACE\n```" in content
