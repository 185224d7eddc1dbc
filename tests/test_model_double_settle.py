"""The model double's request log checks the parsed run: a script the CLI cannot play is an ``error`` run, and
tokens the CLI reports are compared with what the double served."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers.adapters import SAMPLES

from pytest_agentrace.agents.auth import AUTH_FAULT, PROVIDER_FAULT
from pytest_agentrace.model_double.routes import report_of
from pytest_agentrace.model_double.runs import (
    AgentSession,
    read_log,
    read_report,
    script_mismatch,
    served_usage,
    unfounded_fault,
)
from pytest_agentrace.model_double.script import TurnUsage
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


@pytest.mark.parametrize(("error", "records", "status"), [
    # a login fault is believed when the double refused a request, or never answered one
    (f"{AUTH_FAULT}: Invalid API key", [{"answer": {"kind": "error", "status": 401}}], AgentStatus.ERROR),
    (f"{AUTH_FAULT}: Invalid API key", [], AgentStatus.ERROR),
    (f"{AUTH_FAULT}: Invalid API key", [{"answer": {"kind": "text", "step": 0}}], AgentStatus.FAILED),
    # a provider fault is believed when the double served a 5xx or a malformed answer
    (f"{PROVIDER_FAULT}: API Error: 500", [{"answer": {"kind": "error", "status": 500}}], AgentStatus.ERROR),
    (f"{PROVIDER_FAULT}: API Error: 500", [{"answer": {"kind": "text", "step": 0}}], AgentStatus.FAILED),
    # no account at all (the double's helper killed): nothing founds the claim
    (f"{AUTH_FAULT}: Invalid API key", None, AgentStatus.FAILED),
    (f"{PROVIDER_FAULT}: API Error: 500", None, AgentStatus.FAILED),
])
def test_a_fault_the_cli_printed_stands_only_on_the_doubles_account(error: str, records, status) -> None:
    usage = Usage(status=AgentStatus.ERROR, error=error)
    report = None if records is None else report_of(records)
    got = unfounded_fault(usage, report)
    assert got.status == status, got.error
    assert (got.error == error) == (status == AgentStatus.ERROR)


def test_a_run_without_an_environment_claim_is_left_as_it_is() -> None:
    usage = Usage(status=AgentStatus.FAILED, error="tests failed")
    assert unfounded_fault(usage, None) is usage


def test_the_report_pipe_gives_back_the_doubles_whole_account() -> None:
    """What the helper sends on the report pipe (``report_of``, JSON) is read back whole; a document missing a key
    or with a key of the wrong type is no account at all (None)."""
    records = [{"answer": {"kind": "error", "status": 401}}, {"answer": {"kind": "text", "step": 1, "usage": {"input": 7}}},
               {"answer": {"kind": "error", "status": 503}}]
    report = report_of(records, rejected=2)
    assert (report["rejected"], report["refused"], report["answered"], report["server_error"],
            report["last_text_step"]) == (2, True, True, True, 1)
    assert read_report(json.dumps(report).encode()) == report
    for key, bad in (("answered", None), ("rejected", "2"), ("last_text_step", "1"), ("server_error", 1)):
        assert read_report(json.dumps({**report, key: bad}).encode()) is None, key
