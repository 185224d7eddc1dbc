"""Issue 5 through pytest: the statistics report in the session summary, snapshots, --agentrace-fail-on gates that
set the exit status on the controller, stop-when-decided skips, and Elo ratings saved per results store.

Real trial files with real git repos and a fake agent script that prints Claude Code's JSON result (so tokens are
parsed by the claude adapter). Its tokens are ``TOKENS`` (a file of the workspace: the repo says 1000, the ``docs``
overlay 600) times ``SCALE`` (env, default 1) times a fixed per-rep factor, so every figure below is known.
Every session path runs serial and under ``-n 2``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers import BUGGY_REPO, FIXER, make_repo, write_script

from pytest_agentrace.record.store import Store
from pytest_agentrace.stats.ratings import elo, elo_history, races

NOISE = [1.0, 1.04, 0.96, 1.02, 0.98, 1.03, 0.97, 1.01, 0.99, 1.05, 0.95, 1.0]

BOT = r"""
import json, os, pathlib, sys
ws = pathlib.Path.cwd()
noise = NOISE_LIST
rep = int(os.environ["TRIAL_REP"])
tokens = int(float((ws / "TOKENS").read_text()) * float(os.environ.get("SCALE", "1")) * noise[(rep - 1) % len(noise)])
answer = (ws / "ANSWER.txt").read_text().strip()
print(json.dumps({"type": "system", "subtype": "init", "claude_code_version": os.environ.get("BOT_VERSION", "1.0.0"), "model": "m1"}))
print(json.dumps({"type": "result", "subtype": "success", "is_error": False, "result": answer, "num_turns": 2,
                  "usage": {"input_tokens": tokens - 100, "output_tokens": 100}}))
""".replace("NOISE_LIST", repr(NOISE))

TRIAL = """\
name = "ports"

[defaults]
reps = {reps}
timeout = 60
baseline = "base"

[[repos]]
name = "app"
source = "app"

[[arms]]
name = "base"

[[arms]]
name = "docs"
overlay = "docs"

[[agents]]
name = "bot"
kind = "claude"
command = ["{python}", "{bot}", "{{prompt}}"]
{env}

[[questions]]
id = "port"
repo = "app"
prompt = "Which port does the server listen on?"
expect = {expect}
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    make_repo(pytester.path / "app", {"app.py": "PORT = 8123\n", "ANSWER.txt": "The port is 8123.\n", "TOKENS": "1000\n"})
    (pytester.path / "docs").mkdir()
    (pytester.path / "docs" / "TOKENS").write_text("600\n")
    write_script(pytester.path / "bots" / "bot.py", BOT)
    return pytester


def write_trial(p: pytest.Pytester, reps: int = 4, env: dict[str, str] | None = None, expect: str = '["port"]') -> Path:
    import sys

    env_text = "env = { " + ", ".join(f'{k} = "{v}"' for k, v in (env or {}).items()) + " }" if env else ""
    path = p.path / "trial.toml"
    path.write_text(TRIAL.format(reps=reps, python=sys.executable, bot=p.path / "bots" / "bot.py", env=env_text, expect=expect))
    return path


def run(p: pytest.Pytester, *args: str) -> pytest.RunResult:
    return p.runpytest("--agentrace", "--agentrace-out", "out", "--agentrace-resamples", "2000", *args)


def stats_rows(text: str, first: str) -> list[list[str]]:
    """Table rows of the statistics section whose first cell is ``first``."""
    section = text.split("agentrace statistics", 1)[1]
    return [[c.strip() for c in line.strip().strip("|").split("|")] for line in section.splitlines() if line.startswith(f"| {first} ")]


def test_session_summary_prints_the_statistics_report(project: pytest.Pytester, xdist: list[str]) -> None:
    write_trial(project, reps=4)
    res = run(project, *xdist)
    res.assert_outcomes(passed=8)
    assert res.ret == 0
    text = res.stdout.str()
    assert "agentrace statistics" in text and "trial trial.toml - agent bot (baseline arm: base)" in text
    base, docs = stats_rows(text, "base")[0], stats_rows(text, "docs")[0]
    assert base[1:3] == ["4", "4/4 100% (51%-100%)"] and base[4:6] == ["1.00", "baseline"]
    # docs: 600 x (1.0, 1.04, 0.96, 1.02) over 1000 x the same factors -> exactly 0.60; 4 runs a side -> provisional
    assert docs[4].startswith("0.60 (") and docs[5] == "cheaper (provisional)"
    assert docs[3].startswith("603 (")  # (600 + 624 + 576 + 612) / 4
    assert "spread: bot: CV of relative cost" in text
    assert "seed 0, 2,000 resamples; 1 case, up to 4 reps, 8 runs, 0 infrastructure errors" in text


