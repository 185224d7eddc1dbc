"""The statistics subcommands of ``agentrace`` (plan, report, snapshot, compare, ratings, rescore) on results folders
written here; ``regress`` runs a real pytest session and is in ``test_stats_session.py``."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_agentrace import cli
from pytest_agentrace.record.manifest import digest_run, write_manifest
from pytest_agentrace.record.model import Outcome, Usage
from pytest_agentrace.record.runfile import write_run
from pytest_agentrace.record.store import SessionInfo, Store

NOISE = [1.0, 1.04, 0.96, 1.02, 0.98, 1.01, 0.99, 1.03]


def write(out: Path, o: Outcome) -> None:
    """Write ``o`` as a session would: its run.json, and a manifest naming it (so the folder verifies)."""
    run_dir = out / "runs" / o.case / o.arm / o.agent / str(o.rep)
    write_run(run_dir, o)
    write_manifest(out, re.sub(r"\W", "_", o.run_id), {o.run_id: digest_run(out, run_dir)})


def trial_run(case: str, arm: str, rep: int, tokens: int | None, status: str = "passed", agent: str = "a", answer: str | None = None,
              source: str = "t.toml") -> Outcome:
    return Outcome(run_id=f"trial:{case}/{arm}/{agent}/r{rep}", kind="trial", source=source, case=case, arm=arm, agent=agent, rep=rep,
                   status=status, usage=Usage(total_tokens=tokens, answer=answer), extra={"baseline_arm": "base", "trial": "ports"},
                   session_id="s1", started="2026-01-01T00:00:00+00:00", exit_code=0)


def results(out: Path, reps: int = 4, docs_scale: float = 0.6, docs_passed: int | None = None) -> Path:
    for rep in range(1, reps + 1):
        write(out, trial_run("q1", "base", rep, int(1000 * NOISE[rep - 1])))
        ok = docs_passed is None or rep <= docs_passed
        write(out, trial_run("q1", "docs", rep, int(1000 * docs_scale * NOISE[rep - 1]), "passed" if ok else "failed"))
    return out


def main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_plan_formula(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = main(capsys, "plan", "--cv", "0.3", "--effect", "0.2")
    assert code == 0
    # 30, not the t test's 29: the verdict's interval must exclude 1.00 too (one formula for one case and several)
    assert out.splitlines()[0] == "runs per arm to detect a 20% cost difference with 80% power at alpha 0.05 (CV 0.3): 30"
    assert "sigma^2 = ln(1 + CV^2)" in out and "to first order 2 (z_(1-alpha/2) + z_power)^2 sigma^2 / ln(1 - effect)^2 = 27.2" in out
    code, out, _ = main(capsys, "plan", "--cv", "0.3", "--effect", "0.4", "--power", "0.9")
    assert code == 0 and out.startswith("runs per arm to detect a 40% cost difference with 90% power at alpha 0.05 (CV 0.3): 9")
    code, _, err = main(capsys, "plan")
    assert code == 2 and "give --cv (with --effect) for the formula, or --results OUT" in err
    code, _, err = main(capsys, "plan", "--cv", "0.3", "--effect", "2")
    assert code == 2 and "between 0 and 1" in err


def test_plan_results_states_and_spend(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = results(tmp_path / "out", reps=4, docs_scale=0.93)
    code, text, _ = main(capsys, "plan", "--results", str(out), "--max-reps", "40", "--price-per-mtok", "3", "--resamples", "500")
    assert code == 0
    row = next(line for line in text.splitlines() if line.startswith("| a "))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:4] == ["a", "q1", "docs", "4"] and cells[5].startswith("continue (about ")
    more = int(cells[6])
    assert cells[7] == f"{round(more * (1005 + 933.75)):,}" and float(cells[8]) == pytest.approx(more * (1005 + 933.75) * 3 / 1e6, abs=0.006)
    assert "token totals mean different things for different agents" in text
    code, text, _ = main(capsys, "plan", "--results", str(results(tmp_path / "clear", reps=8)), "--format", "json", "--resamples", "500")
    doc = json.loads(text)
    assert doc["rows"][0]["state"] == "clear" and doc["rows"][0]["verdict"] == "cheaper"


def test_report_formats_and_case_filter(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = results(tmp_path / "out")
    write(out, trial_run("q2", "base", 1, 500))
    code, text, _ = main(capsys, "report", str(out), "--format", "markdown", "--resamples", "500")
    assert code == 0 and text.startswith("```text\ntrial ")  # the session's trial table, then the statistics
    assert "\n### trial t.toml - agent a (baseline arm: base)" in text
    code, text, _ = main(capsys, "report", str(out), "--format", "json", "--case", "q1", "--resamples", "500")
    doc = json.loads(text)
    assert {c["case"] for c in doc["cells"]} == {"q1"} and doc["settings"]["cases"] == ["q1"]
    code, _, err = main(capsys, "report", str(out), "--case", "nope")
    assert code == 2 and "--case nope: no such case" in err and "cases: q1, q2" in err
    code, _, err = main(capsys, "report", str(tmp_path / "missing"))
    assert code == 2 and "no such results folder" in err
    (tmp_path / "empty").mkdir()
    code, _, err = main(capsys, "report", str(tmp_path / "empty"))
    assert code == 2 and "no run.json records" in err


def test_snapshot_then_compare_exit_status(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = results(tmp_path / "before", reps=8)
    snap = tmp_path / "baseline.json"
    code, text, _ = main(capsys, "snapshot", str(out), "--to", str(snap), "--name", "v1")
    assert code == 0 and text.strip() == f"wrote {snap}: 2 cells"
    assert json.loads(snap.read_text())["name"] == "v1"
    code, text, _ = main(capsys, "compare", str(out), "--snapshot", str(snap), "--fail-on", "regressed,dearer", "--resamples", "500")
    assert code == 0 and text.strip().endswith("2 cells: 0 regressed, 0 dearer, 0 improved, 2 same, 0 not run, 0 new. "
                                               "`same` means no change could be shown, not that none exists.\n"
                                               "gate: 4 tests (regressed, dearer over 2 rows) at a family-wise error rate "
                                               "of 5% (Holm); 0 failed.")
    assert "Gate p (Holm)" in text
    after = results(tmp_path / "after", reps=8, docs_passed=2)  # docs: 8/8 -> 2/8
    code, text, err = main(capsys, "compare", str(after), "--snapshot", str(snap), "--fail-on", "regressed", "--resamples", "500")
    # Boschloo one-sided 2/8 vs 8/8 is ~0.0013; Holm over the 2 cells' regressed tests doubles it, still below 0.05
    assert code == 1 and "FAIL regressed: a q1 [docs]: regressed (Holm p=0.00" in err and ", 2 tests) - lower pass rate" in err
    assert text.strip().endswith("gate: 2 tests (regressed over 2 rows) at a family-wise error rate of 5% (Holm); 1 failed.")
    code, text, err = main(capsys, "compare", str(after), "--snapshot", str(snap), "--resamples", "500")
    assert code == 0 and "regressed" in text and not err  # reported, no gate asked for
    code, text, _ = main(capsys, "compare", str(after), "--snapshot", str(snap), "--old-arm", "base", "--new-arm", "docs", "--format", "json",
                         "--resamples", "500")
    rows = json.loads(text)["rows"]
    assert [(r["arm"], r["verdict"]) for r in rows] == [("base -> docs", "regressed")]


def test_compare_over_several_cases_for_either_target(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two questions whose docs arm went from 8/8 to 2/8 passed: each cell regressed, and the pooled row over both
    questions regressed for these cases (stratified exact test); for new questions like these two cannot show it."""
    before, after = results(tmp_path / "before", reps=8), results(tmp_path / "after", reps=8, docs_passed=2)
    for out, passed in ((before, 8), (after, 2)):
        for rep in range(1, 9):
            write(out, trial_run("q2", "base", rep, int(1000 * NOISE[rep - 1])))
            write(out, trial_run("q2", "docs", rep, int(600 * NOISE[rep - 1]), "passed" if rep <= passed else "failed"))
    snap = tmp_path / "s.json"
    assert main(capsys, "snapshot", str(before), "--to", str(snap))[0] == 0
    code, text, err = main(capsys, "compare", str(after), "--snapshot", str(snap), "--fail-on", "regressed", "--resamples", "300")
    assert code == 1 and "FAIL regressed: a all 2 cases [docs]: regressed (Holm p=" in err
    assert "6 tests) - lower pass rate (one-sided stratified exact p=" in err
    assert "Over all cases (2 arms): 1 regressed, 0 dearer, 0 improved, 1 same." in text
    code, text, err = main(capsys, "compare", str(after), "--snapshot", str(snap), "--generalize", "cases", "--format", "json", "--resamples", "300")
    pooled = [r for r in json.loads(text)["rows"] if r["pooled"]]
    assert {r["arm"]: r["verdict"] for r in pooled} == {"base": "same", "docs": "same"} and "target: new cases like these" in pooled[1]["detail"]


