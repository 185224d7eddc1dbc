"""Verdict rules and ``--agentrace-fail-on`` gates. Pure functions; no pytest import. Its words (targets, gate
verdicts, ``GATE_CELLS``) are read by ``options`` at every pytest start, so it imports ``stats.numerics`` (the
exact tests) only inside the one rule that runs a test.

A verdict is the decision of one comparison, always read together with its interval:

- ``cheaper`` / ``dearer`` (relative cost vs the baseline arm): the relative-cost interval excludes 1.00 *and*
  the exact test behind it agrees at ``alpha``. Over several cases the test depends on the inference target
  (``FIXED``, the default: a permutation test with arm labels permuted within each case; ``CASES``: a sign-flip
  test on per-case log ratios); one case: the permutation test on its runs. A bootstrap interval alone is
  anti-conservative at 4-12 runs (the project's A/A simulation, ``tests/test_sim_aa.py``, measured 5.5-7.8% false
  positives for it alone at a nominal 5%); requiring the exact test keeps the false-positive rate at or below
  ``alpha``. ``provisional`` below 8 runs per arm in some case.
- ``better`` / ``worse`` (per metric: pass rate, score): the same two conditions on a difference whose null is 0;
  with one case the pass-rate verdict is Boschloo's exact test alone.
- per-case verdicts (one comparison per case, reported together) are decided on their Holm adjusted p-values
  (``compare.with_bh``, family: the cases of one arm and agent, per metric), so the chance of any false per-case
  verdict - also among the cases without an effect when other cases truly differ - stays at or below ``alpha``
  (family-wise; Benjamini-Hochberg, used before, bounded only the false-discovery rate).
- ``regressed`` / ``dearer`` / ``improved`` / ``same`` / ``not run`` / ``new`` (a session against a snapshot):
  see ``snapshot_verdict``. ``same`` means no change could be shown, not that none exists.
- ``no clear difference``: nothing could be shown.
"""

from __future__ import annotations

import enum
import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_agentrace.errors import did_you_mean

PROVISIONAL_RUNS = 8  # a cost verdict with fewer runs per arm in some case than this is marked provisional
SNAPSHOT_MIN_RUNS = 4  # a snapshot token verdict needs at least this many runs a side
REGRESSION_ALPHA = 0.05  # one-sided level of the snapshot pass-rate tests (see snapshot_verdict for why not 0.1)
SAME_NOTE = "`same` means no change could be shown, not that none exists"

# inference targets (``--agentrace-generalize``): what a verdict over several cases is about
FIXED = "fixed"  # the cases this trial ran: runs vary, cases are kept (the default)
CASES = "cases"  # new cases like these: cases are a sample too
TARGETS = (FIXED, CASES)
TARGET_TEXT = {FIXED: "these cases (fixed cases; --agentrace-generalize cases asks about new cases like these)",
               CASES: "new cases like these (cases resampled; the default asks about the cases that ran)"}


def check_target(target: str) -> str:
    """``target`` when it is one of ``TARGETS``; raises ``ValueError`` naming the choices otherwise."""
    if target not in TARGETS:
        raise ValueError(f"generalize: choose {' or '.join(TARGETS)}, not {target!r}")
    return target


class Verdict(enum.StrEnum):
    """Every verdict word the statistics produce (values are what reports print and JSON carries)."""

    CHEAPER = "cheaper"
    DEARER = "dearer"
    BETTER = "better"
    WORSE = "worse"
    NO_CLEAR = "no clear difference"
    REGRESSED = "regressed"
    IMPROVED = "improved"
    SAME = "same"
    NOT_RUN = "not run"
    NEW = "new"
    ERRORS = "errors"  # a cell whose runs were all infrastructure errors: nothing to compare (``--fail-on errors``)


def significant(interval: Any, p: float | None, alpha: float, null: float) -> int:
    """+1 / -1 when ``interval`` lies wholly above / below ``null`` and ``p < alpha``; else 0."""
    if interval is None or not interval.defined or p is None or p >= alpha:
        return 0
    if interval.lo > null:
        return 1
    if interval.hi < null:
        return -1
    return 0


