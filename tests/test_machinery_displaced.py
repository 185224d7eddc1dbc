"""The source's test machinery stays in the clean tree when the agent puts something else where a folder holding it
(or the machinery file itself) was: a file or a link in place of ``tests/`` (which holds ``tests/conftest.py``), a
folder in place of ``conftest.py``, a file in place of ``_pytest/``, a link two folders above a conftest. The
machinery is reset, what the agent put in its way is left out (``dropped``), and ``run.json`` says so; a hidden
verify file under the folder runs with the project's conftest (both forms of the clean tree)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from helpers import make_repo, write_script

from pytest_agentrace.run import cleantree, machinery, snapshot, workspace
from pytest_agentrace.run.sandbox import overlay_bwrap, probe

CONFTEST = 'import pytest\n\n\n@pytest.fixture(autouse=True)\ndef strict(monkeypatch):\n    monkeypatch.setenv("CALC_STRICT", "1")\n'
REPO = {"calc.py": "buggy\n", "conftest.py": "# root\n", "tests/conftest.py": CONFTEST, "tests/test_calc.py": "t\n",
        "_pytest/__init__.py": "# vendored\n", "pkg/sub/conftest.py": "# deep\n", "pkg/mod.py": "m\n"}


def _tests_file(ws: Path) -> None:
    shutil.rmtree(ws / "tests")
    (ws / "tests").write_text("not a folder\n")


def _tests_link(ws: Path) -> None:
    shutil.rmtree(ws / "tests")
    (ws / "mytests").mkdir()
    (ws / "mytests/test_calc.py").write_text("mine\n")
    os.symlink("mytests", ws / "tests")


def _tests_link_out(ws: Path) -> None:
    shutil.rmtree(ws / "tests")
    os.symlink("/etc", ws / "tests")


def _conftest_folder(ws: Path) -> None:
    (ws / "conftest.py").unlink()
    (ws / "conftest.py").mkdir()
    (ws / "conftest.py/helper.py").write_text("h\n")
    (ws / "conftest.py/conftest.py").write_text("# nested\n")


def _pytest_file(ws: Path) -> None:
    shutil.rmtree(ws / "_pytest")
    (ws / "_pytest").write_text("a file\n")


def _ancestor_link(ws: Path) -> None:
    shutil.rmtree(ws / "pkg")
    (ws / "lib").mkdir()
    (ws / "lib/mod.py").write_text("lib\n")
    os.symlink("lib", ws / "pkg")


def _tests_removed(ws: Path) -> None:  # nothing in the way: the conftest comes back, as before this fix
    shutil.rmtree(ws / "tests")


RESET_TESTS = {("tests/conftest.py", "deleted", "reset")}
CASES = {  # edit, what the tree holds besides the source's (None: the source's file is gone), machinery
    "tests-file": (_tests_file, {"tests/test_calc.py": None}, {*RESET_TESTS, ("tests", "added", "dropped")}),
    "tests-link": (_tests_link, {"tests/test_calc.py": None, "mytests/test_calc.py": "mine\n"},
                   {*RESET_TESTS, ("tests", "added", "dropped")}),
    "tests-link-out": (_tests_link_out, {"tests/test_calc.py": None}, {*RESET_TESTS, ("tests", "added", "dropped")}),
    "conftest-folder": (_conftest_folder, {}, {("conftest.py", "deleted", "reset"),
                                              ("conftest.py/helper.py", "added", "dropped"),
                                              ("conftest.py/conftest.py", "added", "reset")}),
    "pytest-file": (_pytest_file, {}, {("_pytest/__init__.py", "deleted", "reset"), ("_pytest", "added", "dropped")}),
    "ancestor-link": (_ancestor_link, {"pkg/mod.py": None, "lib/mod.py": "lib\n"},
                      {("pkg/sub/conftest.py", "deleted", "reset"), ("pkg", "added", "dropped")}),
    "tests-removed": (_tests_removed, {"tests/test_calc.py": None}, RESET_TESTS),
}


def leaves(root: Path) -> dict[str, str]:
    """``{path: content}`` of every file of ``root`` but ``.git`` (a link: ``-> target``), walked without following
    a link."""
    found = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git" or folder != str(root)]
        for name in [*files, *(d for d in dirs if os.path.islink(os.path.join(folder, d)))]:
            path = Path(folder, name)
            rel = path.relative_to(root).as_posix()
            found[rel] = f"-> {os.readlink(path)}" if path.is_symlink() else path.read_text()
    return found


def build(tmp_path: Path, files: dict[str, str], edit, setup=None) -> cleantree.CleanTree:
    """The run's clean tree in the checkout form, made as the pipeline makes it (a snapshot base after ``setup``)."""
    src = make_repo(tmp_path / "src", files)
    ws = tmp_path / "ws"
    made = workspace.clone(str(src), ws, tmp_path / "cache")
    if setup:
        setup(ws)
    desk = workspace.desk_dir(ws)
    before = made.tree if not setup else snapshot.snapshot_tree(ws, desk)
    base = cleantree.prepare(tmp_path / "check.git", ws, made.tree if not setup else None, workspace.borrowed_objects(ws))
    edit(ws)
    after = snapshot.snapshot_tree(ws, desk)
    return cleantree.build(base, desk / "objects", before, after, machinery.DEFAULT_MACHINERY, tmp_path / "clean")