def test_fail_on_dearer_sets_exit_status_1_with_a_red_reason(project: pytest.Pytester, xdist: list[str]) -> None:
    write_trial(project, reps=4)
    (project.path / "docs" / "TOKENS").write_text("1500\n")  # the docs arm costs 1.5x
    res = run(project, "--agentrace-fail-on", "dearer", *xdist)
    res.assert_outcomes(passed=8)
    assert res.ret == 1
    text = res.stdout.str()
    assert ("agentrace: FAILED dearer: bot arm docs vs base: relative cost dearer (provisional) (Holm p=0.0286, 1 test) - "
            "relative cost 1.50") in text
    assert "agentrace: gate: 1 test (dearer over 1 row) at a family-wise error rate of 5% (Holm); 1 failed." in text
    assert text.count("agentrace: FAILED") == 1
    # the same session without the gate passes
    res = run(project, *xdist)
    assert res.ret == 0 and "agentrace: FAILED" not in res.stdout.str()


def test_snapshot_update_then_compare_dearer_and_version_change(project: pytest.Pytester, xdist: list[str]) -> None:
    write_trial(project, reps=6)  # 6 a side: a permutation p can pass Holm over 4 tests
    res = run(project, "--agentrace-snapshot", "snap.json", "--agentrace-snapshot-update", *xdist)
    assert res.ret == 0
    assert "snapshot written:" in res.stdout.str()
    snap = json.loads((project.path / "snap.json").read_text())
    assert sorted(snap["cells"]) == ["trial:port/base/bot", "trial:port/docs/bot"]
    docs = snap["cells"]["trial:port/docs/bot"]
    assert (docs["passed"], docs["total"], docs["cli_versions"], docs["models"]) == (6, 6, ["1.0.0"], ["m1"])
    assert docs["tokens"] == [int(600 * f) for f in NOISE[:6]]
    # tokens x2 and a new CLI version: dearer beyond the 10% tolerance, and the detail says the version changed (a
    # shift large enough for 4 runs a side to pass the gate's family-wise adjustment, Holm over every tested row)
    write_trial(project, reps=6, env={"SCALE": "2.0", "BOT_VERSION": "1.1.0"})
    res = run(project, "--agentrace-snapshot", "snap.json", "--agentrace-fail-on", "regressed,dearer", *xdist)
    assert res.ret == 1
    text = res.stdout.str()
    rows = {r[2]: r for r in stats_rows(text, "bot")}
    assert rows["docs"][3:5] == ["6/6 -> 6/6", "dearer"] and "tokens x2.00" in rows["docs"][6]
    assert "different agent CLI version: 1.0.0 -> 1.1.0" in rows["docs"][6]
    assert "2 cells: 0 regressed, 2 dearer, 0 improved, 0 same, 0 not run, 0 new. `same` means no change could be shown, not that none exists." in text
    assert text.count("agentrace: FAILED dearer: bot port [") == 2


def test_snapshot_regressed_not_run_and_new(project: pytest.Pytester, xdist: list[str]) -> None:
    write_trial(project, reps=4)
    assert run(project, "--agentrace-snapshot", "snap.json", "--agentrace-snapshot-update", *xdist).ret == 0
    # now every answer misses the expected pattern: 4/4 -> 0/4 is a regression (one-sided Boschloo p < 0.1)
    write_trial(project, reps=4, expect='["no such thing"]')
    res = run(project, "--agentrace-snapshot", "snap.json", "--agentrace-arm", "docs", *xdist)
    res.assert_outcomes(failed=4)
    text = res.stdout.str()
    rows = {r[2]: r for r in stats_rows(text, "bot")}
    assert rows["docs"][3:5] == ["4/4 -> 0/4", "regressed"] and "lower pass rate (one-sided Boschloo p=" in rows["docs"][5]
    assert rows["base"][3:5] == ["4/4 -> -", "not run"]
    assert "agentrace: FAILED" not in text  # reported, but no gate asked for
    res = run(project, "--agentrace-snapshot", "snap.json", "--agentrace-arm", "docs", "--agentrace-fail-on", "regressed,pass@1<0.5", *xdist)
    text = res.stdout.str()
    assert "agentrace: FAILED regressed: bot port [docs]: regressed (Holm p=" in text and "test) - lower pass rate" in text
    assert "agentrace: FAILED pass@1<0.5: bot port [docs]: pass@1 0.00 (0/4 passed)" in text
    # an update from a session of one arm updates that arm's cell and keeps the other (as syrupy keeps the
    # snapshots of the tests it did not run)
    res = run(project, "--agentrace-snapshot", "snap.json", "--agentrace-arm", "docs", "--agentrace-snapshot-update", *xdist)
    assert "(1 cells of this session; 1 other cells kept from the file, not run in this session" in res.stdout.str()
    cells = json.loads((project.path / "snap.json").read_text())["cells"]
    assert {k: (c["passed"], c["total"]) for k, c in cells.items()} == {"trial:port/base/bot": (4, 4), "trial:port/docs/bot": (0, 4)}


