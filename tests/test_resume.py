"""Issue 4: --agentrace-resume / --agentrace-retry-failed, for trial and task files, serial and under -n 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import BUGGY_REPO, make_repo, write_script
from helpers.trial import agent_logs, make_project, runs, trial_rows, trial_toml

from pytest_agentrace.record.manifest import digest_run, write_manifest
from pytest_agentrace.record.model import Outcome
from pytest_agentrace.record.runfile import write_run
from pytest_agentrace.run.resume import needs_retry, stored_outcome
from pytest_agentrace.run.runspec import RunSpec
from pytest_agentrace.spec.common import AgentSpec


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    make_project(pytester.path)
    (pytester.path / "trial.toml").write_text(trial_toml(reps=2))
    return pytester


def run(p: pytest.Pytester, *args: str) -> pytest.RunResult:
    """A session without the sandbox: these tests count agent starts by logs the fake agents write outside their
    workspace (``test_resume_in_the_sandbox`` runs resume sandboxed)."""
    return p.runpytest("--agentrace", "--agentrace-out", "out", "--agentrace-sandbox", "off", *args)


def test_resume_in_the_sandbox(project: pytest.Pytester, xdist: list[str]) -> None:
    """Under the default sandbox a resumed session reuses every verified record and starts no agent."""
    project.runpytest("--agentrace", "--agentrace-out", "out", *xdist).assert_outcomes(passed=2, failed=2)
    started = {str(p): p.stat().st_mtime_ns for p in (project.path / "out").glob("runs/**/raw.out")}
    res = project.runpytest("--agentrace", "--agentrace-out", "out", "--agentrace-resume", *xdist)
    res.assert_outcomes(passed=2, failed=2)
    assert res.stdout.str().count("(2 reused)") == 2  # the trial table: runs per cell, all reused
    assert {str(p): p.stat().st_mtime_ns for p in (project.path / "out").glob("runs/**/raw.out")} == started


def agent_runs(p: pytest.Pytester) -> int:
    return len(agent_logs(p.path / "out"))


def test_resume_reuses_every_complete_run(project: pytest.Pytester, xdist: list[str]) -> None:
    run(project, *xdist).assert_outcomes(passed=2, failed=2)
    first = runs(project.path / "out")
    assert agent_runs(project) == 4
    res = run(project, "--agentrace-resume", *xdist)
    res.assert_outcomes(passed=2, failed=2)  # the stored outcomes, reported again
    assert agent_runs(project) == 4  # no agent ran
    assert runs(project.path / "out") == first  # records untouched
    rows = trial_rows(res.stdout.str())
    assert [r[3] for r in rows] == ["2 (2 reused)", "2 (2 reused)"]
    assert "missing from the answer: 8123, listens" in res.stdout.str()


def test_resume_runs_only_missing_or_unreadable_records(project: pytest.Pytester, xdist: list[str]) -> None:
    run(project, *xdist)
    out = project.path / "out"
    (out / "runs/port/docs/bot/2/run.json").unlink()
    (out / "runs/port/baseline/bot/1/run.json").write_text('{"run_id": "trial:port/baseline/bot/r1", "status": ')
    run(project, "--agentrace-resume", *xdist).assert_outcomes(passed=2, failed=2)
    ran = sorted((log["env"]["TRIAL_ARM"], log["env"]["TRIAL_REP"]) for log in agent_logs(out))
    assert ran == sorted([("baseline", "1"), ("baseline", "1"), ("baseline", "2"), ("docs", "1"), ("docs", "2"), ("docs", "2")])
    recs = runs(out)
    assert recs["trial:port/docs/bot/r2"]["status"] == "passed" and recs["trial:port/baseline/bot/r1"]["status"] == "failed"


def test_changed_trial_file_runs_again(project: pytest.Pytester) -> None:
    run(project)
    (project.path / "trial.toml").write_text(trial_toml(reps=2, question='forbid = ["nothing-matches-this"]'))
    run(project, "--agentrace-resume").assert_outcomes(passed=2, failed=2)
    assert agent_runs(project) == 8
    hashes = {r["content_hash"] for r in runs(project.path / "out").values()}
    assert len(hashes) == 1


def test_edited_overlay_runs_again(project: pytest.Pytester) -> None:
    run(project)
    (project.path / "docs" / "ANSWER.txt").write_text("It listens on 8123, says the new doc.\n")
    run(project, "--agentrace-resume").assert_outcomes(passed=2, failed=2)
    assert agent_runs(project) == 8  # the content hash covers the overlays: every cell ran again
    assert runs(project.path / "out")["trial:port/docs/bot/r1"]["usage"]["answer"] == "It listens on 8123, says the new doc."


def test_without_resume_everything_runs_again(project: pytest.Pytester) -> None:
    run(project)
    run(project)
    assert agent_runs(project) == 8
    assert not any(r["reused"] for r in runs(project.path / "out").values())


def test_retry_failed_reruns_error_timeout_and_crash_only(pytester: pytest.Pytester, xdist: list[str]) -> None:
    make_project(pytester.path)
    flaky = pytester.path / "flaky"
    flaky.mkdir()
    more = (
        '\n[[arms]]\nname = "broken"\noverlay = "docs"\nsetup = "test -f ' + str(flaky / "fixed") + ' || exit 4"\n'
        '\n[[agents]]\nname = "crasher"\ncommand = ["./bots/bot.py", "{prompt}"]\nenv = { BOT_EXIT = "2" }\n'
        '\n[[agents]]\nname = "sleeper"\ncommand = ["./bots/bot.py", "{prompt}"]\nenv = { BOT_SLEEP = "30" }\n'
    )
    (pytester.path / "trial.toml").write_text(trial_toml(more=more))
    args = ["--agentrace-timeout", "2", "--agentrace-arm", "baseline", "--agentrace-arm", "broken", *xdist]
    run(pytester, *args).assert_outcomes(failed=3, errors=3)
    before = runs(pytester.path / "out")
    assert {k: v["status"] for k, v in before.items()} == {
        "trial:port/baseline/bot/r1": "failed", "trial:port/baseline/crasher/r1": "failed", "trial:port/baseline/sleeper/r1": "timeout",
        "trial:port/broken/bot/r1": "error", "trial:port/broken/crasher/r1": "error", "trial:port/broken/sleeper/r1": "error",
    }
    n_before = len(agent_logs(pytester.path / "out"))
    (flaky / "fixed").write_text("")  # the infrastructure is fixed
    res = run(pytester, "--agentrace-retry-failed", *args)
    res.assert_outcomes(passed=1, failed=5)
    after = runs(pytester.path / "out")
    ran = sorted(f'{log["env"]["TRIAL_ARM"]}/{log["env"]["TRIAL_AGENT"]}' for log in agent_logs(pytester.path / "out"))
    new = sorted(ran)
    for key in ("baseline/bot", "baseline/crasher", "baseline/sleeper"):
        new.remove(key)  # the first session's agent runs (the broken arm never reached its agent)
    assert n_before == 3
    assert new == ["baseline/crasher", "baseline/sleeper", "broken/bot", "broken/crasher", "broken/sleeper"]
    assert after["trial:port/baseline/bot/r1"] == before["trial:port/baseline/bot/r1"]  # a wrong answer is a sample: kept
    assert after["trial:port/broken/bot/r1"]["status"] == "passed"
    assert after["trial:port/broken/crasher/r1"]["status"] == "failed"
    assert after["trial:port/broken/sleeper/r1"]["status"] == "timeout"


def test_task_files_resume_too(pytester: pytest.Pytester, bin_dir: Path) -> None:
    make_repo(pytester.path / "repo", BUGGY_REPO)
    count = pytester.path / "count.txt"
    write_script(bin_dir / "fixer", f"""\
        import pathlib
        with open({str(count)!r}, "a") as fh:
            fh.write("run\\n")
        p = pathlib.Path("calc.py")
        p.write_text(p.read_text().replace("a - b", "a + b"))
    """)
    (pytester.path / "task.yaml").write_text(
        "name: fix-add\ndescription: Fix add.\nrepo: repo\ntest_command: python -m pytest -q test_calc.py\n"
        "agents:\n  - {name: fixer, command: 'fixer {prompt}'}\n  - noop\n"
    )
    run(pytester, "--agentrace-reps", "2").assert_outcomes(passed=2, xfailed=2)
    assert count.read_text().count("run") == 2
    res = run(pytester, "--agentrace-reps", "2", "--agentrace-resume")
    res.assert_outcomes(passed=2, xfailed=2)
    assert count.read_text().count("run") == 2
    assert res.stdout.str().count("2 (2 reused)") == 2  # one table per task with reps: each agent's row counts them
    # the same agent id with another command (or timeout) is another agent: its runs are made again, noop's reused
    other = "{name: fixer, command: 'fixer {prompt} --again'}"
    res = run(pytester, "--agentrace-reps", "2", "--agentrace-resume", "--agentrace-agent", other, "--agentrace-agent", "noop")
    res.assert_outcomes(passed=2, xfailed=2)
    assert count.read_text().count("run") == 4
    assert "2 (2 reused)" in res.stdout.str() and res.stdout.str().count("reused)") == 1
    run(pytester, "--agentrace-reps", "2", "--agentrace-resume", "--agentrace-timeout", "50").assert_outcomes(passed=2, xfailed=2)
    assert count.read_text().count("run") == 6


def spec_for(tmp_path: Path, content_hash: str = "abc") -> RunSpec:
    class Spec:
        pass

    s = Spec()
    s.content_hash = content_hash
    return RunSpec("trial", tmp_path / "t.toml", "q", "arm", AgentSpec("bot", "bot"), 1, 10.0, s, None)


def outcome(spec: RunSpec, **kw) -> Outcome:
    fields = {"run_id": spec.id, "kind": "trial", "source": "t.toml", "case": "q", "arm": "arm", "agent": "bot", "rep": 1,
              "status": "passed", "content_hash": "abc", "exit_code": 0, "extra": {"agent_hash": spec.agent_hash}}
    return Outcome(**{**fields, **kw})


OTHER_AGENT = RunSpec("trial", Path("t.toml"), "q", "arm", AgentSpec("bot", "bot", command=("other",)), 1, 10.0, None, None)


@pytest.mark.parametrize(
    ("changes", "reuse", "reuse_retry"),
    [
        ({}, True, True),
        ({"status": "failed"}, True, True),
        ({"status": "failed", "exit_code": 1}, True, False),
        ({"status": "timeout", "exit_code": None, "timed_out": True}, True, False),
        ({"status": "error", "exit_code": None}, True, False),
        ({"content_hash": "other"}, False, False),
        ({"run_id": "trial:q/arm/bot/r2"}, False, False),
        ({"status": "weird"}, False, False),
        ({"schema_version": 99}, False, False),
        ({"extra": {"agent_hash": OTHER_AGENT.agent_hash}}, False, False),  # another entry under the id "bot"
        ({"extra": {}}, False, False),  # a record that does not say which agent made it
    ],
)
def test_stored_outcome_rules(tmp_path: Path, changes: dict, reuse: bool, reuse_retry: bool) -> None:
    spec = spec_for(tmp_path)
    out = tmp_path / "out"
    o = outcome(spec, **changes)
    write_run(spec.run_dir(out), o)
    write_manifest(out, "s1", {o.run_id: digest_run(out, spec.run_dir(out))})
    got = stored_outcome(spec, out)
    assert (got is not None) == reuse
    if got is not None:
        assert got.reused is True and got.replace(reused=False) == o
    assert (stored_outcome(spec, out, retry_failed=True) is not None) == reuse_retry


@pytest.mark.parametrize("forge", ["edit", "no-manifest", "extra-file", "contradiction"])
def test_an_unverifiable_record_is_run_again(tmp_path: Path, forge: str) -> None:
    """A record changed or added after its session, or one whose status contradicts its evidence, is never
    reused: a rewritten ``failed`` -> ``passed`` would otherwise count as the agent's pass."""
    spec = spec_for(tmp_path)
    out = tmp_path / "out"
    run_dir = spec.run_dir(out)
    o = outcome(spec, status="failed", tampered=("tests/test_calc.py",) if forge == "contradiction" else ())
    write_run(run_dir, o)
    if forge != "no-manifest":
        write_manifest(out, "s1", {o.run_id: digest_run(out, run_dir)})
    assert forge == "no-manifest" or stored_outcome(spec, out) is not None  # untouched: reused
    if forge == "edit":
        write_run(run_dir, o.replace(status="passed"))
    elif forge == "extra-file":
        (run_dir / "verify.log").write_text("all good\n")
    elif forge == "contradiction":
        write_run(run_dir, o.replace(status="passed"))
        write_manifest(out, "s2", {o.run_id: digest_run(out, run_dir)})  # even a manifest cannot bless it
    assert stored_outcome(spec, out) is None


