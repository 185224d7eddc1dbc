"""Issue 4 acceptance: trial files through pytest, with real git repos and a fake agent script.

Each behaviour the issue lists is observed in a run (run.json, prompt.txt, the agent's own log of what it saw).
Session-level paths run serial and under ``-n 2``.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from helpers.trial import agent_logs, make_project, runs, tag_second_commit, trial_rows, trial_toml

from pytest_agentrace.run.sandbox import probe
from pytest_agentrace.stats.answers import CLAIM_REQUEST


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    make_project(pytester.path)
    return pytester


def write_trial(p: pytest.Pytester, text: str, name: str = "trial.toml") -> Path:
    path = p.path / name
    path.write_text(text)
    return path


def run(p: pytest.Pytester, *args: str) -> pytest.RunResult:
    return p.runpytest("--agentrace", "--agentrace-out", "out", *args)


def test_overlay_decides_the_answer_and_items_are_named(project: pytest.Pytester, xdist: list[str]) -> None:
    write_trial(project, trial_toml(reps=2))
    res = run(project, "-rA", *xdist)
    res.assert_outcomes(passed=2, failed=2)
    text = res.stdout.str()
    for rep in (1, 2):
        assert f"PASSED trial.toml::port[docs-bot-r{rep}]" in text
        assert f"FAILED trial.toml::port[baseline-bot-r{rep}]" in text
    assert "missing from the answer: 8123, listens" in text
    records = runs(project.path / "out")
    assert sorted(records) == [f"trial:port/{arm}/bot/r{r}" for arm in ("baseline", "docs") for r in (1, 2)]
    base, docs = records["trial:port/baseline/bot/r1"], records["trial:port/docs/bot/r1"]
    assert base["status"] == "failed" and base["answer_score"]["missing"] == ["8123", "listens"]
    assert base["usage"]["answer"] == "The port is 8080."
    assert docs["status"] == "passed" and docs["answer_score"] == {"correct": True, "recall": 1.0, "matched": ["8123", "listens"], "missing": [], "forbidden": []}
    assert docs["usage"]["answer"] == "The server listens on port 8123."
    assert docs["kind"] == "trial" and docs["case"] == "port" and docs["arm"] == "docs" and docs["rep"] == 1
    assert docs["extra"]["trial"] == "ports" and docs["baseline_arm"] == "baseline"
    run_dir = project.path / "out/runs/port/docs/bot/1"
    assert {"run.json", "raw.out", "raw.err", "prompt.txt"} <= {p.name for p in run_dir.iterdir()}
    # the summary table: one row per cell
    rows = trial_rows(text)
    assert [r[:6] for r in rows] == [["port", "baseline", "bot", "2", "0/2", "0/2"], ["port", "docs", "bot", "2", "2/2", "2/2"]]


def test_collect_only_is_the_dry_run(project: pytest.Pytester) -> None:
    more = '\n[[questions]]\nid = "name"\nrepo = "other"\nprompt = "Name?"\nexpect = ["x"]\n\n[[agents]]\nname = "noop"\n'
    write_trial(project, trial_toml(reps=2, more=more))
    res = run(project, "--collect-only", "-q")
    items = [line for line in res.stdout.lines if "::" in line]
    expected = [f"trial.toml::{q}[{arm}-{agent}-r{r}]" for q in ("port", "name") for arm in ("baseline", "docs") for agent in ("bot", "noop") for r in (1, 2)]
    assert items == expected
    assert not (project.path / "out" / "runs").exists()


def test_reps_override_and_filters(project: pytest.Pytester) -> None:
    write_trial(project, trial_toml(reps=3, more='\n[[agents]]\nname = "noop"\n'))
    assert len([x for x in run(project, "--collect-only", "-q").stdout.lines if "::" in x]) == 12
    res = run(project, "--collect-only", "-q", "--agentrace-reps", "1", "--agentrace-arm", "docs", "--agentrace-agent", "bot")
    assert [x for x in res.stdout.lines if "::" in x] == ["trial.toml::port[docs-bot-r1]"]
    res = run(project, "--collect-only", "-q", "-k", "baseline and r2")
    assert [x for x in res.stdout.lines if "::" in x] == ["trial.toml::port[baseline-bot-r2]", "trial.toml::port[baseline-noop-r2]"]
    res = run(project, "--collect-only", "-q", "--agentrace-arm", "dcos")
    assert "key '--agentrace-arm': dcos matches none of this trial's arms (did you mean 'docs'?); arms: baseline, docs" in res.stdout.str()
    res = run(project, "--collect-only", "-q", "--agentrace-arm", "zzz", "--agentrace-arm", "doc")
    assert "key '--agentrace-arm': zzz, doc matches none of this trial's arms (did you mean 'docs'?); arms: baseline, docs" in res.stdout.str()
    res = run(project, "--collect-only", "-q", "--agentrace-arm", "zzz")
    assert "key '--agentrace-arm': zzz matches none of this trial's arms; arms: baseline, docs" in res.stdout.str()
    res = run(project, "--collect-only", "-q", "--agentrace-baseline", "dcos")
    assert "key '--agentrace-baseline': dcos is not an arm of this trial (did you mean 'docs'?); arms: baseline, docs" in res.stdout.str()
    res = run(project, "--collect-only", "-q", "--agentrace-baseline", "docs")
    assert len([x for x in res.stdout.lines if "::" in x]) == 12
    # a built-in agent the trial does not list runs as given, as in a task file (spec.select.choose_agents)
    res = run(project, "--collect-only", "-q", "--agentrace-reps", "1", "--agentrace-agent", "claude")
    assert [x for x in res.stdout.lines if "::" in x] == ["trial.toml::port[baseline-claude-r1]", "trial.toml::port[docs-claude-r1]"]
    res = run(project, "--collect-only", "-q", "--agentrace-agent", "bto")
    assert "unknown agent 'bto' (did you mean 'bot'?); this file's agents: bot, noop" in res.stdout.str()


def test_question_without_answer_key_warns(project: pytest.Pytester) -> None:
    """A question with no expect/forbid/verify (or min_recall 0) passes every answer: collection warns, runs go on."""
    write_trial(project, trial_toml(expect="[]"))
    res = run(project, "--collect-only", "-q")
    assert "trial.toml: question(s) port have no answer key (expect, forbid or verify), so every answer passes" in res.stdout.str()
    write_trial(project, trial_toml(question="min_recall = 0"))
    assert "have no answer key" in run(project, "--collect-only", "-q").stdout.str()
    write_trial(project, trial_toml())
    assert "have no answer key" not in run(project, "--collect-only", "-q").stdout.str()


def test_repo_mapping_and_ref(project: pytest.Pytester) -> None:
    tag_second_commit(project.path / "other", "The port is 7070.\n")
    more = '\n[[arms]]\nname = "swap"\nrepos = { app = "other" }\n\n[[arms]]\nname = "pinned"\nrepos = { app = "pinned" }\n\n[[repos]]\nname = "pinned"\nsource = "file://other"\nref = "v1"\n'
    write_trial(project, trial_toml(expect='["port"]', more=more))
    run(project).assert_outcomes(passed=4)
    answers = {k.split("/")[1]: v["usage"]["answer"] for k, v in runs(project.path / "out").items()}
    assert answers == {"baseline": "The port is 8080.", "docs": "The server listens on port 8123.", "swap": "The port is 7070.", "pinned": "The port is 9090."}
    records = runs(project.path / "out")
    assert records["trial:port/swap/bot/r1"]["extra"]["repo"] == "other"
    assert records["trial:port/pinned/bot/r1"]["extra"]["repo"] == "pinned"


def test_fresh_clone_per_run(project: pytest.Pytester) -> None:
    """A file the agent writes in one run is not in the next run's clone."""
    write_trial(project, trial_toml(reps=2, agent='env = { BOT_WRITE = "leftover.txt" }'))
    run(project, "-p", "no:randomly").assert_outcomes(passed=2, failed=2)
    logs = agent_logs(project.path / "out")
    assert len(logs) == 4 and all("leftover.txt" not in log["files"] for log in logs)
    assert all(log["cwd"] != other["cwd"] for log in logs for other in logs if log is not other)


