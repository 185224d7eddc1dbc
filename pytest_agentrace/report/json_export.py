"""The JSON export: one versioned document per session or results folder (``--agentrace-json``, ``agentrace export``).

The document's shape is the JSON Schema ``pytest_agentrace/schemas/report.schema.json`` (draft 2020-12,
``EXPORT_VERSION`` 1). This module is the one place the session result is turned into a dict: the Markdown and
HTML reports read the same result's typed fields (``report.view.shown``), redacted and made finite as this document
is, so the three never disagree. Top-level keys::

    schema_version  1
    product         {name, version}
    generated       ISO-8601 UTC time the document was made
    system          {python, implementation, platform, machine, host, cpus, pytest}
    session         {id, started, finished, args, git_sha, rootdir} or null (a results folder has no session)
    results_dir     the results folder the runs came from (run files: prompt, diff, logs) or null
    partial         (only when so) why the folder holds part of a sharded session's runs: a shard missing or stopped
    config          {agents, tasks [{name, source, timeout}], trials [{name, source, timeout, arms, baseline,
                    questions}], reps, timeout (the session's override, seconds), seed, baseline}
    totals          {runs, passed, failed, expected_failures, timeout, error}: a failed run of a baseline expected
                    to fail (``noop``, ``expect: fail``; pytest's xfailed) counts in expected_failures, not failed
    leaderboard     per agent: runs, races, wins, win_rate, mean_score, mean_cost (USD), mean_seconds, passed
                    (races and ties as defined in ``report.leaderboard``)
    cells           per case x arm x agent: ``cells.summarize`` (Wilson pass-rate interval, token interval, ...)
    comparisons     per arm vs baseline: ``compare.compare_arms`` (relative cost, 95% interval, verdict)
    elo             {ratings {agent: rating}, history [per session], steps [per race]} (``ratings.elo``,
                    ``ratings.elo_history``, ``result.elo_steps``), over the history store's task runs when given
    runs            every outcome (``Outcome.to_dict``, the run.json record) with its composite score

Numbers that cannot be computed are null, never NaN (JSON has no NaN).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_agentrace import __version__
from pytest_agentrace.errors import SpecError
from pytest_agentrace.record.model import Outcome
from pytest_agentrace.record.redact import redact_data, secret_values
from pytest_agentrace.report.result import Context, EloSeries, SessionResult, build_result
from pytest_agentrace.report.view import expected_failure, generated
from pytest_agentrace.spec.task import load_task
from pytest_agentrace.spec.trial import load_trial
from pytest_agentrace.stats.numerics import DEFAULT_RESAMPLES
from pytest_agentrace.stats.report import build_report

EXPORT_VERSION = 1
SCHEMA_FILE = Path(__file__).resolve().parent.parent / "schemas" / "report.schema.json"


def clean(value: Any) -> Any:
    """``value`` with NaN/inf replaced by None, tuples made lists and enums made strings (JSON-safe)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if isinstance(value, str):
        return str(value)
    if value is None or isinstance(value, (bool, int)):
        return value
    if hasattr(value, "to_dict"):
        return clean(value.to_dict())
    return str(value)


def system_info() -> dict[str, Any]:
    """Python version and implementation, platform, machine, host name, CPU count, pytest version."""
    import os
    import platform
    import socket

    try:
        from importlib.metadata import version

        pytest_version = version("pytest")
    except Exception:  # noqa: BLE001 - only informative
        pytest_version = None
    return {
        "python": platform.python_version(), "implementation": platform.python_implementation(),
        "platform": platform.platform(), "machine": platform.machine(), "host": socket.gethostname(),
        "cpus": os.cpu_count(), "pytest": pytest_version,
    }


