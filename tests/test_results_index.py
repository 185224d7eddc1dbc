"""The results-folder index (``record.index``): a cache of every run.json, never the record. Reports from the index
equal reports from parsing the files; a missing, damaged or stale index is rebuilt from the files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import make_repo
from helpers.report import outcome

from pytest_agentrace import cli
from pytest_agentrace.record import index, runfile
from pytest_agentrace.record.runfile import write_run


def folder(out: Path) -> Path:
    """Two arms x 3 cases x 4 reps of a trial, two task runs and one unreadable run.json."""
    for c in range(3):
        for arm, scale in (("base", 1.0), ("docs", 0.6)):
            for rep in range(1, 5):
                status = "passed" if (rep + c) % 3 else "failed"
                o = outcome(case=f"q{c}", arm=arm, agent="a", rep=rep, kind="trial", source="t.toml",
                            tokens=int((1000 + 37 * rep + 11 * c) * scale), status=status,
                            extra={"baseline_arm": "base", "trial": "ports"})
                write_run(out / "runs" / o.case / arm / "a" / str(rep), o)
    for agent in ("x", "y"):
        write_run(out / "runs" / "fix" / "default" / agent / "1", outcome(agent=agent, score=None))
    bad = out / "runs" / "q0" / "base" / "a" / "9" / "run.json"
    bad.parent.mkdir(parents=True)
    bad.write_text('{"run_id": "cut sh')
    return out


def from_files(out: Path) -> list:
    return list(runfile.iter_runs(out))


def report(capsys: pytest.CaptureFixture[str], out: Path) -> tuple[str, str]:
    code = cli.main(["report", str(out), "--format", "json", "--resamples", "300"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out, captured.err


def test_report_from_the_index_equals_report_from_the_files(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    out = folder(tmp_path / "out")
    with monkeypatch.context() as m:  # the report as it was: every run.json parsed
        m.setattr("pytest_agentrace.cli.stats.iter_runs", lambda out, files=None, verified=None: runfile.iter_runs(out))
        m.setattr("pytest_agentrace.cli.stats.iter_outcomes", lambda out, files=None, verified=None: (o for _p, o in runfile.iter_runs(out)))
        parsed = report(capsys, out)
    assert not (out / index.INDEX_FILE).exists()
    built = report(capsys, out)  # no index yet: built from the files, then written
    assert (out / index.INDEX_FILE).is_file()

    def no_parsing(path: Path):
        raise AssertionError(f"{path} parsed although the index is up to date")

    monkeypatch.setattr(index, "load_record", no_parsing)
    cached = report(capsys, out)  # from the index alone
    assert parsed == built == cached
    assert "skipped" in cached[1] and "q0/base/a/9/run.json: not a valid run record" in cached[1]
    assert list(index.iter_runs(out)) == from_files(out)
    assert list(index.iter_outcomes(out)) == [o for _p, o in from_files(out)]


@pytest.mark.parametrize("damage", ["missing", "flipped byte", "cut short", "not an index", "other schema"])
def test_a_missing_or_damaged_index_is_rebuilt(tmp_path: Path, damage: str) -> None:
    out = folder(tmp_path / "out")
    assert index.refresh(out) == 27
    path = out / index.INDEX_FILE
    text = path.read_text()
    if damage == "missing":
        path.unlink()
    elif damage == "flipped byte":  # a token count changed inside one entry: its checksum no longer matches
        path.write_text(text.replace('"total_tokens":1037', '"total_tokens":9037', 1))
        assert path.read_text() != text
    elif damage == "cut short":
        path.write_text(text[: len(text) // 2])
    elif damage == "not an index":
        path.write_text(json.dumps({"runs": []}) + "\n")
    else:
        path.write_text(text.replace('"schema_version":', '"schema_version":9', 1))
    if damage != "cut short":
        assert index.read_index(out) is None
    assert list(index.iter_runs(out)) == from_files(out)
    assert path.read_text() == text  # written again, exactly as built from the files


def test_a_changed_or_new_run_json_replaces_its_entry(tmp_path: Path) -> None:
    out = folder(tmp_path / "out")
    index.refresh(out)
    run_dir = out / "runs" / "q1" / "docs" / "a" / "2"
    old = runfile.read_run(run_dir / "run.json")
    write_run(run_dir, old.replace(status="failed", reason="rescored"))  # as `agentrace rescore` rewrites a run
    write_run(out / "runs" / "q9" / "base" / "a" / "1", outcome(case="q9", arm="base", kind="trial", source="t.toml"))
    (out / "runs" / "fix" / "default" / "y" / "1" / "run.json").unlink()
    got = list(index.iter_runs(out))
    assert got == from_files(out)
    assert {o.run_id: o.status for _, o in got}[old.run_id] == "failed" and len(got) == 26
    assert index.read_index(out) is not None and len(index.read_index(out)) == 27  # 26 readable + 1 unreadable


@pytest.mark.parametrize("xdist", [pytest.param([], id="serial"), pytest.param(["-p", "xdist", "-n", "2"], id="xdist")])
def test_the_session_keeps_the_index(pytester: pytest.Pytester, xdist: list[str]) -> None:
    make_repo(pytester.path / "repo", {"a.py": "A = 1\n"})
    (pytester.path / "task.yaml").write_text("name: idx\ndescription: nothing\nrepo: repo\ntest_command: 'true'\n"
                                             "agents: [{name: noop, expect: pass}]\ntimeout: 60\n")
    out = pytester.path / "out"
    res = pytester.runpytest("--agentrace", "task.yaml", "--agentrace-reps=3", f"--agentrace-out={out}", *xdist)
    res.assert_outcomes(passed=3)
    stored = index.read_index(out)
    assert stored is not None and sorted(stored) == [f"idx/default/noop/{rep}/run.json" for rep in (1, 2, 3)]
    assert list(index.iter_runs(out)) == from_files(out)


def test_a_run_json_equal_to_a_known_record_is_not_parsed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``refresh(out, known)``: a run.json whose JSON equals the record the caller holds (the controller's payload) is
    checked against the caller's outcome, not made into a second one; one that differs is parsed and checked as
    any file is; either way a status that contradicts its evidence is rejected."""
    out = tmp_path / "out"
    same, changed, lying = outcome(agent="a"), outcome(agent="b"), outcome(agent="c")
    lying = lying.replace(checks={"tests": lying.checks["tests"].__class__("tests", "pytest -q", 1, 0.5, "tests.log")})
    for o in (same, changed, lying):
        write_run(out / "runs" / o.case / o.arm / o.agent / "1", o)
    known = {o.run_id: (json.loads(json.dumps(o.record)), o) for o in (same, lying)}
    known[changed.run_id] = ({**changed.record, "reason": "not what the file says"}, changed)
    parsed: list[str] = []
    real = runfile.Outcome.from_dict.__func__

    def counting(cls, d, validate=False):
        parsed.append(d["run_id"])
        return real(cls, d, validate)

    monkeypatch.setattr(runfile.Outcome, "from_dict", classmethod(counting))
    assert index.refresh(out, known) == 3
    assert parsed == [changed.run_id]  # the file that differs from what the caller holds, and only it
    monkeypatch.undo()
    got = {o.run_id: o for o in index.iter_outcomes(out)}
    assert set(got) == {same.run_id, changed.run_id}  # the one passed with a failed check is rejected
    assert got[same.run_id] == same and got[changed.run_id] == changed
    lines = (out / index.INDEX_FILE).read_text().splitlines()
    assert any("rejected, its status contradicts its evidence: passed while its tests check failed" in line for line in lines)


