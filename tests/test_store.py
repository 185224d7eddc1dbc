"""History store (issue 8): schema, migrations, WAL, lock retries, and concurrent writers that lose nothing."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from helpers import make_repo
from helpers.report import outcome

from pytest_agentrace.record import store, storepath
from pytest_agentrace.record.model import Usage
from pytest_agentrace.record.store import SessionInfo, Store, StoreError


def test_session_and_runs_round_trip(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "proj", {"a.txt": "x\n"})
    info = SessionInfo.collect("sess1", repo, args=["--agentrace", "-n", "2"], out=repo / ".agentrace")
    runs = [outcome(agent="a", score=80.0), outcome(agent="b", score=40.0, status="failed", cost=None),
            outcome(case="q1", kind="trial", arm="docs", agent="a", answer_score={"correct": True, "recall": 1.0, "missing": [], "forbidden": []},
                    used_tool=True, claim={"status": "valid"})]
    db = tmp_path / "deep" / "history.db"
    assert store.save(db, info, runs) == 3
    with Store(db) as s:
        assert s.version == store.SCHEMA_VERSION
        assert s.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        (session,) = s.sessions()
        assert session["id"] == "sess1" and session["args"] == ["--agentrace", "-n", "2"]
        assert session["git_sha"] == subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()
        assert session["version"] and session["host"] and session["python"]
        assert sorted(s.outcomes(), key=lambda o: o.run_id) == sorted(runs, key=lambda o: o.run_id)
        rows = {r["run_id"]: r for r in s.runs()}
    a = rows["task:fix-add/default/a/r1"]
    assert (a["score"], a["status"], a["total_tokens"], a["cost_usd"], a["tool_calls"], a["cli_version"]) == (80.0, "passed", 1000, 0.01, 2, "1.2.3")
    assert rows["task:fix-add/default/b/r1"]["cost_usd"] is None
    t = rows["trial:q1/docs/a/r1"]
    assert (t["answer_correct"], t["answer_recall"], t["used_tool"], t["claim_status"], t["arm"]) == (1, 1.0, 1, "valid", "docs")


def test_an_integer_beyond_sqlite_is_stored_as_unknown_and_the_session_saved(tmp_path: Path) -> None:
    """One record with a count SQLite cannot hold (a record read back from disk is type-checked, not range-checked)
    never fails the transaction that saves the whole session: that column is NULL, the outcome JSON keeps it."""
    huge = outcome(agent="huge", usage=Usage(input_tokens=10**30, output_tokens=5, total_tokens=10**30 + 5, turns=2**63))
    db = tmp_path / "h.db"
    assert store.save(db, SessionInfo("s1"), [huge, outcome(agent="b")]) == 2
    with Store(db) as s:
        rows = {r["agent"]: r for r in s.runs()}
    assert (rows["huge"]["input_tokens"], rows["huge"]["output_tokens"], rows["huge"]["total_tokens"], rows["huge"]["turns"]) \
        == (None, 5, None, None)
    assert json.loads(rows["huge"]["outcome"])["usage"]["input_tokens"] == 10**30
    assert rows["b"]["total_tokens"] == 1000
    assert store._storable(2**63 - 1) == 2**63 - 1 and store._storable(-(2**63)) == -(2**63) and store._storable(True) is True


def test_saving_a_session_again_replaces_its_runs(tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    store.save(db, SessionInfo("s1"), [outcome(agent="a", score=10.0), outcome(agent="b", score=20.0)])
    store.save(db, SessionInfo("s1"), [outcome(agent="a", score=99.0)])
    with Store(db) as s:
        assert {(r["agent"], r["score"]) for r in s.runs()} == {("a", 99.0), ("b", 20.0)}
        assert s.count_runs() == 2


def test_filters_and_since(tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    store.save(db, SessionInfo("old", started="2026-01-01T00:00:00+00:00"), [outcome(agent="a", score=1.0)])
    store.save(db, SessionInfo("new", started="2026-02-01T00:00:00+00:00"), [outcome(agent="a", score=2.0), outcome(case="other", agent="b", score=3.0)])
    with Store(db) as s:
        assert [r["score"] for r in s.runs(since="2026-01-15")] == [2.0, 3.0]
        assert [r["score"] for r in s.runs(case="other")] == [3.0]
        assert [r["score"] for r in s.runs(agent="a")] == [1.0, 2.0]
        assert [x["id"] for x in s.sessions(since="2026-01-15")] == ["new"]


def test_newer_schema_and_garbage_file_are_clear_errors(tmp_path: Path) -> None:
    newer = tmp_path / "newer.db"
    conn = sqlite3.connect(newer)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    with pytest.raises(StoreError, match=r"newer.db: history schema version 99 is newer"):
        Store(newer)
    garbage = tmp_path / "garbage.db"
    garbage.write_text("this is not a database\n" * 100)
    with pytest.raises(StoreError, match=r"garbage.db: not a usable history store"):
        Store(garbage)


def test_migration_upgrades_an_old_file_in_place(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "h.db"
    store.save(db, SessionInfo("s1"), [outcome(agent="a", score=5.0)])
    # a later release adds a step; opening the older file must apply it once and keep every row
    newer = len(store.MIGRATIONS) + 1
    monkeypatch.setattr(store, "MIGRATIONS", [*store.MIGRATIONS, ["ALTER TABLE runs ADD COLUMN note TEXT", "UPDATE runs SET note = 'migrated'"]])
    monkeypatch.setattr(store, "SCHEMA_VERSION", len(store.MIGRATIONS))
    with Store(db) as s:
        assert s.version == newer
        assert [(r["score"], r["note"]) for r in s.runs()] == [(5.0, "migrated")]
    with Store(db) as s:  # already migrated: nothing applied twice
        assert s.version == newer and s.count_runs() == 1


def test_a_write_waits_for_a_held_lock_then_succeeds(tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    Store(db).close()
    holder = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN EXCLUSIVE")
    release = threading.Timer(0.6, lambda: holder.execute("COMMIT"))
    release.start()
    with Store(db, busy_timeout=0.01, retries=40) as s:
        assert s.save_session(SessionInfo("s1"), [outcome(score=1.0)]) == 1
        assert s.lock_retries >= 1  # it hit "database is locked" and tried again
        assert s.count_runs() == 1
    release.join()
    holder.close()


def test_a_lock_that_is_never_released_is_a_store_error(tmp_path: Path) -> None:
    db = tmp_path / "h.db"
    Store(db).close()
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with Store(db, busy_timeout=0.01, retries=3) as s, pytest.raises(StoreError, match="still locked after 3 attempts"):
            s.save_session(SessionInfo("s1"), [outcome(score=1.0)])
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    with Store(db) as s:
        assert s.count_runs() == 0  # the failed write left nothing half-done


WRITER = textwrap.dedent("""\
    import pathlib, sys, time
    sys.path.insert(0, {tests!r})
    from helpers.report import outcome
    from pytest_agentrace.record.store import SessionInfo, Store
    db, me, n, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), pathlib.Path(sys.argv[4])
    while not go.exists():
        time.sleep(0.005)
    with Store(db, busy_timeout=0.05) as s:
        s.save_session(SessionInfo(me), [])
        for j in range(n):  # one transaction per run: as much contention as possible
            s.add_runs(me, [outcome(case=f"c{{j}}", agent=me, score=float(j), session_id=me)])
        print(s.lock_retries)