def test_env_vars_for_setup_prepare_verify_and_agent(project: pytest.Pytester) -> None:
    dump = "env | grep ^TRIAL_ | sort > $TRIAL_OUT/{}-$TRIAL_ID.env"
    docs = f'setup = "{dump.format("setup")}"\nprepare = "{dump.format("prepare")}"'
    write_trial(project, trial_toml(docs=docs, question=f'verify = "{dump.format("verify")}"', agent='env = { FOO = "bar" }'))
    run(project, "--agentrace-arm", "docs").assert_outcomes(passed=1)
    out = project.path / "out"
    (log,) = agent_logs(out)
    env = log["env"]
    run_dir = out / "runs" / "port" / "docs" / "bot" / "1" if probe()[0] else out
    if probe()[0]:  # in the box the results folder is out of reach: the agent's $TRIAL_OUT is its outbox, whose
        # regular files the harness copies into the run's record folder after the run (run.outbox)
        assert Path(env["TRIAL_OUT"]).name == "outbox" and not Path(env["TRIAL_OUT"]).is_relative_to(out)
    else:
        assert env["TRIAL_OUT"] == str(run_dir)
    agent_out = env["TRIAL_OUT"]  # the checks run the agent's code: the same $TRIAL_OUT as the agent
    assert env["TRIAL_DIR"] == log["cwd"]
    assert (env["TRIAL_QUESTION"], env["TRIAL_ARM"], env["TRIAL_AGENT"], env["TRIAL_REP"]) == ("port", "docs", "bot", "1")
    assert env["FOO"] == "bar"
    tid = env["TRIAL_ID"]
    assert tid.startswith("t_port_docs_bot_r1_") and tid.replace("_", "").isalnum() and tid.islower() and len(tid) <= 63
    for phase in ("setup", "prepare", "verify"):  # setup and prepare (before the agent) see the results folder
        # verify's $TRIAL_OUT in the box is the agent's outbox: its files land in the record's outbox/
        folder = (run_dir / "outbox" if probe()[0] else run_dir) if phase == "verify" else out
        seen = dict(line.split("=", 1) for line in (folder / f"{phase}-{tid}.env").read_text().splitlines())
        if phase == "verify":  # verify runs in the run's clean tree (run.cleantree), not in the agent's workspace
            assert seen.pop("TRIAL_DIR") == str(Path(env["TRIAL_DIR"]).parent / "clean")
            env = {k: v for k, v in env.items() if k != "TRIAL_DIR"}
        want_out = agent_out if phase == "verify" else str(folder)
        assert seen == {**{k: v for k, v in env.items() if k.startswith("TRIAL_")}, "TRIAL_OUT": want_out}, phase


