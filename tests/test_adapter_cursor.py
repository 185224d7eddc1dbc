"""Cursor agent adapter: argv, camelCase usage, final answer vs result.result, parallel calls, trust refusal."""

from __future__ import annotations

from helpers.adapters import jsonl, make_ctx, sample

from pytest_agentrace.agents.cursor import Cursor, parse_cursor
from pytest_agentrace.record.model import AgentStatus


def test_argv(tmp_path):
    assert Cursor().invocation(make_ctx(tmp_path, name="cursor", prompt="fix", model="gpt-5")).argv == [
        "cursor-agent", "-p", "--force", "--output-format", "stream-json", "--model", "gpt-5", "fix",
    ]
    assert Cursor().invocation(make_ctx(tmp_path, name="cursor", edits=False, sandbox="enabled")).argv == [
        "cursor-agent", "-p", "--trust", "--mode", "ask", "--output-format", "stream-json", "--sandbox", "enabled", "fix the bug",
    ]


def test_camel_case_usage_and_final_answer_is_the_last_assistant_message():
    u = parse_cursor(sample("cursor/handwritten-stream-json-shell-tool.jsonl"))
    assert (u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens) == (4210, 88, 12800, 0)
    assert u.total_tokens == 17098
    assert u.answer == "Created hello.txt."  # result.result joins every assistant text: not the final answer
    assert [(t.name, t.summary) for t in u.tool_calls] == [("shell", "printf 'hi\\n' > hello.txt")]
    assert u.model is None  # "Auto": the router chose, the output does not say what


def test_two_messages_after_the_last_tool_call_give_the_last_one():
    """stream-json prints one ``assistant`` event per whole message (Cursor's output-format docs), so two
    messages after the last tool call are two answers in turn, not one text to join."""
    def say(text):
        return {"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": text}]}}

    out = jsonl(say("Let me check."), say("Done: 42."), {"type": "result", "subtype": "success", "is_error": False,
                                                           "result": "Let me check.Done: 42.", "usage": {}})
    assert parse_cursor(out).answer == "Done: 42."


def test_parallel_tool_calls_are_correlated_by_call_id():
    def call(sub, cid, path):
        return {"type": "tool_call", "subtype": sub, "call_id": cid, "tool_call": {"readToolCall": {"args": {"path": path}}}}

    u = parse_cursor(jsonl(
        call("started", "a", "x.py"), call("started", "b", "y.py"), call("completed", "b", "y.py"), call("completed", "a", "x.py"),
        {"type": "assistant", "message": {"content": [{"type": "text", "text": "read both"}]}},
        {"type": "result", "subtype": "success", "is_error": False, "result": "read both", "usage": {"inputTokens": 1, "outputTokens": 2}},
    ))
    assert [(t.name, t.summary) for t in u.tool_calls] == [("read", "x.py"), ("read", "y.py")]
    assert u.answer == "read both" and u.total_tokens == 3


def test_is_error_result_is_failed():
    u = parse_cursor(jsonl({"type": "result", "subtype": "error", "is_error": True, "result": "model refused", "usage": {}}))
    assert u.status == AgentStatus.FAILED and u.error == "model refused"


def test_workspace_trust_refusal_is_a_setup_error():
    refusal = "⚠ Workspace Trust Required\n  To proceed, you can either:\n    - Pass --trust, --yolo, or -f if you trust this directory\n"
    u = parse_cursor(refusal)
    assert u.status == AgentStatus.ERROR and "Workspace Trust Required" in u.error


def test_real_2026_01_28_captures_tool_calls_answer_and_no_usage():
    """reifying/cursor-hack's published captures (cursor-agent 2026.01.28): sequential and parallel shell
    calls correlated by call id, the last assistant text as the answer, and a result without usage."""
    seq = parse_cursor(sample("cursor/stream-json-2026.01.28-sequential-shell-cursor-hack.jsonl"))
    assert [(t.name, t.summary) for t in seq.tool_calls] == [("shell", "sleep 5"), ("shell", "sleep 3")]
    assert seq.answer.startswith("Both commands have finished running") and seq.status == AgentStatus.COMPLETED
    assert seq.total_tokens is None and seq.tokens_note.startswith("cursor-agent's result event has no usage")
    par = parse_cursor(sample("cursor/stream-json-2026.01.28-parallel-shell-cursor-hack.jsonl"))
    assert [t.summary for t in par.tool_calls] == ["sleep 6", "sleep 4"] and par.answer == "done"