def test_stop_when_decided_skips_the_remaining_reps(project: pytest.Pytester, xdist: list[str]) -> None:
    write_trial(project, reps=12)
    res = run(project, "--agentrace-stop-when-decided", "-rs", *xdist)
    outcomes = res.parseoutcomes()
    text = res.stdout.str()
    assert res.ret == 0
    ran = outcomes["passed"]
    assert outcomes.get("skipped", 0) == 24 - ran
    if not xdist:  # serial: reps run in order, the first look (4 runs per arm) decides, reps 5-12 are skipped
        assert ran == 8
    else:  # two workers may start a few reps before the look that decides: never more than a couple
        assert 8 <= ran <= 12
    assert "stop-when-decided: arm docs vs base is clear after 4 runs per arm (cheaper, z=" in text
    assert "stop-when-decided: every arm vs baseline base is decided (docs clear)" in text
    docs = stats_rows(text, "docs")[0]
    assert docs[5] == "cheaper (clear at 4 runs)"
    assert "stop-when-decided: group-sequential Welch t on log tokens, Lan-DeMets O'Brien-Fleming-type alpha spending (cap 12" in text


def test_stop_when_decided_keeps_running_an_undecided_cell(project: pytest.Pytester) -> None:
    """A 4% difference (noise about 3%) is undecided at the first looks: reps go on until the group-sequential
    boundary is crossed at 9 runs per arm (checked offline with ``sequential.decide`` on the same tokens)."""
    (project.path / "docs" / "TOKENS").write_text("960\n")
    write_trial(project, reps=12)
    res = run(project, "--agentrace-stop-when-decided", "-rs")
    outcomes = res.parseoutcomes()
    assert outcomes["passed"] == 18 and outcomes["skipped"] == 6
    assert "stop-when-decided: arm docs vs base is clear after 9 runs per arm (cheaper, z=" in res.stdout.str()
    assert stats_rows(res.stdout.str(), "docs")[0][5] == "cheaper (clear at 9 runs)"


def test_stop_when_decided_stops_a_futile_cell_and_exports_its_verdict(project: pytest.Pytester) -> None:
    (project.path / "docs" / "TOKENS").write_text("1000\n")  # no difference: only futility can stop it
    write_trial(project, reps=6)
    res = run(project, "--agentrace-stop-when-decided", "-rs", "--agentrace-json", "report.json", "--agentrace-md", "report.md")
    ran = res.parseoutcomes()["passed"]
    text = res.stdout.str()
    # identical costs: the noise-only difference is futile at the first look (4 runs), the rest skipped
    assert ran == 8 and "is futile after 4 runs per arm (the difference cannot be shown within the reps)" in text
    assert stats_rows(text, "docs")[0][5].startswith("no clear difference (futile at 4 runs)")
    # the exported reports carry the same stop-when-decided verdict, not a fixed-sample test of the stopped data
    (comp,) = json.loads((project.path / "report.json").read_text())["comparisons"]
    assert comp["arm"] == "docs" and comp["sequential"]["state"] == "futile" and comp["sequential"]["n"] == 4
    assert comp["cost_verdict"] == "no clear difference"


