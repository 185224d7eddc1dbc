"""Reports and gates never believe the index (``record.index``) for a record a manifest covers: its outcome comes
from the very bytes the manifest check hashed. The index serves the records no manifest names, and its key holds
the file's ctime, which no user can set back."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
from helpers import BUGGY_REPO, make_repo, write_script
from test_manifest import FIXER, agentrace, run_session
from test_results_index import folder, from_files

from pytest_agentrace.cli.stats import load_outcomes
from pytest_agentrace.record import index, runfile
from pytest_agentrace.record.manifest import MANIFEST_DIR, digest_run, verify, write_manifest

NOOP1 = "fix-add/default/noop/1/run.json"


@pytest.fixture
def session(pytester: pytest.Pytester) -> Path:
    """A real session (fixer and noop, 2 reps) into ``out``, with its manifests and index; returns ``out``."""
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(pytester.path / "fixer.py", FIXER)
    (pytester.path / "task.yaml").write_text(
        "name: fix-add\ndescription: Fix add.\nrepo: repo\ntest_command: python -m pytest -q test_calc.py\n"
        f"agents:\n  - {{name: fixer, command: '{pytester.path / 'fixer.py'}'}}\n  - noop\n")
    run_session(pytester).assert_outcomes(passed=2, xfailed=2)
    out = pytester.path / "out"
    assert (out / index.INDEX_FILE).is_file() and list((out / MANIFEST_DIR).glob("*.jsonl"))
    return out


def forge(out: Path, rel: str, status: str) -> None:
    """Rewrite ``rel``'s index line with ``status``: a valid checksum and the file's true key (all readable by
    anyone who can write the folder)."""
    path = out / index.INDEX_FILE
    lines = path.read_text().splitlines(keepends=True)
    for i, line in enumerate(lines[1:], 1):
        _crc, key, entry = line.rstrip("\n").split("\t", 2)
        if json.loads(key)[0] == rel:
            data = json.loads(entry)
            data["record"]["status"], data["record"]["reason"] = status, None
            lines[i] = index._line(json.loads(key), data)
    path.write_text("".join(lines))
    assert index.read_index(out) is not None  # still a well-formed, up-to-date index


def statuses(outcomes) -> dict[str, str]:
    return {f"{o.agent}/{o.rep}": o.status for o in outcomes}


def test_a_forged_index_entry_of_a_manifested_record_is_not_believed(session: Path, capsys) -> None:
    out = session
    truth = statuses(o for _p, o in from_files(out))
    assert truth["noop/1"] == "failed"
    code, before, _ = agentrace(capsys, "report", str(out), "--format", "json", "--resamples", "200")
    assert code == 0
    forge(out, NOOP1, "passed")
    assert verify(out).ok  # every run.json is intact: the verification has nothing to say
    assert statuses(index.iter_outcomes(out)) != truth  # the index alone would believe the forgery
    code, after, err = agentrace(capsys, "report", str(out), "--format", "json", "--resamples", "200")
    assert code == 0 and after == before and "unverifiable" not in err
    assert statuses(load_outcomes(out, gate=True)) == truth  # what gates decide on
    assert statuses(load_outcomes(out, last_session=True, gate=True)) == truth


def test_the_gate_still_refuses_an_unverifiable_record(session: Path, capsys) -> None:
    out = session
    runs = out / "runs" / "fix-add" / "default"
    code, _, _ = agentrace(capsys, "snapshot", str(out), "--to", str(out.parent / "snap.json"))
    assert code == 0
    shutil.copytree(runs / "fixer" / "1", runs / "noop" / "3")  # a record no manifest names: served by the index
    d = json.loads((runs / "noop" / "3" / "run.json").read_text())
    d.update(agent="noop", rep=3, run_id=d["run_id"] + "x")
    (runs / "noop" / "3" / "run.json").write_text(json.dumps(d))
    code, _, err = agentrace(capsys, "compare", str(out), "--snapshot", str(out.parent / "snap.json"),
                             "--fail-on", "regressed")
    assert code == 2 and "refusing to gate" in err and "noop/3" in err
    assert statuses(load_outcomes(out))["noop/3"] == "passed"  # reports warn and count it, as before


def _edit_in_place(path: Path, old: bytes, new: bytes) -> None:
    """Replace ``old`` by ``new`` (same length) inside ``path`` without a new inode, then set its mtime back (to the
    nanosecond); only its ctime, which nobody can set, shows the change."""
    assert len(old) == len(new)
    st = path.stat()
    data = path.read_bytes()
    assert data.count(old) == 1
    with open(path, "r+b") as fh:
        fh.write(data.replace(old, new))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    while path.stat().st_ctime_ns == st.st_ctime_ns:  # file times tick coarsely: wait for the next tick
        time.sleep(0.01)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    now = path.stat()
    assert (now.st_mtime_ns, now.st_size, now.st_ino) == (st.st_mtime_ns, st.st_size, st.st_ino)


def test_a_same_size_edit_with_its_mtime_set_back_is_seen(session: Path, capsys) -> None:
    """Through the manifest (the report reads the hashed bytes and warns) and through the index's key (ctime_ns)."""
    out = session
    _edit_in_place(out / "runs" / NOOP1, b'"rep": 1,', b'"rep": 7,')
    assert "noop/7" in statuses(load_outcomes(out))  # what the file says, not the stale entry
    assert "noop/1: changed after its session: run.json changed" in capsys.readouterr().err
    assert index.read_index(out)[NOOP1][0] != dict(runfile.scan_runs(out).files)[NOOP1]  # its entry: stale, unused
    shutil.rmtree(out / MANIFEST_DIR)  # no manifest: the index's key (its ctime) alone must see the edit
    assert "noop/7" in statuses(load_outcomes(out))
    assert index.read_index(out)[NOOP1][0] == dict(runfile.scan_runs(out).files)[NOOP1]  # the entry made again