def cost_signs(lo, hi, p, alpha: float = 0.05):
    """Vectorised ``significant`` for relative cost (null 1.00): arrays ``lo``, ``hi``, ``p`` -> -1 (cheaper),
    +1 (dearer) or 0 per entry; NaN bounds or p never count."""
    import numpy as np

    lo, hi, p = (np.asarray(x, dtype=float) for x in (lo, hi, p))
    with np.errstate(invalid="ignore"):
        ok = p < alpha
        return np.where(ok & (lo > 1.0), 1, np.where(ok & (hi < 1.0), -1, 0))


def cost_verdict(interval: Any, p: float | None, alpha: float = 0.05) -> str:
    """``cheaper`` / ``dearer`` / ``no clear difference`` for a relative-cost interval (null 1.00) and its test's p."""
    sign = significant(interval, p, alpha, 1.0)
    return (Verdict.CHEAPER if sign < 0 else Verdict.DEARER if sign > 0 else Verdict.NO_CLEAR).value


def difference_verdict(interval: Any, p: float | None, alpha: float = 0.05, higher_is_better: bool = True) -> str:
    """``better`` / ``worse`` / ``no clear difference`` for a difference interval (null 0) and its test's p."""
    sign = significant(interval, p, alpha, 0.0) * (1 if higher_is_better else -1)
    return (Verdict.BETTER if sign > 0 else Verdict.WORSE if sign < 0 else Verdict.NO_CLEAR).value


def test_verdict(p: float | None, diff: float | None, alpha: float = 0.05) -> str:
    """``better`` / ``worse`` from an exact test alone (Boschloo on one case): p < alpha, direction of ``diff``."""
    if p is None or diff is None or p >= alpha or diff == 0:
        return Verdict.NO_CLEAR.value
    return (Verdict.BETTER if diff > 0 else Verdict.WORSE).value


def provisional(n_arm: int, n_base: int) -> bool:
    """True when either side has fewer than ``PROVISIONAL_RUNS`` runs (the verdict may change with more runs).
    Comparisons over several cases pass the fewest runs of any case and side (runs per arm per case)."""
    return min(n_arm, n_base) < PROVISIONAL_RUNS


def snapshot_verdicts(old_passed: int, old_total: int, new_passed: int, new_total: int, ratio: Any = None, ratio_p: float | None = None,
                      tolerance: float = 0.10, alpha: float = REGRESSION_ALPHA, token_alpha: float = 0.05, pass_test: Any = None,
                      runs_per_side: int | None = None, pass_rates: tuple[float, float] | None = None) -> tuple[list[str], list[str]]:
    """``snapshot_tests`` without the gate p-values."""
    found, detail, _ = snapshot_tests(old_passed, old_total, new_passed, new_total, ratio, ratio_p, tolerance, alpha, token_alpha,
                                      pass_test, runs_per_side, pass_rates)
    return found, detail