def test_trial_id_is_unique_per_run_and_session(project: pytest.Pytester) -> None:
    write_trial(project, trial_toml(reps=2))
    run(project, "--agentrace-sandbox", "off")  # the logs stay in $TRIAL_OUT across sessions without the sandbox
    run(project, "--agentrace-sandbox", "off")
    ids = [log["env"]["TRIAL_ID"] for log in agent_logs(project.path / "out")]
    assert len(ids) == 8 and len(set(ids)) == 8


def test_prompt_composition(project: pytest.Pytester) -> None:
    write_trial(project, trial_toml(
        defaults='prompt_suffix = "Answer in one sentence."',
        baseline='prompt_prefix = "You are in a repo."',
        docs='prompt_prefix = "Read docs first."\nprompt_suffix = "Cite the file."',
    ))
    run(project)
    out = project.path / "out/runs/port"
    q = "Which port does the server listen on?"
    assert (out / "baseline/bot/1/prompt.txt").read_text() == f"You are in a repo.\n\n{q}\n\nAnswer in one sentence."
    assert (out / "docs/bot/1/prompt.txt").read_text() == f"Read docs first.\n\n{q}\n\nCite the file."
    sent = {log["env"]["TRIAL_ARM"]: log["prompt"] for log in agent_logs(project.path / "out")}
    assert sent["baseline"] == (out / "baseline/bot/1/prompt.txt").read_text()


