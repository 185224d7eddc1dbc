"""The faster paths of the resampling engine give the same numbers as the paths they replace: the relabellings
picked from sorted keys are ``argsort``'s picks (ties across the cut too), a single row of whole numbers summed from
its drawn indices gives the same bootstrap means as the counts-and-``einsum`` path, and the statistics computed on
threads (``numerics.parallel_map``) come out in order and equal to one thread's."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.report import outcome

from pytest_agentrace.stats import numerics, permutation, resample
from pytest_agentrace.stats.cells import summarize
from pytest_agentrace.stats.compare import compare_arms


@pytest.mark.parametrize(("n", "k"), [(2, 1), (7, 3), (20, 10), (100, 50), (5, 5)])
def test_smallest_marks_the_argsort_picks(n: int, k: int) -> None:
    keys = np.random.default_rng(n * 100 + k).random((4000, n))
    assert np.array_equal(permutation.smallest(keys, k), permutation.indicator(np.argsort(keys, axis=1)[:, :k], n))


def test_smallest_takes_argsorts_pick_where_keys_tie_across_the_cut() -> None:
    keys = np.round(np.random.default_rng(1).random((3000, 8)) * 3)  # values 0..3: ties in most rows
    marks = permutation.smallest(keys, 4)
    assert np.array_equal(marks, permutation.indicator(np.argsort(keys, axis=1)[:, :4], 8))
    assert (marks.sum(axis=1) == 4).all()


def _einsum_means(x: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)  # the counts path, as resampled_means computed every row before
    n = x.shape[1]
    draws = rng.integers(0, n, size=(resamples, n)) + n * np.arange(resamples)[:, None]
    counts = np.bincount(draws.ravel(), minlength=resamples * n).reshape(resamples, n)
    return np.einsum("tn,rn->tr", x, counts) / n


@pytest.mark.parametrize("values", [[1200.0, 1850.0, 990.0, 2210.0, 1500.0, 1731.0, 1402.0],
                                    [0.0, 100.0, 100.0, 0.0, 100.0], [3.0, 2.0**40, 7.0]])
def test_whole_numbers_give_the_same_means_as_the_counts(values: list[float]) -> None:
    x = np.array([values])
    assert resample._whole(x)
    assert np.array_equal(resample.resampled_means(x, 2000, np.random.default_rng(7)), _einsum_means(x, 2000, 7))


def test_fractions_and_huge_values_take_the_counts_path() -> None:
    assert not resample._whole(np.array([[70.5, 90.0]]))
    assert not resample._whole(np.array([[2.0**52, 3.0]]))
    x = np.array([[70.5, 90.0, 12.25, 33.0]])
    assert np.array_equal(resample.resampled_means(x, 500, np.random.default_rng(3)), _einsum_means(x, 500, 3))


def test_parallel_map_keeps_order_and_raises_the_first_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert numerics.workers() == 2
    assert numerics.parallel_map(lambda i: i * i, range(50)) == [i * i for i in range(50)]

    def fail(i: int) -> int:
        if i in (13, 31):
            raise ValueError(f"item {i}")
        return i

    with pytest.raises(ValueError, match="item 13"):
        numerics.parallel_map(fail, range(50))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert numerics.workers() == 1


def _runs() -> list:
    out = []
    for c in range(12):
        for arm in ("plain", "docs"):
            for rep in range(1, 13):
                i = c * 100 + rep * 7 + (arm == "docs")
                out.append(outcome(case=f"q{c:02d}", arm=arm, agent="a", rep=rep, kind="trial", source="t.toml",
                                   status="passed" if (i * 31) % 10 < 7 else "failed",
                                   tokens=(2000 if arm == "plain" else 1500) + (i * 7919) % 600, baseline_arm="plain"))
    return out


def test_threads_give_one_threads_figures(monkeypatch: pytest.MonkeyPatch) -> None:
    runs = _runs()
    figures = {}
    for threads in ("1", "2"):
        monkeypatch.setenv("OMP_NUM_THREADS", threads)
        figures[threads] = ([c.to_dict() for c in summarize(runs, resamples=300)],
                            [c.to_dict() for c in compare_arms(runs, resamples=300)],
                            [c.to_dict() for c in compare_arms(runs, resamples=300, by_case=True)])
    assert figures["1"] == figures["2"]
    assert len(figures["2"][2]) == 12