def test_compare_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = results(tmp_path / "out")
    code, _, err = main(capsys, "compare", str(out), "--snapshot", str(tmp_path / "none.json"))
    assert code == 2 and "none.json: snapshot file not found" in err
    (tmp_path / "s.json").write_text("{}")
    code, _, err = main(capsys, "compare", str(out), "--snapshot", str(tmp_path / "s.json"), "--fail-on", "bogus")
    assert code == 2 and "--fail-on: unknown gate 'bogus'" in err
    code, _, err = main(capsys, "compare", str(out), "--snapshot", str(tmp_path / "s.json"), "--old-arm", "base")
    assert code == 2 and "give both --old-arm and --new-arm" in err


def task_run(case: str, agent: str, score: float, session: str, started: str) -> Outcome:
    return Outcome(run_id=f"task:{case}/default/{agent}/r1", kind="task", source="t.yaml", case=case, arm="default", agent=agent, rep=1,
                   status="passed", score=score, session_id=session, started=started, exit_code=0)


def test_ratings_from_the_history_store_json_and_reset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "history.db"
    with Store(db) as store:
        store.save_session(SessionInfo("s1", started="2026-01-01T00:00:00+00:00"), [
            task_run("t1", "x", 90, "s1", "2026-01-01T00:00:00+00:00"), task_run("t1", "y", 40, "s1", "2026-01-01T00:00:00+00:00")])
    code, text, _ = main(capsys, "ratings", "--db", str(db))
    assert code == 0 and text.splitlines()[2:4] == ["| 1      | x       | 1516  |", "| 2      | y       | 1484  |"]
    assert "1 race; Elo 1500 start, K 32" in text
    code, text, _ = main(capsys, "ratings", "--db", str(db), "--json")  # derived, so asking again changes nothing
    doc = json.loads(text)
    assert doc["ratings"] == {"x": 1516.0, "y": 1484.0} and len(doc["history"]) == 1
    code, text, _ = main(capsys, "ratings", "--db", str(db), "--reset")
    assert code == 0 and "ratings reset" in text
    code, text, _ = main(capsys, "ratings", "--db", str(db))
    assert code == 0 and "no ratings yet" in text  # the earlier session no longer counts
    (tmp_path / "bad.db").write_text("not a database")
    code, _, err = main(capsys, "ratings", "--db", str(tmp_path / "bad.db"))
    assert code == 2 and "not a usable history store" in err
    code, _, err = main(capsys, "ratings", "--db", str(tmp_path / "nonexistent.db"))
    assert code == 2 and "nonexistent.db: no history store" in err