def test_stored_outcome_missing_or_garbage(tmp_path: Path) -> None:
    spec = spec_for(tmp_path)
    out = tmp_path / "out"
    assert stored_outcome(spec, out) is None
    spec.run_dir(out).mkdir(parents=True)
    (spec.run_dir(out) / "run.json").write_text("{not json")
    assert stored_outcome(spec, out) is None
    (spec.run_dir(out) / "run.json").write_text(json.dumps([1]))
    assert stored_outcome(spec, out) is None


def test_needs_retry() -> None:
    spec = spec_for(Path("/x"))
    assert not needs_retry(outcome(spec))
    assert not needs_retry(outcome(spec, status="failed"))
    assert needs_retry(outcome(spec, status="failed", exit_code=137))
    assert needs_retry(outcome(spec, status="timeout", exit_code=None))
    assert needs_retry(outcome(spec, status="error", exit_code=None))


def test_sigterm_handler_only_under_agentrace_and_restored(pytester: pytest.Pytester) -> None:
    import signal

    before = signal.getsignal(signal.SIGTERM)
    pytester.makepyfile("import signal\n\ndef test_h():\n    h = signal.getsignal(signal.SIGTERM)\n    print('HANDLER', getattr(h, '__name__', h))\n")
    assert "HANDLER _raise_interrupt" in pytester.runpytest("-s", "--agentrace").stdout.str()
    assert signal.getsignal(signal.SIGTERM) == before
    assert "HANDLER _raise_interrupt" not in pytester.runpytest("-s").stdout.str()


