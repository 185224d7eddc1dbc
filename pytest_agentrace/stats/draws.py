"""Random draws owned by the runs they resample, and the statistics report's one pass over them.

Every bootstrap figure of a report resamples the runs of cells (case x arm x agent) and every permutation test
relabels the runs of a case. The draws belong to those runs, not to the figure:

- a cell's bootstrap resamples are ``resamples`` rows of run indices drawn by ``rng_for(seed, "runs", kind, source,
  case, arm, agent, n)`` (``n`` the runs resampled: the cell's valid runs, or those of them with known tokens), the
  same for the cell's token interval, every comparison's cost and score intervals over that case, and the arm's
  intervals over all its cases;
- a case's relabellings (arm against baseline) are ``resamples`` rows of random keys drawn by ``rng_for(seed,
  "labels", kind, source, case, agent, arm, baseline, n_arm, n_base)``, the arm labels the ``n_arm`` smallest keys
  (``permutation.smallest``), the same for the case's cost and score tests and the arm's stratified tests over all
  cases.

Each figure's interval or p-value still rests on ``resamples`` independent resamples of its runs, drawn as before,
so its distribution is what it was (same estimator, same method, same ``resamples``); only the Monte Carlo noise of
figures over the same runs is shared. Draws of different cells, and of different cases, are independent, as the
stratified and two-sample methods assume (the arm's and the baseline's runs are different cells).

``Streams`` hands these draws to the resampling code (``resample``) in the order it asks for them, in place of a
``numpy.random.Generator``; ``figures.report_figures`` computes the cells and comparisons of a report in one pass
over the cases, drawing each cell and case once (``Memo``) and summing the arm's figures over cases as it goes,
which gives the very numbers the figures give one by one (``tests/test_stats_draws.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pytest_agentrace.stats import numerics as stats
from pytest_agentrace.stats import resample

Cell = tuple[str, str, str, str, str]  # kind, source, case, arm, agent
LABEL_BLOCK = 250_000  # keys sorted at once by ``relabelling`` (its working arrays stay in the CPU's cache)


def bootstrap_draws(seed: int, cell: Cell, n: int, resamples: int):
    """The bootstrap resamples owned by ``n`` runs of ``cell``: run indices (resamples, n), as 16-bit integers up
    to 65,535 runs (half the generator's work of 64-bit ones)."""
    import numpy as np

    dtype = np.uint16 if n <= 65_535 else np.int64
    return stats.rng_for(seed, "runs", *cell, n).integers(0, n, size=(resamples, n), dtype=dtype)


def relabelling(seed: int, case: tuple[str, ...], na: int, nb: int, resamples: int):
    """The relabellings owned by case ``case`` (kind, source, case, agent, arm, baseline) of ``na`` arm and ``nb``
    baseline runs: boolean rows (resamples, na + nb) marking the arm's runs (one byte a mark), those whose uniform
    random keys are at most the row's ``na``-th smallest key (``numpy.partition``: the one order statistic, no
    sort). The keys are the generator's raw 64-bit output read as 16-bit integers (32-bit above ``KEY16_RUNS``
    runs; ``random_keys``). A row with more than ``na`` such runs (a tie across the cut: about ``(na + nb) / 2^16``
    of rows with 16-bit keys) is drawn again until it has none, so every row is a uniformly random choice of ``na``
    runs (the rows kept are exchangeable in the runs)."""
    import numpy as np

    rng = stats.rng_for(seed, "labels", *case, na, nb)
    n = na + nb
    marks = np.empty((resamples, n), dtype=bool)
    ties = []
    step = max(4, LABEL_BLOCK // n // 4 * 4)  # rows a block: a multiple of 4, so a block's keys fill whole words
    for start in range(0, resamples, step):  # the generator's stream in blocks of rows: the keys of one call
        rows = marks[start:start + step]
        ties.append(start + np.flatnonzero(_mark(random_keys(rng, rows.shape), na, rows)))
    tied = np.concatenate(ties)
    while tied.size:
        rows = np.empty((tied.size, n), dtype=bool)
        again = _mark(random_keys(rng, rows.shape), na, rows)
        marks[tied] = rows
        tied = tied[again]
    return marks


KEY16_RUNS = 4096  # relabelling keys are 16-bit up to this many runs in a case (ties at the cut in about 6% of rows)


def random_keys(rng, shape: tuple[int, int]):
    """Uniform random integer keys of ``shape`` (rows, n): the raw 64-bit output of ``rng``'s bit generator read as
    ``uint16`` (``n`` up to ``KEY16_RUNS``) or ``uint32`` words, every bit of which is uniform (PCG64), in about half
    the time of ``Generator.integers`` of the same type."""
    import numpy as np

    dtype = np.uint16 if shape[1] <= KEY16_RUNS else np.uint32
    size = shape[0] * shape[1]
    words = -(-size * np.dtype(dtype).itemsize // 8)
    return rng.bit_generator.random_raw(words).view(dtype)[:size].reshape(shape)


def _mark(keys, na: int, out):
    """``out`` (rows, n) True where ``keys`` (rows, n) are at most their row's ``na``-th smallest key; returns the
    rows tied across the cut (more than ``na`` marks) as booleans (rows,)."""
    import numpy as np

    np.less_equal(keys, np.partition(keys, na - 1, axis=1)[:, na - 1:na], out=out)
    return out.view(np.uint8).sum(axis=1, dtype=np.int64) != na


def exact_in_float32(x) -> bool:
    """True when ``x`` holds whole numbers whose absolute values sum below 2^24: every partial sum of them is then a
    whole number a float32 holds exactly, so sums over any subset come out the same in float32 and float64, in any
    order."""
    import numpy as np

    return resample._whole(x) and float(np.abs(x).sum()) < 2.0**24


def label_sums(x, chosen, marks32=None):
    """The sums of ``x`` (1, N) over the runs each relabelling ``chosen`` (M, N) boolean marks, as (1, M) floats:
    ``einsum("tn,rn->tr", x, chosen.astype(float))`` to the bit. When ``exact_in_float32(x)`` (tokens, scores) the
    product is made in float32 (half the memory traffic; ``marks32`` the marks as float32 when in hand), else in
    float64."""
    import numpy as np

    if exact_in_float32(x):
        marks32 = chosen.astype(np.float32) if marks32 is None else marks32
        return np.einsum("tn,rn->tr", x.astype(np.float32), marks32).astype(float)
    return np.einsum("tn,rn->tr", x, chosen.astype(float))


def _counts(seed: int, cell: Cell, n: int, resamples: int):
    """How often each of the ``n`` runs is drawn in each of ``cell``'s resamples: floats (resamples, n)."""
    return resample.counts_of(bootstrap_draws(seed, cell, n, resamples), float)


class Memo:
    """The draws of the cells and cases in hand (one case at a time in ``figures.report_figures``): counts (B, n)
    per ``(cell, n)``, relabellings per ``(case, na, nb)``, resampled means per figure and relabelled sums per data
    set, each made once; with ``keep`` False nothing is kept (a figure over many cases would otherwise hold every
    cell's counts)."""

    def __init__(self, seed: int, resamples: int, keep: bool = True) -> None:
        self.seed, self.resamples, self.keep = seed, resamples, keep
        self.counts: dict[Any, Any] = {}
        self.labels: dict[Any, Any] = {}
        self.means: dict[Any, Any] = {}
        self.sums: dict[Any, Any] = {}
        self.marks32: dict[Any, Any] = {}

    def counted(self, cell: Cell, x, moments: bool = False):
        """``resample.counted_means`` of ``x`` (1, n) over the resamples of ``cell``'s ``n`` runs."""
        n = x.shape[1]
        if not self.keep:
            return resample.counted_means(x, _counts(self.seed, cell, n, self.resamples), moments)
        if (cell, n) not in self.counts:
            self.counts[(cell, n)] = _counts(self.seed, cell, n, self.resamples)
        key = (cell, n, x.tobytes())
        found = self.means.get(key)
        if found is None or (moments and found[1] is None):  # the means alone, or with the variances (same means)
            found = self.means[key] = resample.counted_means(x, self.counts[(cell, n)], True) if moments else \
                (resample.counted_means(x, self.counts[(cell, n)]), None)
        return found if moments else found[0]

    def chosen(self, case: tuple[str, ...], na: int, nb: int):
        key = (case, na, nb)
        if not self.keep:
            return relabelling(self.seed, case, na, nb, self.resamples)
        if key not in self.labels:
            self.labels[key] = relabelling(self.seed, case, na, nb, self.resamples)
        return self.labels[key]

    def summed(self, case: tuple[str, ...], na: int, nb: int, x):
        """``label_sums`` of ``x`` (1, na + nb) over the relabellings of case ``case`` (``chosen``), made once per
        data set (the case's test and the arm's stratified test over all cases sum the same runs)."""
        if not self.keep:
            return label_sums(x, self.chosen(case, na, nb))
        key = (case, na, nb, x.tobytes())
        if key not in self.sums:
            import numpy as np

            chosen = self.chosen(case, na, nb)
            if exact_in_float32(x) and (case, na, nb) not in self.marks32:  # made once for the case's data sets
                self.marks32[(case, na, nb)] = chosen.astype(np.float32)
            self.sums[key] = label_sums(x, chosen, self.marks32.get((case, na, nb)))
        return self.sums[key]


class Streams:
    """A stand-in for the generator of one figure: ``counted`` answers the figure's bootstrap requests in turn
    with the draws of ``cells`` (``(cell, n)`` in the order the figure resamples them: per case the arm's runs,
    then the baseline's), ``chosen`` (or ``summed``) its relabelling requests with those of ``cases`` (``(case, na, nb)``).
    ``memo`` shares the draws between figures; ``sums`` (optional) are the figure's sums over cases made in
    ``report_figures`` (read by ``resample``). Raises ``ValueError`` when asked for more or other draws than given."""

    def __init__(self, memo: Memo, cells: Sequence[tuple[Cell, int]] = (), cases: Sequence[tuple[tuple[str, ...], int, int]] = (),
                 sums: Any = None) -> None:
        self.memo, self.cells, self.cases, self.sums = memo, list(cells), list(cases), sums
        self._cell = self._case = 0

    def counted(self, x, moments: bool = False):
        cell, n = self._next(self.cells, "_cell")
        if n != x.shape[1]:
            raise ValueError(f"draws: cell {cell} owns draws of {n} runs, asked for {x.shape[1]}")
        return self.memo.counted(cell, x, moments)

    def chosen(self, na: int, nb: int):
        return self.memo.chosen(self._case_of(na, nb), na, nb)

    def summed(self, x, na: int, nb: int):
        """``label_sums`` of ``x`` (1, na + nb) over the next case's relabellings (``chosen``, summed)."""
        return self.memo.summed(self._case_of(na, nb), na, nb, x)

    def _case_of(self, na: int, nb: int):
        case, a, b = self._next(self.cases, "_case")
        if (a, b) != (na, nb):
            raise ValueError(f"draws: case {case} owns relabellings of {a} + {b} runs, asked for {na} + {nb}")
        return case

    def _next(self, items: list, attr: str):
        i = getattr(self, attr)
        if i >= len(items):
            raise ValueError("draws: asked for more draws than the figure's cells and cases own")
        setattr(self, attr, i + 1)
        return items[i]