def snapshot_tests(old_passed: int, old_total: int, new_passed: int, new_total: int, ratio: Any = None, ratio_p: float | None = None,
                   tolerance: float = 0.10, alpha: float = REGRESSION_ALPHA, token_alpha: float = 0.05, pass_test: Any = None,
                   runs_per_side: int | None = None,
                   pass_rates: tuple[float, float] | None = None) -> tuple[list[str], list[str], dict[str, float]]:
    """Verdicts of one cell against its snapshot (a cell can be both ``regressed`` and ``dearer``: each gate must
    see both), with detail phrases.

    - ``regressed``: pass rate lower, one-sided Boschloo exact test p < ``alpha`` (default 0.05). Issue 5 asked
      for p < 0.1 *and* for an A/A false-regression rate at or below 5%; a level-0.1 test cannot promise the
      second (one-sided Boschloo at 0.1 flags 5-9% of unchanged cells at 4-12 runs, computed exactly in
      ``tests/test_sim_aa.py``), while at 0.05 the exact test guarantees it at every n. ``alpha`` is an option.
    - ``dearer`` / ``improved``: the token ratio (new / old) interval excludes 1.00 and lies wholly beyond the
      ``tolerance`` (above ``1 + tol`` / below ``1 - tol``), the permutation test agrees at ``token_alpha``, and
      each side has at least ``SNAPSHOT_MIN_RUNS`` runs with tokens. ``improved`` also when the pass rate is
      higher with one-sided p < ``alpha``.
    - otherwise ``same``; a lower pass rate that the sample cannot tell from noise says "lower pass rate, within noise".
    ``improved`` only when neither of the first two holds; ``same`` when nothing does. ``ratio``: a
    ``stats.Contrast`` of kind ratio (or None).

    Over several cases (a snapshot's pooled row): ``pass_test`` ``(name, p_less, p_greater)`` replaces Boschloo
    (the stratified exact test, or the sign-flip test over cases), ``pass_rates`` ``(old, new)`` the rates it
    compares (means over cases), and ``runs_per_side`` (the fewest runs of any case and side) the run count that
    must reach ``SNAPSHOT_MIN_RUNS``.

    The third item gives, per gateable verdict, the p-value of the test behind it (what a family-wise gate
    adjusts, ``gate_family``): ``regressed`` the one-sided pass-rate p towards a lower rate; ``dearer`` the token
    test's two-sided p when the ratio is above 1 (else 1: read with the direction it is a valid one-sided p);
    ``improved`` twice the smaller of the one-sided higher-rate p and the token p below 1 (Bonferroni over its two
    routes). The token test's route is there only when it could run (a ratio with a p-value and at least
    ``SNAPSHOT_MIN_RUNS`` runs with tokens a side): without it ``dearer`` has no entry (no test to count in a gate's
    family), and ``improved`` is the pass-rate route alone, not doubled.
    """
    gate_p = {Verdict.REGRESSED.value: 1.0, Verdict.IMPROVED.value: 1.0}
    token_p: float | None = None  # the token test's p towards improved (None: it did not run)
    up_p = 1.0
    detail: list[str] = []
    old_rate = old_passed / old_total if old_total else None
    new_rate = new_passed / new_total if new_total else None
    if pass_rates is not None:
        old_rate, new_rate = pass_rates
    regressed = improved_pass = False
    if old_rate is not None and new_rate is not None and new_rate != old_rate:
        side = "less" if new_rate < old_rate else "greater"
        if pass_test is not None:
            name, p = pass_test[0], pass_test[1] if side == "less" else pass_test[2]
        else:
            # imported here: options reads this module's words at every pytest start, numerics is for sessions that test
            from pytest_agentrace.stats.numerics import boschloo_p, exact_test_name

            name = exact_test_name(new_total, old_total)
            p = boschloo_p(new_passed, new_total, old_passed, old_total, side)
        p = 1.0 if p is None else p
        if new_rate < old_rate:
            gate_p[Verdict.REGRESSED.value] = p
        else:
            up_p = p
        if new_rate < old_rate:
            regressed = p < alpha
            detail.append(f"lower pass rate (one-sided {name} p={p:.3g} < {alpha:g})" if regressed else f"lower pass rate, within noise (p={p:.2g})")
        else:
            improved_pass = p < alpha
            detail.append(f"higher pass rate (one-sided {name} p={p:.3g})" if improved_pass else f"higher pass rate, within noise (p={p:.2g})")
    dearer = improved_cost = False
    if ratio is not None and ratio.estimate is not None:
        iv = ratio.interval
        enough = (min(ratio.n_arm, ratio.n_base) if runs_per_side is None else runs_per_side) >= SNAPSHOT_MIN_RUNS
        sign = significant(iv, ratio_p, token_alpha, 1.0) if enough else 0
        if enough and ratio_p is not None:
            gate_p[Verdict.DEARER.value] = ratio_p if ratio.estimate > 1 else 1.0
            token_p = 1.0 if ratio.estimate > 1 else ratio_p
        dearer = sign > 0 and iv.lo > 1.0 + tolerance
        improved_cost = sign < 0 and iv.hi < 1.0 - tolerance
        text = f"tokens x{ratio.estimate:.2f}"
        if iv.defined:
            text += f" (95% CI {iv.lo:.2f}-{iv.hi:.2f})"
        if not enough:
            text += f", fewer than {SNAPSHOT_MIN_RUNS} runs a side"
        elif sign and not (dearer or improved_cost):
            text += f", within the {tolerance:.0%} tolerance"
        detail.append(text)
    if regressed and dearer:
        detail.append("also dearer")
    found = [v.value for v, hit in ((Verdict.REGRESSED, regressed), (Verdict.DEARER, dearer)) if hit]
    if not found and (improved_cost or improved_pass):
        found = [Verdict.IMPROVED.value]
    gate_p[Verdict.IMPROVED.value] = up_p if token_p is None else min(1.0, 2.0 * min(up_p, token_p))
    return found or [Verdict.SAME.value], detail, gate_p