@pytest.mark.parametrize("case", CASES)
def test_machinery_the_agent_displaced_stays_as_the_source_had_it(tmp_path: Path, case: str) -> None:
    edit, besides, machinery = CASES[case]

    def fix_and_edit(ws: Path) -> None:
        (ws / "calc.py").write_text("fixed\n")
        edit(ws)

    tree = build(tmp_path, REPO, fix_and_edit)
    want = {**REPO, "calc.py": "fixed\n", **besides}
    assert leaves(tree.fresh()) == {path: text for path, text in want.items() if text is not None}
    assert {(m["path"], m["change"], m["verdict"]) for m in tree.machinery} == machinery
    assert len(tree.machinery) == len(machinery)


def test_ignored_machinery_of_a_setup_is_not_displaced_either(tmp_path: Path) -> None:
    """After a setup the base holds the files git ignores; the agent's file in place of such a folder is left out."""
    def setup(ws: Path) -> None:
        (ws / "local").mkdir()
        (ws / "local/conftest.py").write_text("# setup's\n")
        (ws / "local/data.txt").write_text("setup's\n")

    def edit(ws: Path) -> None:
        shutil.rmtree(ws / "local")
        (ws / "local").write_text("the agent's file\n")
        (ws / "calc.py").write_text("fixed\n")

    tree = build(tmp_path, {"calc.py": "buggy\n", ".gitignore": "local/\n"}, edit, setup)
    assert leaves(tree.fresh()) == {"calc.py": "fixed\n", ".gitignore": "local/\n", "local/conftest.py": "# setup's\n",
                                    "local/data.txt": "setup's\n"}
    assert tree.machinery == [{"path": "local", "change": "added", "verdict": "dropped"}]


SESSION_REPO = {
    "calc.py": "def add(a, b):\n    return a - b\n",
    "test_top.py": "from calc import add\n\n\ndef test_top():\n    assert add(2, 3) == 5\n",
    "tests/conftest.py": CONFTEST,
    "tests/test_calc.py": "import os\n\n\ndef test_strict():\n    assert os.environ.get('CALC_STRICT') == '1'\n",
}
SWAP = """\
import os, pathlib, shutil
pathlib.Path("calc.py").write_text("def add(a, b):\\n    return a + b\\n")
shutil.rmtree("tests")
if os.environ["MODE"] == "link":
    os.mkdir("mytests")
    pathlib.Path("mytests/test_calc.py").write_text("def test_mine():\\n    pass\\n")
    os.symlink("mytests", "tests")
else:
    pathlib.Path("tests").write_text("not a folder\\n")
"""
HIDDEN = ("    import os\n    from calc import add\n\n\n    def test_hidden():\n"
          "        assert os.environ.get('CALC_STRICT') == '1', 'the project conftest did not run'\n"
          "        assert add(2, 2) == 4\n")


@pytest.mark.parametrize("form", ["checkout", "overlay"])
def test_a_hidden_test_under_the_displaced_folder_runs_with_the_projects_conftest(pytester: pytest.Pytester,
                                                                                  bin_dir: Path, form: str) -> None:
    """The red team's F4: ``tests/`` made a file or a link; the verify file ``tests/test_hidden.py`` passes only when
    the source's ``tests/conftest.py`` (an autouse fixture) ran, and ``run.json`` says the agent's ``tests`` was
    dropped and its deletion of the conftest reset."""
    if form == "overlay" and (probe()[0] is None or overlay_bwrap() is None):
        pytest.skip("needs a bwrap that mounts overlayfs without privilege")
    write_script(bin_dir / "bot", SWAP)
    make_repo(pytester.path / "repo", SESSION_REPO)
    (pytester.path / "swap.yaml").write_text(
        "name: swap\ndescription: fix add\nrepo: repo\ntest_command: python -m pytest -q test_top.py\n"
        f"verify_command: python -m pytest -q tests/test_hidden.py\nverify_files:\n  tests/test_hidden.py: |\n{HIDDEN}"
        "timeout: 60\nagents:\n  - {name: file, command: [bot], env: {MODE: file}}\n"
        "  - {name: link, command: [bot], env: {MODE: link}}\n")
    sandbox = "bwrap" if form == "overlay" else "off"
    pytester.runpytest("--agentrace", "--agentrace-out", "out", f"--agentrace-sandbox={sandbox}")
    runs = {r["agent"]: r for r in (json.loads(p.read_text()) for p in (pytester.path / "out").glob("runs/**/run.json"))}
    assert sorted(runs) == ["file", "link"]
    for run in runs.values():
        assert run["status"] == "passed", (run["agent"], run["reason"])
        assert run["checks"]["verify"]["tests"] == {"ran": 1, "passed": 1, "failed": 0, "errors": 0, "skipped": 0}
        assert sorted((m["path"], m["change"], m["verdict"]) for m in run["machinery"]) == [
            ("tests", "added", "dropped"), ("tests/conftest.py", "deleted", "reset")]
        assert run["extra"].get("clean_tree") == ("overlay" if form == "overlay" else None)
