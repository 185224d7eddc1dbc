"""The session result as the Markdown, HTML, PR-comment and JUnit outputs print it (``shown``), the time every output
of one result says it was made (``generated``), and which runs are baselines expected to fail (``expects_failure``).

Those outputs read the result's typed fields (``Outcome``, ``stats.cells.CellSummary``, ``stats.compare.ArmComparison``,
``report.leaderboard.Standing``, ``report.result.EloSeries``), never the JSON export's dict; what the export does to
its document they get here, once per result: every string redacted (``record.redact.redact_fields`` with the
secret variables of the process that renders, as the export's ``redact_data``), every NaN or infinite float made
None (printed ``-``, as the export's null), and the statistics report built when the result has none. Pure.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
from collections.abc import Iterable, Mapping
from typing import Any

from pytest_agentrace.record.model import Outcome
from pytest_agentrace.record.redact import redact_fields, secret_values
from pytest_agentrace.report.result import EloSeries, SessionResult
from pytest_agentrace.stats.report import build_report
from pytest_agentrace.stats.verdict import FIXED, TARGET_TEXT


def expects_failure(run: Outcome) -> bool:
    """True for a run of a baseline expected to fail, whatever its status: the ``noop`` agent (any model; ``~N``
    suffix dropped) unless its record says otherwise, or a record whose ``extra.expect`` is ``fail``
    (``plugin.collect.make_items`` marks these items strict xfail)."""
    expect = (run.extra or {}).get("expect")
    if expect is not None:
        return expect == "fail"
    return str(run.agent).split(":", 1)[0].split("~", 1)[0] == "noop"


def expected_failure(run: Outcome) -> bool:
    """True for a failed run of a baseline expected to fail (``expects_failure``: ``noop``, ``expect: fail``), which
    pytest reports as ``xfailed``: every format counts it apart from the failed runs."""
    return run.status == "failed" and expects_failure(run)


def baseline_agents(runs: Iterable[Outcome]) -> set[str]:
    """The agents every one of whose ``runs`` is a baseline expected to fail (``expects_failure``): the threshold
    gates (``pass_rate<0.8``, ``pass@k``) do not read their cells."""
    agents: dict[str, bool] = {}
    for run in runs:
        agents[run.agent] = agents.get(run.agent, True) and expects_failure(run)
    return {agent for agent, baseline in agents.items() if baseline}


def generated(result: SessionResult) -> str:
    """When the outputs of ``result`` were made: ISO-8601 UTC to the second, taken once per result (kept in
    ``result.cache``), so the JSON export, the Markdown and the HTML report of one session give the same time."""
    if "generated" not in result.cache:
        result.cache["generated"] = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
    return result.cache["generated"]


def shown(result: SessionResult) -> SessionResult:
    """``result`` redacted and made finite (see the module docstring), with its statistics report and Elo series
    always there; made once per result (kept in ``result.cache``, which the copy shares, so ``shown`` of it is
    itself)."""
    if "shown" not in result.cache:
        ctx = result.context
        outcomes = list(result.outcomes)
        report = result.report or build_report(outcomes, ctx.baseline, ctx.seed, ctx.resamples, target=ctx.target)
        elo = result.elo or EloSeries.of(outcomes)
        secrets = secret_values()
        copy = dataclasses.replace(
            result, outcomes=redact_fields(result.outcomes, secrets, finite=True, show=True),
            report=redact_fields(report, secrets, finite=True, show=True),
            leaderboard=redact_fields(result.leaderboard, secrets, finite=True, show=True),
            elo=redact_fields(elo, secrets, finite=True, show=True),
            context=dataclasses.replace(ctx, session=redact_fields(dict(ctx.session), secrets, show=True) if ctx.session else None,
                                        partial=redact_fields(ctx.partial, secrets, show=True)))
        result.cache["shown"] = copy
    return result.cache["shown"]


def target_text(result: SessionResult) -> str:
    """The inference target of the result's comparisons in words (the statistics report's ``target`` setting, else
    the context's; ``fixed`` when neither says)."""
    report = result.report
    target = report.settings.get("target", result.context.target) if report is not None else result.context.target
    return TARGET_TEXT.get(target or FIXED, TARGET_TEXT[FIXED])


def session_field(result: SessionResult, key: str) -> Any:
    """A field of the result's session row (``id``, ``git_sha``, ...), None without a session."""
    session: Mapping[str, Any] | None = result.context.session
    return session.get(key) if session else None
