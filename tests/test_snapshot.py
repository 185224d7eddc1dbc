"""``snapshot``: writing, reading and comparing snapshots (keys from RunSpec ids, never pytest node ids)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_agentrace.record.model import Outcome, Usage
from pytest_agentrace.stats import snapshot


def run(case: str, arm: str, agent: str, rep: int, status: str = "passed", tokens: int | None = 1000, version: str = "1.0") -> Outcome:
    return Outcome(run_id=f"trial:{case}/{arm}/{agent}/r{rep}", kind="trial", source="t.toml", case=case, arm=arm, agent=agent, rep=rep,
                   status=status, usage=Usage(total_tokens=tokens, cli_version=version, model="m1"))


def cell_runs(case="q1", arm="docs", agent="a", passed=4, n=4, scale=1.0, version="1.0"):
    noise = [1.0, 1.04, 0.96, 1.02, 0.98, 1.01, 0.99, 1.03]
    return [run(case, arm, agent, r, "passed" if r <= passed else "failed", int(1000 * scale * noise[r - 1]), version) for r in range(1, n + 1)]


def test_make_write_read_roundtrip(tmp_path: Path) -> None:
    outs = cell_runs() + [run("q1", "docs", "a", 5, "error", None)]
    snap = snapshot.make_snapshot(outs, name="nightly")
    cell = snap["cells"]["trial:q1/docs/a"]
    assert (cell["passed"], cell["total"], cell["errors"], cell["tokens"]) == (4, 4, 1, [1000, 1040, 960, 1020])
    assert cell["cli_versions"] == ["1.0"] and cell["models"] == ["m1"] and snap["name"] == "nightly"
    path = snapshot.write_snapshot(tmp_path / "b.json", snap)
    assert snapshot.read_snapshot(path) == json.loads(path.read_text()) == snap


CELL = '{"schema": "agentrace-snapshot", "version": 1, "cells": {"k": {"kind": "trial", "case": "q", "arm": "a", "agent": "x", "passed": %s, "total": %s, "tokens": %s}}}'


@pytest.mark.parametrize(("content", "message"), [
    (None, "snapshot file not found"),
    ("{not json", "not readable as JSON"),
    ('{"cells": {}}', "not an agentrace snapshot"),
    ('{"schema": "agentrace-snapshot", "version": 9, "cells": {}}', "newer than this pytest-agentrace supports"),
    ('{"schema": "agentrace-snapshot", "version": 1, "cells": {"k": {"kind": "trial"}}}', "cell 'k' lacks key 'case'"),
    (CELL % ('-5', '4', '[1]'), r"cell 'k' key 'passed': must be a whole number >= 0, not -5"),
    (CELL % ('1', '"4"', '[1]'), r"cell 'k' key 'total': must be a whole number >= 0, not '4'"),
    (CELL % ('5', '4', '[1]'), r"cell 'k' key 'passed': 5 is more than total 4"),
    (CELL % ('1', '4', '["a"]'), r"cell 'k' key 'tokens': must be a list of token counts >= 0"),
    (CELL % ('1', '4', '[-3]'), r"cell 'k' key 'tokens': must be a list of token counts >= 0"),
])
def test_read_snapshot_errors_name_file_and_fix(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "bad.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(snapshot.SnapshotError, match=message) as exc:
        snapshot.read_snapshot(path)
    assert str(path) in str(exc.value)


def test_compare_verdicts_not_run_new_and_closing_line() -> None:
    snap = snapshot.make_snapshot(cell_runs("q1") + cell_runs("q2") + cell_runs("q3", passed=8, n=8))
    now = cell_runs("q1", scale=1.5) + cell_runs("q3", passed=2, n=8) + cell_runs("q4")
    rows = {r.case: r for r in snapshot.compare(snap, now, resamples=2000)}
    assert rows["q1"].verdict == "dearer" and rows["q1"].passed_text() == "4/4 -> 4/4"
    assert rows["q2"].verdict == "not run" and rows["q2"].passed_text() == "4/4 -> -"
    assert rows["q3"].verdict == "regressed"
    assert rows["q4"].verdict == "new" and rows["q4"].passed_text() == "- -> 4/4"
    # the two compared cells of arm docs also get one row over both cases (the fixed-cases target: stratified tests)
    pooled = rows["all 2 cases"]
    assert pooled.pooled and pooled.passed_text() == "12/12 -> 6/12" and pooled.verdict == "regressed" and "dearer" in pooled.also
    assert "one-sided stratified exact p=" in pooled.detail and "target: these cases" in pooled.detail
    line = snapshot.closing_line(list(rows.values()))
    assert line == ("4 cells: 1 regressed, 1 dearer, 0 improved, 0 same, 1 not run, 1 new. Over all cases (1 arm): 1 regressed, "
                    "1 dearer, 0 improved, 0 same. `same` means no change could be shown, not that none exists.")
    # for new cases like these, two cases cannot show a regression (a one-sided sign-flip p is at least 0.25)
    (again,) = [r for r in snapshot.compare(snap, now, resamples=2000, target="cases") if r.pooled]
    assert again.verdict == "same" and "target: new cases like these" in again.detail
    json.dumps([r.to_dict() for r in rows.values()])


def test_compare_says_when_the_cli_version_or_model_changed() -> None:
    snap = snapshot.make_snapshot(cell_runs(version="1.0"))
    (row,) = snapshot.compare(snap, cell_runs(version="2.0"), resamples=2000)
    assert row.verdict == "same" and "different agent CLI version: 1.0 -> 2.0" in row.detail


def test_compare_old_arm_against_new_arm() -> None:
    snap = snapshot.make_snapshot(cell_runs(arm="base") + cell_runs(arm="docs", scale=0.6))
    rows = snapshot.compare(snap, cell_runs(arm="docs", scale=0.6), old_arm="base", new_arm="docs", resamples=2000)
    assert [(r.arm, r.verdict) for r in rows] == [("base -> docs", "improved")]
    with pytest.raises(ValueError, match="both"):
        snapshot.compare(snap, [], old_arm="base")


def test_regression_level_is_an_option() -> None:
    snap = snapshot.make_snapshot(cell_runs(passed=4, n=4))
    now = cell_runs(passed=2, n=4)
    assert snapshot.compare(snap, now, resamples=500)[0].verdict == "same"  # 4/4 -> 2/4: one-sided p = 0.089
    assert snapshot.compare(snap, now, resamples=500, alpha=0.1)[0].verdict == "regressed"


def test_a_cell_of_errors_alone_reads_errors_not_same() -> None:
    """A cell whose runs this session were all infrastructure errors has no sample: it reads ``errors`` (was
    ``same``), the closing line counts it, only the ``errors`` gate reads it, and the pooled row leaves it out."""
    from pytest_agentrace.stats.verdict import gate_failures, parse_fail_on

    snap = snapshot.make_snapshot(cell_runs("q1") + cell_runs("q2"))
    now = [run("q1", "docs", "a", r, "error", None) for r in (1, 2, 3)] + cell_runs("q2")
    rows = {r.case: r for r in snapshot.compare(snap, now)}
    assert rows["q1"].verdict == "errors" and rows["q1"].passed_text() == "4/4 -> 0/0"
    assert rows["q1"].detail == "every run an infrastructure error (3): nothing to compare"
    assert rows["q2"].verdict == "same" and "all 2 cases" not in rows  # one comparable cell: no pooled row
    line = snapshot.closing_line(list(rows.values()))
    assert line.startswith("2 cells: 0 regressed, 0 dearer, 0 improved, 1 same, 0 not run, 0 new, 1 errors.")
    assert gate_failures(parse_fail_on("regressed,dearer,not-run"), snapshot_rows=list(rows.values())) == []
    assert gate_failures(parse_fail_on("errors"), snapshot_rows=list(rows.values())) == [
        "errors: a q1 [docs]: errors - every run an infrastructure error (3): nothing to compare"]
