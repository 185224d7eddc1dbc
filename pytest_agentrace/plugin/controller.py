"""Controller-side aggregation: every run's Outcome, keyed by RunSpec id, and the session summary.

Outcomes arrive as JSON strings (``report.user_properties``), so a serial run and a pytest-xdist run feed
the same data; everything derived (scores, ranks, tables) is computed from the sorted set of outcomes,
never from arrival order.
"""

from __future__ import annotations

import json
from collections import defaultdict

from pytest_agentrace.record.model import Outcome


class Aggregator:
    """Collects outcomes (last one per run id wins) and derives scores and tables from them."""

    def __init__(self) -> None:
        self.outcomes: dict[str, Outcome] = {}

    def add_json(self, payload: str) -> None:
        """Add one ``Outcome.to_dict`` JSON payload; a malformed payload is ignored (it cannot be ranked)."""
        try:
            outcome = Outcome.from_dict(json.loads(payload))
        except (ValueError, TypeError, KeyError):
            return
        self.add(outcome)

    def add(self, outcome: Outcome) -> None:
        self.outcomes[outcome.run_id] = outcome

    def scored(self) -> list[Outcome]:
        """Task outcomes with their composite ``score`` filled in (per task and rep); other kinds as they are.

        Sorted by (kind, source, case, arm, rep, agent).
        """
        from pytest_agentrace.stats.score import score_group

        groups: dict[tuple, list[Outcome]] = defaultdict(list)
        rest = []
        for o in self.outcomes.values():
            (groups[(o.source, o.case, o.rep)] if o.kind == "task" else rest).append(o)
        result = []
        for runs in groups.values():
            extra = runs[0].extra
            scores = score_group(runs, extra.get("has_verify", False), extra.get("has_lint", False), extra.get("scoring"))
            result.extend(o.replace(score=scores[o.run_id]) for o in runs)
        result.extend(rest)
        return sorted(result, key=lambda o: (o.kind, o.source, o.case, o.arm, o.rep, o.agent))

    def summary_lines(self, show_cost: bool = True, verbose: int | bool = False, width: int | None = None) -> list[str]:
        """The terminal summary (``report.summary``): per-task tables (up to 3 tasks, or ``verbose``), the task x
        agent matrix (2 tasks or more), trial tables; no line wider than ``width`` characters (None: no limit)."""
        from pytest_agentrace.report.summary import summary_lines

        return summary_lines(self.scored(), show_cost=show_cost, verbose=verbose, width=width)
