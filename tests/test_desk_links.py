"""Harness writes never follow links; reports and merge never read through them.

A fake agent (unsandboxed: ``--agentrace-sandbox off`` gives it write access to its own record folder, which the
box takes away; the desk must hold without the box) leaves links where the harness writes next: ``raw.out`` into
HOME's dotfiles, ``diff.patch`` to a new file in the user's project, a check log to a world-readable place, an
earlier rep's ``run.json``, and a verify file's parent folder. HOME and the project stay byte-identical, the earlier
record verifies, and the links are gone from the record. Serial and ``-n 2``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import BUGGY_REPO, make_repo, write_script

from pytest_agentrace.cli import main
from pytest_agentrace.record.manifest import verify

SECRET = "HOME-CREDENTIAL-VALUE-0123"

LINKER = r"""
import os, pathlib, sys
run_dir = pathlib.Path(sys.argv[1])
home, project, drop = os.environ["HOME"], os.environ["PROJECT"], os.environ["DROP"]
p = pathlib.Path("calc.py")
p.write_text(p.read_text().replace("a - b", "a + b"))
def link(target, name):
    path = run_dir / name
    if path.exists() or path.is_symlink():
        path.unlink()
    os.symlink(target, path)
link(home + "/.bashrc", "raw.out")
link(project + "/pwned.txt", "diff.patch")
link(drop + "/tests.log", "tests.log")
link(home + "/.aws/credentials", "creds.txt")
earlier = pathlib.Path(project) / "out" / "runs" / "linked" / "default" / "linker" / "1" / "run.json"
if earlier.exists():  # {run_dir} is the run's outbox: links to an earlier rep's record, by its known path
    link(str(earlier), "run.json")
    link(str(earlier), "prompt.txt")
os.makedirs(home + "/hiddenout", exist_ok=True)
os.symlink(home + "/hiddenout", "hidden")  # where the verify file's folder goes
print("linked")
"""


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def project_files(root: Path) -> dict[str, bytes]:
    """The user's project: everything but the results folder and pytest's own caches and temp folders."""
    return {k: v for k, v in snapshot(root).items() if not k.startswith(("out", ".pytest_cache", "basetemp"))}


@pytest.fixture
def linked(pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    make_repo(pytester.path / "repo", BUGGY_REPO)
    home = tmp_path_factory.mktemp("realhome")
    (home / ".bashrc").write_text("# the user's bashrc\n")
    (home / ".aws").mkdir()
    (home / ".aws" / "credentials").write_text(f"aws_secret_access_key = {SECRET}\n")
    monkeypatch.setenv("HOME", str(home))
    drop = tmp_path_factory.mktemp("worldreadable")
    write_script(pytester.path / "linker.py", LINKER)
    (pytester.path / "task.yaml").write_text(
        "name: linked\ndescription: fix add\nrepo: repo\n"
        "test_command: python -c 'import calc; assert calc.add(2, 3) == 5'\n"
        "verify_command: python hidden/test_hidden.py\n"
        "verify_files:\n  hidden/test_hidden.py: |\n    print('HIDDEN-VERIFY')\n"
        f"env: {{PROJECT: '{pytester.path}', DROP: '{drop}'}}\n"
        f"agents:\n  - {{name: linker, command: '{pytester.path / 'linker.py'} {{run_dir}}'}}\n")
    return pytester, home, drop


def test_links_in_the_record_folder_are_never_written_through(linked, xdist, capsys) -> None:
    pytester, home, drop = linked
    before_home = snapshot(home)
    before_project = project_files(pytester.path)
    res = pytester.runpytest("--agentrace", "--agentrace-out", "out", "--agentrace-reps", "2",
                             "--agentrace-sandbox", "off", "--agentrace-no-save", *xdist)
    res.assert_outcomes(passed=2)  # the fix is right; the checks ran on the clean tree, without the agent's links
    after_home = snapshot(home)
    assert after_home == {**before_home, **{k: v for k, v in after_home.items() if k.startswith("hiddenout")}}
    assert not (home / "hiddenout").exists() or not any((home / "hiddenout").iterdir())  # the verify file
    assert project_files(pytester.path) == before_project
    assert not (pytester.path / "pwned.txt").exists() and not list(drop.iterdir())
    out = pytester.path / "out"
    for rep in (1, 2):
        run_dir = out / "runs" / "linked" / "default" / "linker" / str(rep)
        record = json.loads((run_dir / "run.json").read_text())
        # the linked folder on the verify file's way is not in the checks' clean tree (run.cleantree drops links out
        # of the tree), so the hidden test was written into a real folder there, never through the link
        assert record["status"] == "passed" and not record["tampered"], record
        for name in ("raw.out", "diff.patch", "tests.log", "run.json"):  # written after the agent: replaced
            assert not (run_dir / name).is_symlink() and (run_dir / name).is_file(), (rep, name)
        assert "linked" in (run_dir / "raw.out").read_text() and "a + b" in (run_dir / "diff.patch").read_text()
        # the agent's {run_dir} is its outbox: links there are never copied into the record (nor read, nor hashed)
        assert not (run_dir / "creds.txt").exists() and not (run_dir / "creds.txt").is_symlink()
        assert "creds.txt" in json.dumps(record["extra"]["outbox"])
    assert verify(out).ok, verify(out).lines()  # the earlier rep's run.json is what its session wrote

    # reports and merge read no link: the HOME credentials are neither in the HTML nor in the merged folder
    assert main(["html", str(out), "-o", str(pytester.path / "report.html")]) == 0
    html = (pytester.path / "report.html").read_text()
    assert SECRET not in html  # (the hidden test's own output is in verify.log: it ran, in the clean tree)
    assert main(["merge", str(out), "--to", str(pytester.path / "merged")]) == 0
    merged = pytester.path / "merged"
    assert not [p for p in merged.rglob("*") if p.is_symlink()]
    assert all(SECRET.encode() not in p.read_bytes() for p in merged.rglob("*") if p.is_file())
    assert main(["verify", str(merged)]) == 0
    capsys.readouterr()


def test_a_report_reads_no_link_left_in_place_of_a_record_file(linked, capsys) -> None:
    """After the session someone swaps ``raw.err`` for a link to HOME's credentials: the HTML report (which warns
    that the folder no longer verifies) shows no byte of it, and ``merge`` refuses the unverifiable folder."""
    pytester, home, _ = linked
    pytester.runpytest("--agentrace", "--agentrace-out", "out", "--agentrace-sandbox", "off", "--agentrace-no-save")
    run_dir = pytester.path / "out" / "runs" / "linked" / "default" / "linker" / "1"
    (run_dir / "raw.err").unlink()
    (run_dir / "raw.err").symlink_to(home / ".aws" / "credentials")
    assert main(["html", str(pytester.path / "out"), "-o", str(pytester.path / "r.html")]) == 0
    assert SECRET not in (pytester.path / "r.html").read_text()
    assert main(["merge", str(pytester.path / "out"), "--to", str(pytester.path / "merged")]) == 2
    assert "raw.err removed" in capsys.readouterr().err