TRIAL = """\
name = "ports"
[[repos]]
name = "app"
source = "app"
[[arms]]
name = "base"
[[agents]]
name = "bot"
command = ["bot", "{{prompt}}"]
[[questions]]
id = "port"
repo = "app"
prompt = "Which port?"
expect = {expect}
"""


def test_rescore_after_the_answer_key_changed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "app").mkdir()
    trial = tmp_path / "t.toml"
    trial.write_text(TRIAL.format(expect='["8123"]'))
    out = tmp_path / "out"
    write(out, trial_run("port", "base", 1, 100, "passed", answer="It listens on 8123.", source=str(trial)))
    write(out, trial_run("port", "base", 2, 100, "failed", answer="It listens on 9090.", source=str(trial)))
    write(out, trial_run("port", "base", 3, 100, "timeout", answer="9090", source=str(trial)).replace(timed_out=True))
    trial.write_text(TRIAL.format(expect='["9090"]'))  # the key was wrong
    code, text, _ = main(capsys, "rescore", str(trial), str(out))
    assert code == 0
    assert "trial:port/base/a/r1: passed -> failed" in text and "trial:port/base/a/r2: failed -> passed" in text
    assert "rescored 3 runs of trial 'ports': 2 changed status" in text
    r1 = json.loads((out / "runs/port/base/a/1/run.json").read_text())
    assert r1["status"] == "failed" and r1["answer_score"]["missing"] == ["9090"] and "rescored" in r1["extra"]
    r3 = json.loads((out / "runs/port/base/a/3/run.json").read_text())
    assert r3["status"] == "timeout" and r3["answer_score"]["correct"] is True  # a timeout stays a timeout
    code, _, err = main(capsys, "rescore", str(tmp_path / "missing.toml"), str(out))
    assert code == 2 and "missing.toml" in err


