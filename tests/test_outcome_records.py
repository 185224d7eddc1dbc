"""run.json reading: valid records round-trip; broken ones are skipped with a reason, never a crash later."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from pytest_agentrace.record.model import CheckResult, Outcome, ToolCall, Usage, build
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


@pytest.mark.parametrize("cls", [Outcome, Usage, CheckResult, ToolCall])
def test_build_makes_what_the_dataclass_init_makes(cls: type) -> None:
    """``model.build`` (from_dict's constructor) gives what ``cls(**kw)`` gives: the fields given, the defaults of the
    others (a fresh object from each default factory), ``init=False`` fields at their defaults; a required field
    missing raises ``TypeError``."""
    given = {f.name: getattr(sample(cls), f.name) for f in dataclasses.fields(cls) if f.init}
    for kw in (given, {k: v for i, (k, v) in enumerate(given.items()) if i % 2 == 0 or k in required(cls)}):
        made, want = build(cls, kw), cls(**kw)
        assert made == want and type(made) is cls
        assert [getattr(made, f.name) for f in dataclasses.fields(cls)] == [getattr(want, f.name) for f in dataclasses.fields(cls)]
    for f in dataclasses.fields(cls):
        if f.default_factory is not dataclasses.MISSING:
            kw = {k: v for k, v in given.items() if k != f.name}
            assert getattr(build(cls, kw), f.name) is not getattr(build(cls, kw), f.name)
    for name in required(cls):
        with pytest.raises(TypeError, match=name):
            build(cls, {k: v for k, v in given.items() if k != name})


def required(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)
            if f.init and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}


def sample(cls: type):
    if cls is ToolCall:
        return ToolCall("bash", "ls")
    if cls is CheckResult:
        return CheckResult("verify", "python check.py", 1, 0.5, "verify.log", tests={"ran": 3}, count_failure="1 of 3 tests failed")
    if cls is Usage:
        return Usage(input_tokens=5, total_tokens=10, cost_usd=0.1, tool_calls=(ToolCall("bash", "ls"),), model="m",
                     model_usage={"m": {"input_tokens": 5}}, parse_warnings=("odd line",))
    return Outcome.from_dict(record(checks={"verify": sample(CheckResult).to_dict()}, usage=sample(Usage).to_dict(),
                                    tampered=["tests/x.py"], extra={"trial": "docs"}, score=50.0))
