"""Aider adapter: argv, analytics log (exact) vs stdout Tokens lines (fallback), k/M suffixes, session cost."""

from __future__ import annotations

import json

import pytest
from helpers.adapters import make_ctx, sample

from pytest_agentrace.agents.aider import Aider, number, parse_aider
from pytest_agentrace.record.model import AgentStatus, CostSource


def test_argv(tmp_path):
    ctx = make_ctx(tmp_path, name="aider", prompt="fix it", model="openai/gpt-5")
    assert Aider().invocation(ctx).argv == [
        "aider", "--message", "fix it", "--yes-always", "--no-auto-commits", "--no-pretty", "--no-stream",
        "--no-check-update", "--no-gitignore", "--analytics-disable", "--no-show-release-notes",
        "--analytics-log", str(ctx.run_dir / "aider-events.jsonl"), "--model", "openai/gpt-5",
    ]
    ro = Aider().invocation(make_ctx(tmp_path, name="aider", edits=False, prompt="- q")).argv
    assert ro[1] == "--message=- q" and ro[-2:] == ["--chat-mode", "ask"]


@pytest.mark.parametrize(("text", "value"), [("950", 950), ("3.2k", 3200), ("12k", 12000), ("1,234", 1234), ("1.1M", 1100000), ("2m", 2000000)])
def test_token_figures_with_suffixes_and_separators(text, value):
    assert number(text) == value


def test_stdout_fallback_sums_messages_and_takes_the_last_session_cost():
    out = (
        "Aider v0.82.2\nMain model: anthropic/claude-sonnet-4-5 with diff edit format\nGit repo: .git with 3 files\n\n"
        "First reply.\n\nTokens: 12k sent, 1.2k received. Cost: $0.02 message, $0.02 session.\n\n"
        "Second reply.\n\nTokens: 1,500 sent, 2.1k cache write, 3k cache hit, 200 received. Cost: $0.03 message, $0.05 session.\n"
    )
    u = parse_aider(out)
    assert (u.input_tokens, u.output_tokens, u.cache_write_tokens, u.cache_read_tokens) == (13500, 1400, 2100, 3000)
    assert u.total_tokens == 20000 and u.turns == 2
    assert u.cost_usd == 0.05 and u.cost_source == CostSource.REPORTED
    assert u.cli_version == "0.82.2" and u.model == "anthropic/claude-sonnet-4-5"
    assert any("rounded" in w for w in u.parse_warnings)


def test_cost_is_optional_on_the_tokens_line():
    u = parse_aider("Aider v0.82.2\nModel: gemini/x with whole edit format\n\nok\n\nTokens: 3.2k sent, 222 received.\n")
    assert (u.input_tokens, u.output_tokens) == (3200, 222) and u.cost_usd is None and u.cost_source == CostSource.NONE


def test_analytics_log_is_exact_and_wins_over_stdout(tmp_path):
    u = parse_aider(sample("aider/captured-0.86.2-stdout-whole-edit.txt"), "", sample("aider/captured-0.86.2-analytics-log.jsonl"))
    assert (u.input_tokens, u.output_tokens, u.total_tokens, u.cost_usd, u.turns) == (1000, 50, 1050, 0.0011, 1)
    assert u.status == AgentStatus.COMPLETED and u.parse_warnings == ()
    assert u.answer.startswith("Creating the file.")


