"""``agentrace merge``: the shards' results folders gathered into one give the statistics of one session that ran
everything; conflicting duplicates are refused; histories are merged. Sessions serial and -n 2."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from helpers.trial import make_project, runs, trial_toml

from pytest_agentrace import cli
from pytest_agentrace.record.manifest import digest_run, write_manifest
from pytest_agentrace.record.model import Outcome
from pytest_agentrace.record.runfile import write_run
from pytest_agentrace.record.store import SessionInfo, Store

SECOND_QUESTION = '\n[[questions]]\nid = "port2"\nrepo = "other"\nprompt = "Which port?"\nexpect = ["9090"]\n'


def main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def without_wall_time(value: Any) -> Any:
    """``value`` without its wall-clock fields (``seconds_mean`` ...): measured, not determined by the agent."""
    if isinstance(value, dict):
        return {k: without_wall_time(v) for k, v in value.items() if "seconds" not in k}
    if isinstance(value, list):
        return [without_wall_time(v) for v in value]
    return value


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    make_project(pytester.path)
    (pytester.path / "trial.toml").write_text(trial_toml(reps=3, more=SECOND_QUESTION))
    return pytester


def session(p: pytest.Pytester, out: str, *args: str) -> None:
    res = p.runpytest("--agentrace", "--agentrace-out", out, "--agentrace-db", f"{out}/history.db", *args)
    assert res.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), res.stdout.str()


def test_merged_shards_equal_one_session(project: pytest.Pytester, xdist: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    session(project, "single", *xdist)
    for k in (1, 2, 3):
        session(project, f"out{k}", "--agentrace-shard", f"{k}/3", *xdist)
    root = project.path
    code, text, err = main(capsys, "merge", str(root / "out1"), str(root / "out2"), str(root / "out3"), "--to", str(root / "merged"))
    assert code == 0, err
    assert "12 runs copied into" in text and "history" in text
    assert sorted(runs(root / "merged")) == sorted(runs(root / "single"))
    code, text, _ = main(capsys, "verify", str(root / "merged"))  # the shards' manifests came along
    assert code == 0 and "12 records verified, 0 unverifiable" in text
    reports = {}
    for name in ("single", "merged"):
        code, text, err = main(capsys, "report", str(root / name), "--format", "json", "--resamples", "500")
        assert code == 0, err
        reports[name] = without_wall_time(json.loads(text))
    assert reports["merged"] == reports["single"]
    assert reports["single"]["comparisons"]  # a real comparison of the two arms, not an empty report
    snaps = {}
    for name in ("single", "merged"):
        assert main(capsys, "snapshot", str(root / name), "--to", str(root / f"{name}.snap.json"))[0] == 0
        snaps[name] = without_wall_time(json.loads((root / f"{name}.snap.json").read_text()))
        snaps[name].pop("created", None)
    assert snaps["merged"] == snaps["single"]
    code, text, _ = main(capsys, "compare", str(root / "merged"), "--snapshot", str(root / "single.snap.json"), "--format", "json",
                         "--resamples", "500")
    assert code == 0 and "regressed" not in {r.get("verdict") for r in json.loads(text)["rows"]}
    with sqlite3.connect(root / "merged" / "history.db") as db:
        assert db.execute("SELECT COUNT(*), COUNT(DISTINCT session_id) FROM runs").fetchone() == (12, 3)
    last = json.loads((root / "merged" / "last-session.json").read_text())
    assert sorted(last["run_ids"]) == sorted(runs(root / "single")) and last["session_id"].count("+") == 2
    split = last["shards"].pop("split")
    assert last["shards"] == {"total": 3, "ran": [1, 2, 3]} and "shard" not in err
    assert sorted(split) == ["1", "2", "3"] and len(set(split.values())) == 1  # one split, recorded by each shard
    # one shard's artifact missing: the merge says so, the reports warn, and a gate refuses to decide
    code, text, _ = main(capsys, "merge", str(root / "out1"), str(root / "out3"), "--to", str(root / "part"))
    assert code == 0 and f"warning: {root / 'part'} holds shards 1, 3 of 3; shard 2 of 3 missing" in text
    code, _, err = main(capsys, "report", str(root / "part"), "--resamples", "200")
    assert code == 0 and "shard 2 of 3 missing" in err
    # and in the body of every report of the folder (a step summary does not show standard error)
    code, text, _ = main(capsys, "report", str(root / "part"), "--resamples", "200", "--format", "markdown")
    assert code == 0 and text.startswith("> **Partial results:** ") and "shard 2 of 3 missing" in text.splitlines()[0]
    for fmt in ("md", "html", "comment"):
        code, text, _ = main(capsys, "render", str(root / "part"), "--format", fmt, "--resamples", "200")
        assert code == 0 and "partial results: " in text and "shard 2 of 3 missing" in text, fmt
    code, text, _ = main(capsys, "render", str(root / "part"), "--format", "json", "--resamples", "200")
    assert code == 0 and "shard 2 of 3 missing" in json.loads(text)["partial"]
    code, _, err = main(capsys, "compare", str(root / "part"), "--snapshot", str(root / "single.snap.json"),
                        "--fail-on", "regressed")
    assert code == 2 and "refusing to gate:" in err and "shard 2 of 3 missing" in err
    code, _, err = main(capsys, "snapshot", str(root / "part"), "--to", str(root / "part.snap.json"))
    assert code == 2 and "refusing to write a snapshot:" in err and not (root / "part.snap.json").exists()
    # a shard stopped at its first failed run (as a cancelled CI job is): merged, it is named as a missing one is
    res = project.runpytest("--agentrace", "--agentrace-out", "stopped2", "--agentrace-db", "stopped2/history.db",
                            "--agentrace-shard", "2/3", "--maxfail", "1", *xdist)
    assert res.ret in (pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.INTERRUPTED), res.stdout.str()  # xdist: 2
    assert json.loads((root / "stopped2" / "last-session.json").read_text())["shards"] == {
        "total": 3, "ran": [2], "stopped": [2], "split": {"2": split["2"]}}
    code, text, _ = main(capsys, "merge", str(root / "out1"), str(root / "stopped2"), str(root / "out3"), "--to", str(root / "cut"))
    assert code == 0 and "shard 2 of 3 stopped before every run ran" in text, text
    code, _, err = main(capsys, "compare", str(root / "cut"), "--snapshot", str(root / "single.snap.json"), "--fail-on", "regressed")
    assert code == 2 and "refusing to gate:" in err and "stopped before every run ran" in err


def run_record(rep: int, status: str = "passed", session: str = "s1") -> Outcome:
    return Outcome(run_id=f"trial:q/base/a/r{rep}", kind="trial", source="t.toml", case="q", arm="base", agent="a", rep=rep,
                   status=status, session_id=session, started="2026-01-01T00:00:00+00:00", exit_code=0)


def folder(root: Path, *outcomes: Outcome) -> Path:
    for o in outcomes:
        write_run(root / "runs" / o.case / o.arm / o.agent / str(o.rep), o)
        (root / "runs" / o.case / o.arm / o.agent / str(o.rep) / "raw.out").write_text(f"log of {o.run_id}\n")
    return root


def test_merge_refuses_conflicting_duplicates(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = folder(tmp_path / "a", run_record(1), run_record(2))
    b = folder(tmp_path / "b", run_record(2, status="failed", session="s2"), run_record(3))
    code, _, err = main(capsys, "merge", str(a), str(b), "--to", str(tmp_path / "m"))
    assert code == 2
    assert "run trial:q/base/a/r2 is in" in err and "with different records" in err
    assert str(a / "runs/q/base/a/2/run.json") in err and str(b / "runs/q/base/a/2/run.json") in err
    assert not (tmp_path / "m").exists()  # nothing written


def test_merge_warns_when_shards_ran_one_file_from_different_folders(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two shards that ran the same trial file (same name and content hash) from different checkout folders: the
    merge says the reports will take it as two files; the same file from one folder, or two different files, are
    no warning."""
    def rec(rep: int, source: str, digest: str = "h1") -> Outcome:
        return run_record(rep).replace(source=source, content_hash=digest)

    a = folder(tmp_path / "a", rec(1, "/ci/a/p/trial.toml"), rec(2, "/ci/a/p/other.toml", "h2"))
    b = folder(tmp_path / "b", rec(3, "/ci/b/p/trial.toml"), rec(4, "/ci/b/p/other.toml", "h3"))
    code, text, err = main(capsys, "merge", str(a), str(b), "--to", str(tmp_path / "m"))
    assert code == 0, err
    assert ("agentrace merge: warning: the trial file trial.toml was run from 2 folders (/ci/a/p/trial.toml, "
            "/ci/b/p/trial.toml): the reports take each as a file of its own; run every shard from the same checkout "
            "path") in text
    assert "other.toml" not in text  # two versions of a file: no warning
    c = folder(tmp_path / "c", rec(5, "/ci/a/p/trial.toml"))
    code, text, _ = main(capsys, "merge", str(a), str(c), "--to", str(tmp_path / "m2"))
    assert code == 0 and "warning" not in text


