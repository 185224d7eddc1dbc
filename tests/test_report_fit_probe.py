"""``report.fit`` narrows a table by rendering its probe (``probe_rows``: each column's distinct values), not every
row: the probe is exactly as wide as the table, column by column, under any wrap limits, so the fitted table is the
one that narrowing the whole table step by step gives. Seeded random tables of the kinds the reports print: names,
hyphenated words, numbers (ints, floats, ``1,000``, ``-``, None), multi-line cells and separating lines."""

from __future__ import annotations

import random

import pytest
import tabulate

from pytest_agentrace.report import fit as fit_module
from pytest_agentrace.report.fit import _column_widths, _render, fit, line_width, probe_rows

WORDS = ["claude", "codex", "docs-first", "plain", "fix-the-task-scheduler-deadlock", "a", "gpt-5 high", "1,000",
         "0.70", "12.5", "-", "", "yes (3/3)", "[0.41, 0.93]", "cheaper", "no clear difference", "line one\nline two",
         "passed", "17", "3.14159", "x" * 30]


def cell(rng: random.Random, kind: str):
    if kind == "int":
        return rng.choice([rng.randrange(0, 10**rng.randrange(1, 7)), "-", None])
    if kind == "float":
        return rng.choice([round(rng.random() * 10 ** rng.randrange(0, 4), rng.randrange(0, 4)), "-", "n/a"])
    return " ".join(rng.choice(WORDS) for _ in range(rng.randrange(1, 4)))


def table(rng: random.Random) -> tuple[list, list[str]]:
    kinds = [rng.choice(["text", "int", "float"]) for _ in range(rng.randrange(2, 8))]
    headers = [f"Column {i} {'wide header' * rng.randrange(0, 2)}".strip() for i in range(len(kinds))]
    pool = [[cell(rng, k) for k in kinds] for _ in range(rng.randrange(1, 6))]
    rows: list = [list(rng.choice(pool)) if rng.random() < 0.6 else [cell(rng, k) for k in kinds]
                  for _ in range(rng.randrange(1, 60))]
    if rng.random() < 0.3:
        rows.insert(rng.randrange(0, len(rows)), tabulate.SEPARATING_LINE)
    return rows, headers


@pytest.mark.parametrize("seed", range(40))
def test_the_probe_is_as_wide_as_the_table_under_any_limits(seed: int) -> None:
    rng = random.Random(seed)
    rows, headers = table(rng)
    probe = probe_rows(rows)
    assert len(probe) <= len(rows) + 1
    for _ in range(6):
        limits = [rng.choice([None, rng.randrange(1, 40)]) for _ in headers]
        heads = [rng.choice([None, rng.randrange(4, 20)]) for _ in headers]
        tight, numparse = rng.random() < 0.5, rng.random() < 0.8
        full = _render(rows, headers, numparse, limits, heads, tight)
        probed = _render(probe, headers, numparse, limits, heads, tight)
        assert (line_width(probed), _column_widths(probed)) == (line_width(full), _column_widths(full))


def whole_table_fit(monkeypatch: pytest.MonkeyPatch, *args, **kw):
    """``fit`` as it was before probes: every step renders every row."""
    with monkeypatch.context() as m:
        m.setattr(fit_module, "probe_rows", list)
        return fit(*args, **kw)


@pytest.mark.parametrize("seed", range(40))
def test_fitting_by_the_probe_gives_the_table_fitting_every_row_gives(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(1000 + seed)
    rows, headers = table(rng)
    optional = rng.sample(headers, rng.randrange(0, len(headers)))
    keep = optional[:1] if rng.random() < 0.5 else []
    for width in (None, 200, 80, 50, 30):
        got = fit(rows, headers, width, optional=optional, keep=keep)
        assert got == whole_table_fit(monkeypatch, rows, headers, width, optional=optional, keep=keep), width


def test_a_column_of_many_runs_with_few_values_is_probed_with_few_rows() -> None:
    rows = [[f"q{i % 7}", "claude", ["plain", "docs"][i % 2], 1000 + i % 3] for i in range(2000)]
    probe = probe_rows(rows)
    assert len(probe) == 7 and {r[0] for r in probe} == {f"q{i}" for i in range(7)}
    assert {r[3] for r in probe} == {1000, 1001, 1002} and {r[1] for r in probe} == {"claude"}
    assert probe_rows([["a", 1], ["b"]]) == [["a", 1], ["b"]]  # rows of two lengths: tabulate pads, so no probe
    assert probe_rows([[1, "x"], [1.0, "x"], [True, "x"]]) == [[1, "x"], [1.0, "x"], [True, "x"]]  # 1 == 1.0 == True