def test_agent_hash_is_taken_over_the_redacted_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stored hash cannot confirm a key: an entry whose env holds a key (or whose args carry a known key shape)
    hashes as its redacted form does, so another key gives the same hash (the records are resumed), while another
    value of an ordinary variable, or another model, is another agent."""
    import dataclasses
    import hashlib

    monkeypatch.delenv("MY_SERVICE_TOKEN", raising=False)

    def hashed(**kw) -> str:
        return RunSpec("trial", Path("t.toml"), "q", "arm", AgentSpec("bot", "bot", **kw), 1, 10.0, None, None).agent_hash

    one = hashed(env={"MY_SERVICE_TOKEN": "correct-horse-battery-1"}, args=("--key", "ghp_" + "a" * 36))
    other = hashed(env={"MY_SERVICE_TOKEN": "another-secret-value-2"}, args=("--key", "ghp_" + "b" * 36))
    assert one == other == hashed(env={"MY_SERVICE_TOKEN": "<redacted>"}, args=("--key", "<redacted>"))
    # the hash of the entry in clear (what a holder of a candidate key would compute) is not what is stored
    clear = {"agent": dataclasses.asdict(AgentSpec("bot", "bot", env={"MY_SERVICE_TOKEN": "correct-horse-battery-1"},
                                                   args=("--key", "ghp_" + "a" * 36))), "timeout": 10.0}
    assert hashlib.sha256(json.dumps(clear, sort_keys=True, default=str).encode()).hexdigest() != one
    # a key of the session's environment found literally in the entry is redacted as well
    monkeypatch.setenv("MY_SERVICE_TOKEN", "session-key-0123456789")
    assert hashed(args=("--token=session-key-0123456789",)) == hashed(args=("--token=<redacted>",))
    # what does make another agent still changes the hash
    assert hashed(env={"MODE": "fast"}) != hashed(env={"MODE": "slow"})
    assert hashed(model="m1") != hashed(model="m2")
