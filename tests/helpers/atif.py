"""Validate ATIF trajectories against Harbor's reference: the committed JSON Schema of Harbor 0.26.0's ``Trajectory``
model plus the checks of its validators (``tests/samples/atif/README.md``), and, when ``AGENTRACE_HARBOR_PYTHON``
names a Python with Harbor's models, ``Trajectory.model_validate`` itself in that interpreter. Also compares a
trajectory with its run's ``run.json`` (tool calls, turns, tokens)."""

from __future__ import annotations

import datetime as _dt
import json
import os
import subprocess
from pathlib import Path
from typing import Any

SCHEMA = Path(__file__).parents[1] / "samples" / "atif" / "atif-v1.8.schema.json"
AGENT_ONLY = ("model_name", "reasoning_effort", "reasoning_content", "tool_calls", "metrics")
HARBOR_PYTHON = os.environ.get("AGENTRACE_HARBOR_PYTHON")


def atif_errors(doc: Any) -> list[str]:
    """Why ``doc`` is not a valid ATIF trajectory (empty: it is)."""
    import jsonschema

    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
              for e in jsonschema.Draft202012Validator(schema).iter_errors(doc)]
    if errors or not isinstance(doc, dict):
        return errors
    for i, step in enumerate(doc["steps"]):
        if step["step_id"] != i + 1:
            errors.append(f"steps[{i}].step_id: expected {i + 1}, got {step['step_id']}")
        if step["source"] != "agent":
            errors += [f"steps[{i}].{k}: only on agent steps" for k in AGENT_ONLY if step.get(k) is not None]
        elif step.get("llm_call_count") == 0:
            errors += [f"steps[{i}].{k}: not with llm_call_count 0" for k in ("metrics", "reasoning_content")
                       if step.get(k) is not None]
        ids = {t["tool_call_id"] for t in step.get("tool_calls") or ()}
        for r in (step.get("observation") or {}).get("results", ()):
            if r.get("source_call_id") is not None and r["source_call_id"] not in ids:
                errors.append(f"steps[{i}].observation: source_call_id {r['source_call_id']!r} is no tool call")
        if step.get("timestamp") is not None:
            try:
                _dt.datetime.fromisoformat(step["timestamp"].replace("Z", "+00:00"))
            except ValueError as exc:
                errors.append(f"steps[{i}].timestamp: {exc}")
    return errors


_HARBOR_CHECK = """
import json, sys
from harbor.models.trajectories import Trajectory
bad = []
for line in sys.stdin:
    if line.strip():
        doc = json.loads(line)
        try:
            back = Trajectory.model_validate(doc).to_json_dict()
        except Exception as exc:
            bad.append(str(exc))
        else:
            if back != doc:
                bad.append(f"{doc.get('trajectory_id')}: does not round-trip: {back}")
print(json.dumps(bad))
"""


def harbor_errors(docs: list[dict[str, Any]]) -> list[str]:
    """Harbor's own ``Trajectory.model_validate`` errors of ``docs``, and each document that does not come back
    unchanged from ``Trajectory.to_json_dict`` (the round trip; needs ``AGENTRACE_HARBOR_PYTHON``)."""
    res = subprocess.run([HARBOR_PYTHON, "-c", _HARBOR_CHECK], input="".join(json.dumps(d) + "\n" for d in docs),
                         capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def assert_valid(docs: list[dict[str, Any]]) -> None:
    """Every trajectory of ``docs`` is valid ATIF (schema and validators; Harbor's models when available)."""
    assert docs, "no trajectories"
    for doc in docs:
        assert not atif_errors(doc), (doc.get("trajectory_id"), atif_errors(doc))
    if HARBOR_PYTHON:
        assert harbor_errors(docs) == []


def matches_run(doc: dict[str, Any], run: dict[str, Any]) -> None:
    """The trajectory says what ``run`` (a ``run.json`` dict) says: tool calls (names, in order), model turns,
    tokens and cost."""
    usage = run["usage"]
    calls = [t["function_name"] for s in doc["steps"] for t in s.get("tool_calls") or ()]
    assert calls == [t["name"] for t in usage["tool_calls"]], doc["trajectory_id"]
    summaries = [(t.get("extra") or {}).get("summary", "") for s in doc["steps"] for t in s.get("tool_calls") or ()]
    assert summaries == [t["summary"] for t in usage["tool_calls"]]
    agent_steps = [s for s in doc["steps"] if s["source"] == "agent"]
    turns = [s["llm_call_count"] for s in agent_steps if "llm_call_count" in s]
    assert (sum(turns) if turns else None) == usage["turns"], doc["trajectory_id"]
    final = doc["final_metrics"]
    assert final["total_steps"] == len(doc["steps"])
    assert final.get("total_completion_tokens") == usage["output_tokens"]
    assert final.get("total_cached_tokens") == usage["cache_read_tokens"]
    prompt = None if usage["input_tokens"] is None else sum(
        usage[k] or 0 for k in ("input_tokens", "cache_read_tokens", "cache_write_tokens"))
    assert final.get("total_prompt_tokens") == prompt
    assert (final.get("extra") or {}).get("total_tokens") == usage["total_tokens"]
    assert final.get("total_cost_usd") == usage["cost_usd"]
    assert doc["trajectory_id"] == run["run_id"] and doc["extra"]["status"] == run["status"]


def check_folder(out: Path) -> int:
    """Validate the ``trajectory.json`` of every run under ``out/runs`` and compare it with its ``run.json``;
    returns the number of runs checked."""
    runs = sorted((Path(out) / "runs").glob("**/run.json"))
    docs = []
    for run_file in runs:
        path = run_file.parent / "trajectory.json"
        assert path.is_file(), f"{run_file.parent}: no trajectory.json"
        doc = json.loads(path.read_text(encoding="utf-8"))
        matches_run(doc, json.loads(run_file.read_text(encoding="utf-8")))
        docs.append(doc)
    assert_valid(docs)
    return len(runs)
