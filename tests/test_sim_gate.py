"""Simulation proof (issue 26, item 1): a snapshot gate decided family-wise fails an unchanged session at most at its
stated rate.

Scenario of the acceptance: a trial of 10 cases x 2 arms x 8 runs, true pass rates 0.5 .. 0.95 by case (the same in
both sessions), token costs log-normal (log-sd 0.3 and 0.8) with case scales 10x apart, the same in both sessions.
A snapshot is taken of one session and a second, unchanged session is compared with it as ``agentrace compare
--fail-on regressed,dearer`` does (``cli.stats.compare_and_gate``): ``snapshot.compare`` (20 cell rows and 2 pooled
rows), ``verdict.gate_family`` (Holm over 44 tests: regressed and dearer of 22 rows) and ``verdict.gate_failures``.

Running that path on thousands of sessions would take minutes, so every session first goes through a vectorised
screen of the same tests: a gate can only fail when some test's p is below ``rate / 44`` (Holm's first step). The
screen computes each row's p-values with the same functions (one-sided Boschloo by lookup over the 9 x 9 pass
counts; ``permutation.stratified_permutation_p`` for the tokens, by Monte Carlo with 2,000 relabellings; the pooled
pass-rate test by the normal approximation of its exact conditional null) and keeps a session when any of them is
below ``SCREEN`` times ``rate / 44`` (a 5x margin for the Monte Carlo tests: a true p below the threshold then passes
the screen with probability 1 - 1e-5; 45x for the normal approximation). The kept sessions go through the full
path above. The share of failing sessions must be at most 5% plus two Monte Carlo standard errors; ``raw`` mode on
the same sessions is shown for contrast (the issue measured 28-38% of sessions failing; 55% of 20 here).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import ndtr

from pytest_agentrace.record.model import Outcome, Usage
from pytest_agentrace.stats import numerics as stats
from pytest_agentrace.stats import permutation, snapshot, strata, verdict

CASES, ARMS, RUNS = 10, ("base", "docs"), 8
PASS = np.linspace(0.5, 0.95, CASES)
SCALE = 1000 * np.exp(np.linspace(0, math.log(10), CASES))
RATE = verdict.GATE_RATE
TESTS = 2 * (CASES * len(ARMS) + len(ARMS))  # regressed and dearer of every cell row and pooled row
SCREEN = 5.0
RESAMPLES = 1000  # bootstrap draws and Monte Carlo relabellings of the full path (the product default is 10,000)


def mc_bound(trials: int, rate: float = RATE) -> float:
    return rate + 2 * math.sqrt(rate * (1 - rate) / trials)


def draw(rng, trials: int, sd: float):
    """Per session, arm and case: ``(passes, tokens)`` of the snapshot and of the new session, (T, arms, cases, runs)."""
    shape = (trials, len(ARMS), CASES, RUNS)

    def side():
        passes = rng.random(shape) < PASS[None, None, :, None]
        tokens = np.rint(SCALE[None, None, :, None] * np.exp(rng.normal(-sd * sd / 2, sd, shape)))
        return passes, tokens

    return side(), side()


def boschloo_less_table(n: int) -> np.ndarray:
    """One-sided (new lower) Boschloo p for every (new passes, old passes): the regressed test of a cell row."""
    table = np.ones((n + 1, n + 1))
    for k_new in range(n + 1):
        for k_old in range(n + 1):
            if k_new < k_old:
                table[k_new, k_old] = stats.boschloo_p(k_new, n, k_old, n, "less")
    return table


def pooled_pass_z(k_new, k_old, n: int) -> np.ndarray:
    """One-sided normal-approximation p of the stratified exact test (mean per-case difference, hypergeometric within
    each case given its passes), new lower: (T, cases) pass counts -> (T,)."""
    m = k_new + k_old
    d = (k_new - k_old) / n
    mean = 0.0  # equal runs a side: E[k_new | m] = m / 2, so the expected difference is 0
    var_k = m * (2 * n - m) * n * n / ((2 * n) ** 2 * (2 * n - 1))  # hypergeometric variance of k_new given m
    var = (4.0 / (n * n)) * var_k  # d = (2 k_new - m) / n
    sd = np.sqrt(var.sum(axis=1)) / k_new.shape[1]
    obs = d.mean(axis=1) - mean
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(sd > 0, ndtr(obs / np.where(sd > 0, sd, 1.0)), 1.0)


def screen(old, new, rng) -> np.ndarray:
    """Sessions in which some gated test could be below Holm's first threshold (module docstring)."""
    (old_pass, old_tok), (new_pass, new_tok) = old, new
    trials = old_pass.shape[0]
    limit = RATE / TESTS
    table = boschloo_less_table(RUNS)
    k_old, k_new = old_pass.sum(axis=3), new_pass.sum(axis=3)  # (T, arms, cases)
    keep = (table[k_new, k_old] < limit).any(axis=(1, 2))
    for arm in range(len(ARMS)):
        near = np.flatnonzero(pooled_pass_z(k_new[:, arm], k_old[:, arm], RUNS) < 10 * limit)
        for t in near:  # the exact test where the approximation comes near
            tables = [(int(k_new[t, arm, c]), RUNS, int(k_old[t, arm, c]), RUNS) for c in range(CASES)]
            keep[t] |= strata.stratified_binary_p(tables, "less") < limit
        # a cell's exact permutation p (equal runs a side: |log ratio of means| grows with |sum A - total / 2|) counts
        # the observed labelling, each swap of a run of the larger side for a run of the smaller side at least as
        # large (a sum at least as extreme) and their mirror images: p >= 2 (1 + U) / C(16, 8), U those swaps' number
        a, b = new_tok[:, arm], old_tok[:, arm]  # (T, cases, runs)
        high = (a.sum(axis=2) >= b.sum(axis=2))[:, :, None, None]
        wrong = np.where(high, a[:, :, :, None] > b[:, :, None, :], b[:, :, None, :] > a[:, :, :, None])
        u = (~wrong).sum(axis=(2, 3))  # pairs (run of the larger side, run of the smaller side) with the smaller run larger
        t_idx, c_idx = np.nonzero(2 * (1 + u) / math.comb(2 * RUNS, RUNS) < limit)
        if t_idx.size:  # the exact test where the bound allows a small p
            p = permutation.permutation_p(a[t_idx, c_idx], b[t_idx, c_idx])
            keep[t_idx[p < limit]] = True
        p, _ = permutation.stratified_permutation_p([(new_tok[:, arm, c], old_tok[:, arm, c]) for c in range(CASES)], "ratio", 2000, rng)
        keep |= p < SCREEN * limit
    assert keep.shape == (trials,)
    return keep


