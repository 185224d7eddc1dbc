"""Helpers for the report and store tests: outcome records built field by field (no pytest session needed)."""

from __future__ import annotations

from typing import Any

from pytest_agentrace.model import CheckResult, Outcome, ToolCall, Usage


def outcome(case: str = "fix-add", agent: str = "a", rep: int = 1, status: str = "passed", score: float | None = None,
            kind: str = "task", arm: str = "default", session_id: str = "s1", seconds: float = 1.0,
            tokens: int | None = 1000, cost: float | None = 0.01, source: str = "/suite/task.yaml", **more: Any) -> Outcome:
    """One outcome with the given figures; ``more`` sets any other Outcome field."""
    usage = more.pop("usage", None) or Usage(
        input_tokens=None if tokens is None else tokens - 100, output_tokens=None if tokens is None else 100,
        total_tokens=tokens, cost_usd=cost, cost_source="reported" if cost is not None else "none", turns=3,
        tool_calls=(ToolCall("bash", "ls"), ToolCall("edit", "calc.py")), answer="done", cli_version="1.2.3",
    )
    checks = more.pop("checks", None)
    if checks is None and kind == "task":
        checks = {"tests": CheckResult("tests", "pytest -q", 0 if status == "passed" else 1, 0.5, "tests.log")}
    return Outcome(
        run_id=f"{kind}:{case}/{arm}/{agent}/r{rep}", kind=kind, source=source, case=case, arm=arm, agent=agent,
        rep=rep, status=status, score=score, session_id=session_id, seconds=seconds, usage=usage,
        checks=checks or {}, exit_code=0 if status != "error" else None, **{"started": "2026-01-01T00:00:00+00:00", **more},
    )
