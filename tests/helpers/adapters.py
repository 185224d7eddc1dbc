"""Helpers for the adapter tests: a RunContext for argv/env checks, JSON-lines builders, sample paths."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytest_agentrace.agents.base import RunContext, RunOptions
from pytest_agentrace.spec.common import AgentSpec

SAMPLES = Path(__file__).parents[1] / "samples"


def sample(rel: str) -> str:
    """Text of ``tests/samples/<rel>``."""
    return (SAMPLES / rel).read_text(encoding="utf-8")


def jsonl(*events: dict[str, Any]) -> str:
    """Events as JSON lines (what a CLI prints)."""
    return "".join(json.dumps(e) + "\n" for e in events)


def make_ctx(
    tmp_path: Path, *, name: str = "claude", prompt: str = "fix the bug", model: str | None = None, edits: bool = True,
    env: dict[str, str] | None = None, options: RunOptions | None = None, sandbox: str | None = None,
) -> RunContext:
    """A RunContext with real folders under ``tmp_path`` (workspace, run dir, per-run home)."""
    for d in ("ws", "run", "home"):
        (tmp_path / d).mkdir(exist_ok=True)
    agent = AgentSpec(name=name, id=name + (f":{model}" if model else ""), model=model, sandbox=sandbox)
    return RunContext(
        workspace=tmp_path / "ws", run_dir=tmp_path / "run", home=tmp_path / "home", prompt=prompt,
        prompt_file=tmp_path / "run" / "prompt.txt", model=model, edits=edits,
        env=env if env is not None else {"PATH": "/usr/bin:/bin", "HOME": "/home/someone"}, timeout=60.0,
        agent=agent, options=options or RunOptions(),
    )