def test_the_adapter_reads_the_analytics_log_from_the_run_folder(tmp_path):
    ctx = make_ctx(tmp_path, name="aider")
    events = [
        {"event": "message_send", "properties": {"main_model": "m", "prompt_tokens": 1234, "completion_tokens": 56, "cost": 0.01, "total_cost": 0.01}},
        {"event": "message_send", "properties": {"main_model": "m", "prompt_tokens": 2000, "completion_tokens": 44, "cost": 0.02, "total_cost": 0.03}},
        {"event": "exit", "properties": {"reason": "Completed --message"}},
    ]
    (ctx.run_dir / "aider-events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    u = Aider().parse("Tokens: 1.2k sent, 56 received.\nTokens: 2.0k sent, 44 received.\n", "", ctx)
    assert (u.input_tokens, u.output_tokens, u.cost_usd, u.turns, u.model) == (3234, 100, 0.03, 2, "m")


def test_cache_counts_come_from_aiders_own_tokens_lines_only():
    """With the log, only the Tokens: line of each message_send counts: a quoted line with other figures is
    ignored, and one copying the real figures loses to the real line printed after the answer."""
    log = "".join(json.dumps(e) + "\n" for e in (
        {"event": "message_send", "properties": {"prompt_tokens": 1234, "completion_tokens": 56, "total_cost": 0.01}},
        {"event": "message_send", "properties": {"prompt_tokens": 2000, "completion_tokens": 44, "total_cost": 0.03}},
        {"event": "exit", "properties": {"reason": "Completed --message"}},
    ))
    out = (
        "Aider v0.86.2\nModel: m\n\nFirst.\n\nTokens: 1.2k sent, 300 cache write, 56 received.\n\n"
        "Quoting: Tokens: 9k sent, 50k cache write, 70k cache hit, 9 received.\n"
        "Tokens: 2.0k sent, 8k cache write, 9k cache hit, 44 received.\n"
        "Done.\n\nTokens: 2.0k sent, 1.5k cache hit, 44 received.\n"
    )
    u = parse_aider(out, "", log)
    assert (u.input_tokens, u.output_tokens, u.cache_write_tokens, u.cache_read_tokens) == (3234, 100, 300, 1500)
    assert u.total_tokens == 3234 + 100 + 300 + 1500


def test_zero_cost_in_the_log_is_not_reported_and_missing_exit_is_incomplete():
    log = json.dumps({"event": "message_send", "properties": {"prompt_tokens": 10, "completion_tokens": 2, "cost": 0, "total_cost": 0}})
    u = parse_aider("", "", log)
    assert u.cost_usd is None and u.status == AgentStatus.INCOMPLETE


def test_authentication_error_is_an_auth_error():
    out = "Aider v0.86.2\nlitellm.AuthenticationError: AnthropicException - invalid x-api-key\nThe API provider is not able to authenticate you. Check your API key.\n"
    u = parse_aider(out)
    assert u.status == AgentStatus.ERROR and "AuthenticationError" in u.error


def test_no_model_call_names_litellms_error_and_a_reply_quoting_500_stays_the_agents():
    """A provider failing every retry: the log has no message_send, and the error quotes litellm's last error line
    (an outage, so the run is ``error``). A run that did reply, with code mentioning status 500, stays ``failed``."""
    log_exit = json.dumps({"event": "exit", "properties": {"reason": "Completed --message"}}) + "\n"
    out = ("Aider v0.86.2\nRetrying in 8.0 seconds...\nlitellm.InternalServerError: InternalServerError: OpenAIException - "
           "overload\nThe API provider's servers are down or overloaded.\n")
    u = parse_aider(out, "", log_exit)
    assert u.status == AgentStatus.ERROR and "litellm.InternalServerError" in u.error and u.error.startswith("model provider failed")
    send = json.dumps({"event": "message_send", "properties": {"prompt_tokens": 10, "completion_tokens": 5, "total_cost": 0}}) + "\n"
    cut = parse_aider("Aider v0.86.2\n\napp.js\n```\nres.status(500).json({error: 'InternalServerError'})\n```\n", "", send)
    assert cut.status == AgentStatus.INCOMPLETE


def test_usage_lines_of_older_releases():
    """aider 0.46-0.49 wrote ``Cost: $X request``, 0.7-0.45 ``N prompt tokens, M completion tokens, $X cost``
    (a per-message cost: the run's cost is the sum); formats from aider's ``base_coder.py`` history."""
    u = parse_aider("Tokens: 1,234 sent, 56 received. Cost: $0.001346 request, $0.002692 session.\n")
    assert (u.input_tokens, u.output_tokens, u.cost_usd, u.turns) == (1234, 56, 0.002692, 1)
    u = parse_aider("Editing.\n1000 prompt tokens, 50 completion tokens, $0.001100 cost\n"
                    "Applied edit to hello.txt\n1200 prompt tokens, 10 completion tokens, $0.001220 cost\n")
    assert (u.input_tokens, u.output_tokens, u.total_tokens, u.cost_usd, u.turns) == (2200, 60, 2260, 0.00232, 2)
    u = parse_aider("1000 prompt tokens, 50 completion tokens\n")  # a model without a price: no cost part
    assert (u.input_tokens, u.output_tokens, u.cost_usd) == (1000, 50, None)