def test_prompt_with_claim_request_and_no_prefix(project: pytest.Pytester) -> None:
    write_trial(project, trial_toml(defaults="claim = true"))
    run(project, "--agentrace-arm", "baseline")
    text = (project.path / "out/runs/port/baseline/bot/1/prompt.txt").read_text()
    assert text == f"Which port does the server listen on?\n\n{CLAIM_REQUEST}"


def test_forbid_fails_a_run_that_has_every_expected_pattern(project: pytest.Pytester) -> None:
    (project.path / "docs" / "ANSWER.txt").write_text("The server listens on port 8123 (not 8080).\n")
    write_trial(project, trial_toml(question='forbid = ["8080", "9999"]'))
    res = run(project, "--agentrace-arm", "docs")
    res.assert_outcomes(failed=1)
    rec = runs(project.path / "out")["trial:port/docs/bot/r1"]
    assert rec["answer_score"]["recall"] == 1.0 and rec["answer_score"]["forbidden"] == ["8080"]
    assert rec["reason"] == "answer incorrect: forbidden pattern matched: 8080"


def test_min_recall(project: pytest.Pytester) -> None:
    write_trial(project, trial_toml(question="min_recall = 0.5", expect='["port", "8123", "listens", "TCP"]'))
    run(project).assert_outcomes(passed=1, failed=1)
    recs = runs(project.path / "out")
    assert recs["trial:port/baseline/bot/r1"]["answer_score"]["recall"] == 0.25
    assert recs["trial:port/docs/bot/r1"]["answer_score"]["recall"] == 0.75
    assert recs["trial:port/baseline/bot/r1"]["reason"] == "answer incorrect: recall 0.25 < min_recall 0.50"


def test_verify_and_claims(project: pytest.Pytester, xdist: list[str]) -> None:
    """The bot writes fixed.txt only in the 'edit' arm (via env); verify checks it. Claims: the docs overlay
    claims passed, the edit arm's overlay claims not-run."""
    (project.path / "docs" / "CLAIM.txt").write_text('VERIFICATION: {"ran": ["cat ANSWER.txt"], "result": "passed"}\n')
    (project.path / "edit-overlay").mkdir()
    (project.path / "edit-overlay" / "ANSWER.txt").write_text("It listens on 8123.\n")
    (project.path / "edit-overlay" / "CLAIM.txt").write_text('VERIFICATION: {"ran": [], "result": "not-run", "could_not_verify": ["all"]}\n')
    (project.path / "bad-overlay").mkdir()
    (project.path / "bad-overlay" / "ANSWER.txt").write_text("listens 8123\n")
    (project.path / "bad-overlay" / "CLAIM.txt").write_text("VERIFICATION: it all passed\n")
    more = (
        '\n[[arms]]\nname = "edit"\noverlay = "edit-overlay"\n'
        '\n[[arms]]\nname = "bad"\noverlay = "bad-overlay"\n'
        '\n[[agents]]\nname = "writer"\ncommand = ["./bots/bot.py", "{prompt}"]\nedits = true\nenv = { BOT_WRITE = "fixed.txt" }\n'
    )
    write_trial(project, trial_toml(defaults="claim = true", question='verify = "test -f fixed.txt && echo verified || (echo no fixed.txt; exit 3)"', more=more))
    res = run(project, "--agentrace-agent", "bot", "--agentrace-agent", "writer", "-k", "docs or edit or bad", *xdist)
    res.assert_outcomes(passed=3, failed=3)
    recs = runs(project.path / "out")
    docs_bot, docs_writer = recs["trial:port/docs/bot/r1"], recs["trial:port/docs/writer/r1"]
    assert docs_bot["status"] == "failed" and docs_bot["reason"] == "verify failed (exit 3)"
    assert docs_bot["checks"]["verify"]["passed"] is False and docs_bot["checks"]["verify"]["exit_code"] == 3
    assert "no fixed.txt" in (project.path / "out/runs/port/docs/bot/1/verify.log").read_text()
    assert "--- verify: `test -f fixed.txt" in res.stdout.str() and "no fixed.txt" in res.stdout.str()
    assert docs_writer["status"] == "passed" and docs_writer["checks"]["verify"]["passed"] is True
    assert docs_writer["lines_added"] == 1 and docs_writer["files_changed"] == 1 and docs_writer["extra"]["edits"] is True
    assert docs_bot["extra"]["edits"] is False
    # claimed passed while verify failed -> false_pass; claimed not-run while verify passed -> false_fail
    assert docs_bot["claim"] == {"status": "valid", "result": "passed", "ran": ["cat ANSWER.txt"], "could_not_verify": [], "missing": [], "false_pass": True, "false_fail": False}
    assert docs_writer["claim"]["false_pass"] is False and docs_writer["claim"]["false_fail"] is False
    edit_writer, edit_bot = recs["trial:port/edit/writer/r1"], recs["trial:port/edit/bot/r1"]
    assert edit_writer["claim"]["result"] == "not-run" and edit_writer["claim"]["false_fail"] is True and edit_writer["status"] == "passed"
    assert edit_bot["claim"]["false_fail"] is False and edit_bot["claim"]["false_pass"] is False
    bad = recs["trial:port/bad/writer/r1"]
    assert bad["claim"]["status"] == "invalid" and bad["claim"]["false_pass"] is None and bad["status"] == "passed"


