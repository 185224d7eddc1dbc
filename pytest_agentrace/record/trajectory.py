"""ATIF trajectories: each run's ``trajectory.json`` in the Agent Trajectory Interchange Format, ATIF-v1.8.

The format is Harbor's (RFC 0001; the pydantic models ``harbor.models.trajectories`` of Harbor 0.26.0, of which
``tests/samples/atif/atif-v1.8.schema.json`` is the JSON Schema): one object with ``schema_version``, ``agent``
(``name``, ``version``, ``model_name``), ``steps`` (``step_id`` from 1, ``source`` user / agent, ``message``,
``tool_calls``, ``metrics``, ``llm_call_count``) and ``final_metrics``.

A trajectory is built from the run's record alone (``run.json``'s Outcome and its ``prompt.txt``), so it holds what
the agent's adapter parsed from the CLI's output and nothing more:

- step 1, ``user``: the prompt as sent (redacted like ``prompt.txt``), stamped with the run's start time;
- step 2, ``agent`` (when the agent ran): the final answer as ``message``, every tool call in order
  (``function_name`` the tool, ``tool_call_id`` ``call-<n>``, ``arguments`` ``{}`` and the one-line summary of its
  arguments in ``extra.summary``: a record keeps summaries, not arguments), ``llm_call_count`` the model round-trips
  the CLI reported (``turns``; 0 for the in-process ``noop`` and ``oracle``) and ``metrics`` the run's tokens and
  cost. The adapters read tool calls and usage per run, not per model turn, so the run's turns are one step; the
  trajectory's ``notes`` say so;
- ``final_metrics``: ``total_prompt_tokens`` (input plus cache read and cache write: ATIF counts cached tokens in
  the prompt), ``total_completion_tokens`` (output), ``total_cached_tokens`` (cache read), ``total_cost_usd``,
  ``total_steps``, and in ``extra`` the turns, the cost's source and the cache-write share.

A value the record does not know (tokens of a CLI that reports none, an unknown CLI version) is left out, never
filled in; ``agent.version``, which ATIF requires, is then ``"unknown"``. Tool results (observations) are not in a
run's record, so no step has an ``observation``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pytest_agentrace import __version__, untrusted
from pytest_agentrace.record.model import Outcome, Usage
from pytest_agentrace.record.redact import redact_data
from pytest_agentrace.record.runfile import RUN_FILE, read_run, write_atomic
from pytest_agentrace.record.safefile import is_regular, read_text

ATIF_VERSION = "ATIF-v1.8"
TRAJECTORY_FILE = "trajectory.json"
PROMPT_FILE = "prompt.txt"
MAX_READ = 16 << 20  # bytes of a run's trajectory.json or prompt.txt read back
IN_PROCESS = ("noop", "oracle")  # agents of this package: their version is the package's
ONE_STEP_NOTE = ("pytest-agentrace reads a CLI's tool calls and usage per run, not per model turn: step 2 holds the "
                 "agent's whole run (llm_call_count: its model turns); tool-call arguments are kept as one-line "
                 "summaries (extra.summary), tool results are not recorded")


def agent_name(outcome: Outcome) -> str:
    """The agent's name without its model (``codex:gpt-5`` -> ``codex``; a ``~2`` suffix of a repeated entry is
    dropped)."""
    return outcome.agent.split(":", 1)[0].split("~", 1)[0]


def _prompt_tokens(u: Usage) -> int | None:
    if u.input_tokens is None:
        return None
    return sum(v for v in (u.input_tokens, u.cache_read_tokens, u.cache_write_tokens) if v is not None)


def _metrics(u: Usage) -> dict[str, Any]:
    """ATIF ``Metrics`` of the run's tokens and cost (keys with unknown values left out)."""
    m = {"prompt_tokens": _prompt_tokens(u), "completion_tokens": u.output_tokens,
         "cached_tokens": u.cache_read_tokens, "cost_usd": u.cost_usd}
    extra = {"cache_write_tokens": u.cache_write_tokens} if u.cache_write_tokens is not None else None
    return {k: v for k, v in {**m, "extra": extra}.items() if v is not None}


def _agent_ran(outcome: Outcome) -> bool:
    """Whether the record shows an agent process (or an in-process agent) that ran: it has output, a turn count,
    tool calls, an exit code, seconds or an answer."""
    u = outcome.usage
    return bool(outcome.exit_code is not None or outcome.seconds or outcome.timed_out or u.turns is not None
                or u.tool_calls or u.answer or u.total_tokens is not None)


