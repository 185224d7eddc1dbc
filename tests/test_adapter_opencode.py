"""OpenCode adapter: argv, per-step sums, unreported cost, error without step_finish."""

from __future__ import annotations

from helpers.adapters import jsonl, make_ctx, sample

from pytest_agentrace.agents.opencode import OpenCode, parse_opencode
from pytest_agentrace.record.model import AgentStatus, CostSource


def _step(reason, inp, out, cost, read=0, write=0, reasoning=0):
    return {"type": "step_finish", "part": {"type": "step-finish", "reason": reason, "cost": cost,
                                            "tokens": {"input": inp, "output": out, "reasoning": reasoning, "cache": {"read": read, "write": write}}}}


def test_argv(tmp_path):
    assert OpenCode().invocation(make_ctx(tmp_path, name="opencode", prompt="fix", model="anthropic/claude-sonnet-4-5")).argv == [
        "opencode", "run", "--format", "json", "--auto", "--title", "agentrace", "--model", "anthropic/claude-sonnet-4-5", "fix",
    ]
    assert OpenCode().invocation(make_ctx(tmp_path, name="opencode", edits=False)).argv == [
        "opencode", "run", "--format", "json", "--agent", "plan", "--title", "agentrace", "fix the bug",
    ]


def test_tokens_and_cost_are_summed_over_steps():
    u = parse_opencode(sample("opencode/run-json-multi-step-handwritten-fullsend.jsonl"))
    assert (u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens) == (300, 100, 240, 35)
    assert u.cost_usd == 0.03 and u.cost_source == CostSource.REPORTED and u.turns == 2
    assert u.answer == "I have read the file."


def test_reasoning_tokens_count_as_output():
    u = parse_opencode(jsonl({"type": "step_start", "part": {}}, _step("stop", 10, 5, 0.001, reasoning=7)))
    assert u.output_tokens == 12 and u.total_tokens == 22


def test_cost_zero_with_tokens_means_not_reported():
    u = parse_opencode(sample("opencode/captured-1.18.33-run-json-bash-tool.jsonl"))
    assert u.total_tokens == 2260 and u.cost_usd is None and u.cost_source == CostSource.NONE
    mixed = parse_opencode(sample("opencode/run-json-bash-tool-two-steps-takopi.jsonl"))
    assert mixed.cost_usd is None and any("1 of 2 steps" in w for w in mixed.parse_warnings)


def test_error_event_with_no_step_finish_after_it_is_failed():
    u = parse_opencode(sample("opencode/run-json-api-error-takopi.jsonl"))
    assert u.status == AgentStatus.FAILED and u.error == "APIError: Rate limit exceeded (429)"
    recovered = parse_opencode(jsonl(
        {"type": "error", "error": {"name": "APIError", "data": {"message": "retrying"}}},
        {"type": "step_start", "part": {}}, {"type": "text", "part": {"text": "ok"}}, _step("stop", 1, 1, 0.1),
    ))
    assert recovered.status == AgentStatus.COMPLETED


def test_stream_cut_after_tool_calls_is_incomplete():
    u = parse_opencode(jsonl({"type": "step_start", "part": {}}, _step("tool-calls", 10, 2, 0)))
    assert u.status == AgentStatus.INCOMPLETE


def test_provider_auth_error_is_an_auth_error():
    u = parse_opencode(jsonl({"type": "error", "error": {"name": "ProviderAuthError", "data": {"providerID": "anthropic", "message": "No API key found"}}}))
    assert u.status == AgentStatus.ERROR
