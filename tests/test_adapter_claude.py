"""Claude Code adapter: argv/env, and the output-format variants of issue 3 point 3."""

from __future__ import annotations

import json

from helpers.adapters import jsonl, make_ctx, sample

from pytest_agentrace.agents.base import RunOptions
from pytest_agentrace.agents.claude import Claude, parse_claude
from pytest_agentrace.record.model import AgentStatus, CostSource


def _result(**over):
    base = {
        "type": "result", "subtype": "success", "is_error": False, "num_turns": 3, "result": "done",
        "total_cost_usd": 0.25, "usage": {"input_tokens": 100, "cache_creation_input_tokens": 20,
                                          "cache_read_input_tokens": 3000, "output_tokens": 400},
    }
    base.update(over)
    return base


def test_argv_for_edits_uses_accept_edits_and_bash(tmp_path):
    ctx = make_ctx(tmp_path, prompt="fix it", model="claude-sonnet-4-5")
    assert Claude().invocation(ctx).argv == [
        "claude", "-p", "fix it", "--output-format", "stream-json", "--verbose",
        "--permission-mode", "acceptEdits", "--allowedTools", "Bash", "--model", "claude-sonnet-4-5",
    ]


def test_argv_read_only_uses_plan_mode(tmp_path):
    argv = Claude().invocation(make_ctx(tmp_path, edits=False)).argv
    assert argv[-2:] == ["--permission-mode", "plan"] and "acceptEdits" not in argv and "Bash" not in argv


def test_prompt_starting_with_dash_follows_end_of_options(tmp_path):
    argv = Claude().invocation(make_ctx(tmp_path, prompt="- fix the bug\n- add a test")).argv
    assert argv[-2:] == ["--", "- fix the bug\n- add a test"]
    assert argv.index("--allowedTools") < argv.index("--")


def test_env_has_a_per_run_home_and_drops_the_users_config_dir(tmp_path):
    ctx = make_ctx(tmp_path, env={"PATH": "/bin", "HOME": "/root", "CLAUDE_CONFIG_DIR": "/root/.claude", "ANTHROPIC_API_KEY": "k"})
    env = Claude().invocation(ctx).env
    assert env["HOME"] == str(ctx.home) and env["XDG_CONFIG_HOME"] == str(ctx.home / ".config")
    assert "CLAUDE_CONFIG_DIR" not in env and env["ANTHROPIC_API_KEY"] == "k"


def test_env_keeps_the_users_home_with_agent_home_user(tmp_path):
    ctx = make_ctx(tmp_path, env={"PATH": "/bin", "HOME": "/root", "CLAUDE_CONFIG_DIR": "/root/.claude"}, options=RunOptions(isolated_home=False))
    env = Claude().invocation(ctx).env
    assert env["HOME"] == "/root" and env["CLAUDE_CONFIG_DIR"] == "/root/.claude" and "XDG_CONFIG_HOME" not in env


def test_totals_come_from_result_usage_with_cache_fields_and_total_cost_usd():
    u = parse_claude(jsonl(_result(cost_usd=9.99)))
    assert (u.input_tokens, u.cache_write_tokens, u.cache_read_tokens, u.output_tokens) == (100, 20, 3000, 400)
    assert u.total_tokens == 3520
    assert u.cost_usd == 0.25 and u.cost_source == CostSource.REPORTED  # total_cost_usd, not cost_usd
    assert u.turns == 3 and u.status == AgentStatus.COMPLETED


def test_cost_usd_alone_is_not_read_as_the_run_cost():
    r = _result(cost_usd=0.5)
    del r["total_cost_usd"]
    u = parse_claude(jsonl(r))
    assert u.cost_usd is None and u.cost_source == CostSource.NONE
    assert any("cost_usd" in w for w in u.parse_warnings)


