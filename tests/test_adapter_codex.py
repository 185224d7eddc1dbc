"""Codex adapter: argv/env, item and legacy formats, cumulative usage, incomplete and failed runs."""

from __future__ import annotations

import pytest
from helpers.adapters import jsonl, make_ctx, sample

from pytest_agentrace.agents.base import RunOptions
from pytest_agentrace.agents.claude import Claude
from pytest_agentrace.agents.codex import Codex, parse_codex
from pytest_agentrace.errors import AgentError
from pytest_agentrace.record.model import AgentStatus

OFF = ["--disable", "plugins", "--disable", "remote_plugin", "--disable", "apps", "-c", "analytics.enabled=false"]


def shell_env(env: dict[str, str]) -> list[str]:
    """The flags that give Codex's shell tool the run's environment and PATH (``shell_environment_policy``)."""
    return ["-c", 'shell_environment_policy.inherit="all"', "-c", f'shell_environment_policy.set.PATH="{env["PATH"]}"']
# `codex features list` as 0.171.0 prints it (excerpt; a removed feature is never disabled by name)
FEATURES_0171 = """\
agent_message_board                      under development  false
apply_patch_freeform                     removed            false
apps                                     stable             true
plugins                                  stable             true
remote_plugin                            under development  false
"""


def fake_codex(tmp_path, features: str | None):
    """A ``codex`` on a PATH of its own that answers ``features list`` (or fails it: ``None``); returns the env."""
    import sys

    bin_dir = tmp_path / "codexbin"
    bin_dir.mkdir(exist_ok=True)
    exe = bin_dir / "codex"
    body = "sys.exit(2)" if features is None else f"print({features!r}, end='')"
    exe.write_text(f"#!{sys.executable}\nimport sys\nif sys.argv[1:] == ['features', 'list']:\n    {body}\n")
    exe.chmod(0o755)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": "/home/someone"}


def test_argv_edits_read_only_model_and_sandbox(tmp_path):
    env = fake_codex(tmp_path, FEATURES_0171)
    assert Codex().invocation(make_ctx(tmp_path, name="codex", prompt="fix it", env=env)).argv == [
        "codex", "exec", "--json", "-s", "workspace-write", *OFF, *shell_env(env), "fix it",
    ]
    assert Codex().invocation(make_ctx(tmp_path, name="codex", edits=False, model="gpt-5", env=env)).argv == [
        "codex", "exec", "--json", "-s", "read-only", *OFF, *shell_env(env), "--model", "gpt-5", "fix the bug",
    ]
    argv = Codex().invocation(make_ctx(tmp_path, name="codex", sandbox="danger-full-access", prompt="-x", env=env)).argv
    assert argv[3:5] == ["-s", "danger-full-access"] and argv[-2:] == ["--", "-x"]


@pytest.mark.parametrize(("features", "disabled"), [
    ("apps                             stable             true\nundo                             stable             false\n", ["apps"]),  # 0.100.0
    ("apps  stable  true\nplugins  stable  true\nremote_plugin  removed  false\n", ["plugins", "apps"]),
    (None, []),  # no `features` subcommand: no --disable at all (an unknown name would stop the run)
])
def test_only_features_the_installed_build_knows_are_disabled(tmp_path, features, disabled):
    """codex 0.100.0 stops with "Unknown feature flag: plugins": --disable names only what `codex features list` of
    the build on PATH shows (probed once per executable)."""
    argv = Codex().invocation(make_ctx(tmp_path, name="codex", env=fake_codex(tmp_path, features))).argv
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--disable"] == disabled
    assert argv[-7:-5] == ["-c", "analytics.enabled=false"]


def test_stdin_is_closed_and_codex_home_is_per_run(tmp_path):
    ctx = make_ctx(tmp_path, name="codex", env={"PATH": "/bin", "HOME": "/root", "CODEX_HOME": "/root/.codex"})
    inv = Codex().invocation(ctx)
    assert inv.stdin is None
    assert inv.env["CODEX_HOME"] == str(ctx.home / ".codex") and (ctx.home / ".codex").is_dir()
    user = Codex().invocation(make_ctx(tmp_path, name="codex", env={"PATH": "/bin", "HOME": "/root", "CODEX_HOME": "/root/.codex"}, options=RunOptions(isolated_home=False)))
    assert user.env["CODEX_HOME"] == "/root/.codex" and user.env["HOME"] == "/root"
    # its sandbox helper is refused under the temp folder, where a per-run CODEX_HOME lies: TMPDIR moves out of it
    assert inv.env["TMPDIR"] == str(ctx.home / "tmp") and (ctx.home / "tmp").is_dir() and "TMPDIR" not in user.env