def outcomes(passes, tokens, session: str) -> list[Outcome]:
    out = []
    for a, arm in enumerate(ARMS):
        for c in range(CASES):
            for r in range(RUNS):
                out.append(Outcome(run_id=f"trial:q{c}/{arm}/agent/r{r + 1}", kind="trial", source="t.toml", case=f"q{c}", arm=arm,
                                   agent="agent", rep=r + 1, status="passed" if passes[a, c, r] else "failed", session_id=session,
                                   usage=Usage(total_tokens=int(tokens[a, c, r]))))
    return out


def session_fails(old, new, t: int, mode: str) -> bool:
    """``compare --fail-on regressed,dearer`` on session ``t`` (``cli.stats.compare_and_gate`` without printing)."""
    snap = snapshot.make_snapshot(outcomes(old[0][t], old[1][t], "old"))
    rows = snapshot.compare(snap, outcomes(new[0][t], new[1][t], "new"), resamples=RESAMPLES, seed=t)
    gates = verdict.parse_fail_on("regressed,dearer")
    family = verdict.gate_family(gates, snapshot_rows=rows, mode=mode, rate=RATE)
    assert len(family.tests) <= TESTS
    return bool(verdict.gate_failures(gates, snapshot_rows=rows, family=family))


@pytest.mark.parametrize("sd", [0.3, 0.8])
def test_aa_snapshot_gate_family_wise(sd: float) -> None:
    """A/A, 10 cases x 2 arms x 8 runs, ``compare --fail-on regressed,dearer``: share of failing sessions.
    Measured (T = 2,000 sessions per log-sd; the Monte Carlo standard error of a 5% rate is 0.49 points, bound
    5.97%): log-sd 0.3 1.90%, log-sd 0.8 2.60% (83 and 104 sessions screened in). Each cell's test alone
    (``--agentrace-gate-cells raw``) failed 55% of the first 20 sessions at log-sd 0.8."""
    trials = 2000
    rng = np.random.default_rng(2600 + int(10 * sd))
    old, new = draw(rng, trials, sd)
    kept = np.flatnonzero(screen(old, new, rng))
    failed = sum(session_fails(old, new, int(t), verdict.HOLM) for t in kept)
    rate = failed / trials
    se = math.sqrt(RATE * (1 - RATE) / trials)
    print(f"A/A gate, log-sd {sd}: Holm {rate:.2%} of {trials} sessions (MC se {se:.2%}; {kept.size} screened in)")
    assert rate <= mc_bound(trials)
    if sd == 0.8:
        raw = float(np.mean([session_fails(old, new, t, verdict.RAW) for t in range(20)]))
        print(f"  raw (each cell at its own level): {raw:.0%} of 20 sessions")
        assert raw > 0.10  # without the family-wise rule the same sessions fail far more often
