"""Per-CLI offline settings: point a real agent CLI at the model double and keep it off the network.

``offline_env(settings, ctx, base_url)`` (``settings``: the adapter's ``offline``) returns ``(extra_argv, env_updates, files_written)`` for one run:

- ``extra_argv``: options to add before the prompt (empty for every CLI so far: all of it goes through
  environment variables and config files, so the adapters' argv stays as it is);
- ``env_updates``: variables to set on top of the adapter's environment; a ``None`` value means *unset*
  (credentials a user's shell may hold, such as ``ANTHROPIC_AUTH_TOKEN``, so nothing real is ever sent);
  ``apply_env`` merges them;
- ``files_written``: config files written under ``ctx.home`` (the per-run HOME; CODEX_HOME is
  ``<home>/.codex``, XDG_CONFIG_HOME ``<home>/.config``, as ``agents.cliadapter.CliAdapter.home_env``).

Every CLI gets a fresh HOME, a dummy key (``DUMMY_KEY``), no proxy for loopback, and its telemetry, update,
plugin and model-list traffic switched off. The settings per CLI version are the ones
``model-double.md`` records (sections 1-6); the permission flags (edits without a privileged bypass) come from
the adapters. ``base_url`` is the run's root URL on the double (``http://127.0.0.1:PORT/r/<token>``, no
``/v1``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pytest_agentrace.errors import AgentError
from pytest_agentrace.run.checks import loopback_no_proxy

DUMMY_KEY = "sk-agentrace-model-double"
DOUBLE_MODEL = "test"
ENV_URL = "AGENTRACE_MODEL_DOUBLE_URL"
# credentials and provider switches that would send a run somewhere else, unset for every CLI
_FOREIGN = (
    "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN", "CLAUDE_CODE_USE_BEDROCK", "CLAUDE_CODE_USE_VERTEX",
    "CLAUDE_CONFIG_DIR", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID", "CODEX_API_KEY", "GOOGLE_API_KEY",
    "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_CLOUD_PROJECT", "GOOGLE_APPLICATION_CREDENTIALS", "GH_TOKEN", "GITHUB_TOKEN",
    "COPILOT_GITHUB_TOKEN", "OPENCODE_CONFIG_CONTENT", "OPENCODE_CONFIG_DIR", "AIDER_CONFIG",
    "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy",
)


def _write(path: Path, text: str, written: list[Path]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    written.append(path)


def common_env(home: Path, base_url: str, workspace: Path | None = None) -> dict[str, str | None]:
    """HOME and XDG folders inside ``home``, no proxy for loopback, foreign credentials unset, and ``PWD``
    set to the workspace (OpenCode 1.18.33 takes its project folder from ``$PWD``, not from its real cwd: with
    the harness's PWD it edited the harness's folder)."""
    env: dict[str, str | None] = dict.fromkeys(_FOREIGN)
    if workspace is not None:
        env["PWD"] = str(workspace)
    env.update({
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        # the same value the checks get (run.checks.minimal_env): the session's list plus loopback
        "NO_PROXY": loopback_no_proxy(os.environ.get("no_proxy") or os.environ.get("NO_PROXY")),
        "no_proxy": loopback_no_proxy(os.environ.get("no_proxy") or os.environ.get("NO_PROXY")),
        "DO_NOT_TRACK": "1",
        ENV_URL: base_url,
    })
    return env


def claude_env(ctx: Any, base: str, home: Path, written: list[Path]) -> dict[str, str | None]:
    """Claude Code 2.1.197 (model-double.md section 1): ANTHROPIC_BASE_URL/API_KEY, non-essential traffic,
    telemetry, error reporting and the auto-updater off; onboarding marked done in ``~/.claude.json``."""
    _write(home / ".claude.json", json.dumps({"hasCompletedOnboarding": True, "bypassPermissionsModeAccepted": False}), written)
    return {
        "ANTHROPIC_BASE_URL": base, "ANTHROPIC_API_KEY": DUMMY_KEY,
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1",
        "DISABLE_ERROR_REPORTING": "1", "DISABLE_BUG_COMMAND": "1", "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1",
        # a scripted HTTP error is retried twice, not ten times with back-off (minutes)
        "CLAUDE_CODE_MAX_RETRIES": "2",
    }


def _toml(value: str) -> str:
    return json.dumps(value)  # a JSON string is a valid TOML basic string


def codex_env(ctx: Any, base: str, home: Path, written: list[Path]) -> dict[str, str | None]:
    """Codex 0.171.0 (section 2): a ``scripted`` provider with ``wire_api = "responses"`` in
    ``$CODEX_HOME/config.toml`` (``"chat"`` is rejected), approval ``never``, analytics off, the workspace
    trusted. The adapter adds ``--disable plugins/remote_plugin/apps`` (those the build knows) and ``-c analytics.enabled=false``."""
    codex_home = home / ".codex"
    ws = str(Path(ctx.workspace))
    text = "\n".join([
        f"model = {_toml(ctx.model or DOUBLE_MODEL)}",
        'model_provider = "agentrace_double"',
        'approval_policy = "never"',
        "",
        "[analytics]",
        "enabled = false",
        "",
        "[model_providers.agentrace_double]",
        'name = "agentrace model double"',
        f"base_url = {_toml(base + '/v1')}",
        'env_key = "AGENTRACE_DOUBLE_API_KEY"',
        'wire_api = "responses"',
        "request_max_retries = 2",
        "stream_max_retries = 2",
        "",
        f"[projects.{_toml(ws)}]",
        'trust_level = "trusted"',
        "",
    ])
    _write(codex_home / "config.toml", text, written)
    return {"CODEX_HOME": str(codex_home), "AGENTRACE_DOUBLE_API_KEY": DUMMY_KEY, "OPENAI_API_KEY": None}


def gemini_env(ctx: Any, base: str, home: Path, written: list[Path]) -> dict[str, str | None]:
    """Gemini CLI 0.61.0 (section 4): GEMINI_API_KEY + GOOGLE_GEMINI_BASE_URL (plain http is allowed for
    127.0.0.1), workspace trusted, ``~/.gemini/settings.json`` with API-key auth, usage statistics,
    telemetry and update checks off, at most 3 attempts per model request."""
    settings = {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        # maxAttempts: a scripted HTTP error is tried 3 times, not 10 with back-off (minutes)
        "general": {"disableAutoUpdate": True, "disableUpdateNag": True, "maxAttempts": 3},
    }
    _write(home / ".gemini" / "settings.json", json.dumps(settings, indent=1), written)
    return {
        "GEMINI_API_KEY": DUMMY_KEY, "GOOGLE_GEMINI_BASE_URL": base, "GEMINI_CLI_TRUST_WORKSPACE": "true",
        "GEMINI_TELEMETRY_ENABLED": "false",
    }


# OpenCode's global config folder as its npm step sees a finished install (see ``opencode_env``)
OPENCODE_PLUGIN_LOCK = {"name": "agentrace-opencode-config", "lockfileVersion": 3, "requires": True,
                        "packages": {"": {"dependencies": {"@opencode-ai/plugin": "*"}}}}


def opencode_env(ctx: Any, base: str, home: Path, written: list[Path]) -> dict[str, str | None]:
    """OpenCode 1.18.33 (section 5): a ``scripted`` provider through the bundled ``@ai-sdk/openai-compatible``,
    edits and bash allowed, autoupdate and sharing off, no models.dev fetch, no LSP downloads.

    No npm install at start: for every config folder it may write (the global ``~/.config/opencode`` among them),
    OpenCode 1.18.33 installs ``@opencode-ai/plugin`` in the background (its ``Npm.install``: it reifies when the
    folder has no ``node_modules`` or its ``package-lock.json`` lacks the package), which contacts
    ``registry.npmjs.org`` whatever ``OPENCODE_DISABLE_AUTOUPDATE``, ``OPENCODE_DISABLE_DEFAULT_PLUGINS`` or
    ``OPENCODE_PURE`` say (no documented switch stops it; checked with the real CLI behind a logging proxy). The
    network gate refused it, and a failed run's reason then named ``registry.npmjs.org:443``. An empty
    ``node_modules`` and a lock that lists the package (``OPENCODE_PLUGIN_LOCK``) leave nothing to install; a fresh
    HOME has no plugin that would import it."""
    model = ctx.model or DOUBLE_MODEL
    config = {
        "$schema": "https://opencode.ai/config.json",
        "autoupdate": False,
        "share": "disabled",
        "permission": {"edit": "allow", "bash": "allow"},
        "provider": {"scripted": {
            "npm": "@ai-sdk/openai-compatible", "name": "agentrace model double",
            "options": {"baseURL": base + "/v1", "apiKey": DUMMY_KEY},
            "models": {model: {"name": model, "tool_call": True}},
        }},
        "model": f"scripted/{model}",
        "small_model": f"scripted/{model}",
    }
    path = home / ".config" / "opencode" / "opencode.json"
    _write(path, json.dumps(config, indent=1), written)
    _write(path.with_name("package-lock.json"), json.dumps(OPENCODE_PLUGIN_LOCK, indent=1), written)
    (path.parent / "node_modules").mkdir(exist_ok=True)
    return {
        "OPENCODE_CONFIG": str(path), "OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1", "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
    }


def copilot_env(ctx: Any, base: str, home: Path, written: list[Path]) -> dict[str, str | None]:
    """Copilot CLI 1.0.102 (section 6): its documented offline/BYOK mode (``COPILOT_OFFLINE`` skips GitHub
    auth, telemetry, web tools, the GitHub MCP server and auto-update) with an OpenAI-compatible provider."""
    return {
        "COPILOT_OFFLINE": "true", "COPILOT_PROVIDER_BASE_URL": base + "/v1", "COPILOT_PROVIDER_TYPE": "openai",
        "COPILOT_PROVIDER_API_KEY": DUMMY_KEY, "COPILOT_MODEL": ctx.model or DOUBLE_MODEL, "COPILOT_AUTO_UPDATE": "false",
    }


def aider_env(ctx: Any, base: str, home: Path, written: list[Path]) -> dict[str, str | None]:
    """Aider 0.86.2 (section 3), all through its ``AIDER_*`` variables: an ``openai/test`` model on the
    double with a model-metadata file (stops the price-list fetch and gives a cost), litellm's local cost map,
    no update check, analytics off (``--analytics-log`` still writes locally), no ``.gitignore`` edit, and
    ``--no-stream``: only then does aider report the server's token counts."""
    model = ctx.model or f"openai/{DOUBLE_MODEL}"
    meta = {model: {
        "max_input_tokens": 128000, "max_tokens": 4096, "max_output_tokens": 4096,
        "input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6, "litellm_provider": "openai", "mode": "chat",
    }}
    path = home / ".aider.model.metadata.json"
    _write(path, json.dumps(meta, indent=1), written)
    return {
        "OPENAI_API_BASE": base + "/v1", "OPENAI_API_KEY": DUMMY_KEY, "AIDER_OPENAI_API_BASE": base + "/v1",
        "AIDER_OPENAI_API_KEY": DUMMY_KEY, "AIDER_MODEL": model, "AIDER_MODEL_METADATA_FILE": str(path),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True", "AIDER_CHECK_UPDATE": "false", "AIDER_ANALYTICS_DISABLE": "true",
        "AIDER_SHOW_RELEASE_NOTES": "false", "AIDER_GITIGNORE": "false", "AIDER_SHOW_MODEL_WARNINGS": "false",
        "AIDER_STREAM": "false", "AIDER_CHECK_MODEL_ACCEPTS_SETTINGS": "false",
        # aider's history files go to the per-run HOME, not into the workspace (where they count as changes)
        "AIDER_CHAT_HISTORY_FILE": str(home / ".aider.chat.history.md"),
        "AIDER_INPUT_HISTORY_FILE": str(home / ".aider.input.history"),
        # no repo map: the double does not read it, and its tags cache (.aider.tags.cache.v4/) would be a change
        "AIDER_MAP_TOKENS": "0",
    }