def test_claim_missing_and_no_verify(project: pytest.Pytester) -> None:
    write_trial(project, trial_toml(defaults="claim = true"))
    run(project, "--agentrace-arm", "docs").assert_outcomes(passed=1)
    rec = runs(project.path / "out")["trial:port/docs/bot/r1"]
    assert rec["claim"] == {"status": "missing", "false_pass": None, "false_fail": None}
    assert "verify" not in rec["checks"]


def test_no_claim_unless_asked(project: pytest.Pytester) -> None:
    (project.path / "docs" / "CLAIM.txt").write_text('VERIFICATION: {"result": "passed"}\n')
    write_trial(project, trial_toml())
    run(project, "--agentrace-arm", "docs").assert_outcomes(passed=1)
    rec = runs(project.path / "out")["trial:port/docs/bot/r1"]
    assert rec["claim"] is None and "VERIFICATION" not in rec["usage"]["answer"]


def test_failed_setup_crash_and_timeout_do_not_stop_others(project: pytest.Pytester, xdist: list[str]) -> None:
    more = (
        '\n[[arms]]\nname = "broken"\noverlay = "docs"\nsetup = ["true", "echo cannot set up; exit 4"]\n'
        '\n[[agents]]\nname = "crasher"\ncommand = ["./bots/bot.py", "{prompt}"]\nenv = { BOT_EXIT = "2" }\n'
        '\n[[agents]]\nname = "sleeper"\ncommand = ["./bots/bot.py", "{prompt}"]\nenv = { BOT_SLEEP = "30" }\n'
    )
    write_trial(project, trial_toml(more=more))
    res = run(project, "--agentrace-arm", "docs", "--agentrace-arm", "broken", "--agentrace-timeout", "1.5", *xdist)
    res.assert_outcomes(passed=1, failed=2, errors=3)
    recs = runs(project.path / "out")
    assert len(recs) == 6  # every run recorded, also those that errored
    assert recs["trial:port/docs/bot/r1"]["status"] == "passed"
    crash = recs["trial:port/docs/crasher/r1"]
    assert (crash["status"], crash["reason"], crash["exit_code"]) == ("failed", "agent crashed (exit 2)", 2)
    assert crash["answer_score"]["correct"] is True  # the answer was right, the agent still crashed
    slow = recs["trial:port/docs/sleeper/r1"]
    assert (slow["status"], slow["timed_out"], slow["reason"]) == ("timeout", True, "agent timed out after 1.5s")
    for agent in ("bot", "crasher", "sleeper"):
        rec = recs[f"trial:port/broken/{agent}/r1"]
        assert rec["status"] == "error" and rec["reason"] == "setup of arm 'broken' failed (exit 4): echo cannot set up; exit 4"
        assert rec["checks"]["setup"]["passed"] is False
        assert "cannot set up" in (project.path / f"out/runs/port/broken/{agent}/1/setup.log").read_text()
    assert "infrastructure error: setup of arm 'broken' failed" in res.stdout.str()


