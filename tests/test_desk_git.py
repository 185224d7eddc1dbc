"""The desk's git runs nobody's config: what an agent (or a task's source repo) writes into git config, hooks and
attributes is never run by the harness and changes nothing it records; binary files are recorded by hash.

Each attack is a fake agent (one custom command, the attack named by ``$ATTACK``) that fixes ``calc.py`` and plants
one git setting which, run by git, would create a marker file outside the workspace. The harness's snapshot and diff
run after the agent, outside any sandbox, so these runs use ``--agentrace-sandbox off``: the desk must hold without
the box. Serial and ``-n 2``.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest
from helpers import BUGGY_REPO, git, make_repo, write_script

from pytest_agentrace.run import snapshot, workspace

ATTACKS = ("fsmonitor", "filter", "textconv", "external", "hooks", "worktree")
FAKE_KEY = b"sk-ant-api03-" + b"K" * 40

PLANTER = r"""
import os, pathlib, stat, subprocess
attack, mark = os.environ["ATTACK"], os.environ["MARK"]
p = pathlib.Path("calc.py")
p.write_text(p.read_text().replace("a - b", "a + b"))
evil = pathlib.Path(".git/evil.sh")
evil.write_text(f"#!/bin/sh\necho ran {attack} $0 $PPID $(cat /proc/$PPID/cmdline | tr \"\\\\0\" \" \") >> {mark}\ncat \"$@\" 2>/dev/null\n")
evil.chmod(0o755)
def cfg(*args):
    subprocess.run(["git", "config", *args], check=True)
if attack == "fsmonitor":
    cfg("core.fsmonitor", str(evil.resolve()))
elif attack == "filter":
    pathlib.Path(".gitattributes").write_text("* filter=evil\n")
    cfg("filter.evil.clean", str(evil.resolve()))
    cfg("filter.evil.required", "true")
elif attack == "textconv":
    pathlib.Path(".gitattributes").write_text("*.py diff=evil\n")
    cfg("diff.evil.textconv", str(evil.resolve()))
elif attack == "external":
    cfg("diff.external", str(evil.resolve()))
elif attack == "hooks":
    hooks = pathlib.Path(".git/myhooks")
    hooks.mkdir()
    for name in ("post-index-change", "pre-commit", "post-checkout", "reference-transaction", "pre-auto-gc"):
        for d in (hooks, pathlib.Path(".git/hooks")):
            (d / name).write_text(evil.read_text())
            (d / name).chmod(0o755)
    cfg("core.hooksPath", str(hooks.resolve()))
elif attack == "worktree":
    cfg("core.worktree", os.environ["HOME"])
