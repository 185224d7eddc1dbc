"""Folder chains deeper than the interpreter's recursion limit, made by a hostile agent (the red team's finding): on
Python 3.11 ``os.walk`` and ``shutil.rmtree`` recurse once per level, so 3,000 empty folders (a few kilobytes) in
the workspace or the outbox made the run an ``error`` (a harness fault charged to nobody, the agent's failure
uncounted), and, deleted at the session's end, took the whole report down with a ``RecursionError``. ``fstree``
walks and deletes them at any depth; the run is judged on its change and the session's report is whole."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers import BUGGY_REPO, BUGGY_TASK, FIXER, make_repo, write_script

from pytest_agentrace import fstree
from pytest_agentrace.run.sandbox import probe

DEPTH = 3000  # well past the recursion limit (1,000) and, as a path, past PATH_MAX (4,096 bytes)

DEEP_AGENT = f"""\
import os, sys, tempfile
where = {{"outbox": sys.argv[1], "ws": ".", "tmp": tempfile.gettempdir()}}[os.environ["DEEP"]]
fd = os.open(where, os.O_RDONLY)
for _ in range({DEPTH}):
    os.mkdir("d", dir_fd=fd)
    nfd = os.open("d", os.O_RDONLY, dir_fd=fd)
    os.close(fd)
    fd = nfd
open("leaf.txt", "w", opener=lambda p, f: os.open(p, f, 0o644, dir_fd=fd)).write("leaf\\n")
print("made a deep tree")
"""


def _chain(top: Path, depth: int) -> None:
    fd = os.open(top, os.O_RDONLY)
    for _ in range(depth):
        os.mkdir("d", dir_fd=fd)
        nfd = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = nfd
    os.close(fd)


def test_walk_is_os_walk(tmp_path: Path) -> None:
    """The same ``(dirpath, dirnames, filenames)`` in the same order as ``os.walk``, links to folders listed and not
    entered, pruning in place honoured."""
    for rel in ("a/b/c.txt", "a/x.txt", "e/f/g/h.txt", "top.txt", "z/.git/config"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "a")
    (tmp_path / "e" / "dangling").symlink_to(tmp_path / "nowhere")

    def listing(walker) -> list:
        out = []
        for here, dirs, files in walker(tmp_path):
            dirs[:] = sorted(d for d in dirs if d != ".git")
            out.append((here, list(dirs), sorted(files)))
        return out

    assert listing(fstree.walk) == listing(os.walk)
    assert any("link" in dirs for _, dirs, _ in listing(fstree.walk))


def test_walk_and_rmtree_go_past_the_recursion_limit(tmp_path: Path) -> None:
    top = tmp_path / "deep"
    top.mkdir()
    _chain(top, DEPTH)
    with pytest.raises(RecursionError):
        list(os.walk(top))  # the hole, as Python 3.11 has it (3.12's os.walk is a loop)
    levels = sum(1 for _ in fstree.walk(top))
    assert 1000 < levels <= DEPTH + 1  # past PATH_MAX a folder cannot be listed by path: the walk ends there
    fstree.rmtree(top)
    assert not top.exists()


def test_rmtree_relative_to_an_open_folder(tmp_path: Path) -> None:
    (tmp_path / "deep").mkdir()
    _chain(tmp_path / "deep", DEPTH)
    (tmp_path / "kept.txt").write_text("k")
    fd = os.open(tmp_path, os.O_RDONLY)
    try:
        fstree.rmtree("deep", dir_fd=fd)
    finally:
        os.close(fd)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kept.txt"]


UNMEASURED = ("failed", "resource limit: disk (2 GiB; a folder the run made cannot be measured: deeper than 256 "
              "levels, or not listable)")


@pytest.mark.parametrize("disk", ["2G", "none"])
def test_a_deep_tree_in_the_workspace_or_outbox_is_the_agents_failure(pytester: pytest.Pytester, bin_dir: Path,
                                                                      xdist: list[str], disk: str) -> None:
    """With the disk limit on, the watch stops at a folder it cannot measure (the run fails on the limit, saying
    so); with it off, every harness walk of the workspace and the outbox meets the deep tree, and the run is judged
    on its change: failed, the agent's. In the sandbox, a tree in the box's /tmp is deleted with the run's scratch
    folders too (it was left behind, and broke pytest's own clean-up of its temporary folders in later sessions)."""
    boxed = probe()[0] is not None  # the box's /tmp is the run's own; without the box it is the host's
    make_repo(pytester.path / "repo", BUGGY_REPO)
    write_script(bin_dir / "deep", DEEP_AGENT)
    write_script(bin_dir / "fixer", FIXER)
    (pytester.path / "task.yaml").write_text(
        BUGGY_TASK + "agents:\n  - {name: fixer, command: [fixer]}\n"
        "  - {name: deep-ws, command: 'deep {run_dir}', env: {DEEP: ws}}\n"
        "  - {name: deep-outbox, command: 'deep {run_dir}', env: {DEEP: outbox}}\n"
        + ("  - {name: deep-tmp, command: 'deep {run_dir}', env: {DEEP: tmp}}\n" if boxed else ""))
    # the inner session's own temporary folders (pytester shares one basetemp between its sessions, which pytest
    # empties with a recursive rmtree at each start): this test's deep trees never reach another test's session
    basetemp = pytester.path / "basetemp-deep"
    try:
        res = pytester.runpytest("--agentrace", "task.yaml", "--agentrace-out", "out", "--agentrace-no-save",
                                 "--agentrace-disk", disk, "-p", "no:cacheprovider", "--junitxml=junit.xml",
                                 f"--basetemp={basetemp}", *xdist)
    finally:
        fstree.rmtree(basetemp)
    runs = {p.parent.parent.name: json.loads(p.read_text()) for p in (pytester.path / "out/runs").rglob("run.json")}
    failed = UNMEASURED if disk != "none" else ("failed", "tests failed (exit 1)")
    assert {a: (r["status"], r["reason"]) for a, r in runs.items()} == {
        "fixer": ("passed", None), "deep-ws": failed, "deep-outbox": failed,
        **({"deep-tmp": failed} if boxed and disk == "none" else {"deep-tmp": UNMEASURED} if boxed else {})}, runs
    assert "RecursionError" not in res.stdout.str() + res.stderr.str()
    res.stdout.fnmatch_lines(["*agentrace*", "*fixer*", "*deep-ws*"])  # the session's report
    assert "agentrace.score" in (pytester.path / "junit.xml").read_text()
    assert not list(pytester.path.rglob(".discarded"))  # every run's scratch folders deleted