def test_task_races_save_elo_ratings_in_the_history_store(pytester: pytest.Pytester, xdist: list[str]) -> None:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(pytester.path / "fixer.py", FIXER)
    import sys

    (pytester.path / "task.yaml").write_text(
        "name: fix-add\ndescription: fix add\nrepo: repo\ntest_command: python -m pytest -q test_calc.py\n"
        f'agents: [{{name: fixer, command: "{sys.executable} {pytester.path / "fixer.py"}"}}, noop]\n')
    res = pytester.runpytest("--agentrace", "--agentrace-out", "out", "--agentrace-reps", "2", *xdist)
    res.assert_outcomes(passed=2, xfailed=2)
    assert res.ret == 0
    text = res.stdout.str()
    fixer = stats_rows(text, "fixer")
    assert fixer[-1][8:11] == ["1/1", "100%", "1516"]  # races table: wins/races, win rate, Elo
    with Store(pytester.path / ".agentrace" / "history.db") as store:
        outcomes = store.rating_outcomes()
    assert elo(outcomes) == {"fixer": 1516.0, "noop": 1484.0} and len(races(outcomes)) == 1
    # a second session adds one more race to the same store
    pytester.runpytest("--agentrace", "--agentrace-out", "out", *xdist)
    with Store(pytester.path / ".agentrace" / "history.db") as store:
        outcomes = store.rating_outcomes()
    assert len(races(outcomes)) == 2 and elo(outcomes)["fixer"] > 1516.0 and len(elo_history(outcomes)) == 2


def test_bad_statistics_options_are_usage_errors(project: pytest.Pytester) -> None:
    write_trial(project, reps=1)
    res = run(project, "--agentrace-fail-on", "regressed,bogus")
    assert res.ret == 4
    assert "--agentrace-fail-on: unknown gate 'bogus'" in res.stderr.str()
    res = run(project, "--agentrace-snapshot", "missing.json")
    assert res.ret == 4 and "missing.json: snapshot file not found" in res.stderr.str()
    res = run(project, "--agentrace-snapshot-update")
    assert res.ret == 4 and "--agentrace-snapshot-update needs --agentrace-snapshot PATH" in res.stderr.str()
    res = run(project, "--agentrace-generalize", "runs")
    assert res.ret == 4 and "invalid choice: 'runs' (choose from 'fixed', 'cases')" in res.stderr.str()
    (project.path / "pytest.ini").write_text("[pytest]\nagentrace_generalize = sideways\n")
    res = run(project)
    assert res.ret == 4 and "ini key agentrace_generalize = 'sideways': use one of fixed, cases" in res.stderr.str()


def test_agentrace_regress_runs_the_trial_then_compares(project: pytest.Pytester, xdist: list[str]) -> None:
    import subprocess
    import sys

    write_trial(project, reps=4)
    assert run(project, "--agentrace-snapshot", "snap.json", "--agentrace-snapshot-update").ret == 0

    def regress(out: str | None) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pytest_agentrace.cli", "regress", "trial.toml", "--snapshot", "snap.json",
                               *(["--out", out] if out else []), "--resamples", "1000", "--", "-q", "-p", "no:cacheprovider", *xdist],
                              check=False, cwd=project.path, capture_output=True, text=True, timeout=600,
                              env={**os.environ, "TMPDIR": str(tmp)})

    tmp = project.mkdir("tmp")
    res = regress("same")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "2 cells: 0 regressed, 0 dearer, 0 improved, 2 same, 0 not run, 0 new." in res.stdout
    # its own results folder: given to pytest in one word (an existing path as a word of its own would move the
    # rootdir), and removed at the end
    res = regress(None)
    assert res.returncode == 0 and f"--agentrace-out={tmp}/agentrace-regress-" in res.stdout, res.stdout + res.stderr
    assert list(tmp.iterdir()) == []
    write_trial(project, reps=4, expect='["no such thing"]')  # every answer now misses: 4/4 -> 0/4 in both arms
    res = regress("worse")
    assert res.returncode == 1
    assert "2 cells: 2 regressed" in res.stdout
    assert "FAIL regressed: bot port [base]: regressed" in res.stderr and "FAIL regressed: bot port [docs]: regressed" in res.stderr