def test_output_format_json_single_object_and_array():
    obj = json.loads(sample("claude/captured-2.1.197-output-json.json"))
    single = parse_claude(json.dumps(obj))
    events = [{"type": "system", "subtype": "init", "model": "m", "claude_code_version": "2.0.1"},
              {"type": "assistant", "message": {"id": "a", "model": "m", "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {"file_path": "x.py"}}]}},
              obj]
    array = parse_claude(json.dumps(events, indent=2))
    for u in (single, array):
        assert (u.input_tokens, u.output_tokens, u.total_tokens, u.cost_usd, u.turns) == (2200, 60, 2260, 0.0125, 2)
        assert u.answer == "DONE: created hello.txt"
    assert [(t.name, t.summary) for t in array.tool_calls] == [("Read", "x.py")]
    assert array.cli_version == "2.0.1" and array.parse_warnings == ()


def test_the_last_of_several_results_wins():
    u = parse_claude(jsonl(_result(total_cost_usd=0.1, num_turns=1, result="first"), _result(total_cost_usd=0.3, result="second")))
    assert u.cost_usd == 0.3 and u.answer == "second" and u.turns == 3


def test_is_error_result_is_a_failed_run():
    u = parse_claude(jsonl(_result(is_error=True, subtype="error_during_execution", result="Tool crashed")))
    assert u.status == AgentStatus.FAILED and u.error == "Tool crashed"
    u = parse_claude(jsonl({k: v for k, v in _result(subtype="error_max_turns").items() if k != "result"}))
    assert u.status == AgentStatus.FAILED and "error_max_turns" in u.error


def test_assistant_lines_repeating_one_message_are_never_summed():
    """One API message split over several assistant lines with the same id and usage; their output_tokens is a
    start-of-stream snapshot: the totals are the result's."""
    usage = {"input_tokens": 1000, "output_tokens": 1, "cache_read_input_tokens": 500}
    msg = {"id": "msg_1", "model": "claude-x", "usage": usage}
    stream = jsonl(
        {"type": "assistant", "message": {**msg, "content": [{"type": "thinking", "thinking": "hm"}]}, "parent_tool_use_id": None},
        {"type": "assistant", "message": {**msg, "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}]}, "parent_tool_use_id": None},
        {"type": "assistant", "message": {**msg, "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}]}, "parent_tool_use_id": None},
        _result(usage={"input_tokens": 1100, "output_tokens": 491, "cache_read_input_tokens": 500, "cache_creation_input_tokens": 0}),
    )
    u = parse_claude(stream)
    assert (u.input_tokens, u.output_tokens, u.cache_read_tokens) == (1100, 491, 500)
    assert [(t.name, t.summary) for t in u.tool_calls] == [("Bash", "ls")]
    assert u.model == "claude-x"


def test_denied_tool_is_reported_as_permission_denial_not_hidden():
    u = parse_claude(sample("claude/captured-2.1.197-stream-json-permission-denied.jsonl"))
    assert u.permission_denials == ("Write: /tmp/workspace/hello.txt",)
    assert u.status == AgentStatus.COMPLETED  # the CLI says success; the denial is what tells the truth


def test_no_result_event_is_incomplete_without_invented_tokens():
    u = parse_claude(jsonl({"type": "assistant", "message": {"id": "m", "usage": {"input_tokens": 5, "output_tokens": 1}, "content": [{"type": "text", "text": "working"}]}, "parent_tool_use_id": None}))
    assert u.status == AgentStatus.INCOMPLETE and u.input_tokens is None and u.total_tokens is None
    assert u.answer == "working"


def test_invalid_api_key_result_is_an_auth_error():
    u = parse_claude(jsonl(_result(is_error=True, result="Invalid API key · Please run /login", total_cost_usd=0, usage={})))
    assert u.status == AgentStatus.ERROR and "Invalid API key" in u.error


def test_unknown_events_and_malformed_lines_are_warnings():
    u = parse_claude('{"type":"mystery"}\n{"type": "result", broken\n' + jsonl(_result()))
    assert u.status == AgentStatus.COMPLETED and u.cost_usd == 0.25
    assert any("mystery" in w for w in u.parse_warnings) and any("malformed JSON" in w for w in u.parse_warnings)


def test_impossible_counts_are_dropped_with_a_warning():
    """A negative token count or cost is not a figure: unknown (None) plus a parse warning, and not summed."""
    u = parse_claude(jsonl(_result(total_cost_usd=-1.5, usage={"input_tokens": -5, "output_tokens": 400})))
    assert (u.input_tokens, u.output_tokens, u.total_tokens, u.cost_usd) == (None, 400, 400, None)
    assert "impossible input_tokens -5 ignored" in u.parse_warnings
    assert "impossible cost_usd -1.5 ignored" in u.parse_warnings


def test_counts_beyond_an_exact_integer_are_dropped_with_a_warning():
    """A count above 2^53 - 1 (no model reports one; a float64 or a JSON reader could not even hold it exactly) is
    impossible output too: unknown, never stored (SQLite's INTEGER ends at 2^63 - 1)."""
    u = parse_claude(jsonl(_result(num_turns=10**30, usage={"input_tokens": 10**30, "output_tokens": 2**53 - 1})))
    assert (u.input_tokens, u.output_tokens, u.turns) == (None, 2**53 - 1, None)
    assert f"impossible input_tokens {10**30!r} ignored" in u.parse_warnings
    assert f"impossible turns {10**30!r} ignored" in u.parse_warnings