""")


def test_eight_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    db, go, writers, n = tmp_path / "h.db", tmp_path / "go", 8, 200
    Store(db).close()
    script = tmp_path / "writer.py"
    script.write_text(WRITER.format(tests=str(Path(__file__).parent)))
    procs = [subprocess.Popen([sys.executable, str(script), str(db), f"w{i}", str(n), str(go)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(writers)]
    time.sleep(0.5)
    go.touch()
    results = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0] * writers, [err for _, err in results]
    with Store(db) as s:
        assert s.count_runs() == writers * n
        got = {(r["session_id"], r["case_name"], r["score"]) for r in s.runs()}
        assert got == {(f"w{i}", f"c{j}", float(j)) for i in range(writers) for j in range(n)}
        assert len(s.sessions()) == writers
        # every stored record is intact JSON that reads back as the outcome written
        assert all(json.loads(r["outcome"])["agent"] == r["session_id"] for r in s.runs())


def test_path_precedence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(storepath.ENV_VAR, raising=False)
    assert storepath.default_path(tmp_path) == tmp_path / ".agentrace" / "history.db"
    monkeypatch.setenv(storepath.ENV_VAR, str(tmp_path / "env.db"))
    assert storepath.default_path(tmp_path) == tmp_path / "env.db"


def test_the_cli_finds_the_history_a_session_wrote_from_a_subfolder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """pytest writes ``<rootdir>/.agentrace/history.db`` (the folder of ``pyproject.toml``) when started in a
    subfolder; the commands run there read that file, not a missing one beside them. The search stops at the
    project's top: another project's history above it is not read."""
    monkeypatch.delenv(storepath.ENV_VAR, raising=False)
    outer, proj = tmp_path / "outer", tmp_path / "outer" / "proj"
    (outer / ".agentrace").mkdir(parents=True)
    (outer / ".agentrace" / "history.db").write_text("another project's")
    (proj / "evals" / "deep").mkdir(parents=True)
    (proj / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    monkeypatch.chdir(proj / "evals" / "deep")
    assert storepath.default_path() == proj / "evals" / "deep" / ".agentrace" / "history.db"  # none in the project
    (proj / ".agentrace").mkdir()
    (proj / ".agentrace" / "history.db").write_text("")
    assert storepath.default_path() == proj / ".agentrace" / "history.db"
    (proj / "evals" / ".agentrace").mkdir()
    (proj / "evals" / ".agentrace" / "history.db").write_text("")
    assert storepath.default_path() == proj / "evals" / ".agentrace" / "history.db"  # the nearest
    monkeypatch.chdir(outer)
    assert storepath.default_path() == outer / ".agentrace" / "history.db"
