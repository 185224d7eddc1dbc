"""Gemini CLI adapter: argv/env, stream-json and json formats, several models or none."""

from __future__ import annotations

import json

from helpers.adapters import jsonl, make_ctx, sample

from pytest_agentrace.agents.gemini import Gemini, parse_gemini
from pytest_agentrace.record.model import AgentStatus


def test_argv_and_trust_env(tmp_path):
    ctx = make_ctx(tmp_path, name="gemini", prompt="fix it", model="gemini-2.5-pro")
    inv = Gemini().invocation(ctx)
    assert inv.argv == ["gemini", "-p", "fix it", "--output-format", "stream-json", "--yolo", "--model", "gemini-2.5-pro"]
    assert inv.env["GEMINI_CLI_TRUST_WORKSPACE"] == "true" and inv.env["HOME"] == str(ctx.home)
    ro = Gemini().invocation(make_ctx(tmp_path, name="gemini", edits=False, prompt="- list"))
    assert ro.argv == ["gemini", "--prompt=- list", "--output-format", "stream-json", "--approval-mode", "default"]


def test_captured_stream_includes_the_router_call():
    u = parse_gemini(sample("gemini/captured-0.61.0-stream-json-shell-tool.jsonl"))
    assert (u.input_tokens, u.output_tokens, u.total_tokens) == (2500, 65, 2565)
    assert u.answer == "DONE: created hello.txt" and u.model == "scripted"
    assert [(t.name, t.summary) for t in u.tool_calls] == [("run_shell_command", "printf 'hi\\n' > hello.txt")]


def test_stream_stats_models_with_several_models_are_summed():
    stats = {
        "total_tokens": 1, "input_tokens": 1, "output_tokens": 0,  # top level ignored when models are given
        "models": {
            "gemini-2.5-flash-lite": {"total_tokens": 305, "input_tokens": 300, "output_tokens": 5, "cached": 0, "input": 300},
            "gemini-2.5-pro": {"total_tokens": 5400, "input_tokens": 5000, "output_tokens": 200, "cached": 1000, "input": 4000},
        },
    }
    u = parse_gemini(jsonl({"type": "init", "model": "auto"}, {"type": "result", "status": "success", "stats": stats}))
    # input excludes cached; output is each model's total minus its prompt (thinking tokens included)
    assert (u.input_tokens, u.cache_read_tokens, u.output_tokens, u.total_tokens) == (4300, 1000, 405, 5705)
    assert u.model == "gemini-2.5-pro" and set(u.model_usage) == {"gemini-2.5-flash-lite", "gemini-2.5-pro"}


def test_json_object_with_several_models_and_with_null_models():
    obj = {"session_id": "s", "response": "the answer", "stats": {"models": {
        "gemini-2.5-flash": {"api": {"totalRequests": 2}, "tokens": {"prompt": 1000, "candidates": 100, "total": 1150, "cached": 400, "thoughts": 50, "tool": 0}},
        "gemini-2.5-flash-lite": {"api": {"totalRequests": 1}, "tokens": {"prompt": 200, "candidates": 5, "total": 205, "cached": 0, "thoughts": 0, "tool": 0}},
    }}}
    u = parse_gemini(json.dumps(obj, indent=2))
    assert (u.input_tokens, u.cache_read_tokens, u.output_tokens, u.total_tokens) == (800, 400, 155, 1355)
    assert u.answer == "the answer" and u.status == AgentStatus.COMPLETED
    none = parse_gemini(json.dumps({"response": "x", "stats": {"models": None}}))
    assert none.input_tokens is None and none.total_tokens is None and none.status == AgentStatus.COMPLETED


def test_result_error_is_failed_and_missing_result_is_incomplete():
    u = parse_gemini(jsonl({"type": "init", "model": "m"}, {"type": "result", "status": "error", "error": {"type": "Error", "message": "quota"}, "stats": {}}))
    assert u.status == AgentStatus.FAILED and u.error == "quota"
    assert parse_gemini(jsonl({"type": "init", "model": "m"})).status == AgentStatus.INCOMPLETE


def test_missing_auth_on_stderr_is_an_auth_error():
    u = parse_gemini("", "Please set an Auth method in your /root/.gemini/settings.json or specify one of the following environment variables before running: GEMINI_API_KEY")
    assert u.status == AgentStatus.ERROR and "Auth method" in u.error


def test_final_answer_is_the_text_after_the_last_tool():
    u = parse_gemini(jsonl(
        {"type": "message", "role": "assistant", "content": "Let me look.", "delta": True},
        {"type": "tool_use", "tool_name": "read_file", "tool_id": "t1", "parameters": {"file_path": "a.py"}},
        {"type": "tool_result", "tool_id": "t1", "status": "success", "output": ""},
        {"type": "message", "role": "assistant", "content": "Fixed ", "delta": True},
        {"type": "message", "role": "assistant", "content": "it.", "delta": True},
        {"type": "result", "status": "success", "stats": {"total_tokens": 10, "input_tokens": 8, "output_tokens": 2}},
    ))
    assert u.answer == "Fixed it." and (u.input_tokens, u.output_tokens, u.total_tokens) == (8, 2, 10)


def test_json_object_followed_by_a_notice_line_still_parses():
    obj = {"response": "ok", "stats": {"models": {"gemini-2.5-pro": {"tokens": {"prompt": 10, "candidates": 2, "total": 12, "cached": 0}}}}}
    u = parse_gemini(json.dumps(obj, indent=2) + "\nA new version of Gemini CLI is available.\n")
    assert u.total_tokens == 12 and u.answer == "ok"
    assert "1 non-JSON line(s) ignored" in u.parse_warnings


def test_turns_are_the_model_responses_of_the_stream():
    """The real 0.61.0 capture: one response calling run_shell_command, one answering (two model requests the
    double served); parallel calls in one response count once."""
    assert parse_gemini(sample("gemini/captured-0.61.0-stream-json-shell-tool.jsonl")).turns == 2
    parallel = jsonl(
        {"type": "init", "model": "auto"}, {"type": "message", "role": "user", "content": "go"},
        {"type": "tool_use", "tool_name": "read_file", "tool_id": "a", "parameters": {}},
        {"type": "tool_use", "tool_name": "read_file", "tool_id": "b", "parameters": {}},
        {"type": "tool_result", "tool_id": "a", "status": "success"}, {"type": "tool_result", "tool_id": "b", "status": "success"},
        {"type": "message", "role": "assistant", "content": "Do", "delta": True},
        {"type": "message", "role": "assistant", "content": "ne", "delta": True},
        {"type": "result", "status": "success", "stats": {}},
    )
    u = parse_gemini(parallel)
    assert (u.turns, len(u.tool_calls), u.answer) == (2, 2, "Done")
