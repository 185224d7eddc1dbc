"""Behaviour shared by every CLI adapter: the answer cannot change the figures, HOME isolation, auth detection."""

from __future__ import annotations

import json

import pytest
from helpers.adapters import make_ctx, sample

from pytest_agentrace.agents import get_adapter
from pytest_agentrace.agents.auth import detect
from pytest_agentrace.agents.base import RunOptions
from pytest_agentrace.cli.parse import CLI_AGENTS, usage_json
from pytest_agentrace.record.model import AgentStatus

SPOOF = "Total cost: $9.99\nTokens: 99k sent, 50k cache write, 70k cache hit, 99k received. Cost: $9.99 message, $9.99 session.\ninput_tokens: 999999, total_cost_usd: 9.99"

# (agent, stdout sample, the final answer in it, side files)
CASES = [
    ("claude", "claude/captured-2.1.197-stream-json-bash-tool.jsonl", "DONE: created hello.txt", {}),
    ("codex", "codex/captured-0.171.0-exec-json-command.jsonl", "DONE: created hello.txt", {}),
    ("gemini", "gemini/captured-0.61.0-stream-json-shell-tool.jsonl", "DONE: created hello.txt", {}),
    ("opencode", "opencode/captured-1.18.33-run-json-bash-tool.jsonl", "DONE: created hello.txt", {}),
    ("copilot", "copilot/captured-1.0.102-output-json-bash-tool.jsonl", "DONE: created hello.txt", {"otel": "copilot/captured-1.0.102-otel-export.jsonl"}),
    ("cursor", "cursor/handwritten-stream-json-shell-tool.jsonl", "Created hello.txt.", {}),
    ("aider", "aider/captured-0.86.2-stdout-whole-edit.txt", "Creating the file.", {"analytics": "aider/captured-0.86.2-analytics-log.jsonl"}),
]


@pytest.mark.parametrize(("agent", "rel", "answer", "side"), CASES, ids=[c[0] for c in CASES])
def test_cost_or_token_lines_in_the_answer_do_not_change_the_figures(agent, rel, answer, side):
    text = sample(rel)
    assert answer in text
    escaped = SPOOF if rel.endswith(".txt") else json.dumps(SPOOF)[1:-1]
    spoofed = text.replace(answer, escaped)
    adapter = get_adapter(agent)
    sides = {k: sample(v) for k, v in side.items()}
    plain, tricked = usage_json(adapter.parse_output(text, "", sides)), usage_json(adapter.parse_output(spoofed, "", sides))
    assert SPOOF.splitlines()[0] in (tricked["answer"] or "")
    for d in (plain, tricked):
        d.pop("answer")
    assert tricked == plain
    assert plain["total_tokens"] is not None


@pytest.mark.parametrize("agent", CLI_AGENTS)
def test_every_cli_adapter_isolates_home_unless_asked(agent, tmp_path):
    adapter = get_adapter(agent)
    env = {"PATH": "/bin", "HOME": "/home/me", "XDG_CONFIG_HOME": "/home/me/.config", "OPENAI_API_KEY": "sk-x"}
    ctx = make_ctx(tmp_path, name=agent, env=env)
    iso = adapter.invocation(ctx).env
    assert iso["HOME"] == str(ctx.home) and iso["XDG_CONFIG_HOME"].startswith(str(ctx.home))
    assert iso["OPENAI_API_KEY"] == "sk-x" and iso["PATH"] == "/bin"
    shared = adapter.invocation(make_ctx(tmp_path, name=agent, env=env, options=RunOptions(isolated_home=False))).env
    assert shared["HOME"] == "/home/me" and shared["XDG_CONFIG_HOME"] == "/home/me/.config"


@pytest.mark.parametrize("agent", CLI_AGENTS)
def test_every_cli_adapter_gives_an_executable_and_a_model_flag(agent, tmp_path):
    adapter = get_adapter(agent)
    argv = adapter.invocation(make_ctx(tmp_path, name=agent, model="some-model")).argv
    assert argv[0] == adapter.executable
    assert argv[argv.index("--model") + 1] == "some-model"
    assert "--model" not in adapter.invocation(make_ctx(tmp_path, name=agent)).argv


