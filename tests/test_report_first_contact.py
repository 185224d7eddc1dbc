"""What a newcomer reads first: one table per task however many reps, tables narrowed at word boundaries with the
columns that matter kept, and a missing price said once, with advice only where a ``pricing`` key exists."""

from __future__ import annotations

import dataclasses

from helpers.report import outcome

from pytest_agentrace.agents.pricing import apply_pricing
from pytest_agentrace.record.model import Usage
from pytest_agentrace.report.fit import line_width
from pytest_agentrace.report.terminal import summary_lines
from pytest_agentrace.report.text import task_tables
from pytest_agentrace.report.trials import trial_tables
from pytest_agentrace.stats.score import score_outcomes


def table_rows(lines: list[str]) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split("|")] for line in lines if line.startswith("| ")]


def four_reps() -> list:
    """alpha passes 4 of 4 reps in 10 s, beta 2 of 4 in 20 s (and one rep is an infrastructure error)."""
    runs = []
    for rep in range(1, 5):
        runs.append(outcome(agent="alpha", rep=rep, seconds=10.0, tokens=1000, cost=0.01, lines_changed=2))
        status = "passed" if rep <= 2 else ("failed" if rep == 3 else "error")
        runs.append(outcome(agent="beta", rep=rep, seconds=20.0, tokens=3000, cost=0.03, status=status, lines_changed=4,
                            reason=None if status == "passed" else f"{status} on rep {rep}"))
    return score_outcomes(runs, per_session=False)


def test_a_task_with_reps_gets_one_table_with_a_row_per_agent() -> None:
    lines = task_tables(four_reps())
    assert [line for line in lines if line.startswith("task ")] == ["task fix-add (4 reps)  [/suite/task.yaml]"]
    header, *rows = table_rows(lines)
    assert header[:5] == ["Rank", "Agent", "Runs", "Passed", "Score"]
    by_agent = {r[1]: dict(zip(header, r, strict=True)) for r in rows}
    assert list(by_agent) == ["alpha", "beta"]  # ranked by mean score
    alpha, beta = by_agent["alpha"], by_agent["beta"]
    assert (alpha["Rank"], alpha["Runs"], alpha["Passed"], alpha["Tests"]) == ("1", "4", "4/4", "4/4")
    # the error rep is no sample: beta passed 2 of its 3 samples; means over the samples
    assert (beta["Rank"], beta["Runs"], beta["Passed"], beta["Tests"]) == ("2", "4 (1 error)", "2/3", "2/3")
    assert (alpha["Time (s)"], beta["Time (s)"], alpha["Lines"], beta["Lines"]) == ("10.0", "20.0", "2.0", "4.0")
    assert (alpha["Tokens/run"], beta["Tokens/run"]) == ("1,000", "3,000")
    assert (alpha["Cost/run (USD)"], beta["Cost/run (USD)"]) == ("0.0100", "0.0300")
    # alpha alone passing and fastest scores 100 in every race; beta's mean over its scored samples
    scores = [o.score for o in four_reps() if o.agent == "beta" and o.is_sample]
    assert alpha["Score"] == "100.0" and beta["Score"] == f"{sum(scores) / len(scores):.1f}"
    assert "  beta-r3: failed: failed on rep 3" in lines and "  beta-r4: error: error on rep 4" in lines


def test_a_thousand_runs_print_one_table_per_task() -> None:
    runs = [outcome(case=f"task-{t}", agent=a, rep=r, source=f"/s/task-{t}.yaml", seconds=5.0 + r)
            for t in range(2) for a in ("alpha", "beta", "gamma", "delta", "echo") for r in range(1, 101)]
    lines = summary_lines(score_outcomes(runs, per_session=False), verbose=-1)
    assert sum(line.startswith("task ") for line in lines) == 2  # not 200 (one per rep)
    assert sum(line.startswith("| Rank") for line in lines) == 2
    assert len(lines) < 60


def test_a_single_rep_task_keeps_its_run_table() -> None:
    lines = task_tables(score_outcomes([outcome(agent="a"), outcome(agent="b", status="failed")], per_session=False))
    assert lines[0] == "task fix-add  [/suite/task.yaml]"
    assert table_rows(lines)[0][:4] == ["Rank", "Agent", "Score", "Status"]


def trial_runs() -> list:
    return [outcome(kind="trial", case=q, arm=arm, agent=agent, rep=r, cost=None, source="/s/trial.toml",
                    answer_score={"correct": r != 2, "recall": 0.8}, extra={"trial": "docs"})
            for q in ("where-is-the-config-loaded", "which-function-parses-args")
            for arm in ("baseline", "docs-first") for agent in ("claude-code:sonnet", "codex") for r in (1, 2, 3)]


def test_the_trial_table_at_80_columns_keeps_correct_and_tokens_and_breaks_no_word() -> None:
    lines = trial_tables(trial_runs(), width=80)
    assert line_width(lines) <= 80
    header = table_rows(lines)[0]
    assert {"Question", "Arm", "Agent", "Passed", "Correct", "Tokens/run"} <= set(header)
    assert "Cost/run (USD)" not in header  # every run's cost unknown: the column of '-' went first
    words = {"where-is-the-config-loaded", "which-function-parses-args", "baseline", "docs-first",
             "claude-code:sonnet", "codex"}
    # a cell over several lines is broken after a hyphen (or at a space), never inside a word: the pieces of each
    # row's Question, Arm and Agent cells join up to a whole value, and every piece but the last ends with '-'
    grouped: list[list[list[str]]] = []
    for cells in table_rows(lines)[1:]:
        if cells[header.index("Runs")]:
            grouped.append([[] for _ in range(3)])
        for i in range(3):
            if cells[i]:
                grouped[-1][i].append(cells[i])
    assert len(grouped) == 8
    for row in grouped:
        for pieces in row:
            assert "".join(pieces) in words and all(p.endswith("-") for p in pieces[:-1]), pieces


def test_pricing_advice_only_where_a_pricing_key_exists() -> None:
    usage = Usage(input_tokens=900, output_tokens=100, total_tokens=1000, model="no-such-model")
    task = apply_pricing(usage, None, {}, None)  # a task file: its pricing key (empty by default)
    trial = apply_pricing(usage, None, None, None)  # a trial file: no pricing key
    assert task.parse_warnings == ("no price for model 'no-such-model'; add it to the task's pricing:",)
    assert trial.parse_warnings == ("no price for model 'no-such-model'",)


def test_a_missing_price_is_said_once_for_all_runs() -> None:
    usage = Usage(input_tokens=900, output_tokens=100, total_tokens=1000, model="no-such-model",
                  parse_warnings=("no price for model 'no-such-model'; add it to the task's pricing:",))
    runs = [dataclasses.replace(outcome(agent=a, rep=r), usage=usage) for a in ("a", "b", "c") for r in range(1, 9)]
    lines = task_tables(score_outcomes(runs, per_session=False))
    said = [line for line in lines if "no price for model" in line]
    assert said == ["  no price for model 'no-such-model'; add it to the task's pricing: (24 runs: a-r1, a-r2, a-r3, ...)"]
    trial = [dataclasses.replace(o, usage=dataclasses.replace(usage, parse_warnings=("no price for model 'x'",)))
             for o in trial_runs()]
    said = [line for line in trial_tables(trial) if "no price" in line]
    assert len(said) == 1 and "pricing" not in said[0] and "(24 runs: " in said[0]
