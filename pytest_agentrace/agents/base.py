"""The adapter interface: build a CLI invocation for a prompt, parse the finished run's output.

An adapter is small and stateless. ``invocation`` returns the argv/env/stdin for one run;
``parse`` turns the captured stdout/stderr (plus side files in ``ctx.run_dir``) into a ``Usage``.
In-process agents (``noop``, ``oracle``) set ``executable = None`` and implement ``run_inprocess``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from pytest_agentrace.record.model import Usage
from pytest_agentrace.run.runspec import RunOptions

# every built-in CLI also gets these: the proxy and certificate settings of the network it runs on, its shell
ADAPTER_ENV = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy", "SSL_CERT_FILE",
               "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS", "REQUESTS_CA_BUNDLE", "SHELL", "NO_COLOR", "COLORTERM")


@dataclass(frozen=True)
class RunContext:
    """Everything an adapter may need for one run.

    ``workspace``: the agent's cwd (fresh clone). ``run_dir``: the run's record folder (the harness's; the agent
    never sees it). ``outbox``: the folder the agent's side files (analytics logs) go to, ``agent_dir``. ``home``: a per-run directory an adapter may use as HOME. ``prompt``: the exact
    text sent. ``edits``: whether file changes are allowed. ``env``: the base environment (os.environ plus the
    task's and agent's env). ``timeout``: seconds. ``task``: the Task or trial question (for oracle).
    """

    workspace: Path
    run_dir: Path
    home: Path
    prompt: str
    prompt_file: Path
    model: str | None
    edits: bool
    env: Mapping[str, str]
    timeout: float
    agent: Any = None  # spec.common.AgentSpec
    case: Any = None  # spec.task.Task or a trial question
    options: RunOptions = field(default_factory=RunOptions)
    outbox: Path | None = None  # the folder the agent writes its side files to (run.outbox); None: run_dir

    @property
    def agent_dir(self) -> Path:
        """Where the agent's side files go and are read back from: the outbox (copied into ``run_dir / "outbox"``
        after the run, ``run.outbox``), or ``run_dir`` when a caller made no outbox."""
        return self.outbox if self.outbox is not None else self.run_dir


@dataclass(frozen=True)
class Invocation:
    """How to start the agent: ``argv`` list, full ``env``, text for ``stdin`` (None: stdin closed)."""

    argv: list[str]
    env: dict[str, str]
    stdin: str | None = None


@dataclass(frozen=True)
class InProcessResult:
    """Result of an in-process agent: exit code (0 = ok) and a message shown as its output."""

    exit_code: int
    stdout: str = ""
    stderr: str = ""


class Adapter:
    """Base adapter. Subclasses set ``name`` and ``executable`` and override ``invocation`` and ``parse``."""

    name: ClassVar[str] = ""
    executable: ClassVar[str | None] = None
    # gitignore patterns for the CLI's own cache files in the workspace: not counted as the agent's change
    workspace_excludes: ClassVar[tuple[str, ...]] = ()
    # the session's variables this CLI gets besides the minimal environment (run.checks.minimal_env): name
    # prefixes of its own provider's settings, as its documentation lists them; custom commands get none
    env_keep: ClassVar[tuple[str, ...]] = ()

    def invocation(self, ctx: RunContext) -> Invocation:
        """Return the command for one run. Raises ``AgentError`` when the run cannot be configured."""
        raise NotImplementedError(f"adapter {self.name!r} has no CLI invocation")

    def parse(self, stdout: str, stderr: str, ctx: RunContext | None = None) -> Usage:
        """Read the run's ``Usage`` from its output; never raises for bad output (use ``parse_warnings``)."""
        return Usage(answer=last_text(stdout))

    def run_inprocess(self, ctx: RunContext) -> InProcessResult:
        """Run without a subprocess (only for ``executable = None``)."""
        raise NotImplementedError(f"adapter {self.name!r} is not an in-process agent")

    def version_argv(self, executable: str) -> list[str] | None:
        """argv printing the CLI version (``None``: no version to record)."""
        return [executable, "--version"]


def last_text(text: str, limit: int = 20000) -> str | None:
    """The output with trailing whitespace removed, its last ``limit`` characters (None when empty)."""
    text = text.strip()
    return text[-limit:] if text else None


_VERSION_RE = re.compile(r"(\d+\.\d+(?:\.\d+)?(?:[-+.][0-9A-Za-z.]+)?)")


def version_from(text: str) -> str | None:
    """The first dotted version number in ``text`` (``"codex-cli 0.171.0"`` -> ``"0.171.0"``)."""
    m = _VERSION_RE.search(text or "")
    return m.group(1) if m else None
