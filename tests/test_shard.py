"""--agentrace-shard: a deterministic, hash-stable partition of the runs by run id (balanced by the history's
durations), its ``auto`` form from CI variables, and what stop-when-decided does under shards; serial and -n 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.trial import make_project, runs, trial_toml

from pytest_agentrace.record.model import Outcome
from pytest_agentrace.record.store import SessionInfo, Store, cell_seconds
from pytest_agentrace.spec.shard import Shard, assign, cell_of, expected_seconds, parse_shard, select

SECOND_QUESTION = '\n[[questions]]\nid = "port2"\nrepo = "other"\nprompt = "Which port?"\nexpect = ["9090"]\n'
CI_VARS = [v for triple in (("CI_NODE_INDEX", "CI_NODE_TOTAL"), ("CIRCLE_NODE_INDEX", "CIRCLE_NODE_TOTAL"),
                            ("BUILDKITE_PARALLEL_JOB", "BUILDKITE_PARALLEL_JOB_COUNT")) for v in triple]


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    for var in CI_VARS:
        monkeypatch.delenv(var, raising=False)
    make_project(pytester.path)
    (pytester.path / "trial.toml").write_text(trial_toml(reps=3, more=SECOND_QUESTION))  # 2 questions x 2 arms x 3 reps
    return pytester


def collected(p: pytest.Pytester, *args: str) -> list[str]:
    """Node ids a session would run (``--collect-only -q``)."""
    res = p.runpytest("--agentrace", "--agentrace-out", "out", "--collect-only", "-q", *args)
    return [line for line in res.outlines if line.startswith("trial.toml::")]


ALL_IDS = [f"trial:{q}/{arm}/bot/r{rep}" for q in ("port", "port2") for arm in ("baseline", "docs") for rep in (1, 2, 3)]


# -- the partition -------------------------------------------------------------------------------------------------

def test_parse_shard_forms_and_errors() -> None:
    assert parse_shard("2/3", {}) == Shard(2, 3, "2/3")
    assert parse_shard("auto", {"CI_NODE_INDEX": "2", "CI_NODE_TOTAL": "3"}) == Shard(2, 3, "CI_NODE_INDEX=2 CI_NODE_TOTAL=3")
    assert parse_shard("auto", {"CIRCLE_NODE_INDEX": "0", "CIRCLE_NODE_TOTAL": "4"}).index == 1  # 0-based
    assert parse_shard("auto", {"BUILDKITE_PARALLEL_JOB": "3", "BUILDKITE_PARALLEL_JOB_COUNT": "4"}).index == 4
    assert parse_shard("auto", {}) == Shard(1, 1, "auto: no CI parallel-job variables set")
    for bad, words in (("0/3", "K must be 1..N"), ("4/3", "does not exist"), ("2", "use K/N"), ("a/b", "use K/N")):
        with pytest.raises(ValueError, match=words):
            parse_shard(bad, {})
    with pytest.raises(ValueError, match="both variables must be set"):
        parse_shard("auto", {"CI_NODE_INDEX": "1"})
    with pytest.raises(ValueError, match="shard 4 of 3 does not exist"):
        parse_shard("auto", {"CIRCLE_NODE_INDEX": "3", "CIRCLE_NODE_TOTAL": "3"})


def test_partition_is_exact_and_order_free() -> None:
    parts = [select(ALL_IDS, Shard(k, 3), {}) for k in (1, 2, 3)]
    assert sorted(i for part in parts for i in part) == sorted(ALL_IDS)  # every run exactly once
    assert [len(p) for p in parts] == [4, 4, 4]  # no history: dealt round-robin
    assert [select(list(reversed(ALL_IDS)), Shard(k, 3), {}) for k in (1, 2, 3)] == parts


def test_partition_does_not_depend_on_pythons_hash_seed() -> None:
    code = ("import json, sys; from pytest_agentrace.spec.shard import assign; "
            f"print(json.dumps(assign({ALL_IDS!r}, 3)))")
    outs = {subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONHASHSEED": seed}, capture_output=True,
                           text=True, check=True).stdout for seed in ("1", "2", "3")}
    assert len(outs) == 1 and json.loads(outs.pop()) == assign(ALL_IDS, 3)


def test_lpt_balances_expected_durations() -> None:
    # one slow cell (60 s a run) and three fast ones (10 s): LPT puts the 3 slow runs on 3 different shards
    history = {"trial:port/baseline/bot": 60.0, "trial:port/docs/bot": 10.0, "trial:port2/baseline/bot": 10.0,
               "trial:port2/docs/bot": 10.0}
    seconds = expected_seconds(ALL_IDS, history)
    placed = assign(ALL_IDS, 3, seconds)
    slow = sorted(placed[i] for i in ALL_IDS if cell_of(i) == "trial:port/baseline/bot")
    assert slow == [1, 2, 3]
    loads = [sum(seconds[i] for i, k in placed.items() if k == shard) for shard in (1, 2, 3)]
    assert loads == [90.0, 90.0, 90.0]  # 270 s of work in three equal parts (here LPT is optimal)
    # a run without history gets the mean of the known ones
    assert expected_seconds(["trial:new/a/b/r1", "trial:port/docs/bot/r1"], history) == {
        "trial:new/a/b/r1": 10.0, "trial:port/docs/bot/r1": 10.0}


def test_cell_seconds_reads_the_history_store(tmp_path: Path) -> None:
    db = tmp_path / "history.db"
    assert cell_seconds(db) == {} and not db.exists()  # never created by reading
    outcomes = [Outcome(run_id=f"trial:port/docs/bot/r{rep}", kind="trial", source="t.toml", case="port", arm="docs",
                        agent="bot", rep=rep, status="passed", total_seconds=s) for rep, s in ((1, 10.0), (2, 30.0))]
    with Store(db) as store:
        store.save_session(SessionInfo(id="s1"), outcomes)
    assert cell_seconds(db) == {"trial:port/docs/bot": 20.0}


# -- in a session --------------------------------------------------------------------------------------------------

def test_union_of_shards_is_every_run_once(project: pytest.Pytester, xdist: list[str]) -> None:
    ran: list[str] = []
    digests: set[str] = set()
    for k in (1, 2, 3):
        out = f"out{k}"
        res = project.runpytest("--agentrace", "--agentrace-out", out, "--agentrace-db", f"{out}/history.db",
                                "--agentrace-shard", f"{k}/3", *xdist)
        counts = res.parseoutcomes()
        assert counts.get("passed", 0) + counts.get("failed", 0) == 4
        last = json.loads((project.path / out / "last-session.json").read_text())
        digests.add(last["shards"]["split"][str(k)])
        assert counts.get("deselected") == (None if xdist else 8)  # xdist's controller collects nothing to deselect
        assert f"agentrace: shard {k}/3 of the runs" in res.stdout.str()
        ran += list(runs(project.path / out))
    assert sorted(ran) == sorted(ALL_IDS)
    assert len(digests) == 1  # one history each, empty alike: one split


def test_shards_that_split_differently_are_refused_by_the_merge(project: pytest.Pytester, xdist: list[str],
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Shards run one after another on one machine with the default history: each session saves its runs to the
    history the next one balances by, so the splits differ (some runs twice, others never). Each shard records its
    split's digest; the merge names the shards that differ and writes nothing, before any record conflict."""
    from pytest_agentrace import cli

    digests = {}
    for k in (1, 2, 3):
        project.runpytest("--agentrace", "--agentrace-out", f"out{k}", "--agentrace-shard", f"{k}/3", *xdist)
        split = json.loads((project.path / f"out{k}" / "last-session.json").read_text())["shards"]["split"]
        assert list(split) == [str(k)] and len(split[str(k)]) == 16
        digests[k] = split[str(k)]
    assert len(set(digests.values())) > 1  # the second and third read the history the first ones saved
    code = cli.main(["merge", *(str(project.path / f"out{k}") for k in (1, 2, 3)), "-o", str(project.path / "merged")])
    err = capsys.readouterr().err
    assert code == 2 and "the shards split the runs differently (" in err and "--agentrace-db" in err, err
    assert not (project.path / "merged").exists()


