"""More of the box's holes, each closed: hostile custom agents under the default sandbox (serial and -n 2).

- Every folder an agent writes counts against ``--agentrace-disk``: its HOME and the outbox too, not only the
  workspace and the box's /tmp and /dev/shm (a run wrote 120 MB into HOME or the outbox under a 32 MiB limit and
  was not stopped).
- The outbox's copy into the record folder has a cap on the number of entries, not only on bytes: twenty thousand
  empty files (0 bytes each) were all copied into the results folder, and every one could be named in ``run.json``.
- No ``run.json`` comes out of the outbox, at any depth: an agent's ``{run_dir}/r0/run.json`` became
  ``runs/<task>/<trial>/<agent>/<rep>/r0/run.json``, and ``agentrace report`` counted five forged passed runs of
  another agent (``agentrace verify`` only called them "added after its session").
- What one check's code writes in its HOME or /tmp never reaches the next check: a ``usercustomize.py`` the agent's
  code wrote into the user site during the tests check ran at the start of the hidden verify check.
- ``diff.patch`` is cut at ``run.workspace.PATCH_CAP`` bytes, read from git no further: a 200 MB text file made a
  203 MB diff.patch and took the harness to 1.1 GB of memory.
- A template made from a local folder (``repo: .``) holds none of the harness's folders: not the results folder,
  the template cache, nor ``.agentrace/history.db``; nor the project's other evaluations' hidden inputs (another
  task's verify files, a trial's answer keys, a Harbor task's tests and solution).
- A FIFO or link at a protected path (a hidden verify file's name) is hashed without blocking or following it: a
  FIFO named ``test_hidden.py`` hung the session forever.
- A FIFO the agent's code leaves at a check's JUnit report is no report, at once: the session hung forever.
- A folder at mode 000 the checks' code leaves in its HOME is removed before the next check (opened up first): an
  unprivileged harness could not empty it, and the run that failed its tests became an ``error``.
- A link the agent's code leaves in the checks' reports folder is no harness fault: a link at ``reports/verify``
  turned a run that failed its tests into an ``error`` (``FileExistsError``), which is never charged to the agent.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from helpers import make_repo, write_script
from test_box_attacks import project, run_attack, states, untouched  # noqa: F401 (the fixture)

from pytest_agentrace.record.runfile import iter_runs
from pytest_agentrace.run import counting, outbox, snapshot, workspace
from pytest_agentrace.run.sandbox import probe

FILLER = r"""
import json, os, sys, time
folder = {"home": os.environ["HOME"], "outbox": sys.argv[1]}[os.environ["ATTACK"]]
for i in range(40):
    with open(f"{folder}/fill{i}.bin", "wb") as fh:
        fh.write(os.urandom(1_000_000))
    time.sleep(0.1)
print("RESULT " + json.dumps("filled 40 MB"))
"""


@pytest.mark.skipif(probe()[0] is None, reason=f"no sandbox here: {probe()[1]}")
@pytest.mark.parametrize("where", ["home", "outbox"])
def test_filling_home_or_the_outbox_past_the_disk_limit_stops_the_run(project, xdist, where) -> None:  # noqa: F811
    pytester, home, _ = project
    write_script(pytester.path / "hostile.py", FILLER)
    before = states(pytester, home)
    _, results, records = run_attack(pytester, where, "", xdist, "--agentrace-disk", "5M", command_args=" {run_dir}")
    assert len(records) == 1
    run = records[0]
    assert run["status"] == "failed" and run["reason"].startswith("resource limit: disk"), run["reason"]
    assert results == []  # stopped before it could say it filled 40 MB
    untouched(pytester, home, before)


FORGER = r"""
import json, os, sys
for i in range(3):
    os.makedirs(f"{sys.argv[1]}/r{i}/deeper", exist_ok=True)
    for rel in (f"r{i}", f"r{i}/deeper"):
        json.dump({"task": "box", "agent": "claude", "status": "passed", "rep": 100 + i}, open(f"{sys.argv[1]}/{rel}/run.json", "w"))
