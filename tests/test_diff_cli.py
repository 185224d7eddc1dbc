"""Issue 6: `agentrace diff` turns a unified diff into a task file per mode (review, fix, improve) that loads
with the strict schema; empty or non-diff input exits 2 with a one-line error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import git, make_repo

from pytest_agentrace.cli import main
from pytest_agentrace.cli.difftask import MODES
from pytest_agentrace.spec.task import load_task

AGENTRACE = [sys.executable, "-m", "pytest_agentrace.cli"]


@pytest.fixture
def changed_repo(tmp_path: Path) -> Path:
    """A real repository with a staged change: a modified, a renamed (and edited), a deleted, a new text and a
    new binary file."""
    repo = make_repo(tmp_path / "proj", {
        "app.py": "def area(w, h):\n    return w * h\n",
        "old_name.py": "A = 1\nB = 2\nC = 3\nD = 4\n",
        "gone.py": "x = 1\n",
        "test_app.py": "from app import area\n\n\ndef test_area():\n    assert area(2, 3) == 6\n",
    })
    (repo / "app.py").write_text("def area(w, h):\n    if w < 0:\n        return 0\n    return w * h\n")
    git(repo, "mv", "old_name.py", "new_name.py")
    (repo / "new_name.py").write_text("A = 1\nB = 2\nC = 3\nD = 5\n")
    git(repo, "rm", "-q", "gone.py")
    (repo / "helper.py").write_text("def helper():\n    return 42\n")
    (repo / "logo.png").write_bytes(bytes(range(256)) * 4)
    git(repo, "add", "-A")
    return repo


def staged_diff(repo: Path) -> str:
    return git(repo, "diff", "--cached", "-M", "--binary")


@pytest.mark.parametrize("mode", list(MODES))
def test_each_mode_gives_a_loadable_task(changed_repo: Path, tmp_path: Path, mode: str, capsys: pytest.CaptureFixture[str]) -> None:
    patch = tmp_path / "change.patch"
    patch.write_text(staged_diff(changed_repo))
    out = tmp_path / "tasks" / f"{mode}.yaml"
    os.chdir(changed_repo)
    try:
        assert main(["diff", "--file", str(patch), "--mode", mode, "--output", str(out)]) == 0
    finally:
        os.chdir(tmp_path)
    task = load_task(out)
    text = task.description
    assert text.startswith(MODES[mode].format(test_command="python -m pytest -q")[:40])
    assert "The change touches 5 file(s)" in text
    assert "renamed   old_name.py -> new_name.py (+1 -1)" in text
    assert "added     logo.png (binary)" in text and "(binary content not shown)" in text
    assert "deleted   gone.py (+0 -1)" in text and "added     helper.py (+2 -0)" in text
    assert "+    if w < 0:" in text and "```diff" in text
    assert "GIT binary patch" not in text and "literal " not in text
    assert Path(task.repo) == changed_repo.resolve()
    assert task.test_command == "python -m pytest -q" and [a.id for a in task.agents] == ["claude", "codex"]
    reviewed = ("app.py", "gone.py", "helper.py", "logo.png", "new_name.py", "old_name.py")
    assert task.protected == (reviewed if mode == "review" else ())
    assert f"wrote {out}" in capsys.readouterr().err


def test_generated_task_collects(changed_repo: Path, pytester: pytest.Pytester) -> None:
    patch = pytester.path / "change.patch"
    patch.write_text(staged_diff(changed_repo))
    assert main(["diff", "--file", str(patch), "--mode", "fix", "--name", "fix-area", "--agents", "noop", "--repo", str(changed_repo), "-o", str(pytester.path / "fix.yaml")]) == 0
    res = pytester.runpytest("--agentrace", "fix.yaml", "--collect-only", "-q")
    assert [line for line in res.stdout.lines if "::" in line] == ["fix.yaml::fix-area[noop-r1]"]


def test_stdin_to_stdout_and_options(changed_repo: Path) -> None:
    proc = subprocess.run(
        [*AGENTRACE, "diff", "--mode", "improve", "--name", "better", "--agents", "claude,aider", "--agents", "noop",
         "--test-command", "python -m pytest -q test_app.py", "--lint-command", "ruff check ."],
        input=staged_diff(changed_repo), check=False, capture_output=True, text=True, cwd=changed_repo, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    data = yaml.safe_load(proc.stdout)
    assert data["name"] == "better" and data["agents"] == ["claude", "aider", "noop"]
    assert data["test_command"] == "python -m pytest -q test_app.py" and data["lint_command"] == "ruff check ."
    assert "`python -m pytest -q test_app.py` must pass" in data["description"].replace("\n", " ")
    assert data["repo"] == "."
    assert proc.stdout.count("description: |") == 1  # the prompt is a readable literal block


@pytest.mark.parametrize("source", ["stdin", "file"])
def test_dev_null_exits_2_with_one_line(source: str) -> None:
    args = [*AGENTRACE, "diff"] + (["--file", os.devnull] if source == "file" else [])
    with open(os.devnull) as empty:
        proc = subprocess.run(args, stdin=empty, check=False, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("agentrace diff: error: the input is empty")


@pytest.mark.parametrize("text, message", [
    ("hello\nthis is not a patch\n", "the input is not a unified diff"),
    ("--- a/x.py\n+++ b/x.py\n@@ -1,5 +1,5 @@\n-a\n+b\n", "the input is not a valid unified diff"),
])
def test_non_diff_input_exits_2(text: str, message: str) -> None:
    proc = subprocess.run([*AGENTRACE, "diff"], input=text, check=False, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and message in proc.stderr


def test_unreadable_file_and_bad_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", "--file", str(tmp_path / "missing.patch")]) == 2
    assert "cannot read" in capsys.readouterr().err
    (tmp_path / "p.patch").write_text("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")
    out = tmp_path / "bad.yaml"
    assert main(["diff", "--file", str(tmp_path / "p.patch"), "--name", "a/b", "-o", str(out)]) == 2
    assert "the task does not load" in capsys.readouterr().err and not out.exists()


def test_plain_diff_u_output_works(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one\ntwo\n")
    (tmp_path / "b.txt").write_text("one\n2\n")
    text = subprocess.run(["diff", "-u", "a.txt", "b.txt"], cwd=tmp_path, check=False, capture_output=True, text=True).stdout
    (tmp_path / "p.patch").write_text(text)
    assert main(["diff", "--file", str(tmp_path / "p.patch"), "-o", str(tmp_path / "t.yaml")]) == 0
    assert "modified  a.txt (+1 -1)" in load_task(tmp_path / "t.yaml").description


def test_apply_puts_an_uncommitted_change_into_each_clone(changed_repo: Path, pytester: pytest.Pytester) -> None:
    check = "test -f new_name.py && test -f logo.png && ! test -e gone.py && grep -q 'w < 0' app.py"
    common = ["--mode", "fix", "--agents", "noop", "--repo", str(changed_repo), "--test-command", check]
    diff = pytester.path / "c.patch"
    diff.write_text(staged_diff(changed_repo))
    assert main(["diff", "--file", str(diff), *common, "--apply", "--name", "applied", "-o", str(pytester.path / "applied.yaml")]) == 0
    assert main(["diff", "--file", str(diff), *common, "--name", "head", "-o", str(pytester.path / "head.yaml")]) == 0
    pytester.runpytest("--agentrace", "applied.yaml", "head.yaml")
    runs = {d["case"]: d for d in (json.loads(p.read_text()) for p in (pytester.path / ".agentrace" / "runs").glob("*/default/noop/1/run.json"))}
    assert runs["applied"]["checks"]["setup"]["exit_code"] == 0
    assert runs["applied"]["status"] == "passed"  # the clone holds the staged change
    assert runs["head"]["status"] == "failed"  # without --apply the clone is HEAD, without it
    assert (pytester.path / "c.patch").read_bytes() == diff.read_bytes()


def test_review_fails_a_reviewer_that_edits_the_reviewed_files(changed_repo: Path, pytester: pytest.Pytester, bin_dir: Path) -> None:
    from helpers import write_script

    git(changed_repo, "commit", "-q", "-m", "the change under review")
    write_script(bin_dir / "reviewer", "print('app.py:2: negative widths give 0, not an error')\n")
    write_script(bin_dir / "editor", "import pathlib\npathlib.Path('app.py').write_text('# rewritten\\n')\nprint('fixed it myself')\n")
    (pytester.path / "c.patch").write_text(git(changed_repo, "show", "--format=", "-M", "--binary", "HEAD"))
    assert main(["diff", "--file", str(pytester.path / "c.patch"), "--name", "rev", "--repo", str(changed_repo),
                 "--test-command", "true", "-o", str(pytester.path / "rev.yaml")]) == 0
    path = pytester.path / "rev.yaml"
    agents = "agents:\n  - {name: reviewer, command: reviewer}\n  - {name: editor, command: editor}\n"
    path.write_text(path.read_text().split("agents:")[0] + agents)
    res = pytester.runpytest("--agentrace", "rev.yaml")
    res.assert_outcomes(passed=1, failed=1)
    assert "tampered: app.py" in res.stdout.str()