def test_merge_accepts_identical_duplicates_and_keeps_logs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = folder(tmp_path / "a", run_record(1), run_record(2))
    b = folder(tmp_path / "b", run_record(2), run_record(3))
    code, text, err = main(capsys, "merge", str(a), str(b), "--to", str(tmp_path / "m"))
    assert code == 0, err
    assert "3 runs copied" in text and "1 identical duplicates skipped" in text
    assert sorted(runs(tmp_path / "m")) == [f"trial:q/base/a/r{r}" for r in (1, 2, 3)]
    assert (tmp_path / "m/runs/q/base/a/3/raw.out").read_text() == "log of trial:q/base/a/r3\n"
    # merging again into the same folder: what is there counts as an input, equal records are fine
    code, text, _ = main(capsys, "merge", str(b), "--to", str(tmp_path / "m"))
    assert code == 0 and "0 runs copied" in text
    c = folder(tmp_path / "c", run_record(3, status="failed"))
    code, _, err = main(capsys, "merge", str(c), "--to", str(tmp_path / "m"))
    assert code == 2 and str(tmp_path / "m/runs/q/base/a/3/run.json") in err


def test_merge_refuses_unreadable_records_and_missing_folders(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = folder(tmp_path / "a", run_record(1))
    (a / "runs/q/base/a/1/run.json").write_text('{"run_id": ')
    code, _, err = main(capsys, "merge", str(a), "--to", str(tmp_path / "m"))
    assert code == 2 and "not a valid run record" in err and "fix or remove that run folder" in err
    code, _, err = main(capsys, "merge", str(tmp_path / "nowhere"), "--to", str(tmp_path / "m"))
    assert code == 2 and "nowhere: no such results folder" in err


def test_merge_refuses_a_forged_shard_and_notes_an_unchecked_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = folder(tmp_path / "a", run_record(1))
    code, text, _ = main(capsys, "merge", str(a), "--to", str(tmp_path / "m"))
    assert code == 0 and "no manifests" in text  # a folder from before manifests: merged, and said so
    b = folder(tmp_path / "b", run_record(2, status="failed"))
    run_dir = b / "runs/q/base/a/2"
    write_manifest(b, "sb", {"trial:q/base/a/r2": digest_run(b, run_dir)})
    write_run(run_dir, run_record(2))  # failed -> passed after the session
    code, _, err = main(capsys, "merge", str(b), "--to", str(tmp_path / "m2"))
    assert code == 2 and "unverifiable records" in err and "run.json changed" in err
    assert not (tmp_path / "m2").exists()


def test_histories_merge_and_conflicts_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shared = [run_record(1, session="old")]
    for name, own in (("a", run_record(2, session="sa")), ("b", run_record(3, session="sb"))):
        folder(tmp_path / name, own)
        with Store(tmp_path / name / "history.db") as store:
            store.save_session(SessionInfo(id="old", started="2026-01-01T00:00:00+00:00"), shared)  # restored on both
            store.save_session(SessionInfo(id=own.session_id, started="2026-01-02T00:00:00+00:00"), [own])
    code, text, err = main(capsys, "merge", str(tmp_path / "a"), str(tmp_path / "b"), "--to", str(tmp_path / "m"))
    assert code == 0, err
    with Store(tmp_path / "m" / "history.db") as store:
        assert [s["id"] for s in store.sessions()] == ["old", "sa", "sb"]
        assert sorted((r["session_id"], r["run_id"]) for r in store.runs()) == [
            ("old", "trial:q/base/a/r1"), ("sa", "trial:q/base/a/r2"), ("sb", "trial:q/base/a/r3")]
    with Store(tmp_path / "b" / "history.db") as store:  # the same session's run recorded differently
        store.save_session(SessionInfo(id="old", started="2026-01-01T00:00:00+00:00"), [run_record(1, "failed", "old")])
    code, _, err = main(capsys, "merge", str(tmp_path / "a"), str(tmp_path / "b"), "--to", str(tmp_path / "m2"))
    assert code == 2 and "session old has two different records of run trial:q/base/a/r1" in err
    assert not (tmp_path / "m2" / "runs").exists()  # no run copied


@pytest.mark.parametrize("link", ["runs", "runs/q", "runs/q/base/a", "manifests", "history.db"])
def test_merge_never_writes_through_a_link_in_the_folder_merged_into(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                     link: str) -> None:
    """A merged folder from elsewhere (an earlier artifact) whose ``runs/``, a folder below it, ``manifests/`` or
    history file is a link to the victim's HOME: nothing is written there, and the merge says which link."""
    home = tmp_path / "home"
    (home / "base" / "a" / "1").mkdir(parents=True)
    (home / "note").write_text("own\n")
    before = sorted((p.relative_to(home).as_posix(), p.read_bytes() if p.is_file() else b"") for p in home.rglob("*"))
    shard = folder(tmp_path / "shard", run_record(1))
    write_manifest(shard, "s1", {"trial:q/base/a/r1": digest_run(shard, shard / "runs/q/base/a/1")})
    merged = tmp_path / "merged"
    (merged / link).parent.mkdir(parents=True, exist_ok=True)
    (merged / link).symlink_to(home / "note" if link == "history.db" else home, target_is_directory=link != "history.db")
    code, _, err = main(capsys, "merge", str(shard), "--to", str(merged))
    assert code == 2 and "is a link" in err and str(merged / link) in err
    assert sorted((p.relative_to(home).as_posix(), p.read_bytes() if p.is_file() else b"") for p in home.rglob("*")) == before


def test_merge_refuses_an_input_whose_runs_are_a_link(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    elsewhere = folder(tmp_path / "elsewhere", run_record(1))
    shard = tmp_path / "shard"
    shard.mkdir()
    (shard / "runs").symlink_to(elsewhere / "runs", target_is_directory=True)
    code, _, err = main(capsys, "merge", str(shard), "--to", str(tmp_path / "m"))
    assert code == 2 and f"{shard / 'runs'} is a link" in err and not (tmp_path / "m").exists()


def test_make_folders_refuses_every_link_on_the_way(tmp_path: Path) -> None:
    from pytest_agentrace.record.safefile import UnsafePath, make_folders

    assert make_folders(tmp_path, "a/b/c") == tmp_path / "a/b/c" and (tmp_path / "a/b/c").is_dir()
    (tmp_path / "out").mkdir()
    (tmp_path / "a" / "link").symlink_to(tmp_path / "out", target_is_directory=True)
    (tmp_path / "a" / "file").write_text("x")
    for rel in ("link", "link/new", "file/new", "../escape", "/abs"):
        with pytest.raises(UnsafePath):
            make_folders(tmp_path / "a", rel)
    assert list((tmp_path / "out").iterdir()) == [] and not (tmp_path / "escape").exists()


RACE_TASK = """name: tiny
description: Make add() return a+b.
repo: repo
test_command: python -m pytest -q test_a.py
agents:
  - {name: fixer, command: ["sh", "-c", "sed -i 's/a - b/a + b/' a.py", "{prompt_file}"]}
  - {name: fixer2, command: ["sh", "-c", "sed -i 's/a - b/a + b/' a.py", "{prompt_file}"]}
  - {name: idle, command: ["true", "{prompt_file}"]}
  - {name: idle2, command: ["true", "{prompt_file}"]}
"""


def test_merged_shards_race_as_one_session(pytester: pytest.Pytester, xdist: list[str],
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """Task runs split over shards: the merged folder's leaderboard, wins and Elo are the one session's (the runs of
    a task and rep race together, whichever shard ran them), not one race per shard."""
    pytester.makefile(".yaml", task=RACE_TASK)
    (pytester.path / "repo").mkdir()
    (pytester.path / "repo" / "a.py").write_text("def add(a, b):\n    return a - b\n")
    (pytester.path / "repo" / "test_a.py").write_text("from a import add\n\ndef test_add():\n    assert add(1, 2) == 3\n")
    session(pytester, "single", "task.yaml", *xdist)
    for k in (1, 2):
        session(pytester, f"s{k}", "task.yaml", "--agentrace-shard", f"{k}/2", *xdist)
    root = pytester.path
    assert all(len(runs(root / f"s{k}")) == 2 for k in (1, 2))  # each shard raced two of the four agents
    assert main(capsys, "merge", str(root / "s1"), str(root / "s2"), "--to", str(root / "merged"))[0] == 0
    views = {}
    for name in ("single", "merged"):
        code, text, err = main(capsys, "render", str(root / name), "--format", "json")
        assert code == 0, err
        doc = json.loads(text)
        views[name] = ([(s["agent"], s["wins"], s["races"]) for s in doc["leaderboard"]], doc["elo"]["ratings"])
    assert views["merged"] == views["single"]
    assert sorted(views["single"][0]) == [("fixer", 0, 1), ("fixer2", 0, 1), ("idle", 0, 1), ("idle2", 0, 1)]
