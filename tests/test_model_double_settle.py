"""The model double's request log checks the parsed run: a script the CLI cannot play is an ``error`` run, and
tokens the CLI reports are compared with what the double served."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

from helpers.adapters import SAMPLES

from pytest_agentrace.model_double.runs import (
    AgentSession,
    read_log,
    script_mismatch,
    served_usage,
)
from pytest_agentrace.model_double.script import TurnUsage
from pytest_agentrace.model_double.server import report_of
from pytest_agentrace.record.model import AgentStatus, Usage

READ_ONLY_LOG = SAMPLES / "model-double-requests" / "gemini-cli-0.61.0-read-only-double-log.jsonl"


def test_a_step_without_a_fitting_tool_is_named_with_what_the_cli_offered():
    log = read_log(READ_ONLY_LOG)  # real Gemini CLI 0.61.0 in read-only mode against the double
    why = script_mismatch(log, edits=False)
    assert why is not None and why.startswith("model script does not fit this CLI: step 0 (write: by-write-tool.txt) needs a shell tool; ")
    assert "offered: update_topic, list_directory, read_file" in why and "edits = false" in why
    # what the double served, per model: the router (JSON schema) and the one answered turn
    assert served_usage(log) == {"gemini-3.5-flash-lite": TurnUsage(300, 5), "gemini-3.8-flash": TurnUsage(1000, 50)}


def session_for(tmp_path: Path, log: Path, edits: bool = False) -> AgentSession:
    session = AgentSession.__new__(AgentSession)  # the parts settle() reads; start-up is covered by the runner tests
    session.script_path, session.ctx = "script.yaml", SimpleNamespace(edits=edits)
    session.report = report_of(read_log(log))  # the double's own account of the run (never the log file)
    session.base_url = None
    return session


def test_settle_makes_the_mismatch_an_error_and_notes_tokens_that_differ(tmp_path: Path):
    session = session_for(tmp_path, READ_ONLY_LOG)
    # what the real CLI printed for that run: status success, its totals 1355 (router included)
    reported = Usage(input_tokens=1300, output_tokens=55, total_tokens=1355, answer="scripted model: step 0 ...")
    settled = session.settle(reported)
    assert settled.status == AgentStatus.ERROR and settled.error.startswith("model script does not fit this CLI")
    assert settled.parse_warnings == ()  # 1355 is what the double served
    off = session.settle(Usage(input_tokens=1000, output_tokens=50, total_tokens=1050))
    assert off.parse_warnings == ((
        "tokens differ from what the model double served: the CLI reported 1,050, the double served 1,355 "
        "(1,300 in, 55 out, 0 cached) in 2 requests"
    ),)


def test_a_log_the_script_fits_changes_nothing(tmp_path: Path):
    lines = [json.loads(line) for line in READ_ONLY_LOG.read_text().splitlines()]
    lines[1]["answer"] = {"kind": "text", "step": 0, "usage": {"input": 1000, "output": 50, "cache_read": 0, "cache_write": 0}}
    fitted = tmp_path / "fitted.jsonl"
    fitted.write_text("".join(json.dumps(r) + "\n" for r in lines))
    usage = Usage(input_tokens=1300, output_tokens=55, total_tokens=1355)
    settled = session_for(tmp_path, fitted, edits=True).settle(usage)
    # nothing but the price: a run on the double's script costs 0 USD (``priced``; record.model.CostSource)
    assert dataclasses.replace(settled, cost_usd=None, cost_source=usage.cost_source) == usage
    assert settled.cost_usd == 0.0