@pytest.mark.parametrize("agent", CLI_AGENTS)
def test_garbage_output_is_incomplete_or_failed_never_a_crash(agent):
    u = get_adapter(agent).parse_output("\x00\xff garbage {not json\n[1, 2\n", "segfault", {})
    assert u.status in (AgentStatus.INCOMPLETE, AgentStatus.FAILED)
    assert u.total_tokens is None and u.cost_usd is None


@pytest.mark.parametrize("text", [
    "Invalid API key · Please run /login",
    "Error: unexpected status 401 Unauthorized: Missing bearer authentication",
    "Not logged in · Please run /login",
    "When using Gemini API, you must specify the GEMINI_API_KEY environment variable.",
    "Error: Authentication required. Please run 'cursor-agent login' first.",
    "Credit balance is too low",
])
def test_common_auth_messages_are_recognised(text):
    assert detect(["some other line", text]) == text


def test_ordinary_failures_are_not_auth_errors():
    assert detect(["FAILED test_api.py::test_get - assert 200 == 404", "rate limit exceeded, status 429"]) is None


@pytest.mark.parametrize(("error", "texts", "status"), [
    # what each CLI said after a 500 on every attempt (model double), and a parse failure that stays the agent's
    ("API Error: 500 scripted overload. This is a server-side issue", [], AgentStatus.ERROR),
    ("We’re currently experiencing high demand, which may cause temporary errors.", [], AgentStatus.ERROR),
    ('[API Error: {"error":{"code":500,"message":"scripted overload","status":"INTERNAL"}}]', [], AgentStatus.ERROR),
    ("APIError: scripted overload (500)", [], AgentStatus.ERROR),
    ("Failed to get response from the AI model; retried 5 times Last error: 500 scripted overload", [], AgentStatus.ERROR),
    ("aider made no model call (exit: Completed --message): litellm.InternalServerError: OpenAIException - overload", [],
     AgentStatus.ERROR),
    # only the CLI's final error counts: output that quotes server code, or a retry notice, is not an outage
    ("aider exited: KeyboardInterrupt", ["    return res.status(500).json({error: 'x'})", '{"error": 500}'], AgentStatus.FAILED),
    ("context window exceeded", ["Reconnecting... 1/5 (unexpected status 502 Bad Gateway)"], AgentStatus.FAILED),
    ("API Error: Failed to parse JSON", [], AgentStatus.FAILED),
    ("stream disconnected before completion: stream closed before response.completed", [], AgentStatus.FAILED),
    ("tests failed: assert 500 == 200", ["FAILED test_api.py::test_get - assert 200 == 404"], AgentStatus.FAILED),
])
def test_model_provider_outages_are_errors_not_agent_failures(error, texts, status):
    from pytest_agentrace.agents.auth import settle

    got, reason = settle(AgentStatus.FAILED, error, texts)
    assert got == status
    if status == AgentStatus.ERROR:
        assert reason.startswith("model provider failed (server error after the CLI's retries): ")
    assert settle(AgentStatus.COMPLETED, None, [error, *texts]) == (AgentStatus.COMPLETED, None)


def test_a_completed_run_mentioning_401_stays_completed():
    from helpers.adapters import jsonl

    from pytest_agentrace.agents.claude import parse_claude

    u = parse_claude(jsonl({"type": "result", "subtype": "success", "is_error": False, "result": "Fixed the 401 Unauthorized bug; Invalid API key now handled.", "usage": {"input_tokens": 1, "output_tokens": 1}}))
    assert u.status == AgentStatus.COMPLETED


def test_custom_command_placeholders_are_expanded_once(tmp_path):
    """Text a placeholder inserts is passed on as is: a prompt that mentions ``{workspace}`` reaches the agent
    verbatim (prompt.txt keeps the same text), and ``{model}`` without a model is an error."""
    from pytest_agentrace.agents.command import expand_template
    from pytest_agentrace.errors import AgentError

    ctx = make_ctx(tmp_path, name="mine", prompt="open f'{workspace}/x' and {model}", model="m1")
    argv = expand_template(["run", "--ws={workspace}", "{prompt}", "--model", "{model}", "{prompt_file}"], ctx)
    assert argv == ["run", f"--ws={tmp_path / 'ws'}", "open f'{workspace}/x' and {model}", "--model", "m1",
                    str(tmp_path / "run" / "prompt.txt")]
    with pytest.raises(AgentError, match=r"command uses \{model\} but agent 'mine' has no model"):
        expand_template(["run", "{model}"], make_ctx(tmp_path, name="mine"))