open(f"{sys.argv[1]}/r0/notes.txt", "w").write("a side file")
print("RESULT " + json.dumps("forged"))
"""


@pytest.mark.skipif(probe()[0] is None, reason=f"no sandbox here: {probe()[1]}")
def test_no_run_record_comes_out_of_the_outbox(project, xdist) -> None:  # noqa: F811
    pytester, home, _ = project
    write_script(pytester.path / "hostile.py", FORGER)
    _, results, records = run_attack(pytester, "forge", "", xdist, command_args=" {run_dir}")
    assert results == ["forged"] and len(records) == 1
    out = pytester.path / "out"
    run_dir = out / "runs" / "box" / "default" / "hostile" / "1"
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("run.json")) == [
        "runs/box/default/hostile/1/run.json"]
    assert [o.agent for _, o in iter_runs(out)] == ["hostile"]
    assert (run_dir / "outbox" / "r0" / "notes.txt").read_text() == "a side file"  # other side files are still copied
    assert {"r0/run.json", "r1/deeper/run.json"} <= set(records[0]["extra"]["outbox"]["skipped"])


CHECK_PLANTER = r'''
import json, os
attack = os.environ["ATTACK"]
plant = {
    "usercustomize": (
        "import os, sys\n"
        "site = os.path.expanduser('~/.local/lib/python%d.%d/site-packages' % sys.version_info[:2])\n"
        "os.makedirs(site, exist_ok=True)\n"
        "open(os.path.join(site, 'usercustomize.py'), 'w').write('print(\"PLANTED-\" + \"USERCUSTOMIZE RAN\")')\n"
        "open('/tmp/planted-by-tests', 'w').write('x')\n"),
    "lockhome": (
        "import os\n"
        "locked = os.path.join(os.path.expanduser('~'), 'locked')\n"
        "os.makedirs(locked, exist_ok=True)\n"
        "open(os.path.join(locked, 'f'), 'w').write('x')\n"
        "os.chmod(locked, 0)\n"),
    "lockreports": (
        "import os, sys\n"
        "for arg in sys.argv:\n"
        "    if arg.startswith('--junitxml='):\n"
        "        reports = os.path.dirname(os.path.dirname(arg.split('=', 1)[1]))\n"
        "        for name in ('verify', 'lint'):\n"
        "            os.makedirs(os.path.join(reports, name, 'inner'), exist_ok=True)\n"
        "            os.chmod(os.path.join(reports, name), 0)\n"),
    "reports_link": (
        "import os, sys\n"
        "for arg in sys.argv:\n"
        "    if arg.startswith('--junitxml='):\n"
        "        reports = os.path.dirname(os.path.dirname(arg.split('=', 1)[1]))\n"
        "        os.symlink('/nonexistent', os.path.join(reports, 'verify'))\n"),
}[attack]
# the hidden verify test never imports calc.py: only what the tests check left behind can reach it
open("calc.py", "w").write(plant + "def add(a, b):\n    return a - b\n")
print("RESULT " + json.dumps("planted"))
'''


@pytest.mark.skipif(probe()[0] is None, reason=f"no sandbox here: {probe()[1]}")
def test_what_one_check_writes_in_its_home_or_tmp_never_reaches_the_next(project, xdist) -> None:  # noqa: F811
    pytester, home, _ = project
    write_script(pytester.path / "hostile.py", CHECK_PLANTER)
    _, results, records = run_attack(pytester, "usercustomize", "", xdist)
    assert results == ["planted"] and len(records) == 1
    run_dir = pytester.path / "out" / "runs" / "box" / "default" / "hostile" / "1"
    assert "PLANTED-USERCUSTOMIZE RAN" not in (run_dir / "verify.log").read_text()
    assert records[0]["checks"]["verify"]["passed"] is True  # the hidden test ran, untouched
    assert records[0]["status"] == "failed" and records[0]["reason"].startswith("tests failed")


@pytest.mark.skipif(probe()[0] is None, reason=f"no sandbox here: {probe()[1]}")
def test_an_unlistable_folder_left_in_the_reports_folder_leaves_a_failing_run_failed(project, xdist) -> None:  # noqa: F811
    """The next counted check's report folder is made anew even when the last check's code left a folder at mode
    000 in its place (found through ``--junitxml`` in its own argv): as an unprivileged user the harness could not
    empty it and the run that failed its tests became an uncounted ``error``."""
    pytester, home, _ = project
    write_script(pytester.path / "hostile.py", CHECK_PLANTER)
    _, results, records = run_attack(pytester, "lockreports", "", xdist)
    assert results == ["planted"] and len(records) == 1
    assert records[0]["status"] == "failed", records[0]["reason"]
    assert records[0]["reason"].startswith(("tests failed", "resource limit: disk")), records[0]["reason"]


@pytest.mark.skipif(probe()[0] is None, reason=f"no sandbox here: {probe()[1]}")
def test_an_unlistable_folder_left_in_a_checks_home_leaves_a_failing_run_failed(project, xdist) -> None:  # noqa: F811
    """The next check's HOME is made anew even when the last check's code left a folder there at mode 000: an
    unprivileged harness could not empty it (``rmtree`` gave up quietly, the copy of the fresh HOME then raised), so
    a run that failed its tests became an uncounted ``error`` of the graded code's choosing."""
    pytester, home, _ = project
    write_script(pytester.path / "hostile.py", CHECK_PLANTER)
    _, results, records = run_attack(pytester, "lockhome", "", xdist, more="lint_command: 'true'\n")
    assert results == ["planted"] and len(records) == 1
    # the agent's fault, counted: its tests failed, or (unprivileged) the disk watch could not read the folder
    assert records[0]["status"] == "failed", records[0]["reason"]
    assert records[0]["reason"].startswith(("tests failed", "resource limit: disk")), records[0]["reason"]
    assert records[0]["checks"]["lint"]["passed"] is True  # the next check ran, in a HOME made anew


