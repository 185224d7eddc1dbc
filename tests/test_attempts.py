"""Nothing lost (``record.attempts``): a later session's infrastructure error never replaces a finished record.
The error is written beside it as that session's attempt; an interrupt puts the finished record back; ``agentrace
verify`` accepts both. Session-level paths serial and under ``-n 2``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers import BUGGY_REPO, FIXER, make_repo, write_script

from pytest_agentrace.cli import main
from pytest_agentrace.record.attempts import ATTEMPTS_DIR, KEPT, Keeper, finished

TASK = ("name: t\ndescription: fix add\nrepo: repo\ntest_command: python -m pytest -q test_calc.py\n"
        "agents: [{name: fixer, command: fixer}, {name: other, command: fixer}]\n")


def test_an_error_session_writes_attempts_and_keeps_the_passing_records(
        pytester: pytest.Pytester, bin_dir: Path, xdist: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "fixer", FIXER)
    (pytester.path / "task.yaml").write_text(TASK)
    first = pytester.runpytest("--agentrace", "--agentrace-out", "o", *xdist)
    first.assert_outcomes(passed=2)
    out = pytester.path / "o"
    records = {a: (out / "runs/t/default" / a / "1" / "run.json").read_bytes() for a in ("fixer", "other")}
    (pytester.path / "repo").rename(pytester.path / ".gone")  # the task's repo: path went missing
    second = pytester.runpytest("--agentrace", "--agentrace-out", "o", *xdist)
    second.assert_outcomes(errors=2)  # infrastructure errors
    for agent, data in records.items():
        assert (out / "runs/t/default" / agent / "1" / "run.json").read_bytes() == data  # untouched
    tried = sorted(out.glob(f"{ATTEMPTS_DIR}/*/t/default/*/1/run.json"))
    assert [p.parts[-3] for p in tried] == ["fixer", "other"]
    for path in tried:
        doc = json.loads(path.read_text())
        assert doc["status"] == "error" and doc["reason"].startswith("workspace")
    assert not list(out.glob(f"{ATTEMPTS_DIR}/*/{KEPT}/**/run.json"))  # nothing left set aside
    capsys.readouterr()
    assert main(["verify", str(out)]) == 0, capsys.readouterr().out
    # a later finished run replaces the record, as before
    (pytester.path / ".gone").rename(pytester.path / "repo")
    pytester.runpytest("--agentrace", "--agentrace-out", "o", "-k", "fixer", *xdist).assert_outcomes(passed=1)
    assert json.loads((out / "runs/t/default/fixer/1/run.json").read_text())["session_id"] != json.loads(records["fixer"])["session_id"]


def record(run_dir: Path, status: str) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "run.json").write_text(json.dumps({"status": status}))
    (run_dir / "raw.out").write_text(status)


def test_keeper_interrupt_puts_the_record_back_and_an_error_over_an_error_replaces_it(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs/t/default/a/1"
    record(run_dir, "passed")
    keeper = Keeper(tmp_path, run_dir, "s2")
    assert keeper.set_aside() and not run_dir.exists()
    (run_dir).mkdir(parents=True)
    (run_dir / "prompt.txt").write_text("partial")
    keeper.restore()  # interrupted
    assert (run_dir / "raw.out").read_text() == "passed" and not (run_dir / "prompt.txt").exists()
    record(run_dir, "error")
    keeper = Keeper(tmp_path, run_dir, "s3")
    assert not keeper.set_aside() and keeper.settle("error") is None  # nothing finished to keep


def test_a_record_stranded_by_a_killed_session_is_put_back(tmp_path: Path) -> None:
    """A session killed between its two renames left the finished record in ``.kept``: the next run of the same
    RunSpec puts it back before it starts, then keeps it as usual."""
    run_dir = tmp_path / "runs/t/default/a/1"
    record(run_dir, "failed")
    assert Keeper(tmp_path, run_dir, "s1").set_aside()  # ... and the session is killed here
    record(run_dir, "error")  # whatever the killed run left
    keeper = Keeper(tmp_path, run_dir, "s2")
    assert keeper.set_aside()
    record(run_dir, "error")
    attempt = keeper.settle("error")
    assert (run_dir / "raw.out").read_text() == "failed" and finished(run_dir)
    assert attempt == tmp_path / ATTEMPTS_DIR / "s2/t/default/a/1" and json.loads((attempt / "run.json").read_text())["status"] == "error"
    assert not any(p.is_file() for p in (tmp_path / ATTEMPTS_DIR).rglob("*") if KEPT in p.parts)


def test_a_link_in_place_of_a_record_is_not_finished(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    record(elsewhere, "passed")
    run_dir = tmp_path / "runs/t/default/a/1"
    run_dir.parent.mkdir(parents=True)
    os.symlink(elsewhere, run_dir)
    assert not finished(run_dir) and not Keeper(tmp_path, run_dir, "s").set_aside()


def test_another_files_record_in_the_results_folder_is_never_replaced(pytester: pytest.Pytester, bin_dir: Path,
                                                                      xdist: list[str]) -> None:
    """Two task files named alike, run into one results folder by two sessions: the second session's runs are errors
    naming both files, and the first file's records stay as they were; once that file is gone (moved, renamed) its
    records are replaced as any earlier run's are."""
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "fixer", FIXER)
    for folder in ("a", "b"):
        (pytester.path / folder).mkdir()
        (pytester.path / folder / "task.yaml").write_text(TASK.replace("repo: repo", "repo: ../repo"))
    pytester.runpytest("--agentrace", "a/task.yaml", "--agentrace-out", "o", *xdist).assert_outcomes(passed=2)
    out = pytester.path / "o"
    records = {a: (out / "runs/t/default" / a / "1" / "run.json").read_bytes() for a in ("fixer", "other")}
    second = pytester.runpytest("--agentrace", "b/task.yaml", "--agentrace-out", "o", *xdist)
    second.assert_outcomes(errors=2)
    text = second.stdout.str()
    assert f"{pytester.path / 'b/task.yaml'} and {pytester.path / 'a/task.yaml'} both have a task/question named 't'" in text
    assert "runs/t/default/fixer/1" in text and "another --agentrace-out" in text
    assert {a: (out / "runs/t/default" / a / "1" / "run.json").read_bytes() for a in records} == records
    (pytester.path / "a/task.yaml").unlink()
    pytester.runpytest("--agentrace", "b/task.yaml", "--agentrace-out", "o", *xdist).assert_outcomes(passed=2)
    assert json.loads((out / "runs/t/default/fixer/1/run.json").read_text())["source"] == str(pytester.path / "b/task.yaml")


def test_other_source_names_only_another_existing_file(tmp_path: Path) -> None:
    from pytest_agentrace.record.attempts import other_source

    mine, theirs = tmp_path / "mine.yaml", tmp_path / "theirs.yaml"
    mine.write_text("x")
    theirs.write_text("x")
    run_dir = tmp_path / "runs/t/default/a/1"
    assert other_source(run_dir, mine) is None  # no record
    for source, expected in ((str(theirs), str(theirs)), (str(mine), None), (str(tmp_path / "moved.yaml"), None),
                             ("theirs.yaml", None), (None, None), (7, None)):
        record(run_dir, "passed")
        (run_dir / "run.json").write_text(json.dumps({"status": "passed", "source": source}))
        assert other_source(run_dir, mine) == expected, source
    (run_dir / "run.json").write_text("{not json")
    assert other_source(run_dir, mine) is None
    link = tmp_path / "runs/t/default/a/2"
    os.symlink(run_dir, link)
    (run_dir / "run.json").write_text(json.dumps({"status": "passed", "source": str(theirs)}))
    assert other_source(link, mine) is None  # a link in a record's place is read through no more than written