def _rewrite_line(out: Path, rel: str, change) -> None:
    """Rewrite the index line of ``rel`` through ``change(key list, entry dict)`` with a checksum that matches: a
    forgery the checksum cannot catch."""
    path = out / index.INDEX_FILE
    lines = path.read_text().splitlines(keepends=True)
    for i, line in enumerate(lines[1:], 1):
        _crc, key, entry = line.rstrip("\n").split("\t", 2)
        if json.loads(key)[0] == rel:
            key, entry = change(json.loads(key), json.loads(entry))
            lines[i] = index._line(key, entry)
    path.write_text("".join(lines))


@pytest.mark.parametrize("forgery", ["other record, stale key", "other record, no such file", "not an entry"])
def test_a_forged_entry_with_a_good_checksum_is_read_again_from_its_file(tmp_path: Path, forgery: str) -> None:
    """An index line whose checksum matches but whose key is not its file's (mtime_ns, size, inode), or that is no
    entry this package writes, is never believed: the index is rebuilt from the files."""
    out = folder(tmp_path / "out")
    index.refresh(out)
    built = (out / index.INDEX_FILE).read_text()
    rel = "q1/docs/a/2/run.json"

    def change(key: list, entry: dict) -> tuple[list, dict]:
        if forgery == "not an entry":
            return key, {"records": entry["record"]}
        entry["record"]["status"] = "failed"
        if forgery == "other record, stale key":
            return [key[0], key[1] + 1, *key[2:]], entry
        return ["q1/docs/a/2/zz/run.json", *key[1:]], entry

    _rewrite_line(out, rel, change)
    assert (out / index.INDEX_FILE).read_text() != built
    assert list(index.iter_runs(out)) == from_files(out)
    assert (out / index.INDEX_FILE).read_text() == built  # written again, exactly as built from the files


