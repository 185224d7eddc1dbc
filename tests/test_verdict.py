"""``verdict``: the rules behind every verdict word, and the ``--agentrace-fail-on`` gates."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from pytest_agentrace.stats import numerics as stats
from pytest_agentrace.stats import verdict
from pytest_agentrace.stats.numerics import Interval


def ratio(tokens_new, tokens_old):
    return stats.cluster_contrast([(tokens_new, tokens_old)], "ratio", 0.95, 2000, stats.rng_for(0, "t")), stats.permutation_p(tokens_new, tokens_old)


def test_cost_verdict_needs_interval_and_exact_test() -> None:
    assert verdict.cost_verdict(Interval(0.5, 0.8, "bca"), 0.01) == "cheaper"
    assert verdict.cost_verdict(Interval(1.1, 1.5, "bca"), 0.01) == "dearer"
    assert verdict.cost_verdict(Interval(0.5, 0.8, "bca"), 0.06) == "no clear difference"  # the test disagrees
    assert verdict.cost_verdict(Interval(0.5, 1.2, "bca"), 0.001) == "no clear difference"
    assert verdict.cost_verdict(Interval.none(), 0.001) == "no clear difference"
    assert list(verdict.cost_signs([0.5, 1.1, 0.5, np.nan], [0.8, 1.5, 0.8, np.nan], [0.01, 0.01, 0.2, 0.01])) == [-1, 1, 0, 0]
    assert verdict.provisional(7, 20) and not verdict.provisional(8, 8)


def test_difference_and_test_verdicts() -> None:
    assert verdict.difference_verdict(Interval(0.1, 0.3, "bca"), 0.01) == "better"
    assert verdict.difference_verdict(Interval(0.1, 0.3, "bca"), 0.01, higher_is_better=False) == "worse"
    assert verdict.test_verdict(0.01, -0.5) == "worse" and verdict.test_verdict(0.2, -0.5) == "no clear difference"
    assert verdict.test_verdict(0.01, 0.0) == "no clear difference"


def test_snapshot_verdict_regressed_and_within_noise() -> None:
    v, detail = verdict.snapshot_verdict(8, 8, 2, 8)
    assert v == "regressed" and detail[0].startswith("lower pass rate (one-sided Boschloo p=")
    v, detail = verdict.snapshot_verdict(4, 4, 3, 4)
    assert v == "same" and detail[0].startswith("lower pass rate, within noise")
    v, _ = verdict.snapshot_verdict(2, 8, 8, 8)
    assert v == "improved"
    assert verdict.snapshot_verdict(4, 4, 4, 4) == ("same", [])


def test_snapshot_verdict_tokens_beyond_tolerance_with_enough_runs() -> None:
    old = [1000, 1040, 960, 1020]
    v, detail = verdict.snapshot_verdict(4, 4, 4, 4, *ratio([1500, 1560, 1440, 1530], old))
    assert v == "dearer" and detail[0].startswith("tokens x1.50 (95% CI")
    v, _ = verdict.snapshot_verdict(4, 4, 4, 4, *ratio([600, 624, 576, 612], old))
    assert v == "improved"
    tight = [1000, 1010, 990, 1005]
    v, detail = verdict.snapshot_verdict(4, 4, 4, 4, *ratio([1050, 1060, 1040, 1055], tight))  # clearly +5%: inside the 10% tolerance
    assert v == "same" and detail[0].endswith("within the 10% tolerance")
    v, detail = verdict.snapshot_verdict(3, 3, 3, 3, *ratio([1500, 1560, 1440], old[:3]))
    assert v == "same" and "fewer than 4 runs a side" in detail[0]
    # a regression outranks a cost change in the verdict column, but the cell is dearer too and every gate sees it
    old8 = old * 2
    assert verdict.snapshot_verdict(8, 8, 1, 8, *ratio([1500, 1560, 1440, 1530] * 2, old8))[0] == "regressed"
    found, detail = verdict.snapshot_verdicts(8, 8, 1, 8, *ratio([1500, 1560, 1440, 1530] * 2, old8))
    assert found == ["regressed", "dearer"] and detail[-1] == "also dearer"
    row = SimpleNamespace(agent="a", case="q", arm="base", verdict=found[0], also=tuple(found[1:]), detail="; ".join(detail))
    fails = verdict.gate_failures(verdict.parse_fail_on("dearer"), snapshot_rows=[row])
    assert len(fails) == 1 and fails[0].startswith("dearer: a q [base]: dearer - lower pass rate")


def test_parse_fail_on() -> None:
    gates = verdict.parse_fail_on(["regressed,dearer", "pass^3<0.8", "flip > 0.2", "not run"])
    assert [g.verdict for g in gates] == ["regressed", "dearer", None, None, "not run"]
    assert (gates[2].metric, gates[2].k, gates[2].op, gates[2].value) == ("pass^", 3, "<", 0.8)
    assert (gates[3].metric, gates[3].op, gates[3].value) == ("flip", ">", 0.2)
    assert verdict.parse_fail_on("pass@3<=0.9")[0].k == 3
    assert verdict.parse_fail_on(None) == []
    with pytest.raises(ValueError, match="unknown gate 'cheapest' \\(did you mean 'cheaper'\\?\\)"):
        verdict.parse_fail_on("cheapest")
    with pytest.raises(ValueError, match="unknown gate 'regresed' \\(did you mean 'regressed'\\?\\)"):
        verdict.parse_fail_on("regresed")
    with pytest.raises(ValueError, match="needs k"):
        verdict.parse_fail_on("pass@<0.9")
    with pytest.raises(ValueError, match="takes no k"):
        verdict.parse_fail_on("flip2>0.1")


def test_gate_failures_name_each_failing_cell() -> None:
    comp = SimpleNamespace(agent="a", arm="docs", baseline="base", cost_verdict="dearer", pass_verdict="no clear difference",
                           score_verdict="no clear difference", provisional=True, summary=lambda m: "relative cost 1.50")
    cell = SimpleNamespace(agent="a", case="q1", arm="docs", pass_rate=0.5, passed=2, valid=4, pass_at_k={"3": 0.75}, pass_hat_k={"3": 0.0})
    row = SimpleNamespace(agent="a", case="q1", arm="docs", verdict="regressed", detail="lower pass rate")
    flip = SimpleNamespace(agent="a", arm="docs", flip_rate=0.5, flipping=1, cases=2)
    gates = verdict.parse_fail_on("dearer,regressed,pass^3<0.5,pass@3<0.5,flip>0.25,pass_rate<0.4")
    lines = verdict.gate_failures(gates, [cell], [comp], None, [flip])  # no snapshot: dearer gates the arms
    assert lines == [
        "dearer: a arm docs vs base: relative cost dearer (provisional) - relative cost 1.50",
        "pass^3<0.5: a q1 [docs]: pass^3 0.00 (2/4 passed)",
        "flip>0.25: a arm docs: flip rate 0.50 (1 of 2 cases)",
    ]
    # with a snapshot, dearer and regressed gate change since the snapshot only; other verdicts still gate arms
    comp_worse = SimpleNamespace(**{**vars(comp), "pass_verdict": "worse", "summary": lambda m: "pass rate 0.50 vs 1.00"})
    gates = verdict.parse_fail_on("dearer,regressed,worse")
    assert verdict.gate_failures(gates, [cell], [comp_worse], [row], [flip]) == [
        "regressed: a q1 [docs]: regressed - lower pass rate",
        "worse: a arm docs vs base: pass rate worse - pass rate 0.50 vs 1.00",
    ]


def test_holm_adjust_matches_hand_computation() -> None:
    from pytest_agentrace.stats import numerics

    # sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 -> 0.02, 0.03, 0.06, 0.04 -> running max 0.02, 0.03, 0.06, 0.06
    assert numerics.holm_adjust([0.01, None, 0.04, 0.03, 0.005]) == pytest.approx([0.03, None, 0.06, 0.06, 0.02])


def test_gate_family_holm_keeps_a_lone_raw_hit_from_failing_many_cells() -> None:
    """20 snapshot rows; one reads regressed at raw p 0.01: raw mode fails it, Holm over the 20 tests (0.2) does not;
    at p 0.001 Holm (0.02) fails it too."""
    def rows(p_hit: float):
        out = [SimpleNamespace(agent="a", case=f"q{i}", arm="x", verdict="same", also=(), detail="-",
                               gate_p={"regressed": 0.5}) for i in range(19)]
        return out + [SimpleNamespace(agent="a", case="q19", arm="x", verdict="regressed", also=(), detail="lower",
                                      gate_p={"regressed": p_hit})]
    gates = verdict.parse_fail_on("regressed")
    assert verdict.gate_failures(gates, snapshot_rows=rows(0.01), mode="raw") == ["regressed: a q19 [x]: regressed - lower"]
    assert verdict.gate_failures(gates, snapshot_rows=rows(0.01)) == []
    fam = verdict.gate_family(gates, snapshot_rows=rows(0.001))
    assert fam.adjusted("row", 19) == {"regressed": pytest.approx(0.02)}
    assert verdict.gate_failures(gates, snapshot_rows=rows(0.001), family=fam) == [
        "regressed: a q19 [x]: regressed (Holm p=0.02, 20 tests) - lower"]
    assert fam.summary(1) == "gate: 20 tests (regressed over 20 rows) at a family-wise error rate of 5% (Holm); 1 failed."
    # no snapshot row and no comparison: the gates look at nothing, and the line says so instead of "0 tests; 2 failed"
    empty = verdict.gate_family(verdict.parse_fail_on("regressed,worse"), snapshot_rows=None)
    assert empty.summary(2) == ("gate: no test to run (regressed, worse: no snapshot row or comparison of arms to test); "
                                "2 gates failed for that (below).")
    assert empty.summary(0).endswith("to test).")
    with pytest.raises(ValueError, match="gate-cells: choose holm or raw"):
        verdict.gate_family(gates, snapshot_rows=[], mode="bonferroni")
