"""Issue 8 acceptance through pytest: 3 agents x 2 tasks x 3 reps and a two-arm trial write the history store,
HTML, Markdown (+ $GITHUB_STEP_SUMMARY) and a JSON export that validates; serial and under pytest-xdist. Plus the
store options (--agentrace-db, $AGENTRACE_DB, --agentrace-no-save), two sessions writing one store at once, and
a report path that cannot be written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy  # noqa: F401  (imported once here: pytester's in-process runs cannot re-import numpy's C extension)
import pytest
import scipy.stats  # noqa: F401
from helpers import BUGGY_REPO, FIXER, make_repo, write_script
from helpers.report import make_acceptance_project

from pytest_agentrace.record.store import Store
from pytest_agentrace.record.storepath import ENV_VAR
from pytest_agentrace.report.json_export import validate
from pytest_agentrace.report.markdown import COMMENT_MARKER


def test_acceptance_session_writes_every_report(pytester: pytest.Pytester, bin_dir: Path, monkeypatch: pytest.MonkeyPatch, xdist: list[str]) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    summary = pytester.path / "step-summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    make_acceptance_project(pytester.path, bin_dir)
    res = pytester.runpytest("--agentrace", "--agentrace-reps", "3", "--agentrace-html", "out/report.html",
                             "--agentrace-md", "out/report.md", "--agentrace-json", "out/report.json",
                             "--agentrace-seed", "7", "--agentrace-resamples", "2000", *xdist)
    # gamma never fixes add (3 failures); the baseline arm answers 8080, not 8123 (3 failures)
    res.assert_outcomes(passed=18, failed=6)
    text = res.stdout.str()
    assert "could not" not in text, text[text.find("could not") - 200:]
    for kind in ("html", "md", "json"):
        assert f"agentrace: wrote {kind} report {pytester.path / 'out' / ('report.' + kind)}" in text

    doc = json.loads((pytester.path / "out/report.json").read_text())
    validate(doc)
    assert doc["totals"] == {"runs": 24, "passed": 18, "failed": 6, "expected_failures": 0, "timeout": 0, "error": 0}
    assert doc["config"]["agents"] == ["alpha", "beta", "gamma", "reader"] and doc["config"]["reps"] == 3
    assert [t["name"] for t in doc["config"]["tasks"]] == ["fix-add", "fix-mul"] and doc["config"]["tasks"][0]["timeout"] == 60
    (trial,) = doc["config"]["trials"]
    assert (trial["name"], trial["arms"], trial["baseline"], trial["questions"]) == ("ports", ["baseline", "docs"], "baseline", ["port"])
    cells = {(c["case"], c["arm"], c["agent"]): (c["passed"], c["valid"]) for c in doc["cells"]}
    assert cells == {
        ("fix-add", "default", "alpha"): (3, 3), ("fix-add", "default", "beta"): (3, 3), ("fix-add", "default", "gamma"): (0, 3),
        ("fix-mul", "default", "alpha"): (3, 3), ("fix-mul", "default", "beta"): (3, 3), ("fix-mul", "default", "gamma"): (3, 3),
        ("port", "baseline", "reader"): (0, 3), ("port", "docs", "reader"): (3, 3),
    }
    (comp,) = doc["comparisons"]
    assert (comp["agent"], comp["arm"], comp["baseline"]) == ("reader", "docs", "baseline")
    assert 0.4 < comp["relative_cost"] < 0.55  # the docs arm's bot spends ~950 tokens against ~2050
    board = {s["agent"]: s for s in doc["leaderboard"]}
    assert set(board) == {"alpha", "beta", "gamma"}
    # two races (fix-add, fix-mul); who wins fix-mul depends on wall time, so only the counts are fixed
    assert board["gamma"]["passed"] == 3 and all(s["races"] == 2 for s in board.values()) and sum(s["wins"] for s in board.values()) <= 2
    assert set(doc["elo"]["ratings"]) == {"alpha", "beta", "gamma"} and len(doc["elo"]["steps"]) == 2
    assert doc["session"]["args"][:1] == ["--agentrace"] and doc["results_dir"] == str(pytester.path / ".agentrace")
    # the export's intervals are the session's: same seed and resamples as its terminal report
    from pytest_agentrace.record.runfile import iter_runs
    from pytest_agentrace.stats.cells import summarize
    from pytest_agentrace.stats.compare import compare_arms

    assert (doc["config"]["seed"], doc["config"]["resamples"]) == (7, 2000)
    stored = [o for _, o in iter_runs(pytester.path / ".agentrace")]
    expect = {(c.case, c.arm, c.agent): c.to_dict()["tokens_ci"] for c in summarize(stored, seed=7, resamples=2000)}
    assert {(c["case"], c["arm"], c["agent"]): c["tokens_ci"] for c in doc["cells"]} == expect
    (again,) = compare_arms(stored, seed=7, resamples=2000)
    assert comp["relative_cost_ci"] == again.to_dict()["relative_cost_ci"]

    md = (pytester.path / "out/report.md").read_text()
    assert md.startswith("## agentrace report\n") and "24 runs: 18 passed, 6 failed" in md
    for heading in ("### Leaderboard", "### Tasks", "### Trials", "### Arms vs baseline", "### Elo"):
        assert heading in md
    assert summary.read_text() == "earlier step\n" + md + "\n"  # appended, not overwritten
    assert COMMENT_MARKER not in md

    page = (pytester.path / "out/report.html").read_text()
    assert page.count('<svg class="chart"') == 4 and page.count('<tbody class="run"') == 24
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page  # the tasks' prompt

    with Store(pytester.path / ".agentrace" / "history.db") as store:
        (session,) = store.sessions()  # workers never write: one session row
        assert session["id"] == doc["session"]["id"] and session["finished"]
        assert store.count_runs() == 24
        rows = store.runs()
    assert {r["agent"] for r in rows} == {"alpha", "beta", "gamma", "reader"}
    assert all(r["cli_version"] == "9.9.9" and r["total_tokens"] and r["tool_calls"] >= 1 for r in rows)
    assert sorted({r["score"] is None for r in rows if r["kind"] == "task"}) == [False]


def small_project(pytester: pytest.Pytester, bin_dir: Path) -> None:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "fixer", FIXER)
    (pytester.path / "task.yaml").write_text(
        "name: fix-add\ndescription: Fix add().\nrepo: repo\ntest_command: python -m pytest -q test_calc.py\ntimeout: 60\n"
        "agents:\n  - {name: fixer, command: 'fixer {prompt}'}\n  - noop\n")


def test_no_save_writes_nothing(pytester: pytest.Pytester, bin_dir: Path, monkeypatch: pytest.MonkeyPatch, xdist: list[str]) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    small_project(pytester, bin_dir)
    res = pytester.runpytest("--agentrace", "--agentrace-no-save", *xdist)
    res.assert_outcomes(passed=1, xfailed=1)
    assert not list(pytester.path.rglob("*.db")) and "saved" not in res.stdout.str()  # the Elo ratings live in it too
    assert not list(pytester.path.rglob("ratings.json"))
    pytester.runpytest("--agentrace", *xdist).assert_outcomes(passed=1, xfailed=1)
    assert list(pytester.path.rglob("*.db"))


def test_db_option_and_environment(pytester: pytest.Pytester, bin_dir: Path, monkeypatch: pytest.MonkeyPatch, xdist: list[str]) -> None:
    small_project(pytester, bin_dir)
    monkeypatch.setenv(ENV_VAR, str(pytester.path / "env.db"))
    pytester.runpytest("--agentrace", *xdist).assert_outcomes(passed=1, xfailed=1)
    pytester.runpytest("--agentrace", "--agentrace-db", "opt.db", *xdist).assert_outcomes(passed=1, xfailed=1)
    for name in ("env.db", "opt.db"):
        with Store(pytester.path / name) as store:
            assert len(store.sessions()) == 1 and store.count_runs() == 2
    assert not (pytester.path / ".agentrace" / "history.db").exists()


def test_resumed_runs_are_not_saved_twice(pytester: pytest.Pytester, bin_dir: Path, monkeypatch: pytest.MonkeyPatch, xdist: list[str]) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    small_project(pytester, bin_dir)
    pytester.runpytest("--agentrace", *xdist).assert_outcomes(passed=1, xfailed=1)
    res = pytester.runpytest("--agentrace", "--agentrace-resume", "--agentrace-reps", "2", *xdist)
    res.assert_outcomes(passed=2, xfailed=2)  # rep 1 reused from disk, rep 2 run now
    assert "2 reused runs are saved with the session that ran them" in res.stdout.str()
    with Store(pytester.path / ".agentrace" / "history.db") as store:
        first, second = store.sessions()
        assert store.count_runs() == 4
        assert sorted((r["agent"], r["rep"]) for r in store.runs(session_id=first["id"])) == [("fixer", 1), ("noop", 1)]
        assert sorted((r["agent"], r["rep"]) for r in store.runs(session_id=second["id"])) == [("fixer", 2), ("noop", 2)]


def test_two_sessions_at_once_both_saved(pytester: pytest.Pytester, bin_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_VAR, raising=False)
    small_project(pytester, bin_dir)
    db = pytester.path / "shared.db"
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    procs = [subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--agentrace", "--agentrace-reps", "2",
                               "--agentrace-db", str(db), "--agentrace-out", f"out{i}", *(["-p", "xdist", "-n", "2"] if i else [])],
                              cwd=pytester.path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for i in range(2)]
    outputs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    with Store(db) as store:
        sessions = store.sessions()
        assert len(sessions) == 2 and store.count_runs() == 8
        assert {r["session_id"] for r in store.runs()} == {s["id"] for s in sessions}


def test_an_unwritable_report_is_a_warning_not_a_failure(pytester: pytest.Pytester, bin_dir: Path, xdist: list[str]) -> None:
    small_project(pytester, bin_dir)
    # a directory where the JSON file should go, made after the start-up check (a path checked early can still
    # become unwritable by the end of a long session)
    pytester.makeconftest("import os\n\ndef pytest_sessionstart(session):\n    os.makedirs('taken', exist_ok=True)\n")
    res = pytester.runpytest("--agentrace", "--agentrace-no-save", "--agentrace-json", "taken", "--agentrace-md", "ok.md", *xdist)
    res.assert_outcomes(passed=1, xfailed=1)
    assert res.ret == 0
    res.stdout.fnmatch_lines(["agentrace: wrote md report *ok.md", "agentrace: could not write *taken: IsADirectoryError*"])
    assert (pytester.path / "ok.md").read_text().startswith("## agentrace report")


@pytest.mark.parametrize(("option", "value", "message"), [
    ("--agentrace-md", "afile/x.md", "--agentrace-md afile/x.md: cannot make its folder"),
    ("--agentrace-json", ".", "--agentrace-json .: is a folder; give a file name"),
])
def test_unwritable_report_path_is_a_usage_error_before_any_run(pytester: pytest.Pytester, option: str, value: str, message: str) -> None:
    (pytester.path / "afile").write_text("")
    res = pytester.runpytest("--agentrace", option, value)
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert message in res.stderr.str()
