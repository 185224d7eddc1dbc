"""The base of the real CLI adapters (claude, codex, aider, gemini, opencode, cursor, copilot).

One place decides how a CLI is started, so the model double (offline runs against a scripted server) can add
its settings in the same spots:

- ``argv(ctx)`` builds the command line (non-interactive, machine-readable output, edit or read-only mode);
- ``environment(ctx)`` builds the environment: ``ctx.env`` plus a per-run HOME (``home_env``) unless
  ``--agentrace-agent-home=user``, plus the CLI's own fixed variables (``cli_env``);
- ``parse(stdout, stderr, ctx)`` reads the side files named in ``side_files`` from ``ctx.run_dir`` and calls
  ``parse_output(stdout, stderr, side)``, which the ``agentrace parse`` command calls directly.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import ClassVar

from pytest_agentrace.agents.base import Adapter, Invocation, RunContext
from pytest_agentrace.errors import AgentError
from pytest_agentrace.record.model import Usage
from pytest_agentrace.record.safefile import read_text


def prompt_positional(prompt: str) -> list[str]:
    """The prompt as a trailing positional argument; ``--`` first when it starts with ``-`` (a Markdown list
    item would otherwise be read as an option)."""
    return ["--", prompt] if prompt.startswith("-") else [prompt]


class CliAdapter(Adapter):
    """An adapter for a coding-agent CLI started as a subprocess (see the module docstring).

    Class attributes: ``executable`` (looked up on PATH), ``home_dirs`` (environment variables pointing at
    folders inside the per-run HOME, created before the run), ``user_config_vars`` (variables that point at
    the user's own config; removed when HOME is per run), ``side_files`` (``{key: file name in run_dir}``),
    ``sandbox_flag`` (the CLI option the agent's ``sandbox:`` value is passed to; None: not supported).
    """

    home_dirs: ClassVar[dict[str, str]] = {}
    user_config_vars: ClassVar[tuple[str, ...]] = ()
    side_files: ClassVar[dict[str, str]] = {}
    sandbox_flag: ClassVar[str | None] = None
    # how the model double drives it: a settings function (model_double.environment), or why it cannot (a string)
    offline: ClassVar[Callable[..., dict[str, str | None]] | str | None] = None

    def invocation(self, ctx: RunContext) -> Invocation:
        """argv + environment for one run, stdin closed. Raises ``AgentError`` for a ``sandbox:`` value the CLI
        has no option for."""
        sandbox = getattr(ctx.agent, "sandbox", None)
        if sandbox and not self.sandbox_flag:
            raise AgentError(f"agent {ctx.agent.label!r}: the {self.name} CLI has no sandbox option; remove 'sandbox: {sandbox}'")
        return Invocation(self.argv(ctx), self.environment(ctx), stdin=None)

    def argv(self, ctx: RunContext) -> list[str]:
        """The command line for ``ctx.prompt`` (``ctx.edits`` picks the permission mode)."""
        raise NotImplementedError

    def model_args(self, ctx: RunContext, flag: str = "--model") -> list[str]:
        return [flag, ctx.model] if ctx.model else []

    def sandbox_args(self, ctx: RunContext, default: str | None = None) -> list[str]:
        """``[sandbox_flag, value]`` for the agent's ``sandbox:`` (or ``default``); empty when neither is set."""
        value = getattr(ctx.agent, "sandbox", None) or default
        return [self.sandbox_flag, value] if value and self.sandbox_flag else []

    def environment(self, ctx: RunContext) -> dict[str, str]:
        """``ctx.env`` + per-run HOME variables (unless the user's HOME is shared) + ``cli_env``."""
        env = dict(ctx.env)
        if ctx.options.isolated_home:
            for var in self.user_config_vars:
                env.pop(var, None)
            env.update(self.home_env(Path(ctx.home)))
        env.update(self.cli_env(ctx))
        # the real cwd is the workspace; some CLIs (OpenCode 1.18.33) take their project folder from $PWD instead
        env["PWD"] = str(ctx.workspace)
        return env

    def home_env(self, home: Path) -> dict[str, str]:
        """HOME and the XDG base folders inside ``home`` (so a user's ``XDG_CONFIG_HOME`` cannot leak in), plus
        ``home_dirs``; creates the folders."""
        env = {
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_DATA_HOME": str(home / ".local" / "share"),
            "XDG_STATE_HOME": str(home / ".local" / "state"),
            "XDG_CACHE_HOME": str(home / ".cache"),
        }
        for var, rel in self.home_dirs.items():
            env[var] = str(home / rel)
        for var in ("XDG_CONFIG_HOME", *self.home_dirs):
            Path(env[var]).mkdir(parents=True, exist_ok=True)
        return env

    def cli_env(self, ctx: RunContext) -> dict[str, str]:
        """Variables this CLI always needs for a non-interactive run (none by default)."""
        return {}

    def parse(self, stdout: str, stderr: str, ctx: RunContext | None = None) -> Usage:
        side: dict[str, str] = {}
        if ctx is not None:
            for key, name in self.side_files.items():
                text = read_text(Path(ctx.agent_dir) / name)  # the agent wrote it: a link is never followed
                if text is not None:
                    side[key] = text
        return self.parse_output(stdout, stderr, side)

    def parse_output(self, stdout: str, stderr: str, side: Mapping[str, str] | None = None) -> Usage:
        """Parse a finished run: ``stdout``/``stderr`` text and side files by key (e.g. ``{"otel": text}``).
        Never raises for bad output (problems become ``parse_warnings``)."""
        raise NotImplementedError
