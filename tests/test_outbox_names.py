"""The red team's F6: an agent's outbox files never take a name of the harness's records.

A hostile agent left ``lint.log``, ``setup.log``, ``harness-error.log``, ``codex-session.jsonl``,
``model-double-requests.jsonl``, ``index.jsonl`` and ``attempts/x.txt`` ("ALL 99 TESTS PASSED") in its outbox; on a
task without lint or setup, in a run that was no error, all of them were copied beside the harness's own records
(only names the harness wrote in *this* run were kept free) and the HTML report linked them as the run's files, so a
reader took them for the harness's. The outbox's files now always go under the record's ``outbox/`` and the report
lists them apart, as the agent's.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from helpers import BUGGY_REPO, BUGGY_TASK, make_repo, write_script

from pytest_agentrace.record.manifest import verify
from pytest_agentrace.run import outbox
from pytest_agentrace.run.sandbox import probe

FORGED = "ALL 99 TESTS PASSED\n"
# every name the harness (or an adapter, or the model double) writes into a record folder or the results folder, in
# some run: check logs of every kind, setup and prepare logs, the harness's fault log, the record and its views, the
# agent's output, the adapters' session files, the double's logs, the index and the attempts folder; and the
# record's own outbox folder name
NAMES = ["lint.log", "verify.log", "tests.log", "setup.log", "prepare.log", "harness-error.log", "run.json",
         "trajectory.json", "diff.patch", "raw.out", "raw.err", "prompt.txt", "argv.json", "codex-session.jsonl",
         "aider-events.jsonl", "copilot-otel.jsonl", "model-double-requests.jsonl", "model-double-rejected.jsonl",
         "model-double.json", "index.jsonl", "attempts/x.txt", "outbox/lint.log"]
HOSTILE = r"""
import os, sys
out = sys.argv[1]
for name in sys.argv[2:]:
    path = os.path.join(out, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, "w").write("ALL 99 TESTS PASSED\n")
print("I left my notes", flush=True)
sys.exit(1)
"""
TASK = BUGGY_TASK + "verify_command: python -c \"import calc; assert calc.add(2, 3) == 5\"\n"


def section(html: str, heading: str) -> list[str]:
    """The link texts of the list under the ``<h4>`` that starts with ``heading`` (one run's details)."""
    found = re.search(re.escape(f"<h4>{heading}") + r"[^<]*</h4>(?:<p class=\"note\">[^<]*</p>)?<ul[^>]*>(.*?)</ul>",
                      html, re.S)
    assert found, heading
    return re.findall(r">([^<>]+)</a>", found.group(1))


@pytest.mark.parametrize("box", ["bwrap", "off"])
def test_outbox_files_never_sit_beside_the_harness_records(pytester: pytest.Pytester, bin_dir: Path, box: str) -> None:
    if box == "bwrap" and probe(True)[0] is None:
        pytest.skip(f"no sandbox here: {probe(True)[1]}")
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "hostile", HOSTILE)
    (pytester.path / "task.yaml").write_text(
        TASK + f"agents:\n  - {{name: hostile, command: 'hostile {{run_dir}} {' '.join(NAMES)}'}}\n")
    res = pytester.runpytest("--agentrace", "task.yaml", "--agentrace-out", "out", "--agentrace-no-save",
                             "--agentrace-sandbox", box, "--agentrace-html", "report.html",
                             "--agentrace-md", "summary.md", "-p", "no:cacheprovider")
    res.assert_outcomes(failed=1)
    out = pytester.path / "out"
    run = out / "runs" / "t" / "default" / "hostile" / "1"
    record = json.loads((run / "run.json").read_text())
    assert record["status"] == "failed", record["reason"]
    assert record["reason"] == "tests failed (exit 1); agent crashed (exit 1)", record["reason"]

    # every file the agent left is under outbox/, as it left it ("run.json" excepted: never copied at any depth)
    copied = [n for n in NAMES if n != "run.json"]
    for name in copied:
        assert (run / "outbox" / name).read_text() == FORGED, name
    assert record["extra"]["outbox"] == {"copied": len(copied), "folder": "outbox",
                                         "skipped": {"run.json": "a run record's name (only the harness writes one)"}}
    # and none of them beside the harness's records: the run folder's other files are the harness's own, this run's
    theirs = sorted(p.relative_to(run).as_posix() for p in run.rglob("*")
              if p.is_file() and p.relative_to(run).parts[0] != "outbox")
    assert theirs == ["argv.json", "diff.patch", "prompt.txt", "raw.err", "raw.out", "run.json", "tests.log",
                      "trajectory.json", "verify.log"]
    assert all(FORGED not in (run / name).read_text() for name in theirs)
    assert "I left my notes" in (run / "raw.out").read_text()
    assert not (out / "attempts").exists() and FORGED not in (out / "index.jsonl").read_text()
    assert verify(out).ok, verify(out).lines()  # the manifest holds the agent's files too, where they lie

    # the HTML report lists the harness's files as the run's and the agent's apart, named with their folder
    html = (pytester.path / "report.html").read_text()
    assert section(html, "Run files") == theirs
    assert sorted(section(html, "The agent's outbox files")) == sorted(f"outbox/{n}" for n in copied)
    assert "not by the harness" in html
    summary = (pytester.path / "summary.md").read_text()  # the Markdown lists no run files: nothing of the agent's
    assert FORGED.strip() not in summary and "hostile" in summary