@functools.lru_cache(maxsize=4096)
def _reachable_p(n_new: int, old_passed: int, old_total: int, side: str) -> float:
    """The smallest one-sided Boschloo p a cell of ``n_new`` runs can reach against ``old_passed / old_total``:
    that of the most extreme table (none passed for ``less``, all for ``greater``; Boschloo's p is monotone in the
    new side's count)."""
    from pytest_agentrace.stats.numerics import boschloo_p

    return boschloo_p(0 if side == "less" else n_new, n_new, old_passed, old_total, side)


def reachable_p(row: Any, verdict: str) -> float:
    """The smallest p-value the test behind ``verdict`` (regressed / dearer / improved) of snapshot ``row`` could
    give at its run counts, whatever the runs did: 1.0 for a regression of a cell at 0 passed (it cannot fall) and
    an improvement of one that passed every run, the extreme table's exact p for a cell (``_reachable_p``), 0.0
    where it is not computed (a pooled row's test, the token test), so that such a test always counts. A gate's
    family leaves out a test that cannot reach its level (``gate_family``)."""
    old_p, old_t, new_t = (getattr(row, k, None) for k in ("old_passed", "old_total", "new_total"))
    if not old_t or not new_t or verdict == Verdict.DEARER.value:
        return 0.0
    if verdict == Verdict.REGRESSED.value:
        if old_p == 0:
            return 1.0
        return 0.0 if getattr(row, "pooled", False) else _reachable_p(new_t, old_p, old_t, "less")
    up = 1.0 if old_p == old_t else 0.0 if getattr(row, "pooled", False) else _reachable_p(new_t, old_p, old_t, "greater")
    if Verdict.DEARER.value in (getattr(row, "gate_p", None) or {}):  # the token route could run too: Bonferroni over the two
        return 0.0
    return up


def snapshot_verdict(old_passed: int, old_total: int, new_passed: int, new_total: int, ratio: Any = None, ratio_p: float | None = None,
                     tolerance: float = 0.10, alpha: float = REGRESSION_ALPHA, token_alpha: float = 0.05) -> tuple[str, list[str]]:
    """The first of ``snapshot_verdicts`` (by precedence: regressed, dearer, improved, same) and the detail phrases."""
    found, detail = snapshot_verdicts(old_passed, old_total, new_passed, new_total, ratio, ratio_p, tolerance, alpha, token_alpha)
    return found[0], detail


# ---------------------------------------------------------------------------------------------- gates

_METRIC = re.compile(r"^(?P<metric>pass@|pass\^|flip|pass_rate)(?P<k>\d*)\s*(?P<op><=|>=|<|>)\s*(?P<value>\d*\.?\d+)$")
GATE_VERDICTS = {v.value.replace(" ", "-"): v for v in Verdict if v not in (Verdict.SAME, Verdict.NO_CLEAR)}
GATE_HELP = ("a comma-separated list of verdicts (" + ", ".join(sorted(GATE_VERDICTS)) + ") and thresholds such as "
             "'pass@3<0.9', 'pass^3<0.5' (per cell), 'flip>0.2' (share of flipping cases per agent and arm), 'pass_rate<0.8' (per cell)")


