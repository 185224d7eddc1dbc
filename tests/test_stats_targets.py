"""Issue 13 on synthetic outcomes: the two inference targets, per-case verdicts on Holm p, bounded intervals, and one
answer per question - stop-when-decided, ``plan`` and the fixed-sample report agree on the same runs (constant
tokens, as the model double serves them, included)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pytest_agentrace.record.model import Outcome, Usage
from pytest_agentrace.stats import compare, planning, sequential, strata
from pytest_agentrace.stats import numerics as stats
from pytest_agentrace.stats.report import build_report

R = 1000


def run(case: str, arm: str, rep: int, tokens: float | None, status: str = "passed", agent: str = "a") -> Outcome:
    return Outcome(run_id=f"trial:{case}/{arm}/{agent}/r{rep}", kind="trial", source="t.toml", case=case, arm=arm, agent=agent, rep=rep,
                   status=status, usage=Usage(total_tokens=None if tokens is None else round(tokens)), extra={"baseline_arm": "base"},
                   session_id="s1")


def constant(cases: dict[str, tuple[int, int]], reps: int) -> list[Outcome]:
    """Every run of a cell costs the same (``{case: (docs tokens, base tokens)}``), as the model double serves them."""
    return [run(c, arm, r, t) for c, (d, b) in cases.items() for r in range(1, reps + 1) for arm, t in (("docs", d), ("base", b))]


def noisy(rng: np.random.Generator, ratio: float, cases: int, reps: int, cv: float = 0.3) -> list[Outcome]:
    s = stats.log_sd(cv)
    out = []
    for c in range(cases):
        scale = 1000 * (c + 1)
        for r in range(1, reps + 1):
            out.append(run(f"q{c}", "base", r, scale * math.exp(rng.normal(0, s))))
            out.append(run(f"q{c}", "docs", r, scale * ratio * math.exp(rng.normal(0, s))))
    return out


def test_constant_tokens_give_one_answer_everywhere() -> None:
    """Two questions, 4 reps, constant tokens: the report, the plan and stop-when-decided all say cheaper."""
    outs = constant({"port": (142, 288), "storage": (161, 288)}, 4)
    (comp,) = build_report(outs, resamples=R).comparisons
    assert comp.cost_verdict == "cheaper" and comp.provisional and comp.relative_cost_ci.method == "point"
    assert comp.cost_p == pytest.approx(2 / 4900)  # C(8,4)^2 relabellings, the observed one and its mirror
    (row,) = planning.plan_rows(outs, resamples=R)
    assert (row.state, row.verdict, row.case, row.runs) == ("clear", "cheaper", "port, storage", 4)
    assert row.state_text() == "clear (cheaper, provisional)"
    ((key, d),) = sequential.decisions(outs, cap=12, resamples=R).items()
    assert key == ("trial", "t.toml", ("port", "storage"), "a", "docs") and (d.state, d.verdict, d.n) == ("clear", "cheaper", 4)
    assert math.isinf(d.z) or d.z is None or d.z < -3.4
    (seq,) = build_report(outs, resamples=R, sequential={"cap": 12}).comparisons
    assert seq.cost_verdict == "cheaper" and seq.sequential["state"] == "clear"
    # equal constant tokens: nothing to show, and every tool says so (stop-when-decided stops at once: futile)
    same = constant({"port": (288, 288), "storage": (300, 300)}, 4)
    assert build_report(same, resamples=R).comparisons[0].cost_verdict == "no clear difference"
    assert planning.plan_rows(same, resamples=R)[0].state == "futile"
    assert next(iter(sequential.decisions(same, cap=12, resamples=R).values())).state == "futile"


def test_a_cap_below_the_first_look_is_one_look_at_the_cap() -> None:
    """3 reps (the example trial) with stop-when-decided: the only look is at the cap, at the full level, and it agrees
    with the fixed-sample report (2/400 with 2 questions x 3 runs)."""
    outs = constant({"port": (142, 288), "storage": (161, 288)}, 3)
    (comp,) = build_report(outs, resamples=R).comparisons
    assert comp.cost_verdict == "cheaper" and comp.cost_p == pytest.approx(2 / 400)
    (d,) = sequential.decisions(outs, cap=3, resamples=R).values()
    assert (d.state, d.verdict, d.n) == ("clear", "cheaper", 3)


def test_stop_when_decided_plan_and_report_never_contradict() -> None:
    """Random trials (1-3 cases, 4-8 reps, true ratios 0.6-1.0): on the same runs, a clear stop-when-decided decision
    is the report's verdict; a futile one is the report's no clear difference; the plan is clear exactly when the
    report calls cheaper/dearer and never futile then."""
    rng = np.random.default_rng(13)
    seen = set()
    for i in range(24):
        cases, reps, ratio = int(rng.integers(1, 4)), int(rng.integers(4, 9)), float(rng.choice([0.6, 0.8, 0.9, 1.0]))
        outs = noisy(rng, ratio, cases, reps)
        (comp,) = compare.compare_arms(outs, resamples=500, seed=i)
        (row,) = planning.plan_rows(outs, resamples=500, seed=i, max_reps=reps)
        (d,) = sequential.decisions(outs, cap=reps, resamples=500, seed=i).values()
        decided = comp.cost_verdict in ("cheaper", "dearer")
        assert (row.state == "clear") == decided and not (decided and row.state == "futile")
        if d.state == "clear":
            head = [o for o in outs if o.rep <= d.n]
            (again,) = compare.compare_arms(head, resamples=500, seed=i)
            assert again.cost_verdict == d.verdict
        if d.state == "futile":
            head = [o for o in outs if o.rep <= d.n]
            assert compare.compare_arms(head, resamples=500, seed=i)[0].cost_verdict == "no clear difference"
        seen.add((d.state, row.state))
    assert {"clear", "futile"} <= {s for s, _ in seen}  # both kinds of decision were exercised


def test_per_case_verdicts_are_decided_on_holm_p() -> None:
    """Three cases, one of them cheaper with p = 2/70 (4 constant runs a side): alone it would read cheaper; its
    family (the arm's three cases) adjusts it by Holm to 3 x 2/70 = 0.086, so it reads no clear difference, and the
    table shows both p-values. Holm is family-wise: three cases all at 2/70 stay undecided too (3 x 2/70 > 0.05; BH,
    used before, passed them all), while at 8 runs a side (p = 2/12,870 each) all three read cheaper."""
    outs = constant({"q1": (500, 1000)}, 4) + [o.replace(case=c, run_id=o.run_id.replace("q1", c)) for c in ("q2", "q3")
                                                for o in constant({"q1": (1000, 1000)}, 4)]
    per_case = {c.cases[0]: c for c in compare.compare_arms(outs, resamples=R, by_case=True)}
    assert per_case["q1"].cost_p == pytest.approx(2 / 70) and per_case["q1"].cost_p_adj == pytest.approx(3 * 2 / 70)
    assert per_case["q1"].cost_verdict == "no clear difference"
    all_cheaper = constant({"q1": (500, 1000), "q2": (600, 1000), "q3": (700, 1000)}, 4)
    assert {c.cost_verdict for c in compare.compare_arms(all_cheaper, resamples=R, by_case=True)} == {"no clear difference"}
    all_cheaper = constant({"q1": (500, 1000), "q2": (600, 1000), "q3": (700, 1000)}, 8)
    assert {c.cost_verdict for c in compare.compare_arms(all_cheaper, resamples=R, by_case=True)} == {"cheaper"}
    from pytest_agentrace.report.stats_text import report_lines

    text = "\n".join(report_lines(build_report(outs, resamples=R)))
    row = next(line for line in text.splitlines() if line.startswith("| q1 ") and "| docs " in line)
    assert "0.029 (0.086)" in row and "no clear difference" in row


def test_stratified_pass_rate_test_and_bounded_intervals() -> None:
    """Fixed cases over pass rates: the stratified exact test (hypergeometric per case) against a brute-force count of
    every relabelling, the MOVER-Wilson interval within [-1, 1] and equal to Newcombe's for one case; the score
    interval of a race within 0-100."""
    import itertools

    tables = [(3, 3, 0, 3), (2, 3, 1, 3)]  # passes of the arm and the baseline in two cases of 3 + 3 runs
    cells = [[1] * ka + [0] * (na - ka) + [1] * kb + [0] * (nb - kb) for ka, na, kb, nb in tables]
    observed = sum(ka / na - kb / nb for ka, na, kb, nb in tables) / 2
    hits = total = 0
    for picks in itertools.product(*(itertools.combinations(range(6), 3) for _ in tables)):
        d = sum(sum(c[i] for i in p) / 3 - (sum(c) - sum(c[i] for i in p)) / 3 for c, p in zip(cells, picks, strict=True)) / 2
        total += 1
        hits += abs(d) >= abs(observed) - 1e-9
    assert strata.stratified_binary_p(tables) == pytest.approx(hits / total)
    lo, hi = strata.stratified_pass_interval([(4, 4, 0, 4), (4, 4, 0, 4)])
    assert -1.0 <= lo < hi <= 1.0
    assert strata.stratified_pass_interval([(3, 5, 1, 4)]) == pytest.approx(stats.newcombe_interval(3, 5, 1, 4))
    assert stats.bounded((-47.1, 207.1), 0.0, 100.0) == (0.0, 100.0) and stats.bounded(None, 0, 1) is None
    outs = constant({"q1": (500, 1000), "q2": (600, 1000)}, 4)
    (comp,) = compare.compare_arms(outs, resamples=R)
    assert comp.pass_test == "stratified exact" and comp.pass_p == 1.0 and -1.0 <= comp.pass_diff_ci[0] <= comp.pass_diff_ci[1] <= 1.0
    assert -100.0 <= comp.score_delta_ci.lo <= comp.score_delta_ci.hi <= 100.0
    # three questions where every docs run passes and every baseline run fails: better on these cases (p = 2/70^3),
    # while a sign-flip test over the 3 cases (new cases like these) cannot go below 0.25
    fails = [o.replace(status="failed") if o.arm == "base" else o for o in constant({"q1": (500, 1000), "q2": (600, 1000), "q3": (700, 1000)}, 4)]
    (fixed,) = compare.compare_arms(fails, resamples=R)
    assert fixed.pass_p == pytest.approx(2 / 70**3) and fixed.pass_diff == 1.0 and fixed.pass_diff_ci[0] > 0 and fixed.pass_verdict == "better"
    assert fixed.score_verdict == "better" and fixed.score_delta_ci.hi <= 100.0
    (cases,) = compare.compare_arms(fails, resamples=R, target="cases")
    assert cases.pass_test == "sign-flip" and cases.pass_p == pytest.approx(0.25) and cases.pass_verdict == "no clear difference"


def test_new_cases_target_names_its_answer() -> None:
    """The same data under --agentrace-generalize cases: clustered-t interval and sign-flip, no verdict with 2 cases, and
    the report's target line and method say which question was answered."""
    outs = constant({"port": (142, 288), "storage": (161, 288)}, 4)
    fixed, cases = build_report(outs, resamples=R), build_report(outs, resamples=R, target="cases")
    assert fixed.footer["target"] == "fixed" and cases.footer["target"] == "cases"
    (comp,) = cases.comparisons
    assert comp.cost_test == "sign-flip" and comp.cost_p == pytest.approx(0.5) and comp.cost_verdict == "no clear difference"
    assert "clustered-t" in cases.footer["method"] and "stratified by case" in fixed.footer["method"]
    assert comp.relative_cost_ci.method == "clustered-t" and comp.relative_cost == pytest.approx(math.sqrt(142 / 288 * 161 / 288))
    (row,) = planning.plan_rows(outs, resamples=R, target="cases")
    assert row.state == "add cases" and "a verdict needs 6 or more cases" in row.state_text()
    with pytest.raises(ValueError, match="choose fixed or cases"):
        build_report(outs, target="runs")


@pytest.mark.parametrize("alternative", ["two-sided", "less", "greater"])
def test_stratified_binary_p_on_one_lattice_is_the_general_convolution(alternative: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Tables of one size (the common case) take the whole-number convolution of the arm's passes; its p-value is
    the general path's (outer sums, rounded and merged) to 1e-12, for small and many cases."""
    rng = np.random.default_rng(7)
    for n, k, rate in ((4, 3, 0.5), (8, 10, 0.3), (10, 200, 0.7)):
        tables = [(int(rng.binomial(n, rate)), n, int(rng.binomial(n, rate + 0.1)), n) for _ in range(k)]
        fast = strata.stratified_binary_p(tables, alternative)
        with monkeypatch.context() as m:
            m.setattr(strata, "_one_lattice", lambda *args: None)
            general = strata.stratified_binary_p(tables, alternative)
        assert fast == pytest.approx(general, rel=1e-12, abs=1e-15)
