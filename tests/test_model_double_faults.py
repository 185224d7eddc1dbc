"""Scripted faults (HTTP 500 / 429 / malformed SSE / delays / endless tool loops), logging, routing, parallel runs."""

from __future__ import annotations

import json
import socket
import threading

import pytest
from helpers.double import call, recorded, script

from pytest_agentrace.model_double.server import ModelDouble

CLAUDE = recorded("claude-code-2.1.197")
CODEX = recorded("codex-0.171.0")
COPILOT = recorded("copilot-1.0.102")
GEMINI = recorded("gemini-cli-0.61.0")
# (protocol, path, first-turn body, JSON path to the error message)
TURN_ONE = [
    ("anthropic", "/v1/messages", CLAUDE[1]["body"], ("error", "message")),
    ("responses", "/v1/responses", CODEX[0]["body"], ("error", "message")),
    ("chat", "/v1/chat/completions", COPILOT[0]["body"], ("error", "message")),
    ("gemini", "/v1beta/models/m:streamGenerateContent?alt=sse", GEMINI[1]["body"], ("error", "message")),
]
IDS = [t[0] for t in TURN_ONE]


def faulty(**fault):
    return script({"steps": [{"shell": "true", **fault}, {"text": "done"}]})


@pytest.mark.parametrize(("protocol", "path", "body", "where"), TURN_ONE, ids=IDS)
def test_500_every_time_in_the_providers_error_shape(protocol, path, body, where) -> None:
    with ModelDouble(faulty(error={"status": 500, "message": "scripted overload"})) as d:
        replies = [call(d.url, path, body) for _ in range(3)]
        assert [r.status for r in replies] == [500, 500, 500]
        err = replies[0].json()
        for key in where:
            err = err[key]
        assert err == "scripted overload"
        assert replies[0].headers["retry-after-ms"] == "200" and replies[0].headers["retry-after"] == "1"
        assert [r["answer"]["status"] for r in d.requests()] == [500, 500, 500]