@dataclass(frozen=True)
class Gate:
    """One ``--agentrace-fail-on`` condition: a verdict word, or ``metric[k] op value``."""

    text: str
    verdict: str | None = None
    metric: str | None = None
    k: int | None = None
    op: str = "<"
    value: float = 0.0

    def breached(self, x: float | None) -> bool:
        if x is None:
            return False
        return {"<": x < self.value, "<=": x <= self.value, ">": x > self.value, ">=": x >= self.value}[self.op]


def parse_fail_on(values: str | Sequence[str] | None) -> list[Gate]:
    """Parse ``--agentrace-fail-on`` values (comma-separated, repeatable). Raises ``ValueError`` naming the bad item."""
    if not values:
        return []
    items = [values] if isinstance(values, str) else list(values)
    gates = []
    for item in (x.strip() for chunk in items for x in chunk.split(",")):
        if not item:
            continue
        word = item.lower().replace(" ", "-")
        if word in GATE_VERDICTS:
            gates.append(Gate(item, verdict=GATE_VERDICTS[word].value))
            continue
        m = _METRIC.match(item.replace(" ", ""))
        if not m:
            raise ValueError(f"--agentrace-fail-on: unknown gate {item!r}{did_you_mean(word, GATE_VERDICTS)}; use {GATE_HELP}")
        metric, k = m["metric"], m["k"]
        if metric in ("pass@", "pass^") and not k:
            raise ValueError(f"--agentrace-fail-on: {item!r} needs k, e.g. '{metric}3<0.9'")
        if metric in ("flip", "pass_rate") and k:
            raise ValueError(f"--agentrace-fail-on: {item!r}: {metric} takes no k")
        gates.append(Gate(item, metric=metric, k=int(k) if k else None, op=m["op"], value=float(m["value"])))
    return gates


SNAPSHOT_GATES = frozenset({Verdict.REGRESSED, Verdict.DEARER, Verdict.IMPROVED})
# ``--agentrace-gate-cells``: how a verdict gate treats the many cells it looks at
HOLM = "holm"  # the default: Holm's adjustment over every test the gates look at (family-wise error <= the rate)
RAW = "raw"  # each cell's own test at its own level: the chance of a false failure grows with the cells
GATE_CELLS = (HOLM, RAW)
GATE_RATE = 0.05  # the family-wise error rate of the verdict gates (``--agentrace-regression-alpha`` sets it)
_METRIC_P = {"relative cost": "cost_p", "pass rate": "pass_p", "score": "score_p"}


def check_gate_cells(mode: str) -> str:
    """``mode`` when it is one of ``GATE_CELLS``; raises ``ValueError`` naming the choices otherwise."""
    if mode not in GATE_CELLS:
        raise ValueError(f"gate-cells: choose {' or '.join(GATE_CELLS)}, not {mode!r}")
    return mode


@dataclass(frozen=True)
class GateTest:
    """One test a verdict gate looks at: ``source`` ``row`` (a snapshot row, ``index`` into the rows) or
    ``comparison`` (an arm-vs-baseline comparison, ``index`` into them), its ``metric`` (the verdict for a row,
    relative cost / pass rate / score for a comparison), the test's ``p`` and Holm's ``adjusted`` p over the family."""

    source: str
    index: int
    metric: str
    p: float
    adjusted: float


