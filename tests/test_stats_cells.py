"""``cells``: per-cell summaries, arm comparisons, the report builder and the plan, on synthetic outcomes."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.stats import t as student_t

from pytest_agentrace.record.model import Outcome, Usage
from pytest_agentrace.stats import cells, compare, planning, sequential
from pytest_agentrace.stats.report import build_report

R = 1000  # resamples: enough for the properties checked here


def run(case: str, arm: str, agent: str, rep: int, status: str = "passed", tokens: int | None = 1000, kind: str = "trial",
        baseline: str | None = "base", session: str = "s1", **kw) -> Outcome:
    return Outcome(run_id=f"{kind}:{case}/{arm}/{agent}/r{rep}", kind=kind, source="t.toml", case=case, arm=arm, agent=agent, rep=rep,
                   status=status, usage=Usage(total_tokens=tokens), baseline_arm=baseline or None, session_id=session,
                   started=f"2026-01-01T00:{rep:02d}:00+00:00", **kw)


def arms(n: int, ratio: float, cases=("q1",), agent: str = "a", noise=(1.0, 1.1, 0.9, 1.05, 0.95, 1.02, 0.98, 1.0, 1.03, 0.97, 1.01, 0.99)):
    out = []
    for i, case in enumerate(cases):
        scale = 1000 * (i + 1)
        for rep in range(1, n + 1):
            out.append(run(case, "base", agent, rep, tokens=int(scale * noise[rep - 1])))
            out.append(run(case, "docs", agent, rep, tokens=int(scale * ratio * noise[(rep + 3) % len(noise)])))
    return out


def test_summarize_excludes_errors_and_counts_unknown_tokens() -> None:
    outs = [run("q", "base", "a", 1), run("q", "base", "a", 2, "failed", None), run("q", "base", "a", 3, "error", None),
            run("q", "base", "a", 4, "timeout", 2000)]
    (c,) = cells.summarize(outs, resamples=R)
    assert (c.runs, c.valid, c.errors, c.passed, c.timeouts) == (4, 3, 1, 1, 1)
    assert c.pass_rate == pytest.approx(1 / 3) and c.pass_rate_errors_as_failures == pytest.approx(1 / 4)
    assert (c.tokens_n, c.tokens_unknown, c.tokens_mean) == (2, 1, 1500)
    d = c.to_dict()
    json.dumps(d)  # JSON primitives only
    assert d["pass_ci"] == list(c.pass_ci) and d["tokens_ci"]["method"] in ("bca", "percentile")


def test_compare_arms_clear_cheaper_single_case() -> None:
    (comp,) = compare.compare_arms(arms(8, 0.6), resamples=R)
    assert (comp.arm, comp.baseline, comp.cases, comp.runs_arm, comp.runs_base) == ("docs", "base", ("q1",), 8, 8)
    assert comp.cost_verdict == "cheaper" and not comp.provisional and comp.cost_test == "permutation"
    assert 0.5 < comp.relative_cost < 0.7 and comp.relative_cost_ci.hi < 1.0
    assert comp.pass_verdict == "no clear difference" and comp.pass_test == "Boschloo"
    json.dumps(comp.to_dict())


def test_provisional_below_eight_runs_per_arm() -> None:
    (seven,) = compare.compare_arms(arms(7, 0.6), resamples=R)
    (eight,) = compare.compare_arms(arms(8, 0.6), resamples=R)
    assert seven.provisional and not eight.provisional


def test_two_runs_without_spread_never_give_a_verdict() -> None:
    outs = [run("q", "base", "a", r, tokens=1000) for r in (1, 2)] + [run("q", "docs", "a", r, tokens=500) for r in (1, 2)]
    (comp,) = compare.compare_arms(outs, resamples=R)
    assert comp.relative_cost == 0.5 and comp.relative_cost_ci.method == "point"
    assert comp.cost_p == pytest.approx(2 / 6) and comp.cost_verdict == "no clear difference"
    # score delta from zero-variance samples of size 2: no Cohen's d and no verdict
    outs = [run("q", "base", "a", r, "failed") for r in (1, 2)] + [run("q", "docs", "a", r) for r in (1, 2)]
    (comp,) = compare.compare_arms(outs, resamples=R)
    assert comp.score_delta == 100 and comp.cohens_d is None and comp.score_verdict == "no clear difference"
    assert comp.pass_verdict == "no clear difference"


def test_several_cases_are_paired_and_clustered() -> None:
    """The new-cases target (``--agentrace-generalize cases``): cases are paired units of a sign-flip test."""
    outs = arms(4, 0.6, cases=tuple(f"q{i}" for i in range(8)))
    (comp,) = compare.compare_arms(outs, resamples=R, target="cases")
    assert comp.cost_test == "sign-flip" and comp.cost_p == pytest.approx(2 / 256)  # all 8 log ratios negative
    assert comp.log_ratio_mean == pytest.approx(math.log(0.6), abs=0.05) and comp.log_ratio_ci.hi < 0
    assert comp.cost_verdict == "cheaper" and comp.pass_test == "sign-flip" and comp.target == "cases"
    per_case = compare.compare_arms(outs, resamples=R, by_case=True, target="cases")
    assert [c.cases for c in per_case] == [(f"q{i}",) for i in range(8)]
    # three cases can never reach p < 0.05 with the sign-flip test: no verdict across cases
    (three,) = compare.compare_arms(arms(4, 0.6, cases=("q1", "q2", "q3")), resamples=R, target="cases")
    assert three.cost_p == pytest.approx(2 / 8) and three.cost_verdict == "no clear difference"
    # ... and the report says why, when the interval alone would have excluded 1.00
    from pytest_agentrace.report.stats_text import _verdict

    assert three.relative_cost_ci.hi < 1.0
    assert _verdict(three) == "no clear difference (provisional) (interval excludes 1.00, sign-flip p=0.250; with 3 cases p cannot go below 0.25: add cases)"
    assert _verdict(comp) == "cheaper (provisional)"  # 4 runs per arm in each case (32 in all): provisional


def test_fixed_cases_decide_with_three_cases() -> None:
    """The default target (the cases that ran): the same three cases, where the sign-flip test cannot go below
    0.25, are cheaper by the stratified permutation test (arm labels permuted within each case: C(8,4)^3 = 343,000
    relabellings, drawn by Monte Carlo with its error) and the interval of the bootstrap stratified by case."""
    outs = arms(4, 0.6, cases=("q1", "q2", "q3"))
    (three,) = compare.compare_arms(outs, resamples=R)
    assert three.target == "fixed" and three.cost_test == "stratified permutation"
    assert three.cost_p < 0.01 and 0 < three.cost_p_error < 0.005 and three.cost_p_min == pytest.approx(1 / (R + 1))
    assert three.relative_cost_ci.hi < 1.0 and three.relative_cost == pytest.approx(0.6, abs=0.03)
    assert three.cost_verdict == "cheaper" and three.provisional and three.runs_per_case == 4  # 4 runs per arm per case
    from pytest_agentrace.report.stats_text import _p_bh

    assert _p_bh(three.cost_p, three.cost_p_adj, three.cost_p_error) == "<0.001±0.001 (0.002)"  # p with its Monte Carlo error
    # 10 cases x 4 runs: 40 runs a side, still provisional (runs are counted per case)
    (ten,) = compare.compare_arms(arms(4, 0.6, cases=tuple(f"q{i}" for i in range(10))), resamples=R)
    assert ten.provisional and ten.runs_arm == 40
    # two cases x 2 runs cannot reach p < 0.05 (2 / 36): the report says add runs
    from pytest_agentrace.report.stats_text import _verdict

    (two,) = compare.compare_arms(arms(2, 0.6, cases=("q1", "q2")), resamples=R)
    assert two.cost_p_min == pytest.approx(2 / 36) and two.cost_verdict == "no clear difference"
    assert "with 2 runs per arm in 2 cases p cannot go below 0.056: add runs" in _verdict(two) or not two.relative_cost_ci.defined


def test_pass_rate_difference_with_boschloo_and_errors_bracket() -> None:
    outs = [run("q", "base", "a", r, "failed") for r in range(1, 9)] + [run("q", "docs", "a", r) for r in range(1, 9)]
    outs.append(run("q", "docs", "a", 9, "error", None))
    (comp,) = compare.compare_arms(outs, resamples=R)
    assert comp.pass_diff == 1.0 and comp.pass_verdict == "better" and comp.boschloo_p < 0.001
    assert comp.pass_rate_arm_errors_as_failures == pytest.approx(8 / 9) and comp.errors_arm == 1


def test_bh_adjusted_p_values_cover_every_comparison() -> None:
    outs = arms(6, 0.6, agent="a") + arms(6, 1.0, agent="b")
    comps = compare.compare_arms(outs, resamples=R)
    assert [c.agent for c in comps] == ["a", "b"]
    ps = [p for c in comps for p in (c.cost_p, c.pass_p)]
    m = len(ps)
    order = np.argsort(ps)
    expected = np.minimum.accumulate((np.array(ps)[order] * m / np.arange(1, m + 1))[::-1])[::-1]
    adj = [p for c in comps for p in (c.cost_p_adj, c.pass_p_adj)]
    assert np.array(adj)[order] == pytest.approx(np.minimum(expected, 1.0))


def test_figures_are_seeded_and_do_not_move_when_cells_are_added() -> None:
    base = arms(6, 0.6, agent="a")
    (one,) = compare.compare_arms(base, seed=7, resamples=R)
    (again,) = compare.compare_arms(base, seed=7, resamples=R)
    with_more = compare.compare_arms(base + arms(6, 0.8, agent="b"), seed=7, resamples=R)
    assert one.relative_cost_ci == again.relative_cost_ci == with_more[0].relative_cost_ci
    (other,) = compare.compare_arms(base, seed=8, resamples=R)
    assert other.relative_cost_ci != one.relative_cost_ci


def test_baseline_resolution() -> None:
    outs = [run("q", "x", "a", 1, baseline=None), run("q", "y", "a", 1, baseline=None)]
    assert compare.resolve_baseline(outs) == "x"  # first arm when nothing says otherwise
    assert compare.resolve_baseline(outs, "y") == "y"
    assert compare.resolve_baseline([*outs, run("q", "baseline", "a", 1, baseline=None)]) == "baseline"
    assert compare.resolve_baseline([run("q", "x", "a", 1, baseline="y"), run("q", "y", "a", 1, baseline="y")]) == "y"
    assert compare.resolve_baseline(outs, "missing") == "x"


def test_spread_and_reliability() -> None:
    outs = [run("q", "base", "a", r, "passed" if r % 2 else "failed", tokens=t) for r, t in enumerate([100, 120, 80, 100], 1)]
    report = build_report(outs, resamples=R)
    (sp,) = report.spread
    assert sp.cv == pytest.approx(math.sqrt(800 / 3) / 100)
    assert "runs per arm to detect a 20% difference with 80% power at alpha 0.05" in sp.sentence()
    (rel,) = report.reliability
    assert (rel.cases, rel.flipping, rel.flip_rate) == (1, 1, 1.0) and rel.pass_at_k["1"] == 0.5


def test_build_report_with_sequential_decisions() -> None:
    outs = arms(12, 0.6)
    report = build_report(outs, resamples=R, sequential={"cap": 12})
    (comp,) = report.comparisons
    assert comp.sequential["state"] == "clear" and comp.sequential["n"] == 4 and comp.cost_verdict == "cheaper"
    assert "stop-when-decided" in report.footer["method"]
    json.dumps(report.to_dict())
    # caps per source, as the session passes them
    report = build_report(outs, resamples=R, sequential={"caps": {"t.toml": 12}})
    assert report.comparisons[0].sequential["cap"] == 12


def test_sequential_decide_uses_contiguous_prefix_only() -> None:
    base = {r: run("q", "base", "a", r, tokens=1000 + 10 * r) for r in (1, 2, 3, 5, 6)}  # rep 4 missing
    assert [rep for rep, _ in sequential.prefix_tokens(base)] == [1, 2, 3]
    d = sequential.decide([(1, 600.0), (2, 610.0)], [(1, 1000.0), (2, 990.0)], cap=12)
    assert d.state == "continue" and d.verdict == "no clear difference"


def test_plan_rows_states() -> None:
    clear = arms(8, 0.6)
    unclear = [o.replace(agent="b", run_id=o.run_id + "b") for o in arms(4, 0.97)]
    rows = planning.plan_rows(clear + unclear, min_runs=4, max_reps=12, price_per_mtok=3.0, resamples=R)
    by_agent = {r.agent: r for r in rows}
    assert by_agent["a"].state == "clear" and by_agent["a"].state_text() == "clear (cheaper)" and by_agent["a"].more_runs == 0
    assert by_agent["b"].state == "futile"  # a 3% difference would need far more than 12 runs
    mid = arms(4, 0.92)
    (row,) = planning.plan_rows(mid, max_reps=40, price_per_mtok=3.0, resamples=R)
    assert row.state == "continue" and row.more_runs == row.needed - 4 > 0
    assert row.state_text() == f"continue (about {row.more_runs} more runs per arm)"
    means = {arm: np.mean([o.usage.total_tokens for o in mid if o.arm == arm]) for arm in ("base", "docs")}
    assert row.further_tokens == pytest.approx(row.more_runs * (means["base"] + means["docs"]))
    assert row.further_usd == pytest.approx(row.further_tokens * 3.0 / 1e6)


def test_tokens_per_run_of_an_arm_over_several_cases_has_a_cluster_interval() -> None:
    """Arm tokens over cases: the mean of the case means (1000-scale and 2000-scale cases: about 1,500) with the
    clustered-t interval over the case means (mean -/+ t_(0.975, 1) sd / sqrt(2), 1 df: two cases say little about
    a third), cut at 0 tokens; one-case arms are left to the cell summary."""
    outs = arms(6, 0.6, cases=("q1", "q2"))
    toks = {t.arm: t for t in cells.arm_tokens(outs, resamples=R)}
    base_means = [np.mean([o.usage.total_tokens for o in outs if o.arm == "base" and o.case == q]) for q in ("q1", "q2")]
    assert toks["base"].cases == 2 and toks["base"].mean == pytest.approx(np.mean(base_means))
    base_runs = [o.usage.total_tokens for o in outs if o.arm == "base"]
    half = student_t.ppf(0.975, 1) * np.std(base_means, ddof=1) / math.sqrt(2)
    assert toks["base"].ci.method == "clustered-t" and toks["base"].ci.lo < min(base_runs)
    assert toks["base"].ci.lo == pytest.approx(max(0.0, np.mean(base_means) - half)) and toks["base"].ci.hi == pytest.approx(np.mean(base_means) + half)
    assert toks["docs"].mean == pytest.approx(0.6 * toks["base"].mean, rel=0.05)
    assert cells.arm_tokens(arms(6, 0.6), resamples=R) == []  # one case
    report = build_report(outs, resamples=R)
    text = "\n".join(__import__("pytest_agentrace.report.stats_text", fromlist=["report_lines"]).report_lines(report))
    row = next(line for line in text.splitlines() if line.startswith("| base "))
    lo, hi = round(toks["base"].ci.lo), round(toks["base"].ci.hi)
    assert f"{round(toks['base'].mean):,} ({lo:,}-{hi:,})" in row
    assert report.to_dict()["arm_tokens"][0]["ci"]["lo"] == pytest.approx(toks["base"].ci.lo)