def test_missing_repo_is_an_error_run(project: pytest.Pytester) -> None:
    more = '\n[[arms]]\nname = "gone"\nrepos = { app = "gone" }\n\n[[repos]]\nname = "gone"\nsource = "does-not-exist"\n'
    write_trial(project, trial_toml(more=more))
    res = run(project, "--agentrace-arm", "gone", "--agentrace-arm", "docs")
    res.assert_outcomes(passed=1, errors=1)
    rec = runs(project.path / "out")["trial:port/gone/bot/r1"]
    assert rec["status"] == "error" and rec["reason"].startswith("workspace (gone): repo ") and "does not exist" in rec["reason"]


def test_prepare_runs_once_per_arm(project: pytest.Pytester, xdist: list[str]) -> None:
    prep = 'prepare = ["echo $TRIAL_ARM $PWD >> $TRIAL_OUT/prepared.txt", "sleep 0.2"]'
    write_trial(project, trial_toml(reps=3, baseline=prep, docs=prep, expect='["port"]'))
    res = run(project, *xdist)
    res.assert_outcomes(passed=6)
    lines = (project.path / "out/prepared.txt").read_text().splitlines()
    assert sorted(lines) == [f"baseline {project.path}", f"docs {project.path}"]
    for rec in runs(project.path / "out").values():
        assert rec["checks"]["prepare"]["passed"] is True and rec["checks"]["prepare"]["command"] == "sleep 0.2"
    assert "sleep 0.2" in (project.path / "out/runs/port/docs/bot/3/prepare.log").read_text()
    # a new session prepares again
    run(project, *xdist)
    assert len((project.path / "out/prepared.txt").read_text().splitlines()) == 4


def test_failed_prepare_runs_once_and_errors_every_run_of_the_arm(project: pytest.Pytester, xdist: list[str]) -> None:
    write_trial(project, trial_toml(reps=2, docs='prepare = "echo x >> $TRIAL_OUT/tries.txt; exit 5"', expect='["port"]'))
    res = run(project, *xdist)
    res.assert_outcomes(passed=2, errors=2)
    assert (project.path / "out/tries.txt").read_text() == "x\n"
    recs = runs(project.path / "out")
    assert recs["trial:port/docs/bot/r2"]["reason"].startswith("prepare of arm 'docs' failed (exit 5)")


SETUP_TIMES = "python3 -c \"import time,os; open(os.environ['TRIAL_OUT']+'/times.txt','a').write(f'{time.time()} start {os.environ[\\\"TRIAL_ID\\\"]}\\\\n')\"; sleep 0.3; python3 -c \"import time,os; open(os.environ['TRIAL_OUT']+'/times.txt','a').write(f'{time.time()} end {os.environ[\\\"TRIAL_ID\\\"]}\\\\n')\""


def setup_intervals(path: Path) -> list[tuple[float, float]]:
    start: dict[str, float] = {}
    spans = []
    for line in path.read_text().splitlines():
        t, what, tid = line.split()
        if what == "start":
            start[tid] = float(t)
        else:
            spans.append((start.pop(tid), float(t)))
    return sorted(spans)


def test_setup_never_overlaps(project: pytest.Pytester, xdist: list[str]) -> None:
    setup = "setup = ['''" + SETUP_TIMES + "''']"
    write_trial(project, trial_toml(reps=2, baseline=setup, docs=setup, expect='["port"]'))
    run(project, *xdist).assert_outcomes(passed=4)
    spans = setup_intervals(project.path / "out/times.txt")
    assert len(spans) == 4
    for (_s1, e1), (s2, _e2) in itertools.pairwise(spans):
        assert e1 <= s2, f"setup runs overlap: {spans}"