@dataclass(frozen=True)
class GateFamily:
    """The family of tests the verdict gates look at and how they are decided.

    ``mode`` ``holm``: a gated verdict fails the session only when its test's Holm-adjusted p is below ``rate``, so
    the chance that a session with no change anywhere fails is at most ``rate`` however many cells there are (Holm
    1979; valid under any dependence between the tests). ``raw``: every cell's verdict at its own level; with ``m``
    independent tests at level ``a`` the chance of a false failure is up to ``1 - (1 - a)^m`` (10 cases x 2 verdicts
    at 0.05: up to 64%; the discrete exact tests make it smaller, 28-38% measured at 10 cases x 8 runs)."""

    mode: str
    rate: float
    tests: tuple[GateTest, ...]
    verdicts: tuple[str, ...]
    left_out: int = 0  # snapshot tests that cannot reach ``rate`` at their run counts (``reachable_p``)
    cannot_fail: tuple[str, ...] = ()  # gated verdicts with rows to test of which no test can reach ``rate``

    def adjusted(self, source: str, index: int) -> dict[str, float]:
        """``{metric: adjusted p}`` of one row or comparison (empty when no gated test looks at it)."""
        return {t.metric: t.adjusted for t in self.tests if t.source == source and t.index == index}

    def passes(self, source: str, index: int, metric: str) -> bool:
        """True when a verdict of this row or comparison and metric may fail the session (``raw``: always;
        ``holm``: adjusted p below ``rate``; a verdict without a test p-value, a sequential decision say, as it is)."""
        if self.mode == RAW:
            return True
        found = [t.adjusted for t in self.tests if t.source == source and t.index == index and t.metric == metric]
        return not found or found[0] < self.rate

    def summary(self, failed: int) -> str:
        """``gate: 44 tests (regressed, dearer over 22 rows) at a family-wise error rate of 5% (Holm); 0 failed.``;
        with no test at all, ``gate: no test to run (...)`` and how many gates failed for that."""
        items = len({(t.source, t.index) for t in self.tests})
        what = ", ".join(self.verdicts) + f" over {items} row{'s' if items != 1 else ''}"
        if not self.tests and not self.left_out:  # no snapshot row or comparison to test: a gate that looks at nothing
            return (f"gate: no test to run ({', '.join(self.verdicts)}: no snapshot row or comparison of arms to test)"
                    + (f"; {failed} gate{'s' if failed != 1 else ''} failed for that (below)." if failed else "."))
        if self.mode == RAW:
            line = (f"gate: {_tests(len(self.tests))} ({what}), each at {self.rate:g} on its own "
                    f"(--agentrace-gate-cells raw: no family-wise rate); {failed} failed.")
        else:
            line = (f"gate: {_tests(len(self.tests))} ({what}) at a family-wise error rate of {self.rate:.0%} "
                    f"(Holm); {failed} failed.")
        if self.left_out:
            line += (f" {_tests(self.left_out)} left out: at these run counts no outcome could reach p < "
                     f"{self.rate:g} (a cell at 0 passed cannot regress, nor one that passed every run improve).")
        if self.cannot_fail:
            line += (f" {', '.join(self.cannot_fail)} cannot fail at these run counts, whatever the runs do: "
                     "add runs (--agentrace-reps) to both the snapshot and the session.")
        return line


def _tests(m: int) -> str:
    return f"{m} test{'s' if m != 1 else ''}"


