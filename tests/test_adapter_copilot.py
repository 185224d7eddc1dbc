"""Copilot CLI adapter: argv, OTel env, tokens from the OTel export (not the JSON stdout)."""

from __future__ import annotations

import json

from helpers.adapters import jsonl, make_ctx, sample

from pytest_agentrace.agents.copilot import Copilot, parse_copilot
from pytest_agentrace.record.model import AgentStatus

OUT = "copilot/captured-1.0.102-output-json-bash-tool.jsonl"
OTEL = "copilot/captured-1.0.102-otel-export.jsonl"


def test_argv_and_otel_env(tmp_path):
    ctx = make_ctx(tmp_path, name="copilot", prompt="fix", model="gpt-5")
    inv = Copilot().invocation(ctx)
    assert inv.argv == ["copilot", "-p", "fix", "--output-format", "json", "--allow-all-tools", "--model", "gpt-5"]
    assert inv.env["COPILOT_OTEL_FILE_EXPORTER_PATH"] == str(ctx.run_dir / "copilot-otel.jsonl")
    assert inv.env["COPILOT_OTEL_EXPORTER_TYPE"] == "file" and inv.env["COPILOT_OTEL_ENABLED"] == "true"
    ro = Copilot().invocation(make_ctx(tmp_path, name="copilot", edits=False)).argv
    assert ro[-4:] == ["--deny-tool", "write", "--deny-tool", "shell"]


def test_tokens_come_from_the_otel_export():
    u = parse_copilot(sample(OUT), "", sample(OTEL))
    assert (u.input_tokens, u.output_tokens, u.total_tokens, u.turns) == (2200, 60, 2260, 2)
    assert u.cli_version == "1.0.102" and u.model == "test" and u.answer == "DONE: created hello.txt"
    assert u.cost_usd is None  # premium requests are not dollars
    without = parse_copilot(sample(OUT))
    assert without.total_tokens is None and any("OTel" in w for w in without.parse_warnings)


def test_cached_input_from_span_attributes_is_subtracted():
    span = {"type": "span", "attributes": {"gen_ai.operation.name": "chat", "gen_ai.response.model": "claude-sonnet-4.5",
                                           "gen_ai.usage.input_tokens": 5000, "gen_ai.usage.output_tokens": 100,
                                           "gen_ai.usage.cache_read.input_tokens": 4000}}
    u = parse_copilot(jsonl({"type": "result", "exitCode": 0}), "", jsonl(span, span))
    assert (u.input_tokens, u.cache_read_tokens, u.output_tokens, u.total_tokens) == (2000, 8000, 200, 10200)


def test_nonzero_exit_code_in_result_is_failed_and_no_result_is_incomplete():
    assert parse_copilot(jsonl({"type": "result", "exitCode": 1})).status == AgentStatus.FAILED
    assert parse_copilot(jsonl({"type": "assistant.turn_start", "data": {}})).status == AgentStatus.INCOMPLETE


def test_adapter_reads_the_otel_file_from_the_run_folder(tmp_path):
    ctx = make_ctx(tmp_path, name="copilot")
    (ctx.run_dir / "copilot-otel.jsonl").write_text(sample(OTEL))
    assert Copilot().parse(sample(OUT), "", ctx).total_tokens == 2260


def test_no_login_is_an_auth_error():
    u = parse_copilot("", "Error: No authentication information found.\nTo authenticate, run `copilot` and use /login, or set GH_TOKEN.\n")
    assert u.status == AgentStatus.ERROR and "No authentication information" in u.error


def test_otel_garbage_is_a_warning_not_a_crash():
    u = parse_copilot(jsonl({"type": "result", "exitCode": 0}), "", '{"type": "span", broken\n' + json.dumps([1, 2]) + "\n")
    assert u.status == AgentStatus.COMPLETED and u.total_tokens is None
    assert any(w.startswith("otel:") for w in u.parse_warnings)
