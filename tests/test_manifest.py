"""Tamper-evident results: each session writes a manifest, ``agentrace verify`` catches every change after it, the
reports warn and the gates refuse unverifiable records, and a record whose status contradicts its evidence is
rejected (serial and -n 2)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import BUGGY_REPO, make_repo, write_script

from pytest_agentrace.cli import main
from pytest_agentrace.record.manifest import MANIFEST_DIR, digest_run, verify, write_manifest
from pytest_agentrace.record.model import CheckResult, Outcome
from pytest_agentrace.record.runfile import iter_runs, read_run, write_run

FIXER = """\
import pathlib
p = pathlib.Path("calc.py")
p.write_text(p.read_text().replace("a - b", "a + b"))
"""
# the fix, then a rewrite of every other run's record as passed (what a hostile agent would do unsandboxed)
FORGER = FIXER + """\
import glob, json, os
for path in glob.glob(os.environ["OUT"] + "/runs/**/run.json", recursive=True):
    d = json.load(open(path))
    d["status"], d["reason"] = "passed", None
    json.dump(d, open(path, "w"))
"""


@pytest.fixture
def session(pytester: pytest.Pytester):
    """A task with a fixer and noop (2 reps each), run into ``out``; returns ``(pytester, out)``."""
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(pytester.path / "fixer.py", FIXER)
    (pytester.path / "task.yaml").write_text(
        "name: fix-add\ndescription: Fix add.\nrepo: repo\ntest_command: python -m pytest -q test_calc.py\n"
        f"agents:\n  - {{name: fixer, command: '{pytester.path / 'fixer.py'}'}}\n  - noop\n")
    return pytester, pytester.path / "out"


def run_session(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest("--agentrace", "--agentrace-out", "out", "--agentrace-reps", "2", "--agentrace-no-save", *args)


def agentrace(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    got = capsys.readouterr()
    return code, got.out, got.err


def test_verify_passes_untouched_and_names_each_change(session, xdist, capsys) -> None:
    pytester, out = session
    run_session(pytester, *xdist).assert_outcomes(passed=2, xfailed=2)
    entries = [json.loads(line) for m in (out / MANIFEST_DIR).glob("*.jsonl") for line in m.read_text().splitlines()]
    assert sorted(e["dir"] for e in entries) == [f"runs/fix-add/default/{a}/{r}" for a in ("fixer", "noop") for r in (1, 2)]
    code, text, _ = agentrace(capsys, "verify", str(out))
    assert code == 0 and "4 records verified, 0 unverifiable" in text

    runs = out / "runs" / "fix-add" / "default"
    edited = runs / "noop" / "1" / "run.json"
    d = json.loads(edited.read_text())
    d["status"] = "passed"
    edited.write_text(json.dumps(d))
    shutil.copytree(runs / "fixer" / "1", runs / "fixer" / "3")  # an added run
    shutil.rmtree(runs / "fixer" / "2")  # a removed run
    (runs / "noop" / "2" / "tests.log").write_text("1 passed\n")  # a changed artifact
    code, text, _ = agentrace(capsys, "verify", str(out))
    assert code == 1
    lines = dict(line.split(": ", 1) for line in text.splitlines() if line.startswith("runs/"))
    assert lines == {
        "runs/fix-add/default/noop/1": "changed after its session: run.json changed",
        "runs/fix-add/default/fixer/3": "added after its session (in no manifest)",
        "runs/fix-add/default/fixer/2": "removed after its session (in a manifest, not on disk)",
        "runs/fix-add/default/noop/2": "changed after its session: tests.log changed",
    }
    assert "1 records verified, 4 unverifiable" in text
    code, text, _ = agentrace(capsys, "verify", str(out), "--quick")  # run.json only: the log change is not seen
    assert code == 1 and "noop/2" not in text and "2 records verified" in text


def test_a_second_session_supersedes_the_first(session, capsys) -> None:
    """Re-running a run rewrites its folder; the newer manifest is the one that counts."""
    pytester, out = session
    run_session(pytester).assert_outcomes(passed=2, xfailed=2)
    run_session(pytester).assert_outcomes(passed=2, xfailed=2)
    assert len(list((out / MANIFEST_DIR).glob("*.jsonl"))) == 2
    assert agentrace(capsys, "verify", str(out))[0] == 0


def test_forged_records_are_caught_and_refused_by_gates(session, capsys) -> None:
    """Without the sandbox an agent can rewrite the records of earlier runs: the manifest, hashed before it ran,
    names them; reports warn, ``compare --fail-on`` refuses, ``--agentrace-resume`` runs them again."""
    pytester, out = session
    write_script(pytester.path / "forger.py", FORGER)
    (pytester.path / "task.yaml").write_text(
        "name: fix-add\ndescription: Fix add.\nrepo: repo\ntest_command: python -m pytest -q test_calc.py\n"
        f"env: {{OUT: '{out}'}}\nagents:\n  - noop\n  - {{name: forger, command: '{pytester.path / 'forger.py'}'}}\n")
    run_session(pytester, "--agentrace-sandbox", "off").assert_outcomes(passed=2, xfailed=2)
    found = verify(out)
    forged = {w for w, why in found.problems.items() if "run.json changed" in why}
    assert "runs/fix-add/default/noop/1" in forged, found.problems
    code, _, err = agentrace(capsys, "report", str(out))
    assert code == 0 and "unverifiable records" in err and "noop/1" in err
    code, _, err = agentrace(capsys, "snapshot", str(out), "--to", str(pytester.path / "snap.json"))
    assert code == 0
    code, _, err = agentrace(capsys, "compare", str(out), "--snapshot", str(pytester.path / "snap.json"), "--fail-on", "regressed")
    assert code == 2 and "refusing to gate" in err
    res = run_session(pytester, "--agentrace-resume", "--agentrace-sandbox", "off")
    assert res.stdout.str().count("(reused)") < 4  # the forged noop records ran again instead of counting as passes


def contradicting(tmp_path: Path) -> Path:
    o = Outcome(run_id="task:t/default/a/r1", kind="task", source="t.yaml", case="t", arm="default", agent="a", rep=1,
                status="passed", checks={"tests": CheckResult("tests", "pytest", 1, 0.1, "tests.log")})
    run_dir = tmp_path / "runs" / "t" / "default" / "a" / "1"
    write_run(run_dir, o)
    write_manifest(tmp_path, "s1", {o.run_id: digest_run(tmp_path, run_dir)})
    return run_dir


def test_a_record_that_contradicts_its_evidence_is_rejected(tmp_path: Path, capsys) -> None:
    run_dir = contradicting(tmp_path)
    with pytest.raises(ValueError, match="contradicts its evidence: passed while its tests check failed"):
        read_run(run_dir / "run.json")
    assert list(iter_runs(tmp_path)) == []
    assert "rejected" in capsys.readouterr().err
    code, text, _ = agentrace(capsys, "verify", str(tmp_path))
    assert code == 1 and "status contradicts its evidence" in text


def test_verify_of_a_folder_that_is_not_one(tmp_path: Path, capsys) -> None:
    assert agentrace(capsys, "verify", str(tmp_path / "nowhere"))[0] == 2