def _spec_info(outcomes: Sequence[Outcome], read_task: Callable[[Path], Any] = load_task
               ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Task and trial entries of ``config``, read back from their files where they still load (task files through
    ``read_task``)."""
    tasks: dict[tuple[str, str], dict[str, Any]] = {}
    trials: dict[str, dict[str, Any]] = {}
    for o in outcomes:
        if o.kind == "task" and (o.case, o.source) not in tasks:
            entry: dict[str, Any] = {"name": o.case, "source": o.source, "timeout": None}
            try:
                entry["timeout"] = read_task(Path(o.source)).timeout
            except (SpecError, OSError, ValueError):
                pass
            tasks[(o.case, o.source)] = entry
        elif o.kind == "trial" and o.source not in trials:
            entry = {"name": o.extra.get("trial") or Path(o.source).stem, "source": o.source, "timeout": None,
                     "arms": [], "baseline": None, "questions": []}
            try:
                trial = load_trial(Path(o.source))
                entry.update(name=trial.name, timeout=trial.timeout, arms=[a.name for a in trial.arms],
                             baseline=getattr(trial, "baseline", None) or (trial.arms[0].name if trial.arms else None),
                             questions=[q.id for q in trial.questions])
            except (SpecError, OSError, ValueError):
                pass
            trials[o.source] = entry
    # arms and questions that ran, even when the file no longer loads
    for o in outcomes:
        if o.kind == "trial":
            t = trials[o.source]
            if o.arm not in t["arms"]:
                t["arms"].append(o.arm)
            if o.case not in t["questions"]:
                t["questions"].append(o.case)
    return sorted(tasks.values(), key=lambda t: (t["name"], t["source"])), sorted(trials.values(), key=lambda t: t["source"])


def build_export(
    outcomes: Sequence[Outcome],
    *,
    out: Path | str | None = None,
    session: Mapping[str, Any] | None = None,
    options: Mapping[str, Any] | None = None,
    baseline: str | None = None,
    seed: int = 0,
    history: Sequence[Outcome] | None = None,
    resamples: int | None = None,
    stats_report: Any = None,
    target: str = "fixed",
) -> dict[str, Any]:
    """The export document (see the module docstring) for scored ``outcomes`` (task runs with their composite score:
    ``score.score_outcomes``; raises ``score.UnscoredError`` otherwise): ``document(build_result(...))``.

    ``session``: the session row (``store.SessionInfo`` fields) or None; ``options``: ``{reps, timeout}`` the
    session overrode; ``baseline``: passed to ``compare.compare_arms``; ``target``: its inference target (``fixed``
    or ``cases``, ``config.generalize``); ``seed``/``resamples`` (default 10,000) drive every bootstrap interval and
    test; ``history``: scored outcomes of earlier sessions (the history store) for the Elo chart, else Elo uses
    ``outcomes`` alone; ``stats_report``: a ``StatsReport`` over the same outcomes, else one is built here.
    """
    context = Context(out=Path(out) if out else None, session=session, options=dict(options or {}), baseline=baseline,
                      seed=seed, resamples=int(resamples or DEFAULT_RESAMPLES), target=target)
    return document(build_result(outcomes, context, report=stats_report, history=history))


def document(result: SessionResult) -> dict[str, Any]:
    """The export document of ``result`` (see the module docstring), made once per result (kept in
    ``result.cache``): the JSON report (``--agentrace-json``, ``agentrace export``). Every field is redacted
    (``record.redact``). A result without a statistics report gets one built here."""
    if "document" not in result.cache:
        result.cache["document"] = _document(result)
    return result.cache["document"]


def _document(result: SessionResult) -> dict[str, Any]:
    ctx = result.context
    outcomes = list(result.outcomes)
    options = dict(ctx.options)
    tasks, trials = _spec_info(outcomes, ctx.load_task)
    statuses = Counter(str(o.status) for o in outcomes)
    xfailed = sum(expected_failure(o) for o in outcomes)  # a baseline's failed run: pytest's xfailed, not failed
    stats = result.report or build_report(outcomes, ctx.baseline, ctx.seed, ctx.resamples, target=ctx.target)
    elo = result.elo or EloSeries.of(outcomes)
    session_doc = None
    if ctx.session:
        session_doc = {k: ctx.session.get(k) for k in ("id", "started", "finished", "git_sha", "rootdir")}
        session_doc["args"] = list(ctx.session.get("args") or [])
    doc = {
        "schema_version": EXPORT_VERSION,
        "product": {"name": "pytest-agentrace", "version": __version__},
        "generated": generated(result),
        "system": system_info(),
        "session": session_doc,
        "results_dir": str(ctx.out) if ctx.out else None,
        **({"partial": ctx.partial} if ctx.partial else {}),  # the folder holds part of a sharded session's runs
        "config": {
            "agents": sorted({o.agent for o in outcomes}),
            "tasks": tasks, "trials": trials,
            "reps": options.get("reps") or max((o.rep for o in outcomes), default=0),
            "timeout": options.get("timeout"), "seed": ctx.seed, "resamples": ctx.resamples, "baseline": ctx.baseline,
            "generalize": stats.settings.get("target", ctx.target),
        },
        "totals": {"runs": len(outcomes), "passed": statuses.get("passed", 0), "failed": statuses.get("failed", 0) - xfailed,
                   "expected_failures": xfailed, "timeout": statuses.get("timeout", 0), "error": statuses.get("error", 0),
                   **({"stopped": statuses["stopped"]} if statuses.get("stopped") else {})},  # race mode's stopped runs
        "leaderboard": [s.to_dict() for s in result.leaderboard],
        "cells": [c.to_dict() for c in stats.cells],
        "comparisons": [c.to_dict() for c in stats.comparisons],
        "elo": {"ratings": dict(elo.ratings), "history": list(elo.history), "steps": list(elo.steps)},
        "runs": [o.record for o in outcomes],  # the record dict of each (scored) outcome, made once; copied by clean
    }
    return redact_data(clean(doc), secret_values())  # every exported field (HTML, Markdown, JSON, comment) is redacted


def render(result: SessionResult) -> str:
    """The JSON report (``--agentrace-json``, ``agentrace export``): the export document, indented, keys sorted."""
    return json.dumps(document(result), indent=2, sort_keys=True) + "\n"


def load_schema() -> dict[str, Any]:
    """The export's JSON Schema (a dict)."""
    return json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))


def validate(doc: Mapping[str, Any]) -> None:
    """Validate ``doc`` against the schema; raises ``jsonschema.ValidationError`` (jsonschema is a test extra)."""
    import jsonschema

    jsonschema.validate(doc, load_schema(), cls=jsonschema.Draft202012Validator)