def test_collect_puts_the_agents_files_under_outbox_and_the_doubles_logs_on_top(tmp_path: Path) -> None:
    """The unit: every name of the agent's goes under ``outbox/``; only ``harness`` names at the outbox's top level
    (the double's logs, written there by the harness's double inside the box) go to the record's top; a folder named
    ``run.json`` is never copied; a path the record already holds is never replaced."""
    box, record = outbox.make(tmp_path), tmp_path / "record"
    record.mkdir()
    (record / "raw.out").write_text("the harness's")
    (box / "raw.out").write_text("the agent's")
    (box / "model-double-requests.jsonl").write_text("the double's log\n")
    (box / "sub").mkdir()
    (box / "sub" / "model-double-requests.jsonl").write_text("the agent's, deeper\n")
    (box / "run.json" / "inner").mkdir(parents=True)
    (box / "run.json" / "inner" / "x.txt").write_text("x")
    taken = outbox.collect(box, record, harness=("model-double-requests.jsonl", "model-double-rejected.jsonl"))
    assert taken == {"copied": 2, "folder": "outbox", "harness": ["model-double-requests.jsonl"],
                     "skipped": {"run.json": "a run record's name (only the harness writes one)"}}
    assert (record / "raw.out").read_text() == "the harness's"
    assert (record / "outbox" / "raw.out").read_text() == "the agent's"
    assert (record / "model-double-requests.jsonl").read_text() == "the double's log\n"
    assert (record / "outbox" / "sub" / "model-double-requests.jsonl").read_text() == "the agent's, deeper\n"
    assert not os.path.lexists(record / "outbox" / "run.json") and not os.path.lexists(record / "run.json")
    again = outbox.collect(box, record, harness=("model-double-requests.jsonl",))  # nothing already there replaced
    assert again["copied"] == 0 and set(again["skipped"]) == {"raw.out", "model-double-requests.jsonl",
                                                              "sub/model-double-requests.jsonl", "run.json"}
    assert outbox.collect(tmp_path / "missing", record) == {"copied": 0}


def test_outbox_names_are_stored_as_redacted_text_and_the_record_verifies(tmp_path: Path) -> None:
    """A name that is no UTF-8 (``x\\xff.txt``) is stored as text (``x\\\\xff.txt``), so the manifest names the very
    file and the record verifies (it was "changed after its session", so resume ran a failing agent again and merge
    refused the folder); a name holding a session secret, a file's or a folder's, is stored redacted; a folder too
    deep to be listed is named in ``skipped``, not dropped unnamed (below)."""
    from pytest_agentrace.record.manifest import digest_run, write_manifest
    from pytest_agentrace.record.model import Outcome
    from pytest_agentrace.record.runfile import write_run

    secret = "zqxsupersecretvalue987"
    box, record = outbox.make(tmp_path), tmp_path / "out" / "runs" / "t" / "default" / "a" / "1"
    record.mkdir(parents=True)
    (box / os.fsdecode(b"x\xff.txt")).write_text("odd name")
    (box / f"{secret}.txt").write_text("named after a key")
    (box / f"dir-{secret}").mkdir()
    (box / f"dir-{secret}" / "f.txt").write_text("in a folder named after a key")
    taken = outbox.collect(box, record, secrets=[secret])
    stored = sorted(p.relative_to(record / "outbox").as_posix() for p in (record / "outbox").rglob("*") if p.is_file())
    assert stored == ["<redacted>.txt", "dir-<redacted>/f.txt", "x\\xff.txt"]
    assert taken["copied"] == 3 and not any(secret in k for k in taken.get("skipped", {}))
    write_run(record, Outcome(run_id="task:t/default/a/r1", kind="task", source="t.yaml", case="t", arm="default",
                              agent="a", rep=1, status="failed", reason="gave up", exit_code=0))
    out = tmp_path / "out"
    write_manifest(out, "s1", {"task:t/default/a/r1": digest_run(out, record)})
    assert verify(out).ok


def test_a_folder_too_deep_to_list_is_named_in_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    box, record = outbox.make(tmp_path), tmp_path / "record"
    record.mkdir()
    (box / "a" / "b").mkdir(parents=True)
    (box / "a" / "b" / "f.txt").write_text("deep")
    (box / "top.txt").write_text("shallow")
    monkeypatch.setattr(outbox, "PATH_MAX", len(os.fsencode(box / "a" / "b")))  # "a/b" is as deep as listing goes
    taken = outbox.collect(box, record)
    assert taken["copied"] == 1 and taken["skipped"] == {"a/b": f"too deep to copy (a path of {outbox.PATH_MAX} bytes or more)"}
