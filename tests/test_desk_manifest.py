"""Keyed manifests and the results digest: the three forgeries that re-hash their manifest lines (an edited record,
an added run with a forged line, a removed run with its line) pass ``agentrace verify`` without a key; with
``AGENTRACE_MANIFEST_KEY`` it names each, and without the key the digest the session printed catches each. The
digest is also in the JUnit XML and the history. Serial and ``-n 2``."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from helpers import BUGGY_REPO, FIXER, make_repo, write_script

from pytest_agentrace.cli import main
from pytest_agentrace.record.manifest import MANIFEST_DIR, digest_run, results_digest, verify

KEY = "ci-secret-manifest-key-0042"


def lines_of(out: Path) -> list[tuple[Path, int, dict]]:
    found = []
    for path in sorted((out / MANIFEST_DIR).glob("*.jsonl")):
        for number, line in enumerate(path.read_text().splitlines()):
            found.append((path, number, json.loads(line)))
    return found


def rewrite(path: Path, keep) -> None:
    """Rewrite the manifest file ``path`` keeping/changing its entries by ``keep(entry) -> entry | None``."""
    kept = [e for e in (keep(json.loads(line)) for line in path.read_text().splitlines()) if e is not None]
    path.write_text("".join(json.dumps(e, sort_keys=True) + "\n" for e in kept))


def forge_edit(out: Path) -> None:
    """noop's rep 1 becomes a pass; its manifest line gets the new hashes."""
    run_dir = out / "runs" / "fix-add" / "default" / "noop" / "1"
    record = json.loads((run_dir / "run.json").read_text())
    record.update(status="passed", reason=None, checks={})
    (run_dir / "run.json").write_text(json.dumps(record))
    (run_dir / "tests.log").unlink()
    fresh = digest_run(out, run_dir)
    for path, _n, entry in lines_of(out):
        if entry["dir"] == fresh["dir"]:
            rewrite(path, lambda e: {**e, "files": fresh["files"]} if e["dir"] == fresh["dir"] else e)


def forge_add(out: Path) -> None:
    """A third fixer rep, copied from the first, with a line that looks like the others."""
    runs = out / "runs" / "fix-add" / "default" / "fixer"
    shutil.copytree(runs / "1", runs / "3")
    record = json.loads((runs / "3" / "run.json").read_text())
    record.update(rep=3, run_id=record["run_id"].replace("/r1", "/r3"))
    (runs / "3" / "run.json").write_text(json.dumps(record))
    path, _n, template = lines_of(out)[-1]
    entry = {**template, **digest_run(out, runs / "3"), "run_id": record["run_id"]}
    if "seq" in entry:
        entry["seq"] += 1
        entry["prev"] = template["mac"]
        entry["mac"] = "0" * 64
    with path.open("a") as fh:
        fh.write(json.dumps(entry, sort_keys=True) + "\n")


def forge_delete(out: Path) -> None:
    """fixer's rep 2 and its manifest line are removed."""
    gone = "runs/fix-add/default/fixer/2"
    shutil.rmtree(out / gone)
    for path, _n, entry in lines_of(out):
        if entry["dir"] == gone:
            rewrite(path, lambda e: None if e["dir"] == gone else e)


@pytest.fixture
def keyed(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch):
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(pytester.path / "fixer.py", FIXER)
    (pytester.path / "task.yaml").write_text(
        "name: fix-add\ndescription: Fix add.\nrepo: repo\ntest_command: python -m pytest -q test_calc.py\n"
        f"agents:\n  - {{name: fixer, command: '{pytester.path / 'fixer.py'}'}}\n  - noop\n")
    monkeypatch.setenv("AGENTRACE_MANIFEST_KEY", KEY)
    return pytester


def test_key_and_digest_catch_the_three_rehashed_forgeries(keyed, xdist, monkeypatch, capsys) -> None:
    pytester = keyed
    db = pytester.path / "history.db"
    res = pytester.runpytest("--agentrace", "--agentrace-out", "out", "--agentrace-reps", "2", "--agentrace-db", str(db),
                             "--junitxml", "j.xml", *xdist)
    res.assert_outcomes(passed=2, xfailed=2)
    m = re.search(r"agentrace: results digest .*\n  ([0-9a-f]{64})", res.stdout.str())
    assert m, res.stdout.str()
    digest, out = m.group(1), pytester.path / "out"
    assert digest == results_digest(out)
    suite_props = {p.get("name"): p.get("value") for p in ET.parse(pytester.path / "j.xml").getroot().iter("property")}
    assert suite_props["agentrace.results_digest"] == digest
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT digest FROM sessions").fetchall() == [(digest,)]
    assert all("mac" in e and e["seq"] >= 1 for _p, _n, e in lines_of(out))
    assert len(list((out / MANIFEST_DIR).glob("*.seal"))) == 1
    assert verify(out, key=KEY.encode()).ok
    assert main(["verify", str(out), "--digest", digest]) == 0

    for forge in (forge_edit, forge_add, forge_delete):
        copy = pytester.path / f"out-{forge.__name__}"
        shutil.copytree(out, copy)
        forge(copy)
        assert verify(copy).ok, (forge.__name__, verify(copy).lines())  # without the key: not caught
        keyed_check = verify(copy, key=KEY.encode())
        assert not keyed_check.ok, forge.__name__
        assert verify(copy, key=b"some-other-key").manifest_errors  # a wrong key verifies nothing either
        monkeypatch.delenv("AGENTRACE_MANIFEST_KEY")
        capsys.readouterr()
        assert main(["verify", str(copy)]) == 0, forge.__name__
        assert main(["verify", str(copy), "--digest", digest]) == 1, forge.__name__  # the digest catches it
        assert "does NOT match" in capsys.readouterr().out
        monkeypatch.setenv("AGENTRACE_MANIFEST_KEY", KEY)
        assert main(["verify", str(copy)]) == 1, forge.__name__  # the key (from the environment) catches it
    problems = {f.__name__: verify(pytester.path / f"out-{f.__name__}", key=KEY.encode()).lines()
                for f in (forge_edit, forge_add, forge_delete)}
    assert any("not signed with the key" in line for line in problems["forge_edit"]), problems
    assert any("not signed with the key" in line for line in problems["forge_add"]), problems
    assert any("chain broken" in line or "does not match its seal" in line for line in problems["forge_delete"])