def test_an_entry_that_is_no_record_is_read_again_from_its_file(tmp_path: Path) -> None:
    """A checksummed entry whose record cannot be an outcome (a field of the wrong shape) is rebuilt from its file
    rather than failing the report."""
    out = folder(tmp_path / "out")
    index.refresh(out)
    built = (out / index.INDEX_FILE).read_text()
    _rewrite_line(out, "q0/docs/a/1/run.json", lambda key, entry: (key, {"record": {**entry["record"], "checks": 3}}))
    assert list(index.iter_outcomes(out)) == [o for _p, o in from_files(out)]
    assert (out / index.INDEX_FILE).read_text() == built


def test_report_walks_the_runs_once_for_the_index_and_the_manifests(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """``agentrace report`` walks ``runs/`` once: the records it checks against the manifests are the ones it reads
    (the unverifiable warning names the runs the report counts), and the index is read once, not parsed again."""
    out = folder(tmp_path / "out")
    index.refresh(out)
    walked: list[str] = []
    real = runfile.scan_runs

    def counting(out: Path, top: str = "runs") -> runfile.Scan:
        walked.append(top)
        return real(out, top)

    for module in ("runfile", "index", "manifest"):
        monkeypatch.setattr(f"pytest_agentrace.record.{module}.scan_runs", counting)
    monkeypatch.setattr("pytest_agentrace.cli.stats.scan_runs", counting)
    _out, err = report(capsys, out)
    assert walked.count("runs") == 1 and set(walked) <= {"runs", "attempts"}
    assert "27 unverifiable records" in err  # 26 readable + 1 unreadable run.json, none in a manifest


def test_reading_many_records_leaves_the_collector_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The collector is paused while the index is read and enabled again after (its objects frozen from
    ``FREEZE_AT`` records on); the outcomes read are the same either way."""
    import gc

    out = folder(tmp_path / "out")
    expected = [o for _p, o in from_files(out)]
    monkeypatch.setattr(index, "FREEZE_AT", 1)
    frozen = gc.get_freeze_count()
    try:
        assert list(index.iter_outcomes(out)) == expected
        assert gc.isenabled() and gc.get_freeze_count() > frozen
        gc.disable()
        assert list(index.iter_outcomes(out)) == expected
        assert not gc.isenabled()
    finally:
        gc.enable()
        gc.unfreeze()


def test_a_folder_whose_index_cannot_be_written_is_read_from_its_files(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """When the index cannot be brought up to date (a read-only folder: ``refresh`` raises ``OSError``), the records
    come from their files as ``runfile.iter_runs`` reads them, a manifested record's from ``verified`` (its file not
    read), the unreadable one skipped with the same line, and a link named run.json is no record (never followed)."""
    out = folder(tmp_path / "out")
    (out / "runs" / "q9" / "base" / "a" / "1").mkdir(parents=True)
    (out / "runs" / "q9" / "base" / "a" / "1" / "run.json").symlink_to(out / "runs" / "fix" / "default" / "x" / "1" / "run.json")
    want = [(p, o) for p, o in runfile.iter_runs(out) if "q9" not in p.parts]
    want_err = "".join(line for line in capsys.readouterr().err.splitlines(keepends=True) if "/q9/" not in line)

    def unwritable(*_args, **_kwargs):
        raise PermissionError("read-only folder")

    monkeypatch.setattr(index, "refresh", unwritable)
    assert [(p, o) for p, o in index.iter_runs(out)] == want
    err = capsys.readouterr().err
    assert err == want_err and err.count("agentrace: skipped") == 1 and "q0/base/a/9/run.json" in err
    kept = want[0][1]
    rel = want[0][0].relative_to(out / "runs").as_posix()
    (out / "runs" / rel).write_text("{}")  # the file now says nothing: the verified outcome is used, not the file
    assert [o for _p, o in index.iter_runs(out, verified={rel: kept})] == [o for _p, o in want]