def test_anthropic_and_google_error_types() -> None:
    with ModelDouble(faulty(error={"status": 429, "message": "slow down", "retry_after": 2.5})) as d:
        a = call(d.url, "/v1/messages", CLAUDE[1]["body"])
        g = call(d.url, "/v1beta/models/m:generateContent", GEMINI[1]["body"])
    assert a.json() == {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
    assert g.json()["error"] == {"code": 429, "message": "slow down", "status": "RESOURCE_EXHAUSTED"}
    assert (a.headers["retry-after"], a.headers["retry-after-ms"]) == ("3", "2500")


@pytest.mark.parametrize(("protocol", "path", "body", "where"), TURN_ONE, ids=IDS)
def test_429_once_per_conversation_then_success(protocol, path, body, where) -> None:
    with ModelDouble(faulty(error={"status": 429, "times": 1})) as d:
        assert call(d.url, path, body).status == 429
        assert call(d.url, path, body).status == 200  # the retry of the same request
        other = {"X-Claude-Code-Session-Id": "other", "session-id": "other", "x-session-id": "other"}
        if protocol in ("chat", "gemini"):  # no session header: the first user message tells conversations apart
            body = json.loads(json.dumps(body).replace("create hello.txt containing hi", "another task"))
            other = {}
        assert call(d.url, path, body, headers=other).status == 429
        kinds = [r["answer"]["kind"] for r in d.requests()]
    assert kinds == ["error", "tool", "error"]


@pytest.mark.parametrize(("protocol", "path", "body", "where"), TURN_ONE, ids=IDS)
def test_malformed_stream_breaks_off_with_a_line_that_is_not_json(protocol, path, body, where) -> None:
    with ModelDouble(faulty(malformed=True)) as d:
        reply = call(d.url, path, body)
    assert reply.status == 200
    data = [data for _, data in reply.events()]
    assert isinstance(data[-1], str) and data[-1].startswith("{")
    with pytest.raises(ValueError):
        json.loads(data[-1])


def test_malformed_non_streamed_body_is_cut_json() -> None:
    with ModelDouble(faulty(malformed=True)) as d:
        reply = call(d.url, "/v1/messages", {**CLAUDE[1]["body"], "stream": False})
    assert reply.status == 200
    with pytest.raises(ValueError):
        reply.json()


def test_delay_holds_the_answer_back() -> None:
    with ModelDouble(faulty(delay=5)) as d, pytest.raises((socket.timeout, TimeoutError)):
        call(d.url, "/v1/messages", CLAUDE[1]["body"], timeout=0.3)


def test_looping_script_never_stops_calling_tools() -> None:
    s = script({"loop": True, "steps": [{"shell": "echo one"}, {"shell": "echo two"}]})
    body = json.loads(json.dumps(COPILOT[1]["body"]))
    with ModelDouble(s) as d:
        commands = []
        for _ in range(5):
            chunk = call(d.url, "/v1/chat/completions", {**body, "stream": False}).json()
            tool_call = chunk["choices"][0]["message"]["tool_calls"][0]
            commands.append(json.loads(tool_call["function"]["arguments"])["command"])
            body["messages"] += [{"role": "assistant", "tool_calls": [tool_call]}, {"role": "tool", "tool_call_id": tool_call["id"], "content": "x"}]
    # the recorded body already holds one tool result, so the first answer is step 1
    assert commands == ["echo two", "echo one", "echo two", "echo one", "echo two"]
    numbered = script({"loop": True, "steps": [{"shell": "echo turn {turn}"}]})
    with ModelDouble(numbered) as d:
        msg = call(d.url, "/v1/chat/completions", {**COPILOT[1]["body"], "stream": False}).json()["choices"][0]["message"]
    assert json.loads(msg["tool_calls"][0]["function"]["arguments"])["command"] == "echo turn 1"


def test_no_shell_tool_offered_is_answered_with_text_that_says_so() -> None:
    body = {**COPILOT[0]["body"], "tools": ["view", "grep"], "stream": False}
    with ModelDouble(script()) as d:
        text = call(d.url, "/v1/chat/completions", body).json()["choices"][0]["message"]["content"]
    assert "needs a shell tool; offered: view, grep" in text


def test_log_redacts_credentials_and_shortens_long_strings(tmp_path) -> None:
    log = tmp_path / "requests.jsonl"
    secret = "sk-live-0123456789abcdef"
    body = {**COPILOT[0]["body"], "messages": [{"role": "user", "content": "x" * 5000}]}
    with ModelDouble(script(), log) as d:
        call(d.url, "/v1/chat/completions", body, headers={"Authorization": f"Bearer {secret}", "x-api-key": secret})
        call(d.url, "/v1beta/models/m:countTokens?key=" + secret, {"contents": []}, headers={"x-goog-api-key": secret})
    text = log.read_text()
    assert secret not in text
    records = [json.loads(line) for line in text.splitlines()]
    assert records[0]["headers"]["Authorization"] == "<redacted>" and records[0]["headers"]["X-Api-Key"] == "<redacted>"
    assert records[1]["query"] == {"key": ["<redacted>"]}
    assert records[0]["body"]["messages"][0]["content"] == "x" * 4000 + "...<1000 chars>"
    assert records[0]["protocol"] == "chat" and records[1]["answer"] == {"kind": "count_tokens", "input_tokens": 300}


def test_unknown_route_and_unknown_endpoint_are_404_and_logged() -> None:
    with ModelDouble(script()) as d:
        assert call(d.url, "/r/nosuchtoken/v1/messages", CLAUDE[1]["body"]).status == 404
        assert call(d.url, "/v1/embeddings", {"input": "x"}).status == 404
        assert [r["answer"]["kind"] for r in d.unrouted.records] == ["not_found"]
        assert d.requests()[0]["answer"]["error"] == "no such endpoint"


def test_parallel_runs_on_one_server_each_get_their_own_script_and_log(tmp_path) -> None:
    with ModelDouble() as d:
        urls = [d.register(script({"steps": [{"text": f"answer {i}"}]}), tmp_path / f"{i}.jsonl") for i in range(8)]
        answers: dict[int, list[str]] = {}

        def worker(i: int) -> None:
            got = []
            for _ in range(5):
                msg = call(urls[i], "/v1/messages", {**CLAUDE[1]["body"], "stream": False}).json()
                got.append(msg["content"][0]["text"])
            answers[i] = got

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert answers == {i: [f"answer {i}"] * 5 for i in range(8)}
    assert all(len((tmp_path / f"{i}.jsonl").read_text().splitlines()) == 5 for i in range(8))


def test_the_model_double_fixture_is_a_started_server(model_double) -> None:
    assert model_double.url.startswith("http://127.0.0.1:")
    assert call(model_double.url, "/v1/messages", {**CLAUDE[1]["body"], "stream": False}).json()["content"][0]["text"] == "DONE"
    model_double.use(script())
    assert call(model_double.url, "/v1/messages", {**CLAUDE[1]["body"], "stream": False}).json()["content"][0]["name"] == "Bash"
    assert len(model_double.requests()) == 2