def generic_env(ctx: Any, base: str, home: Path, written: list[Path]) -> dict[str, str | None]:
    """Any other agent (custom commands): the usual provider variables all pointing at the double."""
    return {
        "ANTHROPIC_BASE_URL": base, "ANTHROPIC_API_KEY": DUMMY_KEY, "OPENAI_BASE_URL": base + "/v1",
        "OPENAI_API_BASE": base + "/v1", "OPENAI_API_KEY": DUMMY_KEY, "GOOGLE_GEMINI_BASE_URL": base,
        "GEMINI_API_KEY": DUMMY_KEY,
    }


OfflineSettings = Callable[[Any, str, Path, list[Path]], dict[str, str | None]]


def offline_env(settings: OfflineSettings | str | None, ctx: Any, base_url: str,
                key: str = DUMMY_KEY) -> tuple[list[str], dict[str, str | None], list[Path]]:
    """``(extra_argv, env_updates, files_written)`` that point a CLI at the double at ``base_url`` for the run
    described by ``ctx`` (an ``agents.base.RunContext``; uses ``home``, ``workspace``, ``model``). Writes config
    files under ``ctx.home``.

    ``settings`` is the CLI's own settings function (its adapter's ``offline``: ``claude_env``, ...), None for a
    custom command (``generic_env``'s provider variables), or a string: why this CLI cannot be pointed at a custom
    endpoint, raised as ``AgentError``. ``key``: the provider key the CLI is given (the run's own double's key); the
    settings write ``DUMMY_KEY`` and it is put in its place, in the variables and in the config files written.
    """
    if isinstance(settings, str):
        raise AgentError(f"model_double: {settings}")
    home = Path(ctx.home)
    home.mkdir(parents=True, exist_ok=True)
    base = base_url.rstrip("/")
    written: list[Path] = []
    env = common_env(home, base, Path(ctx.workspace))
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        Path(env[var] or home).mkdir(parents=True, exist_ok=True)
    env.update((settings or generic_env)(ctx, base, home, written))
    if key != DUMMY_KEY:
        env = {k: (v.replace(DUMMY_KEY, key) if isinstance(v, str) else v) for k, v in env.items()}
        for path in written:
            text = path.read_text(encoding="utf-8")
            if DUMMY_KEY in text:
                path.write_text(text.replace(DUMMY_KEY, key), encoding="utf-8")
    return [], env, written


def apply_env(env: Mapping[str, str], updates: Mapping[str, str | None]) -> dict[str, str]:
    """``env`` with ``updates`` applied (``None`` removes the variable)."""
    out = dict(env)
    for k, v in updates.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return out


def insert_argv(argv: list[str], extra: list[str], prompt: str) -> list[str]:
    """``argv`` with ``extra`` inserted before the prompt argument (before a ``--`` that precedes it), or
    appended when the prompt is not an argument (read from stdin or a file)."""
    if not extra:
        return list(argv)
    for i in range(len(argv) - 1, 0, -1):
        if argv[i] == prompt:
            at = i - 1 if argv[i - 1] == "--" else i
            return [*argv[:at], *extra, *argv[at:]]
    return [*argv, *extra]