def build_trajectory(outcome: Outcome, prompt: str | None) -> dict[str, Any]:
    """The ATIF-v1.8 trajectory of one run (a JSON-ready dict; see the module docstring for the mapping).

    ``prompt``: the text sent to the agent (``prompt.txt``), None when the run stopped before writing it (the
    user step's message is then empty and ``notes`` say so). Every string is redacted (``redact_data``)."""
    u = outcome.usage
    name = agent_name(outcome)
    version = u.cli_version or (__version__ if name in IN_PROCESS else None)
    agent: dict[str, Any] = {"name": name, "version": version or "unknown"}
    model = u.model or outcome.model
    if model:
        agent["model_name"] = model
    agent["extra"] = {"agent_id": outcome.agent, "harness": f"pytest-agentrace {__version__}"}
    user: dict[str, Any] = {"step_id": 1, "source": "user", "message": prompt if prompt is not None else ""}
    if outcome.started:
        user["timestamp"] = outcome.started
    steps = [user]
    notes = [ONE_STEP_NOTE]
    if prompt is None:
        notes.append("the prompt was not recorded (the run stopped before it was sent)")
    if _agent_ran(outcome):
        step: dict[str, Any] = {"step_id": 2, "source": "agent", "message": u.answer or ""}
        if model:
            step["model_name"] = model
        if u.tool_calls:
            step["tool_calls"] = [
                {"tool_call_id": f"call-{i}", "function_name": t.name or "?", "arguments": {},
                 **({"extra": {"summary": t.summary}} if t.summary else {})}
                for i, t in enumerate(u.tool_calls, 1)]
        if u.turns is not None:
            step["llm_call_count"] = u.turns
        metrics = _metrics(u)
        if metrics and u.turns != 0:  # ATIF: a step of no model call carries no metrics
            step["metrics"] = metrics
        step["extra"] = {k: v for k, v in {"agent_status": u.status, "agent_error": u.error,
                                            "exit_code": outcome.exit_code, "seconds": outcome.seconds,
                                            "timed_out": outcome.timed_out or None}.items() if v is not None}
        steps.append(step)
    final = {"total_prompt_tokens": _prompt_tokens(u), "total_completion_tokens": u.output_tokens,
             "total_cached_tokens": u.cache_read_tokens, "total_cost_usd": u.cost_usd, "total_steps": len(steps)}
    final_extra = {"turns": u.turns, "total_tokens": u.total_tokens, "cache_write_tokens": u.cache_write_tokens,
                   "cost_source": u.cost_source if u.cost_usd is not None else None, "tokens_note": u.tokens_note}
    final["extra"] = {k: v for k, v in final_extra.items() if v is not None} or None
    doc: dict[str, Any] = {
        "schema_version": ATIF_VERSION,
        "session_id": outcome.session_id or None,
        "trajectory_id": outcome.run_id,
        "agent": agent,
        "steps": steps,
        "notes": "; ".join(notes),
        "final_metrics": {k: v for k, v in final.items() if v is not None},
        "extra": {k: v for k, v in {"run_id": outcome.run_id, "kind": outcome.kind, "case": outcome.case,
                                    "arm": outcome.arm, "rep": outcome.rep, "status": outcome.status,
                                    "reason": outcome.reason}.items() if v is not None},
    }
    return redact_data({k: v for k, v in doc.items() if v is not None})


def write_trajectory(run_dir: Path, outcome: Outcome) -> Path:
    """Write ``run_dir/trajectory.json`` (atomically) from ``outcome`` and the folder's ``prompt.txt``; returns its
    path. Called before the run's files are hashed into the manifest (``record.manifest.record_run``)."""
    path = Path(run_dir) / TRAJECTORY_FILE
    write_atomic(path, json.dumps(build_trajectory(outcome, read_prompt(run_dir)), indent=2) + "\n")
    return path


def read_prompt(run_dir: Path) -> str | None:
    """The run's ``prompt.txt`` (regular file only, read through no link, at most ``MAX_READ`` bytes), None when
    there is none."""
    return read_text(Path(run_dir) / PROMPT_FILE, MAX_READ)


def load_trajectory(run_dir: Path, run: Outcome | None = None) -> dict[str, Any]:
    """A run's ATIF trajectory as a dict, every string (and key) redacted (``redact_data``: it may come from a
    folder made elsewhere): its ``trajectory.json`` (a regular file read through no link, at most ``MAX_READ``
    bytes), or, for a run recorded before trajectories were written, one built from its record (``run``, else its
    ``run.json``) and ``prompt.txt``. Raises ``ValueError`` (naming the file) when neither is a readable record,
    ``FileNotFoundError`` when the folder holds no run."""
    run_dir = Path(run_dir)
    path = run_dir / TRAJECTORY_FILE
    if is_regular(path):
        text = read_text(path, MAX_READ + 1)
        try:
            if text is None or len(text) > MAX_READ:
                raise ValueError("unreadable" if text is None else f"larger than {MAX_READ} bytes")
            data = untrusted.loads(text)
        except ValueError as exc:
            raise ValueError(f"{path}: not readable as JSON ({exc})") from None
        if not isinstance(data, dict):
            raise ValueError(f"{path}: not an ATIF trajectory (a JSON object)")
        return redact_data(data)
    if run is None:
        if not is_regular(run_dir / RUN_FILE):
            raise FileNotFoundError(f"{run_dir}: no {TRAJECTORY_FILE} or {RUN_FILE} here")
        run = read_run(run_dir / RUN_FILE)
    return redact_data(build_trajectory(run, read_prompt(run_dir)))


def iter_trajectories(out: Path) -> Iterable[tuple[Path, dict[str, Any]]]:
    """``(run folder, trajectory)`` for every run under ``out/runs`` (sorted by path); unreadable runs are skipped
    with one line on stderr, as ``runfile.iter_runs`` does."""
    import sys

    for run_file in sorted((Path(out) / "runs").glob(f"**/{RUN_FILE}")):
        try:
            yield run_file.parent, load_trajectory(run_file.parent)
        except (ValueError, OSError) as exc:
            print(f"agentrace: skipped {exc}", file=sys.stderr)