def test_rescore_leaves_another_trial_files_runs_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two trial files of one name in one results folder (sessions refuse to mix them): rescoring with the second
    leaves the first's runs as they are and says so; once the first file is gone its runs are the second's."""
    (tmp_path / "app").mkdir()
    first, second = tmp_path / "t.toml", tmp_path / "t2.toml"
    first.write_text(TRIAL.format(expect='["8123"]'))
    second.write_text(TRIAL.format(expect='["9090"]'))
    out = tmp_path / "out"
    write(out, trial_run("port", "base", 1, 100, "passed", answer="It listens on 8123.", source=str(first)))
    code, _, err = main(capsys, "rescore", str(second), str(out))
    assert code == 2 and f"left the runs of {first} as they are" in err and "no runs of trial 'ports'" in err
    assert json.loads((out / "runs/port/base/a/1/run.json").read_text())["status"] == "passed"
    first.unlink()
    code, text, _ = main(capsys, "rescore", str(second), str(out))
    assert code == 0 and "trial:port/base/a/r1: passed -> failed" in text


def test_resume_reuses_rescored_runs_only_for_the_key_they_were_graded_with(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """After ``rescore`` a run's status belongs to the new answer key: ``--agentrace-resume`` reuses it under that
    key and runs it again when the file goes back to the key it first ran with."""
    from pytest_agentrace.run.resume import stored_outcome
    from pytest_agentrace.spec.common import AgentSpec
    from pytest_agentrace.spec.matrix import trial_runs
    from pytest_agentrace.spec.trial import load_trial

    (tmp_path / "app").mkdir()
    trial = tmp_path / "t.toml"
    trial.write_text(TRIAL.format(expect='["8123"]'))

    def spec():
        return trial_runs(load_trial(trial), [AgentSpec(name="a", id="a", command=("bot", "{prompt}"))], ["base"], 1)[0]

    out = tmp_path / "out"
    made = trial_run("port", "base", 1, 100, "passed", answer="It listens on 9090.", source=str(trial))
    write(out, made.replace(content_hash=spec().spec.content_hash, extra={**made.extra, "agent_hash": spec().agent_hash}))
    assert stored_outcome(spec(), out) is not None  # ran with this file: reused
    trial.write_text(TRIAL.format(expect='["9090"]'))
    assert stored_outcome(spec(), out) is None  # the key changed: not reused before a rescore
    assert main(capsys, "rescore", str(trial), str(out))[0] == 0
    assert stored_outcome(spec(), out).status == "passed"  # re-graded with this key: reused
    trial.write_text(TRIAL.format(expect='["8123"]'))
    assert stored_outcome(spec(), out) is None  # graded with another key than the file's now


def test_entry_point_lists_the_statistics_commands() -> None:
    res = subprocess.run([sys.executable, "-m", "pytest_agentrace.cli", "--help"], capture_output=True, text=True, check=True)
    for name in ("plan", "report", "snapshot", "compare", "ratings", "rescore", "regress"):
        assert f"    {name} " in res.stdout


def test_plan_formula_for_several_cases_either_target_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_agentrace.stats import power

    code, out, _ = main(capsys, "plan", "--cv", "0.3", "--effect", "0.3", "--cases", "3")
    need = power.runs_needed(0.3, 0.3, 0.05, 0.8, 3, "fixed")
    assert code == 0 and need is not None and need < power.runs_needed(0.3, 0.3)  # three cases need fewer runs each
    assert out.splitlines()[0] == f"runs per arm per case to detect a 30% cost difference with 80% power at alpha 0.05 (CV 0.3) over 3 cases (fixed cases): {need}"
    assert power.power(need, 0.3, 0.3, 3) >= 0.8 > power.power(need - 1, 0.3, 0.3, 3)
    code, out, _ = main(capsys, "plan", "--cv", "0.3", "--effect", "0.3", "--cases", "3", "--generalize", "cases")
    assert code == 0 and "no number of runs: with 3 cases a sign-flip p cannot go below 0.25; a verdict needs 6 or more cases" in out
    code, out, _ = main(capsys, "plan", "--cv", "0.3", "--effect", "0.3", "--cases", "10", "--generalize", "cases", "--case-sd", "0.1",
                        "--format", "json")
    doc = json.loads(out)["formula"]  # --format json prints JSON for the formula too
    assert doc["target"] == "cases" and doc["cases"] == 10 and doc["runs_needed"] == power.runs_needed(0.3, 0.3, 0.05, 0.8, 10, "cases", 0.1)
    assert doc["power_at_runs_needed"] >= 0.8 and set(doc["power_by_runs"]) == {"4", "8", "12", "16", "24", "32"}


def test_plan_results_before_the_spread_is_known_and_without_tokens(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """After one run per arm nothing is futile yet; an agent without token data says so; several cases make one row
    per arm whose runs are counted per case; --format json is one JSON document with the formula and the rows."""
    out = results(tmp_path / "one", reps=1)
    for rep in (1, 2):
        write(out, trial_run("q1", "base", rep, None, agent="quiet"))
        write(out, trial_run("q1", "docs", rep, None, agent="quiet"))
    code, text, _ = main(capsys, "plan", "--results", str(out), "--resamples", "300")
    rows = {r[0]: r for r in ([c.strip() for c in line.strip("|").split("|")] for line in text.splitlines() if line.startswith("| "))}
    assert code == 0 and rows["a"][3:6] == ["1", "0.60", "continue (spread unknown)"] and rows["quiet"][5] == "no token data"
    two = results(tmp_path / "two", reps=4)
    for rep in range(1, 5):
        write(two, trial_run("q2", "base", rep, int(2000 * NOISE[rep - 1])))
        write(two, trial_run("q2", "docs", rep, int(1200 * NOISE[rep - 1])))
    code, text, _ = main(capsys, "plan", "--results", str(two), "--cv", "0.3", "--format", "json", "--resamples", "300")
    doc = json.loads(text)
    (row,) = doc["rows"]
    assert doc["formula"]["runs_needed"] == 30 and row["cases"] == ["q1", "q2"] and row["runs"] == 4 and row["provisional"]
    assert row["state"] == "clear" and row["state_text"] == "clear (cheaper, provisional)" and doc["generalize"] == "fixed"
    code, text, _ = main(capsys, "plan", "--results", str(two), "--generalize", "cases", "--resamples", "300")
    assert "add cases (with 2 cases a sign-flip p cannot go below 0.5; a verdict needs 6 or more cases)" in text
    assert "target: new cases like these" in text and "runs per arm are counted per case" in text


def test_compare_decides_every_gate_the_session_takes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``compare --fail-on`` took only the snapshot's verdicts: a threshold (``pass_rate<0.8``, ``pass@3<0.9``) or
    an arm-vs-baseline verdict (``worse``) passed whatever the runs; ``errors`` fails a cell that measured nothing."""
    snap = tmp_path / "baseline.json"
    assert main(capsys, "snapshot", str(results(tmp_path / "before", reps=8)), "--to", str(snap))[0] == 0
    after = results(tmp_path / "after", reps=8, docs_passed=0)  # docs: 8/8 -> 0/8
    for gate, want in (("pass_rate<0.8", "FAIL pass_rate<0.8: a q1 [docs]: pass rate 0.00 (0/8 passed)"),
                       ("pass@3<0.9", "FAIL pass@3<0.9: a q1 [docs]: pass@3 0.00 (0/8 passed)"),
                       ("worse", "FAIL worse: a arm docs vs base: pass rate worse")):
        code, _, err = main(capsys, "compare", str(after), "--snapshot", str(snap), "--fail-on", gate, "--resamples", "300")
        assert code == 1 and want in err, (gate, err)
    code, _, err = main(capsys, "compare", str(tmp_path / "before"), "--snapshot", str(snap), "--fail-on", "pass_rate<0.8,worse,errors",
                        "--resamples", "300")
    assert code == 0 and not err
    broken = tmp_path / "broken"
    for rep in range(1, 5):
        write(broken, trial_run("q1", "base", rep, 1000))
        write(broken, trial_run("q1", "docs", rep, None, "error"))
    code, _, err = main(capsys, "compare", str(broken), "--snapshot", str(snap), "--fail-on", "errors", "--resamples", "300")
    assert code == 1 and "FAIL errors: a q1 [docs]: errors" in err and "every run an infrastructure error" in err


