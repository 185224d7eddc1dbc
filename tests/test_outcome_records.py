"""run.json reading: valid records round-trip; broken ones are skipped with a reason, never a crash later."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_agentrace.record.model import Outcome, Usage
from pytest_agentrace.record.runfile import iter_runs, read_run, write_run


def record(**over) -> dict:
    o = Outcome(run_id="task:t/default/a/r1", kind="task", source="t.yaml", case="t", arm="default", agent="a", rep=1,
                status="passed", seconds=1.5, usage=Usage(total_tokens=10, cost_usd=0.1))
    d = o.to_dict()
    d.update(over)
    return d


def test_round_trip(tmp_path: Path) -> None:
    o = Outcome.from_dict(record())
    write_run(tmp_path, o)
    assert read_run(tmp_path / "run.json") == o


@pytest.mark.parametrize(
    ("over", "field"),
    [({"seconds": "abc"}, "seconds"), ({"score": "high"}, "score"), ({"agent": None}, "agent"),
     ({"status": "great"}, "status"), ({"rep": 1.5}, "rep"), ({"usage": {"total_tokens": "x"}}, "usage.total_tokens")],
)
def test_wrong_types_are_rejected_with_the_field(over: dict, field: str) -> None:
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        Outcome.from_dict(record(**over), validate=True)


def test_iter_runs_skips_broken_records_and_says_so(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    good = tmp_path / "runs/t/default/a/1"
    write_run(good, Outcome.from_dict(record()))
    bad = tmp_path / "runs/t/default/b/1"
    bad.mkdir(parents=True)
    (bad / "run.json").write_text(json.dumps(record(run_id="task:t/default/b/r1"))[:40])
    typed = tmp_path / "runs/t/default/c/1"
    typed.mkdir(parents=True)
    (typed / "run.json").write_text(json.dumps(record(seconds="slow")))
    assert [o.agent for _, o in iter_runs(tmp_path)] == ["a"]
    err = capsys.readouterr().err
    assert err.count("agentrace: skipped") == 2 and "seconds" in err
