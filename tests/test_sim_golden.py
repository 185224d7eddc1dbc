"""Golden numbers (issue 5): a fixed small results folder (``tests/golden/stats_results``) whose report figures
are checked against values computed by hand in this file (plain formulas, not the module under test).

The folder: trial ``golden.toml`` question ``q1``, agent ``a``:
- arm ``base``: reps 1-4 tokens 1000, 1200, 800, 1000 (passed, passed, failed, passed); rep 5 failed, tokens unknown.
- arm ``docs``: reps 1-4 tokens 600, 700, 500, 600, all passed, claims on reps 1-2 (one false pass); rep 5 an
  infrastructure error.
- task file ``golden.yaml``: tasks t1 (x 90, y 10 timed out) and t2 (x 70, y 70.5), scores given.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from scipy.stats import boschloo_exact, nct
from scipy.stats import t as student_t

from pytest_agentrace import cli
from pytest_agentrace.record.runfile import iter_runs
from pytest_agentrace.stats.report import build_report
from pytest_agentrace.stats.score import score_outcomes

GOLDEN = Path(__file__).parent / "golden" / "stats_results"
Z = 1.959963984540054


def wilson(k: int, n: int) -> tuple[float, float]:
    p, d = k / n, 1 + Z * Z / n
    c, h = (p + Z * Z / (2 * n)) / d, Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n)) / d
    return (0.0 if k == 0 else c - h, 1.0 if k == n else c + h)


@pytest.fixture(scope="module")
def report():
    return build_report(score_outcomes([o for _, o in iter_runs(GOLDEN)]), resamples=2000)


def cell(report, arm: str, case: str = "q1", agent: str = "a"):
    return next(c for c in report.cells if (c.case, c.arm, c.agent) == (case, arm, agent))


def test_cell_counts_rates_and_wilson(report) -> None:
    base, docs = cell(report, "base"), cell(report, "docs")
    assert (base.runs, base.valid, base.errors, base.passed, base.tokens_n, base.tokens_unknown) == (5, 5, 0, 3, 4, 1)
    assert (docs.runs, docs.valid, docs.errors, docs.passed, docs.tokens_n, docs.tokens_unknown) == (5, 4, 1, 4, 4, 0)
    assert base.pass_rate == 0.6 and docs.pass_rate == 1.0
    assert base.pass_rate_errors_as_failures == 0.6 and docs.pass_rate_errors_as_failures == 0.8
    assert base.pass_ci == pytest.approx(wilson(3, 5))
    assert base.pass_ci == pytest.approx((0.230724, 0.882379), abs=1e-6)
    assert docs.pass_ci == pytest.approx((0.510109, 1.0), abs=1e-6)
    assert docs.pass_ci_errors_as_failures == pytest.approx(wilson(4, 5))
    assert base.tokens_mean == 1000 and docs.tokens_mean == 600
    assert base.tokens_sd == pytest.approx(math.sqrt(80000 / 3))  # deviations 0, 200, -200, 0
    assert (docs.claims, docs.false_pass, docs.false_fail) == (2, 1, 0)
    assert docs.used_tool == 4 and docs.used_tool_known == 4 and base.used_tool == 0
    assert base.seconds_mean == pytest.approx((11 + 12 + 13 + 14 + 15) / 5)


def test_pass_at_k_and_pass_hat_k(report) -> None:
    base = cell(report, "base")  # 3 of 5 passed
    assert base.pass_at_k["1"] == pytest.approx(0.6)
    assert base.pass_at_k["2"] == pytest.approx(1 - 1 / 10)  # 1 - C(2,2)/C(5,2)
    assert base.pass_at_k["3"] == pytest.approx(1.0)  # C(2,3) = 0
    assert base.pass_hat_k["2"] == pytest.approx(3 / 10)  # C(3,2)/C(5,2)
    assert base.pass_hat_k["3"] == pytest.approx(1 / 10)
    assert base.pass_hat_k["4"] == 0.0 and base.flaky
    rel = {r.arm: r for r in report.reliability if r.kind == "trial"}
    assert (rel["base"].flipping, rel["base"].cases, rel["base"].flip_rate) == (1, 1, 1.0)
    assert rel["docs"].flip_rate == 0.0


def test_relative_cost_and_pass_rate_comparison(report) -> None:
    (comp,) = [c for c in report.comparisons if c.kind == "trial"]
    assert (comp.arm, comp.baseline, comp.runs_arm, comp.runs_base, comp.errors_arm, comp.errors_base) == ("docs", "base", 4, 5, 1, 0)
    assert comp.relative_cost == pytest.approx(0.6)  # 600 / 1000
    assert comp.relative_cost_ci.lo < 0.6 < comp.relative_cost_ci.hi < 1.0
    assert comp.cost_test == "permutation" and comp.cost_p == pytest.approx(2 / 70)  # complete separation, C(8,4) = 70
    assert comp.cost_verdict == "cheaper" and comp.provisional  # 4 runs < 8
    assert comp.pass_diff == pytest.approx(0.4)
    l1, u1 = wilson(4, 4)
    l0, u0 = wilson(3, 5)
    assert comp.pass_diff_ci == pytest.approx((0.4 - math.hypot(1 - l1, u0 - 0.6), 0.4 + math.hypot(u1 - 1, 0.6 - l0)), abs=1e-9)
    assert comp.pass_diff_ci == pytest.approx((-0.165448, 0.769276), abs=1e-6)
    assert comp.boschloo_p == pytest.approx(boschloo_exact([[4, 3], [0, 2]]).pvalue)
    assert comp.pass_verdict == "no clear difference"
    assert comp.pass_rate_arm_errors_as_failures == 0.8 and comp.pass_rate_base_errors_as_failures == 0.6
    # Cohen's d on per-run scores (100 if passed): docs 100 x4, base 100, 100, 0, 100, 0
    pooled_var = (0 + 4 * (3 * 40**2 + 2 * 60**2) / 4) / 7
    assert comp.cohens_d == pytest.approx((100 - 60) / math.sqrt(pooled_var))
    assert comp.tokens_unknown == 1


def test_spread_and_runs_needed(report) -> None:
    (sp,) = [s for s in report.spread if s.kind == "trial"]
    cv_base, cv_docs = math.sqrt(80000 / 3) / 1000, math.sqrt(20000 / 3) / 600
    assert sp.cv == pytest.approx(math.sqrt((3 * cv_base**2 + 3 * cv_docs**2) / 6))
    assert sp.cv == pytest.approx(0.150308, abs=1e-6)

    def power(n: int) -> float:  # two-sample t test on log cost, sigma^2 = ln(1 + CV^2), 20% drop
        nu, lam = 2 * n - 2, abs(math.log(0.8)) / (math.sqrt(math.log1p(sp.cv**2)) * math.sqrt(2 / n))
        crit = student_t.ppf(0.975, nu)
        return nct.sf(crit, nu, lam) + nct.cdf(-crit, nu, lam)

    assert power(sp.runs_needed - 1) < 0.8 <= power(sp.runs_needed) and sp.runs_needed == 9


def test_races_elo_and_coderace_statistics(report) -> None:
    races = {r.agent: r for r in report.races}
    x, y = races["x"], races["y"]
    e = 1 / (1 + 10 ** ((1484 - 1516) / 400))  # t1: x wins -> 1516 / 1484; t2 (70 vs 70.5): a draw
    assert x.elo == pytest.approx(1516 + 32 * (0.5 - e))
    assert x.elo == pytest.approx(1514.530498, abs=1e-6)
    assert y.elo == pytest.approx(1484 - 32 * (0.5 - e))
    assert (x.wins, x.races, x.win_rate, y.wins, y.win_rate) == (1, 2, 0.5, 0, 0.0)
    assert x.score_mean == 80 and x.score_sd == pytest.approx(math.sqrt(200))
    # Wilson's interval of 80/100 over 2 runs, times 100 (a 0-100 score's variance is at most m (100 - m))
    center, half = (0.8 + Z * Z / 4) / (1 + Z * Z / 2), Z * math.sqrt(0.8 * 0.2 / 2 + Z * Z / 16) / (1 + Z * Z / 2)
    assert x.score_ci == pytest.approx((100 * (center - half), 100 * (center + half)), abs=1e-6)
    assert x.score_ci == pytest.approx((22.31, 98.24), abs=0.01)
    assert x.consistency == pytest.approx(1 - math.sqrt(200) / 80)
    assert y.consistency == 0.0 and y.reliability == 0.5 and x.reliability == 1.0


def test_cli_report_json_and_text_show_the_same_figures(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["report", str(GOLDEN), "--format", "json", "--resamples", "2000"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (comp,) = [c for c in doc["comparisons"] if c["kind"] == "trial"]
    assert comp["relative_cost"] == pytest.approx(0.6) and comp["cost_verdict"] == "cheaper" and comp["provisional"] is True
    assert doc["footer"]["errors"] == 1 and doc["footer"]["tokens_unknown"] == 1 and doc["footer"]["runs"] == 14
    assert cli.main(["report", str(GOLDEN), "--resamples", "2000"]) == 0
    text = capsys.readouterr().out
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines() if line.startswith("| docs ")]
    assert rows[0][:4] == ["docs", "4 (+1 error)", "4/4 100% (51%-100%)", "600 (500-700)"]
    assert rows[0][5] == "cheaper (provisional)" and rows[0][4].startswith("0.60 (")
    # the arm family's p-values are this comparison's cost p (2/70) and pass p (Boschloo 0.253): BH doubles the
    # smaller one (2/70 * 2/1 = 0.057) and leaves the larger (0.253 * 2/2)
    assert rows[0][6] == "0.029 (0.057)" and rows[1][6] == "0.253"
    assert "BH p = Benjamini-Hochberg adjusted over the arm-vs-baseline comparisons" in text and "Holm p = Holm adjusted" in text
    assert rows[1][:4] == ["docs", "100% vs 60%", "80% vs 60% (1 error)", "+0.40 (-0.17 to +0.77)"]
    assert "1 infrastructure error (excluded), 1 run with unknown tokens" in text