def test_last_session_reads_only_that_sessions_runs(project: pytest.Pytester, xdist: list[str]) -> None:
    """A results folder keeps every run ever made there (4 reps, then 2): ``last-session.json`` lists the runs of
    the session that just ended, and ``--last-session`` makes ``agentrace snapshot/report/compare`` use only those."""
    from pytest_agentrace.cli import main

    write_trial(project, reps=4)
    assert run(project, *xdist).ret == 0
    write_trial(project, reps=2)
    assert run(project, *xdist).ret == 0
    last = json.loads((project.path / "out" / "last-session.json").read_text())
    assert last["run_ids"] == [f"trial:port/{arm}/bot/r{r}" for arm in ("base", "docs") for r in (1, 2)]
    out = str(project.path / "out")
    assert main(["snapshot", out, "--to", str(project.path / "all.json")]) == 0
    assert main(["snapshot", out, "--to", str(project.path / "last.json"), "--last-session"]) == 0
    every = json.loads((project.path / "all.json").read_text())["cells"]["trial:port/docs/bot"]
    latest = json.loads((project.path / "last.json").read_text())["cells"]["trial:port/docs/bot"]
    assert (every["total"], latest["total"]) == (4, 2)
    assert main(["compare", out, "--snapshot", str(project.path / "last.json"), "--last-session", "--fail-on", "regressed"]) == 0
    (project.path / "out" / "last-session.json").unlink()
    assert main(["report", out, "--last-session"]) == 2


SECOND_QUESTION = """
[[questions]]
id = "port2"
repo = "app"
prompt = "On which port does the server listen?"
expect = {expect}
"""


def write_two_question_trial(p: pytest.Pytester, reps: int) -> Path:
    path = write_trial(p, reps=reps)
    path.write_text(path.read_text() + SECOND_QUESTION.format(expect='["port"]'))
    return path


def test_stop_when_decided_over_fixed_cases_stops_every_question(project: pytest.Pytester, xdist: list[str]) -> None:
    """Two questions (the default target, the cases that ran): one decision for the docs arm over both questions
    (stratified look; the fixed-sample check is 2/4900 at 4 runs each), after which the remaining reps of both
    questions and arms are skipped."""
    write_two_question_trial(project, reps=12)
    res = run(project, "--agentrace-stop-when-decided", "-rs", *xdist)
    outcomes = res.parseoutcomes()
    text = res.stdout.str()
    ran = outcomes["passed"]
    assert outcomes.get("skipped", 0) == 48 - ran and (ran == 16 if not xdist else 16 <= ran <= 22)
    assert "stop-when-decided: arm docs vs base is clear over 2 cases after 4 runs per arm (cheaper, z=" in text
    assert stats_rows(text, "docs")[0][5] == "cheaper (clear at 4 runs per case)"
    assert "(cap 12 runs per arm, first look at 4; one decision per arm over its cases)" in text


def test_stop_when_decided_for_new_cases_decides_each_question_at_half_alpha(project: pytest.Pytester) -> None:
    """The same trial under --agentrace-generalize cases: each question is decided on its own at alpha / 2 (4 runs a
    side reach p = 2/70 = 0.029 > 0.025, 5 runs 2/252), so both stop after 5 runs; the arm's verdict over the two
    questions is the sign-flip test, which cannot go below 0.5 with 2 cases."""
    write_two_question_trial(project, reps=12)
    res = run(project, "--agentrace-stop-when-decided", "--agentrace-generalize", "cases", "-rs")
    outcomes = res.parseoutcomes()
    text = res.stdout.str()
    assert outcomes["passed"] == 20 and outcomes["skipped"] == 28
    assert "stop-when-decided: arm docs vs base is clear after 5 runs per arm (cheaper, z=" in text
    docs = stats_rows(text, "docs")
    assert docs[0][5].startswith("no clear difference (provisional) (interval excludes 1.00, sign-flip p=0.500; with 2 cases p cannot go below 0.5: add cases)")
    by_case = [r for r in stats_rows(text, "port") + stats_rows(text, "port2") if r[1] == "docs"]
    assert [r[6] for r in by_case] == ["cheaper (clear at 5 runs)"] * 2
    assert "target: new cases like these" in text


def test_ini_paths_are_relative_to_the_ini_file_wherever_pytest_starts(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                                                        xdist: list[str]) -> None:
    """``agentrace_out = results`` (and the snapshot and report files) in the project's ini file name one place,
    whichever folder pytest is started in, as pytest's own ``paths`` ini keys; a command-line value is relative to
    the folder pytest was started in."""
    write_trial(project, reps=1)
    project.makeini("[pytest]\nagentrace_out = results\nagentrace_snapshot = snap.json\nagentrace_md = report.md\n")
    sub = project.mkdir("sub")
    monkeypatch.chdir(sub)
    res = project.runpytest("--agentrace", str(project.path / "trial.toml"), "--agentrace-snapshot-update", "--agentrace-resamples", "200",
                            "-p", "no:benchmark", *xdist)  # pytest-benchmark writes .benchmarks/ where pytest starts
    assert res.ret == 0, res.stdout.str()
    assert (project.path / "results" / "runs").is_dir() and (project.path / "snap.json").is_file() and (project.path / "report.md").is_file()
    assert sorted(p.name for p in sub.iterdir()) == []
    res = project.runpytest("--agentrace", str(project.path / "trial.toml"), "--agentrace-out=here", "--agentrace-resamples", "200", *xdist)
    assert res.ret == 0 and (sub / "here" / "runs").is_dir()