def test_auto_reads_gitlab_variables(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    explicit = collected(project, "--agentrace-shard", "2/3")
    monkeypatch.setenv("CI_NODE_INDEX", "2")
    monkeypatch.setenv("CI_NODE_TOTAL", "3")
    assert collected(project, "--agentrace-shard", "auto") == explicit and len(explicit) == 4
    assert collected(project, "--agentrace-shard", "auto", "-p", "xdist", "-n", "2") == explicit


def test_shards_balance_by_history(project: pytest.Pytester) -> None:
    """The session reads ``--agentrace-db``: with a history where one cell is slow, shard 3 gets one of its runs
    (without it, none). That each shard gets one is the pure rule's test (test_select_rules)."""
    db = project.path / "history.db"
    slow = [Outcome(run_id=f"trial:port/baseline/bot/r{r}", kind="trial", source="t", case="port", arm="baseline",
                    agent="bot", rep=r, status="passed", total_seconds=60.0) for r in (1, 2, 3)]
    fast = [Outcome(run_id=f"trial:{q}/{a}/bot/r1", kind="trial", source="t", case=q, arm=a, agent="bot", rep=1,
                    status="passed", total_seconds=10.0) for q, a in (("port", "docs"), ("port2", "baseline"), ("port2", "docs"))]
    with Store(db) as store:
        store.save_session(SessionInfo(id="old"), slow + fast)
    ids = collected(project, "--agentrace-shard", "3/3", "--agentrace-db", str(db))
    assert sum(i.startswith("trial.toml::port[baseline-") for i in ids) == 1
    assert not any(i.startswith("trial.toml::port[baseline-") for i in collected(project, "--agentrace-shard", "3/3"))


def test_bad_shard_is_a_usage_error(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    res = project.runpytest("--agentrace", "--agentrace-shard", "4/3")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "shard 4 of 3 does not exist; K must be 1..N" in res.stderr.str()
    monkeypatch.setenv("CIRCLE_NODE_INDEX", "x")
    monkeypatch.setenv("CIRCLE_NODE_TOTAL", "3")
    res = project.runpytest("--agentrace", "--agentrace-shard", "auto")
    assert res.ret == pytest.ExitCode.USAGE_ERROR and "CIRCLE_NODE_INDEX=x CIRCLE_NODE_TOTAL=3: not whole numbers" in res.stderr.str()


def test_stop_when_decided_is_off_under_shards(project: pytest.Pytester) -> None:
    res = project.runpytest("--agentrace", "--agentrace-out", "out", "--agentrace-shard", "1/3",
                            "--agentrace-stop-when-decided", "-W", "default")
    counts = res.parseoutcomes()
    assert counts["deselected"] == 8 and "skipped" not in counts  # nothing skipped as decided
    assert "--agentrace-stop-when-decided is off under --agentrace-shard 1/3" in res.stdout.str()