BARRIER = (
    "mkdir -p $TRIAL_OUT/barrier && touch $TRIAL_OUT/barrier/$TRIAL_ID && "
    "for i in $(seq 1 400); do [ $(ls $TRIAL_OUT/barrier | wc -l) -ge 2 ] && break; sleep 0.05; done; "
    "[ $(ls $TRIAL_OUT/barrier | wc -l) -ge 2 ] && echo met >> $TRIAL_OUT/met.txt"
)


def test_parallel_setup_lets_setups_overlap_under_xdist(project: pytest.Pytester) -> None:
    """Two setups wait for each other (a barrier): only possible when they run at the same time."""
    setup = f"parallel_setup = true\nsetup = '''{BARRIER}'''"
    write_trial(project, trial_toml(reps=2, docs=setup, expect='["port"]'))
    run(project, "--agentrace-arm", "docs", "-p", "xdist", "-n", "2", "--dist", "load").assert_outcomes(passed=2)
    assert (project.path / "out/met.txt").read_text() == "met\nmet\n"


def test_agent_keys_args_model_kind(project: pytest.Pytester) -> None:
    more = (
        '\n[[agents]]\nname = "modelled"\nmodel = "m-1"\ncommand = ["./bots/bot.py", "{prompt}", "--model={model}"]\nargs = ["--extra", "x y"]\n'
        '\n[[agents]]\nname = "noop-parsed"\ncommand = ["./bots/bot.py", "{prompt}"]\nkind = "noop"\n'
    )
    write_trial(project, trial_toml(more=more))
    res = run(project, "--agentrace-arm", "docs", "-rA")
    res.assert_outcomes(passed=2, xfailed=0, failed=1)
    logs = {log["env"]["TRIAL_AGENT"]: log for log in agent_logs(project.path / "out")}
    assert logs["modelled:m-1"]["argv"][1:] == ["--model=m-1", "--extra", "x y"]
    assert "PASSED trial.toml::port[docs-modelled:m-1-r1]" in res.stdout.str()
    recs = runs(project.path / "out")
    assert recs["trial:port/docs/modelled:m-1/r1"]["model"] == "m-1"
    # kind = "noop": the noop adapter parses the command's output, whatever it printed
    assert recs["trial:port/docs/noop-parsed/r1"]["usage"]["answer"] == "noop: no change made"


def test_noop_is_an_expected_failure(project: pytest.Pytester) -> None:
    write_trial(project, trial_toml(more='\n[[agents]]\nname = "noop"\n'))
    run(project, "--agentrace-arm", "docs").assert_outcomes(passed=1, xfailed=1)


def test_other_toml_and_pyproject_are_left_alone(project: pytest.Pytester) -> None:
    (project.path / "pyproject.toml").write_text('[project]\nname = "x"\n[[questions]]\nid = "not a trial"\n')
    (project.path / "settings.toml").write_text('[tool]\nquestions = "no array"\n')
    res = run(project, "--collect-only", "-q")
    assert "no tests collected" in res.stdout.str() or "no tests ran" in res.stdout.str()
    assert res.ret == pytest.ExitCode.NO_TESTS_COLLECTED


def test_broken_trial_file_is_a_collection_error(project: pytest.Pytester) -> None:
    write_trial(project, "[[questions]]\nid = \"q\"\nprompt = \n")
    res = run(project)
    res.assert_outcomes(errors=1)
    assert "agentrace: " in res.stdout.str() and "not valid TOML" in res.stdout.str()
    write_trial(project, trial_toml().replace("expect =", "expcet ="))
    res = run(project)
    assert "key '[[questions]] 'port'.expcet': unknown key (did you mean 'expect'?)" in res.stdout.str()


def test_not_collected_without_agentrace(project: pytest.Pytester) -> None:
    write_trial(project, trial_toml())
    assert project.runpytest("--collect-only", "-q").ret == pytest.ExitCode.NO_TESTS_COLLECTED