print("planted", attack)
"""


@pytest.fixture
def planted(pytester: pytest.Pytester, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """A task whose agents each plant one attack; a real HOME with a planted credentials file."""
    make_repo(pytester.path / "repo", BUGGY_REPO)
    home = tmp_path_factory.mktemp("realhome")
    (home / ".aws").mkdir()
    (home / ".aws" / "credentials").write_text("aws_secret_access_key = HOME-SECRET-VALUE\n")
    monkeypatch.setenv("HOME", str(home))
    marks = tmp_path_factory.mktemp("marks")
    write_script(pytester.path / "planter.py", PLANTER)
    agents = "".join(f"  - {{name: {a}, command: '{pytester.path / 'planter.py'}', env: {{ATTACK: {a}}}}}\n"
                     for a in ATTACKS)
    (pytester.path / "task.yaml").write_text(
        # the check imports calc instead of running pytest: a pytest plugin (pytest-benchmark) runs git in the
        # workspace itself, and checks run the agent's code by design (in the box); this is about the harness's git
        "name: planted\ndescription: fix add\nrepo: repo\n"
        "test_command: python -c 'import calc; assert calc.add(2, 3) == 5'\n"
        f"env: {{MARK: '{marks / 'ran'}'}}\nagents:\n{agents}")
    return pytester, home, marks


def files_in(patch: str) -> set[str]:
    return {line.split(" b/", 1)[1] for line in patch.splitlines() if line.startswith("diff --git ")}


def test_planted_git_config_never_runs_and_changes_nothing_recorded(planted, xdist) -> None:
    pytester, home, marks = planted
    res = pytester.runpytest("--agentrace", "--agentrace-out", "out", "--agentrace-sandbox", "off",
                             "--agentrace-no-save", *xdist)
    res.assert_outcomes(passed=len(ATTACKS))
    assert not (marks / "ran").exists(), (marks / "ran").read_text()
    for attack in ATTACKS:
        run_dir = pytester.path / "out" / "runs" / "planted" / "default" / attack / "1"
        record = json.loads((run_dir / "run.json").read_text())
        patch = (run_dir / "diff.patch").read_text()
        expected = {"calc.py", ".gitattributes"} if attack in ("filter", "textconv") else {"calc.py"}
        assert files_in(patch) == expected, (attack, patch)
        assert (record["lines_added"], record["files_changed"]) == (len(expected), len(expected)), attack
        assert "-    return a - b\n+    return a + b" in patch, attack  # the real bytes, no textconv output
        assert "HOME-SECRET" not in patch and ".aws" not in patch, attack


def hostile_source(tmp_path: Path, output: str) -> tuple[Path, Path]:
    """``(source repo, marks folder)``: a repo whose clean/smudge filter, fsmonitor and hooks run a script that
    leaves ``marks/ran`` (then runs ``output``), so a test can tell whether anything of the source ran."""
    marks = tmp_path / "marks"
    marks.mkdir()
    src = make_repo(tmp_path / "src", {"a.txt": "plain\n", ".gitattributes": "* filter=evil\n"})
    evil = src / ".git" / "evil.sh"
    evil.write_text(f"#!/bin/sh\necho ran >> {marks / 'ran'}\n{output}\n")
    evil.chmod(0o755)
    for key in ("filter.evil.smudge", "filter.evil.clean", "core.fsmonitor"):
        git(src, "config", key, str(evil))
    for hook in ("post-checkout", "post-index-change", "reference-transaction"):
        (src / ".git" / "hooks" / hook).write_text(evil.read_text())
        (src / ".git" / "hooks" / hook).chmod(0o755)
    (marks / "ran").unlink(missing_ok=True)  # the test's own git config calls above may have run the fsmonitor
    return src, marks


def test_a_source_repo_with_config_builds_its_template_without_running_it(tmp_path: Path) -> None:
    """A task's source repo carrying a smudge/clean filter, fsmonitor and hooks: the template holds the committed
    bytes and nothing runs (the old checkout ran the smudge filter in the source)."""
    src, marks = hostile_source(tmp_path, "echo SMUDGED")
    ws = tmp_path / "ws"
    made = workspace.clone(str(src), ws, tmp_path / "cache")
    assert not (marks / "ran").exists()
    assert (ws / "a.txt").read_text() == "plain\n"
    assert made.tree == snapshot.snapshot_tree(ws)
    assert not (marks / "ran").exists()


def test_the_uncommitted_check_runs_nothing_the_source_names(tmp_path: Path) -> None:
    """Asking whether a source repo has uncommitted changes (``workspace.uncommitted``) runs none of its clean
    filter, fsmonitor or hooks and writes nothing into it, and still names the changed and untracked files."""
    src, marks = hostile_source(tmp_path, "cat")
    (src / "a.txt").write_text("edited\n")
    (src / "new.txt").write_text("new\n")
    (marks / "ran").unlink(missing_ok=True)  # the edits' own stat calls above run nothing, but be sure
    before = sorted((p.relative_to(src).as_posix(), p.stat().st_mtime_ns) for p in src.rglob("*") if p.is_file())
    assert workspace.uncommitted(src, session="t") == ("a.txt", "new.txt")
    assert not (marks / "ran").exists()
    assert sorted((p.relative_to(src).as_posix(), p.stat().st_mtime_ns) for p in src.rglob("*") if p.is_file()) == before


def test_a_binary_file_is_recorded_by_hash_not_bytes(pytester: pytest.Pytester) -> None:
    """A binary file holding a key: diff.patch names it with size and sha256 (no ``GIT binary patch`` that
    ``git apply`` turns back into the key); a task with ``binary_diffs: true`` keeps the bytes."""
    make_repo(pytester.path / "repo", BUGGY_REPO)
    blob = b"\x00\x01" + FAKE_KEY + b"\x00"
    write_script(pytester.path / "drop.py", f"open('key.bin', 'wb').write({blob!r})\n")
    for name, extra in (("hashed", ""), ("kept", "binary_diffs: true\n")):
        (pytester.path / f"{name}.yaml").write_text(
            f"name: {name}\ndescription: x\nrepo: repo\ntest_command: 'true'\n{extra}"
            f"agents:\n  - {{name: drop, command: '{pytester.path / 'drop.py'}'}}\n")
    res = pytester.runpytest("--agentrace", "hashed.yaml", "kept.yaml", "--agentrace-out", "out",
                             "--agentrace-sandbox", "off", "--agentrace-no-save")
    res.assert_outcomes(passed=2)
    hashed = pytester.path / "out" / "runs" / "hashed" / "default" / "drop" / "1"
    patch = (hashed / "diff.patch").read_text()
    digest = hashlib.sha256(blob).hexdigest()
    assert "GIT binary patch" not in patch and f"# binary key.bin: {len(blob)} bytes, sha256 {digest}" in patch
    assert json.loads((hashed / "run.json").read_text())["extra"]["binary_files"] == [
        {"path": "key.bin", "size": len(blob), "sha256": digest}]
    scratch = make_repo(pytester.path / "apply", {"x": "x\n"})
    applied = subprocess.run(["git", "apply", str(hashed / "diff.patch")], cwd=scratch, capture_output=True)
    assert applied.returncode != 0 and not (scratch / "key.bin").exists()
    kept = (pytester.path / "out" / "runs" / "kept" / "default" / "drop" / "1" / "diff.patch").read_text()
    assert "GIT binary patch" in kept
