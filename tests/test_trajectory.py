"""ATIF trajectories (``record.trajectory``): the mapping from a run's record, validity against Harbor's schema and
validators, redaction, the manifest, and ``agentrace export --format atif`` (one run, a results folder, older runs
without trajectory.json), in sessions serial and with ``-n 2``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers.atif import HARBOR_PYTHON, assert_valid, atif_errors, check_folder, harbor_errors

from pytest_agentrace.cli import main
from pytest_agentrace.record.manifest import verify
from pytest_agentrace.record.model import Outcome, ToolCall, Usage
from pytest_agentrace.record.trajectory import build_trajectory, load_trajectory

EXAMPLES = Path(__file__).parents[1] / "example_suites" / "tasks"
KEY = "sk-ant-api03-" + "x" * 90  # a real key's length (record.redact matches 80 or more)


def outcome(**usage) -> Outcome:
    return Outcome(run_id="task:t/default/codex:gpt-5/r1", kind="task", source="t.yaml", case="t", arm="default",
                   agent="codex:gpt-5", rep=1, status="passed", model="gpt-5", started="2026-12-01T10:00:00+00:00",
                   seconds=3.5, exit_code=0, session_id="s1", usage=Usage(**usage))


def test_a_cli_run_maps_to_a_user_and_an_agent_step() -> None:
    o = outcome(input_tokens=1000, output_tokens=60, cache_read_tokens=200, cache_write_tokens=50, total_tokens=1310,
                cost_usd=0.0125, cost_source="reported", turns=3, cli_version="0.171.0", model="gpt-5.4",
                answer="DONE", tool_calls=(ToolCall("shell", "ls"), ToolCall("apply_patch", "")))
    doc = build_trajectory(o, "fix it")
    assert atif_errors(doc) == []
    assert doc["agent"] == {"name": "codex", "version": "0.171.0", "model_name": "gpt-5.4",
                            "extra": doc["agent"]["extra"]} and doc["agent"]["extra"]["agent_id"] == "codex:gpt-5"
    user, agent = doc["steps"]
    assert user == {"step_id": 1, "source": "user", "message": "fix it", "timestamp": "2026-12-01T10:00:00+00:00"}
    assert agent["message"] == "DONE" and agent["llm_call_count"] == 3
    assert agent["tool_calls"] == [
        {"tool_call_id": "call-1", "function_name": "shell", "arguments": {}, "extra": {"summary": "ls"}},
        {"tool_call_id": "call-2", "function_name": "apply_patch", "arguments": {}}]
    # ATIF counts cached tokens in the prompt: 1000 uncached + 200 read + 50 written
    assert agent["metrics"] == {"prompt_tokens": 1250, "completion_tokens": 60, "cached_tokens": 200,
                                "cost_usd": 0.0125, "extra": {"cache_write_tokens": 50}}
    assert doc["final_metrics"] == {"total_prompt_tokens": 1250, "total_completion_tokens": 60,
                                    "total_cached_tokens": 200, "total_cost_usd": 0.0125, "total_steps": 2,
                                    "extra": {"turns": 3, "total_tokens": 1310, "cache_write_tokens": 50,
                                              "cost_source": "reported"}}
    assert (doc["schema_version"], doc["session_id"], doc["trajectory_id"]) == ("ATIF-v1.8", "s1", o.run_id)


def test_what_the_output_does_not_say_stays_out() -> None:
    doc = build_trajectory(outcome(tokens_note="a plain command reports no token counts"), None)
    assert atif_errors(doc) == []
    assert doc["agent"]["version"] == "unknown" and doc["steps"][0]["message"] == ""
    assert "not recorded" in doc["notes"]
    agent = doc["steps"][1]
    assert "metrics" not in agent and "llm_call_count" not in agent and "tool_calls" not in agent
    note = "a plain command reports no token counts"
    assert doc["final_metrics"] == {"total_steps": 2, "extra": {"tokens_note": note}}


def test_in_process_agents_call_no_model_and_a_run_that_never_started_has_no_agent_step() -> None:
    noop = outcome(turns=0, answer="noop: no change made").replace(agent="noop", model=None)
    doc = build_trajectory(noop, "p")
    assert atif_errors(doc) == [] and doc["agent"]["version"] != "unknown"
    assert doc["steps"][1]["llm_call_count"] == 0 and "metrics" not in doc["steps"][1]
    error = Outcome(run_id="task:t/default/claude/r1", kind="task", source="t.yaml", case="t", arm="default",
                    agent="claude", rep=1, status="error", reason="workspace: clone failed")
    doc = build_trajectory(error, "p")
    assert atif_errors(doc) == [] and [s["source"] for s in doc["steps"]] == ["user"]
    assert doc["extra"]["reason"] == "workspace: clone failed"


def test_the_validator_can_fail() -> None:
    doc = build_trajectory(outcome(turns=0, input_tokens=5, output_tokens=1, answer="x"), "p")
    doc["steps"][1]["metrics"] = {"prompt_tokens": 5}
    doc["steps"][0]["tool_calls"] = []
    doc["steps"].append({"step_id": 5, "source": "system", "message": "", "observation": {
        "results": [{"source_call_id": "call-9"}]}})
    errors = atif_errors(doc)
    assert "steps[2].step_id: expected 3, got 5" in errors and "steps[0].tool_calls: only on agent steps" in errors
    assert "steps[1].metrics: not with llm_call_count 0" in errors and any("call-9" in e for e in errors)
    assert atif_errors({"schema_version": "ATIF-v9", "agent": {"name": "x"}, "steps": []})
    if HARBOR_PYTHON:
        assert len(harbor_errors([doc])) == 1


def test_trajectories_are_redacted() -> None:
    doc = build_trajectory(outcome(answer=f"the key is {KEY}", tool_calls=(ToolCall("Bash", f"curl -H {KEY}"),)),
                           f"use {KEY}")
    assert KEY not in json.dumps(doc) and "<redacted>" in doc["steps"][0]["message"]


def test_every_run_gets_a_trajectory_that_is_hashed_and_exported(pytester: pytest.Pytester, xdist: list[str],
                                                                 capsys: pytest.CaptureFixture) -> None:
    shutil.copytree(EXAMPLES / "slugify", pytester.path / "slugify")
    res = pytester.runpytest("--agentrace", "--agentrace-out", "out", "slugify", "--agentrace-reps", "2", *xdist)
    res.assert_outcomes(passed=2, xfailed=2)
    out = pytester.path / "out"
    assert check_folder(out) == 4
    assert verify(out).ok
    manifests = "".join(p.read_text() for p in (out / "manifests").glob("*.jsonl"))
    assert manifests.count('"trajectory.json"') == 4
    run = out / "runs/slugify/default/oracle/2"
    kept = (run / "trajectory.json").read_text()
    (run / "trajectory.json").write_text(kept.replace("slugify", "other"))
    assert not verify(out).ok  # the manifest holds its hash: a changed trajectory is found
    (run / "trajectory.json").write_text(kept)
    assert main(["export", str(out), "--format", "atif", "-o", str(pytester.path / "all.jsonl")]) == 0
    lines = [json.loads(x) for x in (pytester.path / "all.jsonl").read_text().splitlines()]
    assert [d["trajectory_id"] for d in lines] == [f"task:slugify/default/{a}/r{r}" for a in ("noop", "oracle")
                                                   for r in (1, 2)]
    assert_valid(lines)
    capsys.readouterr()
    # an older run without trajectory.json is exported from its run.json: the same document
    first = out / "runs/slugify/default/noop/1"
    written = json.loads((first / "trajectory.json").read_text())
    (first / "trajectory.json").unlink()
    assert load_trajectory(first) == written
    assert main(["export", str(first), "--format", "atif"]) == 0
    assert json.loads(capsys.readouterr().out) == written
    assert main(["export", str(pytester.path / "nothing"), "--format", "atif"]) == 2
