"""``agentrace report`` over a results folder prints the same figures whatever path reads the folder: a small
folder from the aggregation benchmark's generator (``benchmarks/aggregate.make_folder``: seeded by construction,
6 cases x 2 arms x 10 reps) is reported in text, Markdown and JSON and compared with the output recorded in
``tests/golden/report_aggregate/`` before the reading path was rewritten (the session's trial table in front of
the statistics was added later, the figures unchanged); a second report (from the index) and a report with the
index removed (every ``run.json`` parsed again) print the same."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pytest_agentrace.cli import main

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden" / "report_aggregate"
sys.path.insert(0, str(ROOT / "benchmarks"))

from aggregate import make_folder  # noqa: E402

FORMATS = {"text": "report.txt", "markdown": "report.md", "json": "report.json"}


def report(out: Path, fmt: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["report", str(out), "--format", fmt, "--resamples", "400"]) == 0
    return capsys.readouterr().out


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("agg") / "out"
    make_folder(out, 120, 6)
    return out


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_report_prints_the_recorded_figures(folder: Path, fmt: str, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "160")
    first = report(folder, fmt, capsys)
    assert first == (GOLDEN / FORMATS[fmt]).read_text(encoding="utf-8")
    assert report(folder, fmt, capsys) == first  # from the index
    (folder / "index.jsonl").unlink()
    assert report(folder, fmt, capsys) == first  # every run.json parsed again