@pytest.mark.skipif(probe()[0] is None, reason=f"no sandbox here: {probe()[1]}")
def test_a_link_left_in_the_reports_folder_leaves_a_failing_run_failed(project, xdist) -> None:  # noqa: F811
    pytester, home, _ = project
    write_script(pytester.path / "hostile.py", CHECK_PLANTER)
    _, results, records = run_attack(pytester, "reports_link", "", xdist)
    assert results == ["planted"] and len(records) == 1
    assert records[0]["status"] == "failed", records[0]["reason"]
    assert records[0]["reason"].startswith("tests failed")
    assert records[0]["checks"]["verify"]["passed"] is True


def test_a_flood_of_files_in_the_outbox_is_counted_not_copied(tmp_path: Path) -> None:
    box, record = tmp_path / "outbox", tmp_path / "record"
    record.mkdir()
    (box / "flood").mkdir(parents=True)
    for i in range(60):
        (box / "flood" / f"f{i}").write_bytes(b"")
    for i in range(20):
        os.mkfifo(box / f"pipe{i}")
    (box / "note.txt").write_text("kept")
    taken = outbox.collect(box, record, count_cap=50)
    assert (record / "outbox" / "note.txt").read_text() == "kept"  # the outbox's top folder: 22 entries, under the cap
    assert not (record / "outbox" / "flood").exists()  # its 60 files would pass the cap: none copied
    assert taken["copied"] == 1 and taken["over_count_cap"] == 60
    assert set(taken["skipped"]) == {f"pipe{i}" for i in range(20)}
    (tmp_path / "record2").mkdir()
    many = outbox.collect(box, tmp_path / "record2")
    assert many["copied"] == 61  # under the default cap, every regular file is copied


def test_skipped_entries_are_named_at_most_skipped_cap_times(tmp_path: Path) -> None:
    box, record = tmp_path / "outbox", tmp_path / "record"
    record.mkdir()
    box.mkdir()
    for i in range(outbox.SKIPPED_CAP + 30):
        os.symlink("/etc/passwd", box / f"link{i}")
    taken = outbox.collect(box, record)
    assert taken["copied"] == 0 and len(taken["skipped"]) == outbox.SKIPPED_CAP


