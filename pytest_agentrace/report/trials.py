"""Terminal table of trial outcomes: one row per cell (question x arm x agent), counts only.

Intervals, relative cost and verdicts are the statistics module's job; this table says what ran and how it
ended, so a trial session is never silent. Pure function over outcomes (tabulate imported lazily).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from pytest_agentrace.record.model import Outcome, Status
from pytest_agentrace.report import numbers
from pytest_agentrace.report.fit import fit_lines, fit_table
from pytest_agentrace.report.text import mean_cost, mean_tokens, notes_lines, title_line

MAX_NOTES = 20
TRIAL_HEADERS = ["Question", "Arm", "Agent", "Runs", "Passed", "Correct", "Recall", "Verify", "Used tool", "Claims ok", "Errors", "Time (s)"]
# dropped in this order to fit a width
# dropped in this order to fit a width (columns of nothing but ``-`` first): the answer key's Correct and the
# tokens per run, the figures a trial is run for, go last
TRIAL_OPTIONAL = ("Claims ok", "Used tool", "Recall", "Cost/run (USD)", "Verify", "Errors", "Time (s)", "Tokens/run", "Correct")
TRIAL_KEEP = ("Tokens/run", "Correct")


def trial_notes(cells: dict[tuple[str, str, str], list[Outcome]]) -> list[str]:
    """The ``notes:`` block of one trial table (cut output, parse warnings, unknown tokens; ``MAX_NOTES`` lines)."""
    runs = sorted((o for c in cells.values() for o in c), key=lambda o: (o.case, o.arm, o.agent, o.rep))
    block = notes_lines((f"{o.case}[{o.arm}-{o.agent}-r{o.rep}]", o) for o in runs)
    if len(block) > MAX_NOTES + 1:
        block = [*block[: MAX_NOTES + 1], f"  ... and {len(block) - MAX_NOTES - 1} more (see the run.json files)"]
    return block


def trial_tables(outcomes: Iterable[Outcome], show_cost: bool = True, width: int | None = None) -> list[str]:
    """One table per trial file, rows per cell in (question, arm, agent) order, as lines of text no wider than
    ``width`` (``report.fit``: cells wrap, then ``TRIAL_OPTIONAL`` columns drop; None: no limit).

    Columns: runs; passed and (answer key) correct among the runs that are samples (status not ``error``);
    mean recall; verify passed / runs with a verify result; used tool; valid claims without false_pass or
    false_fail / runs asked for a claim; ``error`` count; mean agent seconds; and (``show_cost``) mean total
    tokens and mean cost (USD) per run where known (cost marked ``(priced)`` / ``(est.)`` when any run's figure
    was priced from tokens or estimated, and ``of n`` when only n runs have one). ``(n reused)`` marks runs reported from an earlier session's ``run.json``.
    """
    by_trial: dict[str, dict[tuple[str, str, str], list[Outcome]]] = defaultdict(lambda: defaultdict(list))
    for o in outcomes:
        if o.kind == "trial":
            by_trial[o.source][(o.case, o.arm, o.agent)].append(o)
    lines: list[str] = []
    for source, cells in sorted(by_trial.items()):
        rows = []
        for (case, arm, agent), runs in sorted(cells.items()):
            samples = [o for o in runs if o.is_sample]
            scored = [o for o in samples if o.answer_score]
            recall = [o.answer_score["recall"] for o in scored]
            verify = [o.checks["verify"].passed for o in samples if "verify" in o.checks]
            used = [bool(o.used_tool) for o in samples if o.used_tool is not None]
            claims = [o.claim.get("status") == "valid" and not o.claim.get("false_pass") and not o.claim.get("false_fail") for o in samples if o.claim]
            reused = sum(o.reused for o in runs)
            row = [
                case, arm, agent, f"{len(runs)}" + (f" ({reused} reused)" if reused else ""),
                numbers.count_ratio([o.status == Status.PASSED for o in samples]), numbers.count_ratio([bool(o.answer_score["correct"]) for o in scored]),
                f"{sum(recall) / len(recall):.2f}" if recall else "-", numbers.count_ratio(verify), numbers.count_ratio(used), numbers.count_ratio(claims),
                len(runs) - len(samples), f"{sum(o.seconds for o in samples) / len(samples):.1f}" if samples else "-",
            ]
            if show_cost:
                row.append(mean_tokens(samples))
                row.append(mean_cost(samples))
            rows.append(row)
        name = next(iter(cells.values()))[0].extra.get("trial", "")
        lines.append(title_line(f"trial {name}", source, width))
        headers = TRIAL_HEADERS + (["Tokens/run", "Cost/run (USD)"] if show_cost else [])
        lines += fit_table(rows, headers, width, TRIAL_OPTIONAL, numparse=False, keep=TRIAL_KEEP)
        notes = sorted({f"  {o.case}[{o.arm}-{o.agent}-r{o.rep}]: {o.status}: {o.reason}" for c in cells.values() for o in c if o.status != Status.PASSED and o.reason})
        if notes:
            lines.append("not passed:")
            lines.extend(notes[:MAX_NOTES])
            if len(notes) > MAX_NOTES:
                lines.append(f"  ... and {len(notes) - MAX_NOTES} more (see the run.json files)")
        lines.extend(trial_notes(cells))
        lines.append("")
    return fit_lines(lines, width)
