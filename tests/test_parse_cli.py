"""``agentrace parse AGENT FILE [--json] [--otel FILE] [--analytics FILE]`` through the installed command."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from helpers.adapters import SAMPLES

from pytest_agentrace.cli.parse import JSON_KEYS

EXPECTED_KEYS = [
    "input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens", "total_tokens", "cost_usd", "cost_source",
    "turns", "tool_calls", "answer", "status", "cli_version", "model", "warnings",
]


def agentrace(*args: str) -> subprocess.CompletedProcess:
    exe = shutil.which("agentrace")
    cmd = [exe] if exe else [sys.executable, "-m", "pytest_agentrace.cli"]
    return subprocess.run([*cmd, "parse", *args], check=False, capture_output=True, text=True, timeout=60)


def test_json_has_exactly_the_documented_keys():
    res = agentrace("claude", str(SAMPLES / "claude/captured-2.1.197-stream-json-bash-tool.jsonl"), "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert list(data) == EXPECTED_KEYS == list(JSON_KEYS)
    assert data["input_tokens"] == 2200 and data["output_tokens"] == 60 and data["total_tokens"] == 2260
    assert data["cost_usd"] == 0.0125 and data["cost_source"] == "reported" and data["turns"] == 2
    assert data["tool_calls"] == [{"name": "Bash", "summary": "printf 'hi\\n' > hello.txt"}]
    assert data["status"] == "completed" and data["cli_version"] == "2.1.197" and data["warnings"] == []


def test_unknown_values_are_null():
    data = json.loads(agentrace("codex", str(SAMPLES / "codex/exec-json-0.46.0-no-terminal-event-agentcmd.jsonl"), "--json").stdout)
    assert data["status"] == "incomplete"
    for key in ("input_tokens", "output_tokens", "total_tokens", "cost_usd", "turns", "answer", "cli_version", "model"):
        assert data[key] is None


def test_copilot_otel_and_aider_analytics_side_files():
    cop = agentrace("copilot", str(SAMPLES / "copilot/captured-1.0.102-output-json-bash-tool.jsonl"),
                    "--otel", str(SAMPLES / "copilot/captured-1.0.102-otel-export.jsonl"), "--json")
    assert json.loads(cop.stdout)["total_tokens"] == 2260
    without = agentrace("copilot", str(SAMPLES / "copilot/captured-1.0.102-output-json-bash-tool.jsonl"), "--json")
    assert json.loads(without.stdout)["total_tokens"] is None
    aid = agentrace("aider", str(SAMPLES / "aider/captured-0.86.2-stdout-whole-edit.txt"),
                    "--analytics", str(SAMPLES / "aider/captured-0.86.2-analytics-log.jsonl"), "--json")
    data = json.loads(aid.stdout)
    assert (data["input_tokens"], data["output_tokens"], data["cost_usd"], data["warnings"]) == (1000, 50, 0.0011, [])


def test_text_report():
    res = agentrace("opencode", str(SAMPLES / "opencode/run-json-multi-step-handwritten-fullsend.jsonl"))
    assert res.returncode == 0
    assert "total 675" in res.stdout and "$0.030000 (reported)" in res.stdout and "1. read: main.go" in res.stdout


@pytest.mark.parametrize(("args", "message"), [
    (["clade", "FILE"], "agentrace parse: unknown agent 'clade' (did you mean 'claude'?); valid: aider, claude, codex, copilot, cursor, gemini, opencode"),
    (["claude", "/nonexistent/raw.out"], "agentrace parse: cannot read /nonexistent/raw.out: No such file or directory"),
    (["claude", str(SAMPLES)], f"agentrace parse: cannot read {SAMPLES}: Is a directory"),
    (["codex", "FILE", "--otel", "x"], "agentrace parse: --otel is only for copilot, not codex"),
    (["copilot", "FILE", "--otel", "/nonexistent/otel.jsonl"], "agentrace parse: cannot read /nonexistent/otel.jsonl: No such file or directory"),
])
def test_bad_input_exits_2_with_one_line(args, message):
    res = agentrace(*[str(SAMPLES / "claude/captured-2.1.197-output-json.json") if a == "FILE" else a for a in args])
    assert res.returncode == 2
    assert res.stderr == message + "\n" and res.stdout == ""
