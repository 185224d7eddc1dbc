"""What the runner calls for one agent run with ``model_double:`` and/or ``--agentrace-offline``.

``start_session(spec, ctx)`` loads the agent's model script, starts a model double for this run (a server
costs about a millisecond, so every run gets its own and shares nothing), and returns an ``AgentSession``:

- ``apply(argv, env)`` adds the CLI's offline settings (``environment.offline_env``) to the adapter's argv and
  environment and, with ``--agentrace-offline`` where namespaces are permitted, wraps argv so the agent (and
  the double with it) runs in a loopback-only network namespace (``netns``);
- ``close()`` stops the double and completes ``model-double.json``.

Files in the run folder (beside ``run.json``): ``model-double-requests.jsonl`` (every request the CLI sent,
auth headers redacted, with the double's answer) and ``model-double.json`` (script, URL, offline mode, config
files written, request count).
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

from pytest_agentrace.agents import get_adapter
from pytest_agentrace.errors import AgentError, SpecError
from pytest_agentrace.model_double import netns
from pytest_agentrace.model_double.environment import (
    apply_env,
    insert_argv,
    offline_env,
)
from pytest_agentrace.model_double.script import load_script
from pytest_agentrace.model_double.server import ModelDouble

REQUEST_LOG = "model-double-requests.jsonl"
INFO_FILE = "model-double.json"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class AgentSession:
    """The model double and/or network namespace of one run (see the module docstring)."""

    def __init__(self, spec: Any, ctx: Any):
        self.spec, self.ctx = spec, ctx
        self.run_dir = Path(ctx.run_dir)
        self.script_path: str | None = spec.agent.model_double or ctx.options.model_double
        self.offline = ctx.options.offline
        self.netns_reason = ""
        self.sandboxed = ctx.options.sandbox is not None and ctx.options.sandbox.offline  # bwrap --unshare-net
        if self.offline and not self.sandboxed:
            prefix, self.netns_reason = netns.probe()
            self.offline = prefix is not None
        self.double: ModelDouble | None = None
        self.base_url: str | None = None
        self.port: int | None = None
        self.info: dict[str, Any] = {}
        if self.script_path:
            try:
                self.script = load_script(self.script_path)
            except SpecError as exc:
                raise AgentError(f"model_double: {exc}") from None
            log = self.run_dir / REQUEST_LOG
            log.unlink(missing_ok=True)
            if self.offline:  # the double starts inside the namespace, on a port free there
                self.port = _free_port()
            else:
                self.double = ModelDouble(self.script, log).start()
                self.port = self.double.port
            self.base_url = f"http://127.0.0.1:{self.port}"

    def apply(self, argv: list[str], env: dict[str, str]) -> tuple[list[str], dict[str, str]]:
        """``(argv, env)`` pointed at the double and, with ``--agentrace-offline``, in a namespace.
        Raises ``AgentError`` for a CLI the double cannot drive."""
        files: list[Path] = []
        if self.base_url is not None:
            settings = getattr(get_adapter(self.spec.agent.adapter), "offline", None)
            extra, updates, files = offline_env(settings, self.ctx, self.base_url)
            env = apply_env(env, updates)
            argv = insert_argv(argv, extra, self.ctx.prompt)
        if self.offline:
            log = str(self.run_dir / REQUEST_LOG) if self.script_path else None
            argv = netns.wrap(argv, self.script_path, log, self.port, unshare=not self.sandboxed)
        self.info = {
            "script": self.script_path, "script_name": getattr(getattr(self, "script", None), "name", None),
            "url": self.base_url, "adapter": self.spec.agent.adapter, "offline": self.offline,
            "offline_unavailable": self.netns_reason or None, "files": [str(p) for p in files],
        }
        self._write_info()
        return argv, env

    def close(self) -> None:
        """Stop the double; record how many requests it served."""
        if self.double is not None:
            self.double.stop()
        if self.script_path:
            log = self.run_dir / REQUEST_LOG
            try:
                self.info["requests"] = sum(1 for line in log.open(encoding="utf-8") if line.strip()) if log.exists() else 0
            except OSError:
                pass
        self._write_info()

    def _write_info(self) -> None:
        if not (self.script_path or self.offline or self.netns_reason):
            return
        (self.run_dir / INFO_FILE).write_text(json.dumps(self.info, indent=1), encoding="utf-8")


def start_session(spec: Any, ctx: Any) -> AgentSession:
    """Start what ``spec.agent.model_double`` and ``ctx.options.offline`` ask for. Raises ``AgentError``
    for a missing or invalid model script (the run then ends ``error`` with that reason)."""
    return AgentSession(spec, ctx)