def test_an_arm_gate_with_no_baseline_run_fails_saying_so(project: pytest.Pytester, xdist: list[str]) -> None:
    """``--agentrace-arm docs --agentrace-fail-on worse``: the baseline arm did not run, so the gate looks at nothing;
    it said ``gate: 0 tests ... 0 failed`` and passed. It fails now, naming why; with both arms it passes."""
    write_trial(project, reps=1)
    res = run(project, "--agentrace-arm", "docs", "--agentrace-fail-on", "worse,cheaper", *xdist)
    assert res.ret == 1
    res.stdout.fnmatch_lines(["*agentrace: FAILED worse: nothing to compare: no arm ran beside its baseline arm (arms run: docs)*"])
    assert "FAILED cheaper: nothing to compare" in res.stdout.str()
    assert run(project, "--agentrace-fail-on", "worse", *xdist).ret == 0


def test_a_session_stopped_early_writes_no_snapshot(pytester: pytest.Pytester, xdist: list[str]) -> None:
    """``--agentrace-snapshot-update`` with ``-x``: the loop stops at the first failed run, so the cells would be cut
    short; the file is left as it was and the summary says so. The same session run to its end writes it."""
    pytester.makefile(".yaml", t='name: t\ndescription: hi\ntest_command: "false"\nagents: [oracle]\n')
    args = ["--agentrace", "--agentrace-out", "out", "--agentrace-reps", "4", "--agentrace-snapshot", "snap.json",
            "--agentrace-snapshot-update", *xdist]
    res = pytester.runpytest(*args, "-x")
    assert "snapshot not written: the session stopped before every run ran" in res.stdout.str()
    assert not (pytester.path / "snap.json").exists()
    res = pytester.runpytest(*args)
    assert "snapshot written" in res.stdout.str() and (pytester.path / "snap.json").is_file()


def test_a_shard_writes_no_snapshot(pytester: pytest.Pytester, xdist: list[str]) -> None:
    """``--agentrace-snapshot-update`` under ``--agentrace-shard 2/2``: the shard holds only some reps of each cell
    (a 3/3 cell would be written as 2/2), so the file is left as it was and the summary says where to write it from."""
    pytester.makefile(".yaml", t='name: t\ndescription: hi\ntest_command: "true"\nagents: [oracle]\n')
    (pytester.path / "snap.json").write_text("kept")
    res = pytester.runpytest("--agentrace", "--agentrace-out", "out", "--agentrace-reps", "3", "--agentrace-shard", "2/2",
                             "--agentrace-snapshot", "snap.json", "--agentrace-snapshot-update", *xdist)
    res.stdout.fnmatch_lines(["*snapshot not written: shard 2 of 2 holds only part of each cell's runs;*"])
    assert (pytester.path / "snap.json").read_text() == "kept"


def test_a_snapshot_gate_without_a_snapshot_fails_unless_the_session_writes_it(pytester: pytest.Pytester,
                                                                               xdist: list[str]) -> None:
    """``--agentrace-fail-on regressed`` (or ``improved``) with no snapshot looks at nothing: the session fails saying
    so, as ``dearer`` already did; a session that writes the snapshot passes, and one compared with it decides."""
    pytester.makefile(".yaml", t='name: t\ndescription: hi\ntest_command: "true"\nagents: [{name: ok, command: "true"}]\n')
    base = ["--agentrace", "--agentrace-out", "out", "--agentrace-reps", "2", *xdist]
    res = pytester.runpytest(*base, "--agentrace-fail-on", "regressed,improved")
    assert res.ret == 1
    assert res.stdout.str().count("nothing to compare: no snapshot was compared") == 2
    snap = ["--agentrace-snapshot", "snap.json", "--agentrace-fail-on", "regressed"]
    assert pytester.runpytest(*base, *snap, "--agentrace-snapshot-update").ret == 0
    res = pytester.runpytest(*base, *snap)
    assert res.ret == 0 and "nothing to compare" not in res.stdout.str()
