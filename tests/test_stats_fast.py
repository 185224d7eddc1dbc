"""The statistics' faster paths give the very numbers of the plain ones, to the bit: relabelled sums in float32 for
whole numbers, counts made block by block, relabellings made block by block and from one partition of their keys, and
an interval read from a partitioned row of replicates instead of a sorted one. Each compares the fast path with the plain computation it replaces."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_agentrace.stats import draws, resample

CASE = ("trial", "/s/t.toml", "q0", "a", "docs", "base")


@pytest.mark.parametrize("values", [
    np.arange(1000.0, 1100.0),  # tokens: whole numbers
    np.where(np.arange(100) % 3 == 0, 100.0, 0.0),  # scores of a trial: 0 or 100
    np.linspace(0.1, 77.7, 100),  # not whole: the float64 product
    np.full(100, 2.0**20),  # whole, but their sum passes 2^24: the float64 product
])
def test_relabelled_sums_are_those_of_the_float64_product(values: np.ndarray) -> None:
    marks = draws.relabelling(0, CASE, 40, 60, 3000)
    x = values[None, :]
    plain = np.einsum("tn,rn->tr", x, marks.astype(float))
    assert np.array_equal(draws.label_sums(x, marks), plain)
    memo = draws.Memo(0, 3000)
    assert np.array_equal(memo.summed(CASE, 40, 60, x), plain)
    assert memo.summed(CASE, 40, 60, x) is memo.summed(CASE, 40, 60, x)  # made once


def test_relabellings_made_block_by_block_are_those_of_one_call(monkeypatch: pytest.MonkeyPatch) -> None:
    whole = draws.relabelling(3, CASE, 3, 4, 5000)
    monkeypatch.setattr(draws, "LABEL_BLOCK", 7 * 13)  # 12 rows a block (a multiple of 4), the last one short
    assert np.array_equal(draws.relabelling(3, CASE, 3, 4, 5000), whole)
    assert (whole.sum(axis=1) == 3).all()


def sorted_relabelling(seed: int, case: tuple, na: int, nb: int, resamples: int) -> np.ndarray:
    """``draws.relabelling`` as a sort of the keys gives it: the ``na`` smallest of each row's keys, a row whose
    ``na``-th and ``na + 1``-th smallest keys are equal drawn again, in one block."""
    from pytest_agentrace.stats import numerics

    rng = numerics.rng_for(seed, "labels", *case, na, nb)
    keys = draws.random_keys(rng, (resamples, na + nb))
    ordered = np.sort(keys, axis=1)
    marks = keys <= ordered[:, na - 1:na]
    tied = np.flatnonzero(ordered[:, na - 1] == ordered[:, na])
    while tied.size:
        keys = draws.random_keys(rng, (tied.size, na + nb))
        ordered = np.sort(keys, axis=1)
        marks[tied] = keys <= ordered[:, na - 1:na]
        tied = tied[ordered[:, na - 1] == ordered[:, na]]
    return marks


@pytest.mark.parametrize(("na", "nb"), [(50, 50), (3, 4), (1, 9), (12, 1), (3000, 2000)])
@pytest.mark.parametrize("coarse", [False, True])
def test_relabellings_from_a_partition_are_those_of_the_sorted_keys(
        monkeypatch: pytest.MonkeyPatch, na: int, nb: int, coarse: bool) -> None:
    """The keys at most the row's ``na``-th smallest (one partition) mark the same runs, and find the same ties
    (drawn again), as the sorted keys; with keys of 8 values nearly every row is tied and drawn again. 5,000 runs
    take 32-bit keys."""
    if coarse:
        plain = draws.random_keys
        # 8 values for 16-bit keys; 65,536 for the 32-bit keys of 5,000 runs (ties in about 8% of rows)
        monkeypatch.setattr(draws, "random_keys", lambda rng, shape: plain(rng, shape) >> (13 if shape[1] <= draws.KEY16_RUNS else 16))
    monkeypatch.setattr(draws, "LABEL_BLOCK", 10**9)  # one block: the sorted version above draws in one call
    resamples = 300 if na + nb > draws.KEY16_RUNS else 2000
    want = sorted_relabelling(5, CASE, na, nb, resamples)
    got = draws.relabelling(5, CASE, na, nb, resamples)
    assert np.array_equal(got, want)
    assert (got.sum(axis=1) == na).all()


def test_random_keys_are_uniform_16_and_32_bit_words() -> None:
    """The keys of 100 runs are uint16, of 5,000 runs uint32, each of their 16 (32) bits set in half of 200,000
    keys (within 5 standard errors: 0.0056)."""
    from pytest_agentrace.stats import numerics

    rng = numerics.rng_for(0, "keys")
    for n, dtype in ((100, np.uint16), (5000, np.uint32)):
        keys = draws.random_keys(rng, (200_000 // n, n))
        assert keys.dtype == dtype and keys.shape == (200_000 // n, n)
        bits = (keys.ravel()[:, None] >> np.arange(8 * keys.itemsize, dtype=dtype)) & 1
        assert np.abs(bits.mean(axis=0) - 0.5).max() < 5 * 0.5 / np.sqrt(200_000)


def test_counts_made_block_by_block_are_the_bincount_of_every_row(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(1)
    idx = rng.integers(0, 37, size=(2003, 37), dtype=np.uint16)
    plain = np.bincount((idx + 37 * np.arange(2003)[:, None]).ravel(), minlength=2003 * 37).reshape(2003, 37)
    assert np.array_equal(resample.counts_of(idx), plain)
    monkeypatch.setattr(resample, "COUNT_BLOCK", 500)
    counts = resample.counts_of(idx, float)
    assert counts.dtype == np.float64 and np.array_equal(counts, plain)


@pytest.mark.parametrize("seed", range(6))
def test_an_interval_from_a_partitioned_row_is_that_from_the_sorted_row(seed: int) -> None:
    """One row (the report's case) is partitioned, several rows are sorted: the same row alone and beside another
    gives the same interval, with replicates that are NaN or infinite (dropped) and ties."""
    rng = np.random.default_rng(seed)
    boot = np.round(rng.lognormal(0, 1, size=(2, 4000)), 2)
    boot[0, rng.random(4000) < 0.1] = np.nan
    boot[0, rng.random(4000) < 0.02] = np.inf
    est = np.array([1.1, 0.9])
    jack = rng.normal(1, 0.2, size=(2, 30))
    crit = np.array([2.1, 1.96])
    both = resample.interval(est, boot, jack, crit)
    alone = resample.interval(est[:1], boot[:1], jack[:1], crit[:1])
    for got, want in zip(alone, both, strict=True):
        assert np.array_equal(got, want[:1], equal_nan=True)
