"""The offline agents every install has: ``noop`` (changes nothing) and ``oracle`` (the reference solution)."""

from __future__ import annotations

import subprocess
from typing import ClassVar

from pytest_agentrace.agents.base import Adapter, InProcessResult, RunContext
from pytest_agentrace.record.model import Usage
from pytest_agentrace.run.workspace import write_files

IN_PROCESS_NOTE = "an in-process agent calls no model"


class Noop(Adapter):
    """Changes nothing: the do-nothing baseline. A task whose checks pass under noop is invalid."""

    name: ClassVar[str] = "noop"

    def run_inprocess(self, ctx: RunContext) -> InProcessResult:
        return InProcessResult(0, "noop: no change made\n")

    def parse(self, stdout: str, stderr: str, ctx: RunContext | None = None) -> Usage:
        return Usage(answer="noop: no change made", turns=0, tokens_note=IN_PROCESS_NOTE)

    def version_argv(self, executable: str) -> None:
        return None


class Oracle(Adapter):
    """Applies the case's reference solution: ``solution_files`` then ``solution_patch`` (``git apply``).

    Exit code 1 with the reason when the case has no solution or the patch does not apply.
    """

    name: ClassVar[str] = "oracle"

    def run_inprocess(self, ctx: RunContext) -> InProcessResult:
        task = ctx.case
        files = getattr(task, "solution_files", None) or {}
        patch = task.solution_patch_text() if getattr(task, "solution_patch", None) else None
        if not files and patch is None:
            return InProcessResult(1, stderr="oracle: the task has no solution_files or solution_patch\n")
        if files:
            write_files(ctx.workspace, files)
        if patch is not None:
            proc = subprocess.run(
                ["git", "apply", "--whitespace=nowarn", "-"], input=patch if patch.endswith("\n") else patch + "\n",
                cwd=ctx.workspace, capture_output=True, text=True,
            )
            if proc.returncode != 0:
                return InProcessResult(1, stderr=f"oracle: solution_patch does not apply: {proc.stderr.strip()}\n")
        changed = ", ".join(files) or "patch"
        return InProcessResult(0, f"oracle: applied reference solution ({changed})\n")

    def parse(self, stdout: str, stderr: str, ctx: RunContext | None = None) -> Usage:
        return Usage(answer=stdout.strip() or None, turns=0, tokens_note=IN_PROCESS_NOTE, status="completed" if not stderr else "failed", error=stderr.strip() or None)

    def version_argv(self, executable: str) -> None:
        return None