def test_the_errors_gate_without_a_snapshot_reads_the_sessions_cells() -> None:
    from types import SimpleNamespace

    from pytest_agentrace.stats.verdict import gate_failures, parse_fail_on

    cells = [SimpleNamespace(agent="a", case="q1", arm="docs", runs=3, valid=0, errors=3),
             SimpleNamespace(agent="a", case="q1", arm="base", runs=3, valid=2, errors=1)]
    assert gate_failures(parse_fail_on("errors"), cells) == [
        "errors: a q1 [docs]: every run an infrastructure error (3): nothing measured"]


def test_report_without_out_reads_the_projects_results(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """``agentrace report`` (and ``snapshot``, ``compare``) with no OUT read the nearest ``.agentrace/`` with runs up to
    the project's top, as the history commands find their store; ``report .`` in the project names that folder
    instead of telling the user to write runs into the project's top."""
    (tmp_path / "pyproject.toml").write_text("")
    results(tmp_path / ".agentrace")
    (tmp_path / "evals").mkdir()
    monkeypatch.chdir(tmp_path / "evals")
    code, text, _ = main(capsys, "report", "--resamples", "200")
    assert code == 0 and "docs" in text
    assert main(capsys, "snapshot", "--to", str(tmp_path / "s.json"))[0] == 0
    code, _, err = main(capsys, "report", str(tmp_path))
    assert code == 2 and f"did you mean {tmp_path / '.agentrace'}" in err
    (tmp_path / "evals" / "other").mkdir()
    (tmp_path / "evals" / "other" / "pytest.ini").write_text("[pytest]\n")  # another project's top: not looked past
    monkeypatch.chdir(tmp_path / "evals" / "other")
    code, _, err = main(capsys, "report")
    assert code == 2 and "no results folder given (OUT)" in err



@pytest.mark.parametrize("ini", ["pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg"])
def test_report_without_out_reads_the_folder_the_ini_file_names(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                monkeypatch: pytest.MonkeyPatch, ini: str) -> None:
    """An ini file's ``agentrace_out`` is where the project's sessions write: a command without OUT reads that
    folder, not an older ``.agentrace/`` beside it."""
    text = {"pytest.ini": "[pytest]\nagentrace_out = results\n",
            "pyproject.toml": "[tool.pytest.ini_options]\nagentrace_out = 'results'\n",
            "tox.ini": "[pytest]\nagentrace_out = results\n", "setup.cfg": "[tool:pytest]\nagentrace_out = results\n"}[ini]
    (tmp_path / ini).write_text(text)
    (tmp_path / ".agentrace" / "runs").mkdir(parents=True)  # stale: of another setting
    results(tmp_path / "results")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")
    from pytest_agentrace.record.storepath import default_results

    assert default_results() == tmp_path / "results"
    code, out, _ = main(capsys, "report", "--resamples", "200")
    assert code == 0 and "docs" in out

TINY_TASK = """name: tiny
description: Make add() return a+b.
repo: repo
test_command: python -m pytest -q test_a.py
agents: [oracle, noop]
solution_patch: |
  --- a/a.py
  +++ b/a.py
  @@ -1,2 +1,2 @@
   def add(a, b):
  -    return a - b
  +    return a + b
"""


def test_gates_on_task_runs_decide_and_skip_the_baselines(pytester: pytest.Pytester, xdist: list[str],
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """A folder of task runs (oracle passes, the noop baseline fails as expected): ``compare --fail-on`` decides every
    gate word (the task runs are scored first), and no threshold gate reads the baseline's cells, in the session
    or after it."""
    from pytest_agentrace import cli

    pytester.makefile(".yaml", task=TINY_TASK)
    (pytester.path / "repo").mkdir()
    (pytester.path / "repo" / "a.py").write_text("def add(a, b):\n    return a - b\n")
    (pytester.path / "repo" / "test_a.py").write_text("from a import add\n\ndef test_add():\n    assert add(1, 2) == 3\n")
    res = pytester.runpytest("--agentrace", "task.yaml", "--agentrace-out", "out", "--agentrace-fail-on", "pass_rate<0.8",
                             *xdist)
    assert res.ret == 0 and "FAILED pass_rate" not in res.stdout.str()
    out = pytester.path / "out"
    assert cli.main(["snapshot", str(out), "-o", str(pytester.path / "snap.json")]) == 0
    capsys.readouterr()
    for gate, want in [("regressed", 0), ("errors", 0), ("pass_rate<0.8", 0), ("pass@1<0.9", 0), ("not-run", 0),
                       ("new", 0), ("flip>0.2", 0), ("worse", 1)]:  # worse: no arm ran beside a baseline arm
        code = cli.main(["compare", str(out), "--snapshot", str(pytester.path / "snap.json"), "--fail-on", gate])
        err = capsys.readouterr().err
        assert (code, "Traceback" in err) == (want, False), (gate, err)
    (pytester.path / "repo" / "test_a.py").write_text("def test_add():\n    assert False\n")  # oracle now fails
    res = pytester.runpytest("--agentrace", "task.yaml", "--agentrace-out", "out2", "--agentrace-fail-on", "pass_rate<0.8",
                             *xdist)
    assert res.ret == 1
    assert "agentrace: FAILED pass_rate<0.8: oracle tiny [default]: pass rate 0.00 (0/1 passed)" in res.stdout.str()
    assert "FAILED pass_rate<0.8: noop" not in res.stdout.str()


def test_regress_help_after_the_file_is_its_own(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = main(capsys, "regress", str(tmp_path / "trial.toml"), "--snapshot", "s.json", "--help")
    assert code == 0 and out.startswith("usage: agentrace regress FILE --snapshot SNAPSHOT") and "--fail-on" in out
    assert not err and not any(tmp_path.iterdir())  # no pytest session ran
