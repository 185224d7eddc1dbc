"""Per-CLI offline settings: config files under the per-run HOME, dummy keys, foreign credentials unset."""

from __future__ import annotations

import json
import tomllib
import types

import pytest

from pytest_agentrace.agents import get_adapter
from pytest_agentrace.errors import AgentError
from pytest_agentrace.model_double.environment import (
    DUMMY_KEY,
    apply_env,
    insert_argv,
    offline_env,
)

BASE = "http://127.0.0.1:4321"


@pytest.fixture
def ctx(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    return types.SimpleNamespace(home=tmp_path / "home", workspace=ws, model=None)


def test_every_cli_gets_a_fresh_home_no_proxy_and_no_foreign_credentials(ctx) -> None:
    user = {"HOME": "/root", "ANTHROPIC_AUTH_TOKEN": "real", "GH_TOKEN": "real", "HTTPS_PROXY": "http://proxy:3128", "PATH": "/bin", "PWD": "/somewhere"}
    for name in ("claude", "codex", "gemini", "opencode", "copilot", "aider", "my-custom-agent"):
        settings = get_adapter(name).offline if name != "my-custom-agent" else None  # a custom command has none
        extra, updates, _ = offline_env(settings, ctx, BASE)
        env = apply_env(user, updates)
        assert extra == []
        assert env["HOME"] == str(ctx.home) and env["XDG_CONFIG_HOME"] == str(ctx.home / ".config")
        assert env["PWD"] == str(ctx.workspace) and env["PATH"] == "/bin"
        assert "ANTHROPIC_AUTH_TOKEN" not in env and "GH_TOKEN" not in env and "HTTPS_PROXY" not in env
        assert "127.0.0.1" in env["NO_PROXY"] and env["AGENTRACE_MODEL_DOUBLE_URL"] == BASE
        assert not any(v == "real" for v in env.values())


def test_claude(ctx) -> None:
    _, env, files = offline_env(get_adapter("claude").offline, ctx, BASE)
    assert env["ANTHROPIC_BASE_URL"] == BASE and env["ANTHROPIC_API_KEY"] == DUMMY_KEY
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1" and env["DISABLE_TELEMETRY"] == "1"
    assert env["CLAUDE_CODE_MAX_RETRIES"] == "2"
    assert files == [ctx.home / ".claude.json"] and json.loads(files[0].read_text())["hasCompletedOnboarding"] is True


def test_codex_config_is_valid_toml_with_a_responses_provider_and_a_trusted_workspace(ctx) -> None:
    _, env, files = offline_env(get_adapter("codex").offline, ctx, BASE)
    assert env["CODEX_HOME"] == str(ctx.home / ".codex") and env["AGENTRACE_DOUBLE_API_KEY"] == DUMMY_KEY
    config = tomllib.loads(files[0].read_text())
    assert files[0] == ctx.home / ".codex" / "config.toml"
    assert config["model_provider"] == "agentrace_double" and config["approval_policy"] == "never"
    provider = config["model_providers"]["agentrace_double"]
    assert provider["base_url"] == BASE + "/v1" and provider["wire_api"] == "responses" and provider["env_key"] == "AGENTRACE_DOUBLE_API_KEY"
    assert config["projects"][str(ctx.workspace)] == {"trust_level": "trusted"} and config["analytics"] == {"enabled": False}


def test_gemini(ctx) -> None:
    _, env, files = offline_env(get_adapter("gemini").offline, ctx, BASE)
    assert env["GOOGLE_GEMINI_BASE_URL"] == BASE and env["GEMINI_API_KEY"] == DUMMY_KEY and env["GEMINI_CLI_TRUST_WORKSPACE"] == "true"
    settings = json.loads((ctx.home / ".gemini" / "settings.json").read_text())
    assert settings["security"]["auth"]["selectedType"] == "gemini-api-key"
    assert settings["telemetry"] == {"enabled": False} and settings["privacy"]["usageStatisticsEnabled"] is False
    assert settings["general"]["maxAttempts"] == 3 and files


def test_opencode(ctx) -> None:
    _, env, files = offline_env(get_adapter("opencode").offline, ctx, BASE)
    config = json.loads(files[0].read_text())
    assert env["OPENCODE_CONFIG"] == str(files[0]) == str(ctx.home / ".config" / "opencode" / "opencode.json")
    assert config["provider"]["scripted"]["options"] == {"baseURL": BASE + "/v1", "apiKey": DUMMY_KEY}
    assert config["model"] == "scripted/test" and config["permission"] == {"edit": "allow", "bash": "allow"}
    assert config["autoupdate"] is False and env["OPENCODE_DISABLE_MODELS_FETCH"] == "1"
    # its global config folder holds a finished install of @opencode-ai/plugin: no npm contact at start
    folder = ctx.home / ".config" / "opencode"
    assert (folder / "node_modules").is_dir() and folder / "package-lock.json" in files
    lock = json.loads((folder / "package-lock.json").read_text())
    assert "@opencode-ai/plugin" in lock["packages"][""]["dependencies"]


def test_copilot(ctx) -> None:
    _, env, files = offline_env(get_adapter("copilot").offline, ctx, BASE)
    assert files == [] and env["COPILOT_OFFLINE"] == "true" and env["COPILOT_PROVIDER_BASE_URL"] == BASE + "/v1"
    assert env["COPILOT_PROVIDER_TYPE"] == "openai" and env["COPILOT_PROVIDER_API_KEY"] == DUMMY_KEY and env["COPILOT_MODEL"] == "test"


def test_aider_streams_off_metadata_file_history_in_home(ctx) -> None:
    ctx.model = "openai/other"
    _, env, files = offline_env(get_adapter("aider").offline, ctx, BASE)
    assert env["AIDER_MODEL"] == "openai/other" and env["AIDER_STREAM"] == "false" and env["OPENAI_API_BASE"] == BASE + "/v1"
    meta = json.loads(files[0].read_text())
    assert env["AIDER_MODEL_METADATA_FILE"] == str(files[0]) and meta["openai/other"]["litellm_provider"] == "openai"
    assert env["AIDER_CHAT_HISTORY_FILE"].startswith(str(ctx.home)) and env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"


def test_cursor_cannot_be_driven(ctx) -> None:
    with pytest.raises(AgentError, match="cursor-agent has no setting for a custom model endpoint"):
        offline_env(get_adapter("cursor").offline, ctx, BASE)


def test_insert_argv_goes_before_the_prompt() -> None:
    assert insert_argv(["c", "-p", "hi", "--json"], ["--x", "1"], "hi") == ["c", "-p", "--x", "1", "hi", "--json"]
    assert insert_argv(["c", "exec", "--", "-dash prompt"], ["--x"], "-dash prompt") == ["c", "exec", "--x", "--", "-dash prompt"]
    assert insert_argv(["c", "--stdin"], ["--x"], "not in argv") == ["c", "--stdin", "--x"]
    assert insert_argv(["c", "hi"], [], "hi") == ["c", "hi"]