def test_repo_and_overlay_folders_are_not_collected_as_tests(project: pytest.Pytester) -> None:
    (project.path / "docs" / "test_in_overlay.py").write_text("def test_x():\n    assert False\n")
    (project.path / "plain-src").mkdir()
    (project.path / "plain-src" / "test_in_repo.py").write_text("def test_y():\n    assert False\n")
    (project.path / "plain-src" / "ANSWER.txt").write_text("listens 8123\n")
    more = '\n[[repos]]\nname = "plain"\nsource = "plain-src"\n\n[[arms]]\nname = "plainarm"\nrepos = { app = "plain" }\n'
    write_trial(project, trial_toml(more=more))
    res = run(project, "--collect-only", "-q")
    names = [x for x in res.stdout.lines if "::" in x]
    assert names == ["trial.toml::port[baseline-bot-r1]", "trial.toml::port[docs-bot-r1]", "trial.toml::port[plainarm-bot-r1]"]
    run(project, "--agentrace-arm", "plainarm").assert_outcomes(passed=1)  # a plain folder is committed into a template repo


def test_used_tool_is_none_without_uses(project: pytest.Pytester) -> None:
    write_trial(project, trial_toml())
    run(project, "--agentrace-arm", "docs")
    assert runs(project.path / "out")["trial:port/docs/bot/r1"]["used_tool"] is None


def test_timeout_from_defaults(project: pytest.Pytester) -> None:
    write_trial(project, trial_toml(agent='env = { BOT_SLEEP = "20" }').replace("timeout = 30", "timeout = 1"))
    run(project, "--agentrace-arm", "docs").assert_outcomes(failed=1)
    rec = runs(project.path / "out")["trial:port/docs/bot/r1"]
    assert rec["status"] == "timeout" and rec["reason"] == "agent timed out after 1s"


def test_parallel_is_advisory_and_baseline_is_recorded(project: pytest.Pytester) -> None:
    write_trial(project, trial_toml(defaults='parallel = 4\nbaseline = "docs"'))
    run(project).assert_outcomes(passed=1, failed=1)  # parallel: xdist decides; the runs are the same
    assert {r["baseline_arm"] for r in runs(project.path / "out").values()} == {"docs"}


def test_run_json_is_the_task_schema(project: pytest.Pytester) -> None:
    from pytest_agentrace.record.model import Outcome

    write_trial(project, trial_toml())
    run(project)
    for rec in runs(project.path / "out").values():
        assert Outcome.from_dict(rec).to_dict() == rec
        assert json.loads(json.dumps(rec)) == rec


def test_old_session_markers_are_pruned(tmp_path: Path) -> None:
    import os
    import time

    from pytest_agentrace.run.trial import prune_sessions

    root = tmp_path / ".sessions"
    for name in ("old", "recent", "mine"):
        (root / name / "prepare").mkdir(parents=True)
    day_ago = time.time() - 2 * 24 * 3600
    os.utime(root / "old", (day_ago, day_ago))
    os.utime(root / "mine", (day_ago, day_ago))
    prune_sessions(root, keep="mine")
    assert sorted(p.name for p in root.iterdir()) == ["mine", "recent"]


def test_nested_overlay_and_repo_folders_are_not_collected(project: pytest.Pytester) -> None:
    nested = project.path / "inputs" / "overlays" / "docs"
    nested.mkdir(parents=True)
    (nested / "ANSWER.txt").write_text("listens on 8123\n")
    (nested / "test_nested.py").write_text("def test_z():\n    assert False\n")
    (project.path / "inputs" / "test_beside.py").write_text("def test_w():\n    pass\n")  # not an input: collected
    write_trial(project, trial_toml().replace('overlay = "docs"', 'overlay = "inputs/overlays/docs"'))
    names = [x for x in run(project, "--collect-only", "-q").stdout.lines if "::" in x]
    assert names == ["inputs/test_beside.py::test_w", "trial.toml::port[baseline-bot-r1]", "trial.toml::port[docs-bot-r1]"]