def test_a_folder_without_manifests_is_read_from_the_index(session: Path, capsys,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """With manifests the index is not opened (every record is covered); without them it is read and no run.json
    is parsed."""
    out = session
    truth = statuses(o for _p, o in from_files(out))

    def refused(*args, **kwargs):
        raise AssertionError("read although no record needs it")

    with monkeypatch.context() as m:
        m.setattr(index, "_read", refused)
        assert statuses(load_outcomes(out)) == truth
    shutil.rmtree(out / MANIFEST_DIR)
    with monkeypatch.context() as m:
        m.setattr(index, "load_record", refused)
        m.setattr(runfile, "load_record", refused)
        assert statuses(load_outcomes(out)) == truth
    forge(out, NOOP1, "passed")  # nothing vouches for these records: the index (a cache of them) is what is read
    assert statuses(load_outcomes(out))["noop/1"] == "passed"
    assert "unverifiable" in capsys.readouterr().err  # as before: the report warns that no manifest covers them


def test_a_manifested_folder_reports_as_its_files_do(tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    """The outcomes read from the hashed bytes are the files' own: unreadable records skipped with the same line,
    the report identical to one that parses every file; records outside the manifest still come from the index."""
    out = folder(tmp_path / "out")
    scan = runfile.scan_runs(out)
    covered = sorted(scan.folders)[:-3]  # three folders no manifest names
    write_manifest(out, "s0", {where: digest_run(out, out / where) for where in covered})
    with monkeypatch.context() as m:  # the report as it was before the index: every run.json parsed
        m.setattr("pytest_agentrace.cli.stats.iter_outcomes",
                  lambda out, files=None, verified=None: (o for _p, o in runfile.iter_runs(out)))
        code, parsed, parsed_err = agentrace(capsys, "report", str(out), "--format", "json", "--resamples", "300")
    assert code == 0
    index.refresh(out)
    code, got, err = agentrace(capsys, "report", str(out), "--format", "json", "--resamples", "300")
    assert code == 0 and got == parsed
    skipped = [line for line in err.splitlines() if "skipped" in line]
    assert skipped == [line for line in parsed_err.splitlines() if "skipped" in line] and len(skipped) == 1
    found = verify(out, artifacts=False, runs=scan.folders, keep=True)
    assert len(found.records) == len(covered)
    assert list(index.iter_outcomes(out, scan.files, found.records)) == [o for _p, o in from_files(out)]
