"""The model double's Anthropic Messages API against Claude Code 2.1.197's recorded requests."""

from __future__ import annotations

import json
import subprocess

import pytest
from helpers.double import call, recorded, script, url_and_path

from pytest_agentrace.model_double.server import ModelDouble

CLAUDE = recorded("claude-code-2.1.197")
EVENTS = ["message_start", "content_block_start", "content_block_delta", "content_block_stop", "message_delta", "message_stop"]


@pytest.fixture
def double(tmp_path):
    with ModelDouble(script(), tmp_path / "log.jsonl") as d:
        yield d


def test_head_probe_gets_an_empty_200(double) -> None:
    reply = call(double.url, CLAUDE[0]["path"], method="HEAD")
    assert (reply.status, reply.body) == (200, b"")
    assert double.requests()[0]["answer"] == {"kind": "probe"}


def test_turn_one_streams_a_bash_tool_call(double) -> None:
    reply = call(double.url, url_and_path(CLAUDE[1]), CLAUDE[1]["body"])
    assert reply.status == 200 and reply.headers["content-type"] == "text/event-stream"
    events = reply.events()
    assert [name for name, _ in events] == EVENTS
    assert all(data["type"] == name for name, data in events)
    start, block, delta, _, end, _ = (data for _, data in events)
    assert start["message"]["usage"] == {"input_tokens": 1000, "output_tokens": 1, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    assert block["content_block"]["type"] == "tool_use" and block["content_block"]["name"] == "Bash"
    args = json.loads(delta["delta"]["partial_json"])
    assert args["command"] == "printf 'hi\\n' > hello.txt" and args["description"]
    assert end["delta"]["stop_reason"] == "tool_use" and end["usage"] == {"output_tokens": 50}


def test_turn_two_holds_a_tool_result_and_gets_the_final_text(double) -> None:
    body = CLAUDE[2]["body"]
    assert any(m["role"] == "system" for m in body["messages"])  # mid-conversation system message is accepted
    events = call(double.url, url_and_path(CLAUDE[2]), body).events()
    assert [name for name, _ in events] == EVENTS
    assert events[2][1]["delta"] == {"type": "text_delta", "text": "DONE: created hello.txt"}
    assert events[4][1]["delta"]["stop_reason"] == "end_turn" and events[4][1]["usage"]["output_tokens"] == 10
    assert events[0][1]["message"]["usage"]["input_tokens"] == 1200
    assert [r["answer"]["step"] for r in double.requests()] == [1]


def test_non_streamed_answer_and_count_tokens(double) -> None:
    body = {**CLAUDE[1]["body"], "stream": False}
    msg = call(double.url, "/v1/messages", body).json()
    assert msg["type"] == "message" and msg["stop_reason"] == "tool_use"
    assert msg["content"][0]["name"] == "Bash" and msg["usage"]["output_tokens"] == 50
    side = call(double.url, "/v1/messages", {"model": "m", "messages": [{"role": "user", "content": "title?"}]}).json()
    assert side["content"] == [{"type": "text", "text": "Scripted title"}] and side["usage"]["input_tokens"] == 300
    assert call(double.url, "/v1/messages/count_tokens", {"messages": []}).json() == {"input_tokens": 300}


def test_write_step_without_a_known_workspace_becomes_a_shell_command_that_writes_exactly(tmp_path) -> None:
    content = "line 'one'\n$HOME `x` \\n\nno newline at end"
    s = script({"steps": [{"write": {"path": "sub/dir/f.txt", "content": content}}, {"text": "done"}]})
    with ModelDouble(s) as d:
        events = call(d.url, "/v1/messages", CLAUDE[1]["body"]).events()
    args = json.loads(events[2][1]["delta"]["partial_json"])
    assert events[1][1]["content_block"]["name"] == "Bash"
    subprocess.run(["bash", "-c", args["command"]], cwd=tmp_path, check=True)
    assert (tmp_path / "sub/dir/f.txt").read_text() == content


def test_write_step_uses_claude_write_for_a_new_file_in_the_named_workspace(tmp_path) -> None:
    body = json.loads(json.dumps(CLAUDE[1]["body"]))
    body["system"].append({"type": "text", "text": f"Environment\n - Primary working directory: {tmp_path}\n"})
    body["tools"] = [{"name": "Write", "input_schema": {"properties": {"file_path": {}, "content": {}}}}, {"name": "Bash"}]
    s = script({"steps": [{"write": {"path": "new.py", "content": "x = 1\n"}}, {"write": {"path": "old.py", "content": "y\n"}}, {"text": "done"}]})
    (tmp_path / "old.py").write_text("old\n")
    with ModelDouble(s) as d:
        first = call(d.url, "/v1/messages", {**body, "stream": False}).json()["content"][0]
        body["messages"] = [*body["messages"], {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "ok"}]}]
        second = call(d.url, "/v1/messages", {**body, "stream": False}).json()["content"][0]
    assert (first["name"], first["input"]) == ("Write", {"file_path": f"{tmp_path}/new.py", "content": "x = 1\n"})
    # Claude Code refuses Write over a file it has not read: an existing file is written by a shell command
    assert second["name"] == "Bash" and "old.py" in second["input"]["command"]
