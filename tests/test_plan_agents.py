"""``agentrace plan`` lists every agent: an agent whose arm (or baseline) has only infrastructure errors gets a
``no valid runs`` row saying so, instead of being left out of the plan."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_agentrace.cli import main
from pytest_agentrace.record.model import Outcome, Usage
from pytest_agentrace.record.runfile import write_run
from pytest_agentrace.stats import planning


def run(agent: str, arm: str, rep: int, status: str = "passed", tokens: int | None = 1000) -> Outcome:
    return Outcome(run_id=f"trial:q/{arm}/{agent}/r{rep}", kind="trial", source="t.toml", case="q", arm=arm, agent=agent,
                   rep=rep, status=status, usage=Usage(total_tokens=tokens), baseline_arm="base", session_id="s1",
                   exit_code=0 if status != "error" else None)


def outcomes() -> list[Outcome]:
    both = [run(a, arm, r, tokens=1000 + 10 * r) for a in ("claude", "codex") for arm in ("base", "docs") for r in (1, 2, 3)]
    gemini = [run("gemini", "base", r, tokens=900 + r) for r in (1, 2, 3)] + [run("gemini", "docs", r, "error", None) for r in (1, 2, 3)]
    return both + gemini


def test_plan_rows_list_an_agent_whose_arm_has_only_errors() -> None:
    rows = planning.plan_rows(outcomes(), resamples=200)
    assert [r.agent for r in rows] == ["claude", "codex", "gemini"]
    gemini = rows[-1]
    assert (gemini.arm, gemini.baseline, gemini.state, gemini.runs, gemini.more_runs) == ("docs", "base", "no valid runs", 0, None)
    assert gemini.state_text() == "no valid runs (every run of docs was an infrastructure error)"


def test_plan_command_shows_every_agent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for o in outcomes():
        write_run(tmp_path / "runs" / o.case / o.arm / o.agent / str(o.rep), o)
    assert main(["plan", "--results", str(tmp_path), "--format", "json", "--resamples", "200"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert sorted(r["agent"] for r in rows) == ["claude", "codex", "gemini"]
    assert next(r for r in rows if r["agent"] == "gemini")["state_text"].startswith("no valid runs")