def gate_family(gates: Iterable[Gate], comparisons: Sequence[Any] = (), snapshot_rows: Sequence[Any] | None = None,
                mode: str = HOLM, rate: float = GATE_RATE) -> GateFamily:
    """Every test the verdict ``gates`` look at (see ``gate_failures`` for which), with Holm-adjusted p-values
    (``numerics.holm_adjust``). A snapshot row contributes one test per gated verdict (its ``gate_p``, from
    ``snapshot_tests``; rows ``not run`` / ``new`` none); a comparison one per metric whose verdict a gate names
    (cheaper / dearer: relative cost; better / worse: pass rate and score). Raises ``ValueError`` for a bad ``mode``.

    A snapshot test that could not give p < ``rate`` at its run counts whatever the runs did (``reachable_p``: the
    regression of a cell at 0 passed, a fall from 2/2 to 0/2) is left out: it can never fail the gate, and counted
    it would only raise every other test's adjusted p (four such tests beside one real fall from 3/3 to 0/3 made
    it pass). Leaving it out keeps the family-wise rate: Holm's bound counts the tests that may reject, and whether
    one may is fixed by the run counts (the snapshot's and the session's plan), not by the outcomes (Tarone's
    argument, Biometrics 46, 1990, with the cut at the family's level). The summary counts them, and names a gated
    verdict none of whose tests could reach the level."""
    from pytest_agentrace.stats.numerics import holm_adjust

    check_gate_cells(mode)
    words = [g.verdict for g in gates if g.verdict]
    raw: list[tuple[str, int, str, float | None]] = []
    left_out, cannot_fail = 0, []
    for word in dict.fromkeys(words):
        if snapshot_rows is not None and word in SNAPSHOT_GATES:
            tested = reachable = 0
            for i, r in enumerate(snapshot_rows):
                gate_p = getattr(r, "gate_p", None)
                if gate_p and word in gate_p:
                    tested += 1
                    if reachable_p(r, word) >= rate:
                        left_out += 1  # it can never fail the gate; counted, it would only raise the others' p
                        continue
                    reachable += 1
                    raw.append(("row", i, word, gate_p[word]))
            if tested and not reachable:
                cannot_fail.append(word)
            continue
        metrics = (("relative cost",) if word in (Verdict.CHEAPER, Verdict.DEARER)
                   else ("pass rate", "score") if word in (Verdict.BETTER, Verdict.WORSE) else ())
        for i, c in enumerate(comparisons):
            for metric in metrics:
                p = getattr(c, _METRIC_P[metric], None)
                if p is not None:
                    raw.append(("comparison", i, metric, p))
    seen: dict[tuple[str, int, str], float] = {}
    for source, i, metric, p in raw:  # better and worse look at the same test: count it once
        seen.setdefault((source, i, metric), float(p))  # type: ignore[arg-type]
    adjusted = holm_adjust(list(seen.values()))
    tests = tuple(GateTest(src, i, m, p, float(a)) for ((src, i, m), p), a in zip(seen.items(), adjusted, strict=True))
    return GateFamily(mode, rate, tests, tuple(dict.fromkeys(words)), left_out, tuple(cannot_fail))


def unanswered_gates(gates: Iterable[Gate], comparisons: Sequence[Any], snapshot_rows: Sequence[Any] | None,
                     arms: Iterable[str], snapshot_written: bool = False) -> list[str]:
    """One failure line per verdict gate that looks at nothing, as a CI gate that cannot look must not pass in
    silence: ``regressed`` and ``improved`` when no snapshot was compared (only a snapshot answers them; not when
    the session writes it, ``snapshot_written``), and an arm-comparison gate (better, worse, cheaper, dearer; not one
    a snapshot answers) when no arm ran beside its baseline at all (``arms``: the arms the runs have; a session of
    one arm, ``-k``, ``--agentrace-arm``, or of tasks, whose only arm is ``default``), and a snapshot gate none of
    whose rows has its test (``dearer`` with no cell's token counts on both sides, say)."""
    gates = list(gates)
    out = [f"{g.text}: nothing to compare: no snapshot was compared (--agentrace-snapshot FILE in a session, "
           "agentrace compare --snapshot FILE after one); give one, or leave this gate out"
           for g in gates if g.verdict in (Verdict.REGRESSED, Verdict.IMPROVED)
           and snapshot_rows is None and not snapshot_written]
    if snapshot_rows is not None:  # a snapshot was compared, but no row has the gated verdict's test
        why = {Verdict.DEARER: f"its token test needs at least {SNAPSHOT_MIN_RUNS} runs with token counts on each side",
               Verdict.REGRESSED: "no cell ran both in the snapshot and now", Verdict.IMPROVED: "no cell ran both in the snapshot and now"}
        out += [f"{g.text}: nothing to compare: no cell of the snapshot could be tested ({why[g.verdict]}); "
                "leave this gate out, or give it runs it can test"
                for g in gates if g.verdict in SNAPSHOT_GATES
                and not any(g.verdict in (getattr(r, "gate_p", None) or {}) for r in snapshot_rows)]
    if comparisons:
        return out
    arms = sorted(set(arms))
    words = (Verdict.BETTER, Verdict.WORSE, Verdict.CHEAPER, Verdict.DEARER)
    return out + [f"{g.text}: nothing to compare: no arm ran beside its baseline arm (arms run: {', '.join(arms) or 'none'}); "
                  "run the baseline arm too, or leave this gate out"
                  for g in gates if g.verdict in words and not (snapshot_rows is not None and g.verdict in SNAPSHOT_GATES)]