def test_turn_completed_usage_is_cumulative_take_the_last():
    u = parse_codex(jsonl(
        {"type": "thread.started", "thread_id": "t"},
        {"type": "turn.started"},
        {"type": "turn.completed", "usage": {"input_tokens": 1000, "cached_input_tokens": 200, "output_tokens": 50}},
        {"type": "turn.started"},
        {"type": "item.completed", "item": {"id": "item_0", "type": "agent_message", "text": "second"}},
        {"type": "turn.completed", "usage": {"input_tokens": 2500, "cached_input_tokens": 1200, "output_tokens": 80, "reasoning_output_tokens": 30}},
    ))
    # nested OpenAI-style counters: input includes cached; output includes reasoning
    assert (u.input_tokens, u.cache_read_tokens, u.output_tokens, u.total_tokens) == (1300, 1200, 80, 2580)
    assert u.status == AgentStatus.COMPLETED and u.answer == "second"


def test_cache_writes_are_subtracted_from_input():
    u = parse_codex(sample("codex/exec-json-0.152.1-command-and-file-change-fullsend.jsonl"))
    assert (u.input_tokens, u.cache_read_tokens, u.cache_write_tokens, u.output_tokens) == (9, 27386, 13925, 295)
    assert u.total_tokens == 41615  # 41,320 input + 295 output, not 83k
    assert [t.name for t in u.tool_calls] == ["command_execution", "file_change"]
    assert u.answer == "done"


def test_legacy_id_msg_events():
    u = parse_codex(jsonl(
        {"model": "o4-mini", "sandbox": "read-only"},
        {"id": "0", "msg": {"type": "task_started"}},
        {"id": "0", "msg": {"type": "exec_command_begin", "call_id": "c1", "command": ["bash", "-lc", "ls -la"]}},
        {"id": "0", "msg": {"type": "token_count", "info": {"total_token_usage": {"input_tokens": 900, "cached_input_tokens": 100, "output_tokens": 40, "total_tokens": 940}}}},
        {"id": "0", "msg": {"type": "agent_message", "message": "interim"}},
        {"id": "0", "msg": {"type": "token_count", "info": {"total_token_usage": {"input_tokens": 2000, "cached_input_tokens": 500, "output_tokens": 70, "total_tokens": 2070}}}},
        {"id": "0", "msg": {"type": "task_complete", "last_agent_message": "all done"}},
    ))
    assert (u.input_tokens, u.cache_read_tokens, u.output_tokens, u.total_tokens) == (1500, 500, 70, 2070)
    assert u.answer == "all done" and u.status == AgentStatus.COMPLETED and u.turns == 2
    assert [(t.name, t.summary) for t in u.tool_calls] == [("command_execution", "bash -lc 'ls -la'")]
    assert u.model == "o4-mini"


def test_legacy_flat_token_counts_are_per_request_and_summed():
    u = parse_codex(jsonl(
        {"id": "0", "msg": {"type": "token_count", "input_tokens": 100, "cached_input_tokens": 0, "output_tokens": 10, "total_tokens": 110}},
        {"id": "0", "msg": {"type": "token_count", "input_tokens": 300, "cached_input_tokens": 100, "output_tokens": 20, "total_tokens": 320}},
        {"id": "0", "msg": {"type": "task_complete", "last_agent_message": "ok"}},
    ))
    assert (u.input_tokens, u.cache_read_tokens, u.output_tokens, u.total_tokens) == (300, 100, 30, 430)


def test_legacy_error_without_task_complete_is_failed():
    u = parse_codex(jsonl({"id": "0", "msg": {"type": "task_started"}}, {"id": "0", "msg": {"type": "error", "message": "model overloaded"}}))
    assert u.status == AgentStatus.FAILED and u.error == "model overloaded"


def test_error_item_and_error_event_are_not_failures():
    u = parse_codex(jsonl(
        {"type": "thread.started", "thread_id": "t"},
        {"type": "item.completed", "item": {"id": "item_0", "type": "error", "message": "metadata missing"}},
        {"type": "turn.started"},
        {"type": "error", "message": '{"message": "Reconnecting... 1/5"}'},
        {"type": "item.completed", "item": {"id": "item_1", "type": "agent_message", "text": "ok"}},
        {"type": "turn.completed", "usage": {"input_tokens": 10, "cached_input_tokens": 0, "output_tokens": 2}},
    ))
    assert u.status == AgentStatus.COMPLETED and u.error is None
    assert any("metadata missing" in w for w in u.parse_warnings) and any("Reconnecting" in w for w in u.parse_warnings)