def test_a_huge_change_is_cut_in_diff_patch_and_still_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 200 MB text file the agent left made a 203 MB diff.patch, and the harness held 1.1 GB while making it
    (no cap: a 2 GiB one would take the session's memory). The patch is read from git up to ``PATCH_CAP`` bytes;
    the line counts still cover the whole change."""
    monkeypatch.setattr(workspace, "PATCH_CAP", 10_000)
    src = make_repo(tmp_path / "src", {"a.txt": "1\n"})
    ws = tmp_path / "ws"
    workspace.create(str(src), ws, tmp_path / "cache")
    before = snapshot.snapshot_tree(ws)
    (ws / "big.txt").write_text("a line of text\n" * 50_000)  # 750 kB of patch
    (ws / "a.txt").write_text("2\n")
    ch = workspace.change(ws, before, snapshot.snapshot_tree(ws))
    assert (ch.lines_added, ch.lines_removed, ch.files_changed) == (50_001, 1, 2)
    assert len(ch.patch) < 10_200 and ch.patch.endswith("# diff.patch cut at 10000 bytes: the whole change is larger\n")
    assert ch.patch.startswith("diff --git a/a.txt b/a.txt")
    monkeypatch.undo()
    whole = workspace.change(ws, before, snapshot.snapshot_tree(ws))
    assert "cut at" not in whole.patch and whole.patch.count("+a line of text") == 50_000


PEEK = r"""
import json, os
print("RESULT " + json.dumps(sorted(os.path.join(r, f)[2:] for r, d, fs in os.walk(".") if ".git" not in r for f in fs)))
"""


@pytest.mark.skipif(probe()[0] is None, reason=f"no sandbox here: {probe()[1]}")
@pytest.mark.parametrize("out", ["default", "elsewhere"])
def test_a_task_whose_repo_is_its_own_folder_copies_no_harness_folder(pytester: pytest.Pytester, out: str) -> None:
    """``repo: .`` with the task file at the project's top: the default results folder (``.agentrace``, with the
    template cache) was copied into its own cache until the path was too long (a harness fault, every run); with the
    results elsewhere, ``.agentrace/history.db`` went into the agent's workspace."""
    (pytester.path / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (pytester.path / ".agentrace").mkdir()
    (pytester.path / ".agentrace" / "history.db").write_text("SQLite format 3 HISTORY-SECRET")
    write_script(pytester.path / "peek.py", PEEK)
    (pytester.path / "task.yaml").write_text(
        "name: self\ndescription: look\nrepo: .\ntest_command: 'true'\n"
        f"agents:\n  - {{name: peek, command: '{pytester.path / 'peek.py'}'}}\n")
    where = pytester.path / ".agentrace" if out == "default" else pytester.path.parent / f"{pytester.path.name}-out"
    pytester.runpytest("--agentrace", *(["--agentrace-out", str(where)] if out != "default" else []),
                       "--agentrace-no-save", "-p", "no:cacheprovider")
    record = json.loads((where / "runs" / "self" / "default" / "peek" / "1" / "run.json").read_text())
    assert record["status"] == "passed", record["reason"]
    raw = (where / "runs" / "self" / "default" / "peek" / "1" / "raw.out").read_text()
    listing = json.loads(raw.split("RESULT ", 1)[1])
    assert listing == ["calc.py", "peek.py"]


@pytest.mark.skipif(probe()[0] is None, reason=f"no sandbox here: {probe()[1]}")
def test_a_repo_dot_workspace_holds_no_other_tasks_checks_or_answer_keys(pytester: pytest.Pytester, xdist) -> None:
    """``repo: .`` in a project with other evaluations beside it: another task's hidden verify files, a trial file's
    answer keys and a Harbor task's tests were in the agent's workspace; so were the task's own reference patch file
    and another task's (``solution_patch: fix.patch``). They are left out; the project's own YAML and TOML files (and
    a task file without hidden checks) stay."""
    (pytester.path / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (pytester.path / "config.yaml").write_text("verbose: true\n")
    (pytester.path / "settings.toml").write_text("[tool]\nquestions = 3\n")
    (pytester.path / "fix.patch").write_text("# OWN-SOLUTION\n")
    (pytester.path / "patches").mkdir()
    (pytester.path / "patches" / "other.diff").write_text("# OTHER-SOLUTION\n")
    (pytester.path / "evals").mkdir()
    (pytester.path / "evals" / "other.yaml").write_text(
        "name: other\ndescription: d\ntest_command: 'true'\nverify_command: pytest -q\n"
        "verify_files:\n  test_hidden.py: '# HIDDEN-CHECK'\nsolution_patch: ../patches/other.diff\n")
    (pytester.path / "evals" / "broken.yml").write_text("verify_files:\n  a: [unclosed\n")
    (pytester.path / "evals" / "visible.yaml").write_text("name: v\ndescription: d\ntest_command: 'true'\n")
    (pytester.path / "evals" / "trial.toml").write_text(
        "[[questions]]\nid = 'q'\nprompt = 'p'\nexpect = ['ANSWER-KEY']\n")
    harbor = pytester.path / "evals" / "hb"
    for rel in ("task.toml", "instruction.md", "tests/test_outputs.py", "solution/solve.sh", "environment/Dockerfile"):
        (harbor / rel).parent.mkdir(parents=True, exist_ok=True)
        (harbor / rel).write_text("x\n")
    write_script(pytester.path / "peek.py", PEEK)
    (pytester.path / "task.yaml").write_text(
        "name: self\ndescription: look\nrepo: .\ntest_command: 'true'\nsolution_patch: fix.patch\n"
        f"agents:\n  - {{name: peek, command: '{pytester.path / 'peek.py'}'}}\n")
    pytester.runpytest("--agentrace", "task.yaml", "--agentrace-no-save", "-p", "no:cacheprovider", *xdist)
    run = pytester.path / ".agentrace" / "runs" / "self" / "default" / "peek" / "1"
    record = json.loads((run / "run.json").read_text())
    assert record["status"] == "passed", record["reason"]
    listing = json.loads((run / "raw.out").read_text().split("RESULT ", 1)[1])
    assert listing == ["calc.py", "config.yaml", "evals/hb/environment/Dockerfile", "evals/hb/instruction.md",
                       "evals/hb/task.toml", "evals/visible.yaml", "peek.py", "settings.toml"]


def test_a_fifo_or_link_at_a_protected_path_never_blocks_the_harness(tmp_path: Path) -> None:
    """An agent that left a FIFO named like a hidden verify file (always protected) hung the session forever: the
    harness opened it to hash it after the run, and nobody writes to it (a link to ``/dev/zero`` would never end
    either). Protected files are read without following links and without blocking."""
    import threading

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "test_kept.py").write_text("x = 1\n")
    (tmp_path / "outside.txt").write_text("the harness's own file\n")
    os.mkfifo(ws / "test_hidden.py")
    os.symlink(tmp_path / "outside.txt", ws / "test_link.py")
    got: dict = {}
    worker = threading.Thread(target=lambda: got.update(workspace.protected_state(ws, ["test_*.py"])), daemon=True)
    worker.start()
    worker.join(20)
    blocked = worker.is_alive()
    if blocked:  # let the blocked open go, so the thread ends; then fail
        with open(ws / "test_hidden.py", "wb"):
            pass
        worker.join(5)
    assert not blocked, "protected_state blocked on a FIFO"
    assert got == {"test_kept.py": hashlib.sha256(b"x = 1\n").hexdigest(), "test_hidden.py": "not a regular file",
                   "test_link.py": f"link: {tmp_path / 'outside.txt'}"}


def test_a_fifo_left_at_the_junit_report_never_blocks_the_harness(tmp_path: Path) -> None:
    """The agent's code, running in a check's pytest, swapped the JUnit report for a FIFO at exit (``atexit``): the
    harness opened it to count the tests and the session hung forever. It is no report (None), at once."""
    import threading

    report = tmp_path / "junit.xml"
    os.mkfifo(report)
    got: list = []
    worker = threading.Thread(target=lambda: got.append(counting.read_report(report)), daemon=True)
    worker.start()
    worker.join(20)
    blocked = worker.is_alive()
    if blocked:  # let the blocked open go, so the thread ends; then fail
        with open(report, "wb"):
            pass
        worker.join(5)
    assert not blocked, "read_report blocked on a FIFO"
    assert got == [None]