def gate_failures(gates: Iterable[Gate], cells: Sequence[Any] = (), comparisons: Sequence[Any] = (),
                  snapshot_rows: Sequence[Any] | None = None, flips: Sequence[Any] = (), mode: str = HOLM,
                  rate: float = GATE_RATE, family: GateFamily | None = None,
                  baselines: Iterable[str] = ()) -> list[str]:
    """One reason line per (gate, failing cell). Inputs are ``cells.CellSummary``, ``cells.ArmComparison``,
    ``snapshot.SnapshotRow`` and ``cells.Reliability`` objects (anything with the same attributes). ``baselines``:
    the agents expected to fail (``noop``, ``expect: fail``), whose cells no threshold gate reads.

    ``snapshot_rows`` is ``None`` when no snapshot was compared. When one was, a verdict that a snapshot
    comparison gives (``SNAPSHOT_GATES``: regressed, dearer, improved) gates the snapshot rows only: a
    regression gate is about change since the snapshot, so an arm that costs more than the baseline arm by
    design (a docs arm, say) does not fail every session. Other verdicts (worse, cheaper, ...) gate the
    arm-vs-baseline comparisons as without a snapshot.

    Verdict gates are decided family-wise (``gate_family``, ``mode`` ``holm``: a verdict fails only when its
    Holm-adjusted p is below ``rate``) unless ``mode`` is ``raw``; ``family`` passes one already built.
    Threshold gates (pass@k, pass^k, flip, pass_rate) are descriptive limits, not tests, and are not adjusted.
    """
    gates, skip = list(gates), set(baselines)
    fam = family if family is not None else gate_family(gates, comparisons, snapshot_rows, mode, rate)
    out: list[str] = []

    def holm(source: str, index: int, metric: str) -> str:
        adj = fam.adjusted(source, index).get(metric)
        return "" if fam.mode == RAW or adj is None else f" (Holm p={adj:.3g}, {_tests(len(fam.tests))})"

    for g in gates:
        if g.verdict:
            against_snapshot = snapshot_rows is not None and g.verdict in SNAPSHOT_GATES
            for i, c in enumerate(() if against_snapshot else comparisons):
                for metric, v in (("relative cost", c.cost_verdict), ("pass rate", c.pass_verdict), ("score", c.score_verdict)):
                    if v == g.verdict and fam.passes("comparison", i, metric):
                        extra = " (provisional)" if metric == "relative cost" and c.provisional else ""
                        out.append(f"{g.text}: {c.agent} arm {c.arm} vs {c.baseline}: {metric} {v}{extra}"
                                   f"{holm('comparison', i, metric)} - {c.summary(metric)}")
            for i, r in enumerate(snapshot_rows or ()):
                if g.verdict in (r.verdict, *getattr(r, "also", ())) and fam.passes("row", i, g.verdict):
                    out.append(f"{g.text}: {r.agent} {r.case} [{r.arm}]: {g.verdict}{holm('row', i, g.verdict)} - {r.detail}")
            if g.verdict == Verdict.ERRORS and snapshot_rows is None:  # without a snapshot: the session's own cells
                out += [f"{g.text}: {c.agent} {c.case} [{c.arm}]: every run an infrastructure error ({c.errors}): nothing measured"
                        for c in cells if c.runs and not c.valid]
        elif g.metric == "flip":
            for f in flips:
                if g.breached(f.flip_rate):
                    out.append(f"{g.text}: {f.agent} arm {f.arm}: flip rate {f.flip_rate:.2f} ({f.flipping} of {f.cases} cases)")
        else:
            for c in cells:
                if c.agent in skip:
                    continue
                if g.metric == "pass_rate":
                    x, label = c.pass_rate, "pass rate"
                else:
                    table = c.pass_at_k if g.metric == "pass@" else c.pass_hat_k
                    x, label = table.get(str(g.k)), f"{g.metric}{g.k}"
                if g.breached(x):
                    out.append(f"{g.text}: {c.agent} {c.case} [{c.arm}]: {label} {x:.2f} ({c.passed}/{c.valid} passed)")
    return out