def test_only_turn_failed_is_a_failure():
    u = parse_codex(sample("codex/exec-json-turn-failed-429-handwritten-fullsend.jsonl"))
    assert u.status == AgentStatus.FAILED and "429" in u.error


def test_stream_without_terminal_turn_event_is_incomplete():
    u = parse_codex(sample("codex/exec-json-0.46.0-no-terminal-event-agentcmd.jsonl"))
    assert u.status == AgentStatus.INCOMPLETE and "no terminal event" in u.error
    u = parse_codex(jsonl({"type": "turn.started"}, {"type": "turn.completed", "usage": {}}, {"type": "turn.started"}))
    assert u.status == AgentStatus.INCOMPLETE  # the second turn never ended


def test_unauthorized_turn_failure_is_an_auth_error():
    u = parse_codex(jsonl(
        {"type": "thread.started", "thread_id": "t"}, {"type": "turn.started"},
        {"type": "error", "message": "unexpected status 401 Unauthorized: Missing bearer or basic authentication in header"},
        {"type": "turn.failed", "error": {"message": "unexpected status 401 Unauthorized: Missing bearer or basic authentication in header"}},
    ))
    assert u.status == AgentStatus.ERROR and "401 Unauthorized" in u.error


def test_item_ids_of_different_turns_are_different_calls():
    item = {"id": "item_0", "type": "command_execution", "command": "make", "status": "completed"}
    u = parse_codex(jsonl(
        {"type": "turn.started"}, {"type": "item.started", "item": item}, {"type": "item.completed", "item": item},
        {"type": "turn.completed", "usage": {}}, {"type": "turn.started"}, {"type": "item.completed", "item": item},
        {"type": "turn.completed", "usage": {}},
    ))
    assert [t.summary for t in u.tool_calls] == ["make", "make"]


def test_sandbox_value_for_a_cli_without_a_sandbox_option_is_an_agent_error(tmp_path):
    with pytest.raises(AgentError, match="no sandbox option"):
        Claude().invocation(make_ctx(tmp_path, sandbox="read-only"))


READ_ONLY_OUT = "codex/captured-0.171.0-exec-json-read-only-refused.jsonl"
READ_ONLY_LOG = "codex/captured-0.171.0-session-log-read-only-refused.jsonl"


def test_a_refused_command_is_missing_from_the_stream_and_read_from_the_session_log():
    """Real 0.171.0 read-only run: the sandbox refused the scripted command, ``--json`` shows no tool call and
    no turn count; the session log has the call, two model responses and the model served."""
    alone = parse_codex(sample(READ_ONLY_OUT))
    assert (alone.tool_calls, alone.turns, alone.model) == ((), None, None)
    u = parse_codex(sample(READ_ONLY_OUT), "", sample(READ_ONLY_LOG))
    assert [(t.name, t.summary) for t in u.tool_calls] == [("command_execution", "printf 'hi\\n' > hello.txt")]
    assert (u.turns, u.model, u.input_tokens, u.output_tokens, u.status) == (2, "test", 2200, 60, AgentStatus.COMPLETED)


def test_the_run_copies_its_session_log_by_thread_id_with_secrets_redacted(tmp_path):
    ctx = make_ctx(tmp_path, name="codex", env={"PATH": "/bin", "HOME": "/root", "OPENAI_API_KEY": "sk-secret-value-123456"})
    day = ctx.home / ".codex" / "sessions" / "2026" / "12" / "01"
    day.mkdir(parents=True)
    log = sample(READ_ONLY_LOG)
    tid = "01a230e4-d909-77b2-b9fd-67e19020cf56"  # the thread.started id of the sample
    (day / f"rollout-2026-12-01T09-20-00-{tid}.jsonl").write_text(log.replace("DONE", "DONE sk-secret-value-123456"))
    (day / "rollout-2026-12-01T09-19-00-01a230e4-0000-0000-0000-000000000000.jsonl").write_text("{}\n")  # another session
    u = Codex().parse(sample(READ_ONLY_OUT), "", ctx)
    copied = (ctx.run_dir / "codex-session.jsonl").read_text()
    assert "sk-secret-value-123456" not in copied and "<redacted>" in copied
    assert [t.name for t in u.tool_calls] == ["command_execution"] and u.turns == 2
    # no thread id in the stream (or no such file): nothing copied, the stream alone is parsed
    (tmp_path / "b").mkdir()
    other = make_ctx(tmp_path / "b", name="codex")
    assert Codex().parse("", "", other).tool_calls == () and not (other.run_dir / "codex-session.jsonl").exists()
