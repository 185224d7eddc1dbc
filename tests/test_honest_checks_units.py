"""The parts of honest checks on their own: which commands are counted, what a JUnit report says, which hidden
tests a verify file defines, and how the clean tree merges ``pyproject.toml`` / ``setup.cfg`` and keeps what setup
made (real git, real pytest processes)."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest
from helpers import make_repo

from pytest_agentrace.errors import SpecError
from pytest_agentrace.run import cleantree, counting, desk, machinery, snapshot, workspace
from pytest_agentrace.spec.task import load_task


@pytest.mark.parametrize(("command", "counted"), [
    ("python -m pytest -q test_fib.py", True), ("pytest", True), ("py.test -x", True),
    ("PYTHONHASHSEED=0 .venv/bin/python3.11 -B -m pytest tests/*.py", True), ("pytest -k 'a or b'", True),
    ("make test", False), ("pytest && ruff check .", False), ("pytest | tee log", False), ("pytest # note", False),
    ("python -c 'import pytest'", False), ("python run.py -m pytest", False), ("pytest $(cat list)", False),
])
def test_which_commands_are_counted(command: str, counted: bool) -> None:
    assert counting.pytest_argv(command) is counted


def junit(tmp_path: Path, tests: str, *args: str) -> Path:
    (tmp_path / "test_x.py").write_text(tests)
    report = tmp_path / "r.xml"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}", *args,
                    "test_x.py"], cwd=tmp_path, capture_output=True, env={**os.environ, "PYTEST_ADDOPTS": ""})
    return report


def test_a_report_is_counted_and_compared_with_the_hidden_tests(tmp_path: Path) -> None:
    tests = ("import pytest\n\ndef test_a():\n    pass\n\n@pytest.mark.parametrize('n', [1, 2])\ndef test_b(n):\n"
             "    assert n == 1\n\nclass TestC:\n    def test_d(self):\n        pytest.skip('no')\n")
    count = counting.read_report(junit(tmp_path, tests))
    assert count is not None and count.to_dict() == {"ran": 3, "passed": 2, "failed": 1, "errors": 0, "skipped": 1}
    hidden = counting.hidden_tests({"test_x.py": tests, "helper.py": "def test_no(): pass\n"})
    assert hidden == ["test_x.test_a", "test_x.test_b", "test_x.TestC.test_d"]
    assert counting.verdict(count, hidden) == "2 of 3 hidden tests ran"
    assert counting.verdict(count) == "1 of 3 tests failed"
    only = counting.read_report(junit(tmp_path, tests, "-k", "test_a"))
    assert counting.verdict(only, ["test_x.test_a"]) is None
    assert counting.verdict(counting.read_report(junit(tmp_path, tests, "--collect-only"))) == "no test ran"
    assert counting.verdict(None) == "no test report"


def test_a_report_is_read_without_following_a_link(tmp_path: Path) -> None:
    real = junit(tmp_path, "def test_a():\n    pass\n")
    (tmp_path / "link.xml").symlink_to(real)
    assert counting.read_report(real) is not None
    assert counting.read_report(tmp_path / "link.xml") is None
    (tmp_path / "bad.xml").write_text("<testsuites><testcase")
    assert counting.read_report(tmp_path / "bad.xml") is None


def test_hidden_tests_leave_out_what_pytest_would_not_run() -> None:
    source = ("import pytest\n__all__ = []\n\n@pytest.mark.skip\ndef test_skipped():\n    pass\n\n"
              "class TestInit:\n    def __init__(self):\n        pass\n\n    def test_x(self):\n        pass\n\n"
              "async def test_async():\n    pass\n")
    assert counting.hidden_tests({"sub/test_h.py": source, "x_test.py": "def test_y(): pass\n"}) == [
        "sub.test_h.test_async", "x_test.test_y"]
    assert counting.hidden_tests({"test_off.py": "__test__ = False\ndef test_z(): pass\n"}) == []


@pytest.mark.parametrize(("path", "expected"), [
    ("conftest.py", True), ("a/b/conftest.py", True), ("tests/pytest.ini", True), ("x/__pycache__/m.cpython-311.pyc", True),
    ("foo-1.0.dist-info/entry_points.txt", True), ("lib/_pytest/x.py", True), ("site.pth", True),
    ("pytest/__main__.py", True), ("calc.py", False), ("pyproject.toml", False), ("setup.cfg", False),
    ("my_pytest_notes.md", False), ("tests/test_calc.py", False), ("ruff.toml", True), ("sub/.ruff.toml", True),
    (".flake8", True), ("mypy.ini", True), (".pylintrc", True), ("pkg/pylintrc", True), (".pre-commit-config.yaml", True),
    ("gettext.py", False),  # a rule of its own (``machinery.shadowing``), not a name pattern
])
def test_default_machinery(path: str, expected: bool) -> None:
    assert machinery.is_machinery(path, machinery.DEFAULT_MACHINERY) is expected


PYPROJECT = '[project]\nname = "x"\ndependencies = []\n\n[tool.pytest.ini_options]\nmarkers = ["slow"]\n\n[tool.ruff]\nline-length = 100\n'


def clean(tmp_path: Path, files: dict[str, str], edit, setup=None) -> tuple[cleantree.CleanTree, Path]:
    src = make_repo(tmp_path / "src", files)
    ws = tmp_path / "ws"
    made = workspace.clone(str(src), ws, tmp_path / "cache")
    if setup:
        setup(ws)
    git_folder = workspace.desk_dir(ws)  # the harness's own git folder, as the pipeline uses
    before = made.tree if not setup else snapshot.snapshot_tree(ws, git_folder)
    base = cleantree.prepare(tmp_path / "check.git", ws, made.tree if not setup else None, workspace.borrowed_objects(ws))
    edit(ws)
    after = snapshot.snapshot_tree(ws, git_folder)
    tree = cleantree.build(base, git_folder / "objects", before, after, machinery.DEFAULT_MACHINERY, tmp_path / "clean")
    return tree, tree.fresh()


def test_pyproject_keeps_the_agents_tables_and_the_sources_pytest_tables(tmp_path: Path) -> None:
    def edit(ws: Path) -> None:
        text = PYPROJECT.replace("dependencies = []", 'dependencies = ["requests"]')
        (ws / "pyproject.toml").write_text(text.replace('markers = ["slow"]', 'addopts = "--collect-only"')
                                           + '\n[tool.pytest_env]\nX = "1"\n')
    tree, root = clean(tmp_path, {"pyproject.toml": PYPROJECT}, edit)
    data = tomllib.loads((root / "pyproject.toml").read_text())
    assert data["project"]["dependencies"] == ["requests"] and data["tool"]["ruff"] == {"line-length": 100}
    assert data["tool"]["pytest"] == {"ini_options": {"markers": ["slow"]}} and "pytest_env" not in data["tool"]
    assert tree.machinery == [{"path": "pyproject.toml", "change": "changed", "verdict": "merged"}]


def test_a_pytest_key_the_merge_cannot_separate_resets_the_whole_file(tmp_path: Path) -> None:
    def edit(ws: Path) -> None:
        (ws / "pyproject.toml").write_text(PYPROJECT.replace("[tool.ruff]", '[tool]\npytest.x = 1\n\n[tool.ruff]'))
    tree, root = clean(tmp_path, {"pyproject.toml": PYPROJECT}, edit)
    assert (root / "pyproject.toml").read_text() == PYPROJECT
    assert tree.machinery == [{"path": "pyproject.toml", "change": "changed", "verdict": "reset"}]


def test_setup_cfg_gets_the_sources_pytest_section_back(tmp_path: Path) -> None:
    def edit(ws: Path) -> None:
        (ws / "setup.cfg").write_text("[metadata]\nname = y\n\n[tool:pytest]\naddopts = --collect-only\n")
    tree, root = clean(tmp_path, {"setup.cfg": "[metadata]\nname = x\n"}, edit)
    assert (root / "setup.cfg").read_text().strip() == "[metadata]\nname = y"
    assert tree.machinery == [{"path": "setup.cfg", "change": "changed", "verdict": "merged"}]


def test_lint_tools_parts_are_merged_back_and_their_own_files_reset(tmp_path: Path) -> None:
    """A lint check is judged by its exit code: the agent's ruff.toml and .flake8 are reset, its ``[tool.ruff*]``
    / ``[tool.mypy]`` tables and ``setup.cfg``'s ``[flake8]`` / ``[mypy-*]`` sections give way to the source's,
    while its own change to ``[project]`` and ``[metadata]`` stays."""
    cfg = "[metadata]\nname = x\n\n[flake8]\nmax-line-length = 100\n"

    def edit(ws: Path) -> None:
        text = PYPROJECT.replace("dependencies = []", 'dependencies = ["requests"]')
        (ws / "pyproject.toml").write_text(text.replace("line-length = 100", 'line-length = 100\nexclude = ["*"]')
                                           + '\n[tool.ruff.lint]\nignore = ["F"]\n\n[tool.mypy]\nignore_errors = true\n')
        (ws / "setup.cfg").write_text(cfg.replace("name = x", "name = y").replace("100", "100\nexclude = *")
                                      + "\n[mypy-calc.*]\nignore_errors = True\n")
        (ws / "ruff.toml").write_text('exclude = ["*"]\n')
        (ws / ".flake8").write_text("[flake8]\nexclude = *\n")
    tree, root = clean(tmp_path, {"pyproject.toml": PYPROJECT, "setup.cfg": cfg, ".flake8": "[flake8]\n"}, edit)
    data = tomllib.loads((root / "pyproject.toml").read_text())
    assert data["project"]["dependencies"] == ["requests"]
    assert data["tool"] == {"pytest": {"ini_options": {"markers": ["slow"]}}, "ruff": {"line-length": 100}}
    assert (root / "setup.cfg").read_text() == "[metadata]\nname = y\n\n[flake8]\nmax-line-length = 100\n"
    assert not (root / "ruff.toml").exists() and (root / ".flake8").read_text() == "[flake8]\n"
    assert {m["path"]: (m["change"], m["verdict"]) for m in tree.machinery} == {
        "pyproject.toml": ("changed", "merged"), "setup.cfg": ("changed", "merged"), "ruff.toml": ("added", "reset"),
        ".flake8": ("changed", "reset")}


def test_a_task_that_replaces_the_set_lets_the_agent_change_the_lint_configuration(tmp_path: Path) -> None:
    def edit(ws: Path) -> None:
        (ws / "pyproject.toml").write_text(PYPROJECT.replace("line-length = 100", "line-length = 120"))
        (ws / "ruff.toml").write_text("line-length = 120\n")
    src = make_repo(tmp_path / "src", {"pyproject.toml": PYPROJECT})
    ws = tmp_path / "ws"
    made = workspace.clone(str(src), ws, tmp_path / "cache")
    base = cleantree.prepare(tmp_path / "check.git", ws, made.tree, workspace.borrowed_objects(ws))
    edit(ws)
    after = snapshot.snapshot_tree(ws, workspace.desk_dir(ws))
    patterns = machinery.machinery_patterns(replace=["conftest.py", "pyproject.toml [tool.pytest*]"])
    tree = cleantree.build(base, workspace.desk_dir(ws) / "objects", made.tree, after, patterns, tmp_path / "clean")
    root = tree.fresh()
    assert tree.machinery == []
    assert "line-length = 120" in (root / "pyproject.toml").read_text() and (root / "ruff.toml").exists()


SOURCE = {"calc.py": "x = 1\n", "types.py": "the project's\n", "pkg/__init__.py": "", "pkg/json.py": "",
          "pkg2/__init__.py": "", "pkg2/string.py": "the source's\n", "src/app.py": "", "html/index.html": "<p>\n"}


def shadow_edit(ws: Path) -> None:
    """The agent's changes: each module named like an importable one, where it would or would not shadow it."""
    files = {
        "types.py": "the agent's\n",  # the source's own module of a standard name: the project's
        "gettext.py": "hack\n", "src/json.py": "hack\n", "tools/gettext.py": "hack\n",  # root; folders without __init__
        "pluggy/__init__.py": "hack\n", "tools/email.cpython-312-x86_64-linux-gnu.so": "hack\n",
        "html/__init__.py": "hack\n",  # the source's folder of static files made a package named like the stdlib's
        "html/page.py": "hack\n",  # ... and a module in that package
        "iniconfig/extra.py": "hack\n",  # a namespace portion of an installed distribution's name (it may be one)
        "code/snippet.py": "kept\n",  # a namespace portion of a stdlib name: the stdlib's regular module wins
        "iniconfig/data.txt": "kept\n",  # data, not code
        "pkg/logging.py": "kept\n", "newpkg/__init__.py": "", "newpkg/types.py": "kept\n",  # package-internal
        "mathutil.py": "kept\n", "src/helpers.py": "kept\n",  # new modules of names nothing else has
        "my-tool.py": "kept\n", "test/test_calc.py": "kept\n",  # no identifier, nothing's; CPython's own test suite
        f"{sysconfig._get_sysconfigdata_name()}.py": "hack\n",  # no identifier, but sysconfig imports it
        "pkg2/string.py": "hack\n",  # the source's, in a package: the agent removes pkg2/__init__.py (below)
    }
    for rel, text in files.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)
    (ws / "pkg2" / "__init__.py").unlink()


def test_modules_that_would_shadow_an_importable_one_are_reset(tmp_path: Path) -> None:
    tree, root = clean(tmp_path, SOURCE, shadow_edit)
    reset = ["gettext.py", "html/__init__.py", "html/page.py", "iniconfig/extra.py", "pluggy/__init__.py", "src/json.py",
             "tools/email.cpython-312-x86_64-linux-gnu.so", "tools/gettext.py", f"{sysconfig._get_sysconfigdata_name()}.py"]
    assert sorted((m["path"], m["change"], m["verdict"]) for m in tree.machinery) == sorted(
        [(path, "added", "reset") for path in reset] + [("pkg2/string.py", "changed", "reset")])
    assert [p for p in reset if (root / p).exists()] == []
    assert (root / "pkg2" / "string.py").read_text() == "the source's\n"
    assert (root / "types.py").read_text() == "the agent's\n" and not (root / "pkg2" / "__init__.py").exists()
    for kept in ("code/snippet.py", "iniconfig/data.txt", "pkg/logging.py", "newpkg/types.py", "mathutil.py", "src/helpers.py",
                 "my-tool.py", "test/test_calc.py"):
        assert (root / kept).read_text() == "kept\n", kept


def test_without_the_rule_a_shadowing_module_is_the_agents(tmp_path: Path) -> None:
    src = make_repo(tmp_path / "src", SOURCE)
    ws = tmp_path / "ws"
    made = workspace.clone(str(src), ws, tmp_path / "cache")
    base = cleantree.prepare(tmp_path / "check.git", ws, made.tree, workspace.borrowed_objects(ws))
    shadow_edit(ws)
    after = snapshot.snapshot_tree(ws, workspace.desk_dir(ws))
    patterns = machinery.machinery_patterns(replace=["conftest.py"])
    tree = cleantree.build(base, workspace.desk_dir(ws) / "objects", made.tree, after, patterns, tmp_path / "clean")
    assert tree.machinery == [] and (tree.fresh() / "gettext.py").read_text() == "hack\n"


def test_shadow_names_and_module_names() -> None:
    names = machinery.shadow_names()
    assert {"gettext", "argparse", "sys", "pluggy", "_pytest", "iniconfig"} <= names  # stdlib, built-in, installed
    assert sysconfig._get_sysconfigdata_name() in names  # __import__ takes names that are no identifier
    assert "calc" not in names and "mathutil" not in names and "test" not in names
    assert machinery.shadow_names() is names  # computed once per process
    assert [machinery.module_name(n) for n in ("gettext.py", "gettext.pyc", "x.cpython-311-x86_64-linux-gnu.so",
                                                "x.so", "x.pyd", "a.b.py", "my-mod.py", "README.md", "gettext", ".py")] == [
        "gettext", "gettext", "x", "x", "x", None, "my-mod", None, None, None]


def test_what_setup_made_is_in_the_clean_tree_but_the_agents_change_to_it_is_not(tmp_path: Path) -> None:
    """After a setup the base is every file of the workspace, ignored ones too (a tool folder setup installed)."""
    def setup(ws: Path) -> None:
        (ws / "tools").mkdir()
        (ws / "tools" / "sitecustomize.py").write_text("setup's\n")
        (ws / "tools" / "helper.py").write_text("setup's\n")

    def edit(ws: Path) -> None:
        (ws / "tools" / "sitecustomize.py").write_text("agent's\n")
        (ws / "calc.py").write_text("agent's\n")
    tree, root = clean(tmp_path, {"calc.py": "x\n", ".gitignore": "tools/\n"}, edit, setup)
    assert (root / "tools" / "helper.py").read_text() == "setup's\n"
    assert (root / "tools" / "sitecustomize.py").read_text() == "setup's\n"
    assert (root / "calc.py").read_text() == "agent's\n"
    (root / "calc.py").write_text("a check wrote this\n")
    assert (tree.fresh() / "calc.py").read_text() == "agent's\n"  # each check starts from the clean tree again


def test_task_key_test_machinery(tmp_path: Path) -> None:
    path = tmp_path / "task.yaml"
    base = "name: t\ndescription: d\ntest_command: pytest\n"
    path.write_text(base + "test_machinery: [fixtures/, 'data/*.json']\n")
    task = load_task(path)
    assert task.machinery[-2:] == ("fixtures/", "data/*.json") and "conftest.py" in task.machinery
    path.write_text(base + "test_machinery: {replace: [conftest.py]}\n")
    assert load_task(path).machinery == ("conftest.py",)
    path.write_text(base + "test_machinery: ['setup.cfg [bandit]', 'pyproject.toml [tool.coverage*]']\n")
    assert load_task(path).machinery[-2:] == ("setup.cfg [bandit]", "pyproject.toml [tool.coverage*]")
    path.write_text(base + "test_machinery: {replace: [conftest.py, <shadowing modules>]}\n")
    assert load_task(path).machinery == ("conftest.py", machinery.SHADOWING)
    for bad in ("test_machinery: {only: [x]}\n", "test_machinery: ['../x']\n", "test_machinery: 3\n",
                "test_machinery: ['<other modules>']\n", "test_machinery: ['pyproject.toml [project]']\n",
                "test_machinery: ['tox.ini [flake8]']\n"):
        path.write_text(base + bad)
        with pytest.raises(SpecError, match="test_machinery"):
            load_task(path)


def test_the_clean_trees_commit_is_the_one_git_commit_tree_writes(tmp_path: Path) -> None:
    """``cleantree._commit`` writes the commit object itself (no git process): the same id and bytes as ``git
    commit-tree`` with the harness's identity, and git reads it."""
    bare = tmp_path / "g"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    tree = subprocess.run(["git", "--git-dir", str(bare), "mktree"], input=b"", capture_output=True,
                          check=True).stdout.decode().strip()
    ours = cleantree._commit(bare, tree)
    theirs = subprocess.run(["git", "--git-dir", str(bare), "commit-tree", "-m", cleantree.COMMIT_MESSAGE, tree],
                            capture_output=True, text=True, check=True,
                            env={**os.environ, **desk.GIT_IDENTITY}).stdout.strip()
    assert ours == theirs
    assert cleantree._commit(bare, tree) == ours  # written once: an object is its content
    assert subprocess.run(["git", "--git-dir", str(bare), "cat-file", "-t", ours], capture_output=True, text=True,
                          check=True).stdout == "commit\n"


@pytest.mark.parametrize("name", ["pyproject.toml", "setup.cfg"])
def test_a_deleted_config_keeps_the_sources_pytest_part_alone(tmp_path: Path, name: str) -> None:
    """Deleting the file is no way around the merge: the clean tree has a file with the source's pytest part alone
    (``merged``), so its addopts, markers and strictness still apply; a file with no pytest part is deleted."""
    source = PYPROJECT if name == "pyproject.toml" else "[metadata]\nname = x\n\n[tool:pytest]\naddopts = --strict-markers\n"
    tree, root = clean(tmp_path, {name: source, "other.cfg": "[tool:pytest]\n"}, lambda ws: ((ws / name).unlink(),
                                                                                              (ws / "other.cfg").unlink()))
    text = (root / name).read_text()
    if name == "pyproject.toml":
        # the machinery parts: pytest's tables and the lint tools' ([tool.ruff]); [project] is the agent's to delete
        assert tomllib.loads(text) == {"tool": {"pytest": {"ini_options": {"markers": ["slow"]}}, "ruff": {"line-length": 100}}}
    else:
        assert "[tool:pytest]" in text and "--strict-markers" in text and "[metadata]" not in text
    assert not (root / "other.cfg").exists()  # not a config the merge knows: deleted as the agent left it
    assert tree.machinery == [{"path": name, "change": "deleted", "verdict": "merged"}]


def test_a_deleted_config_without_a_pytest_part_is_deleted(tmp_path: Path) -> None:
    tree, root = clean(tmp_path, {"setup.cfg": "[metadata]\nname = x\n"}, lambda ws: (ws / "setup.cfg").unlink())
    assert not (root / "setup.cfg").exists() and tree.machinery == []


@pytest.mark.parametrize("name", ["pyproject.toml", "setup.cfg"])
@pytest.mark.parametrize("source_has_it", [True, False])
def test_a_link_at_a_config_name_is_reset(tmp_path: Path, name: str, source_has_it: bool) -> None:
    """pytest reads a linked config's target: a link the agent leaves at ``pyproject.toml`` / ``setup.cfg`` (to its
    own ``addopts = "-p evilplug"``) is no way around the merge; the source's file (or none) is what the checks see."""
    evil = '[tool.pytest.ini_options]\naddopts = "-p evilplug"\n' if name == "pyproject.toml" else "[tool:pytest]\naddopts = -p evilplug\n"
    source = PYPROJECT if name == "pyproject.toml" else "[metadata]\nname = x\n"

    def edit(ws: Path) -> None:
        (ws / "cfg.txt").write_text(evil)
        (ws / name).unlink(missing_ok=True)
        os.symlink("cfg.txt", ws / name)

    tree, root = clean(tmp_path, {name: source} if source_has_it else {"calc.py": "x\n"}, edit)
    if source_has_it:
        assert not (root / name).is_symlink() and (root / name).read_text() == source
    else:
        assert not os.path.lexists(root / name)
    assert tree.machinery == [{"path": name, "change": "changed" if source_has_it else "added", "verdict": "reset"}]


@pytest.mark.parametrize(("commands", "expected"), [
    (["make test"], ("Makefile", "makefile", "GNUmakefile", "*.mk")),
    (["make -f build/tests.mk verify"], ("Makefile", "makefile", "GNUmakefile", "*.mk", "build/tests.mk")),
    (["npm test", "yarn lint"], ("package.json",)),
    (["FOO=1 sh run_tests.sh && python -m pytest -q"], ("run_tests.sh",)),
    (["./ci/check.sh --fast", "python3 check.py", "bash scripts/t.sh"], ("ci/check.sh", "check.py", "scripts/t.sh")),
    (["nox -s tests", "tox -e py", "just test"], ("noxfile.py", "tox.ini", "justfile", "Justfile", ".justfile")),
    # nothing of the tree: a module, a program on PATH, an inline script, a path outside the tree, a broken line
    (["python -m pytest -q", "pytest -q", "bash -c 'true'", "python /abs/x.py", "sh ../up.sh", "echo 'unclosed", None],
     ()),
])
def test_the_files_a_check_command_runs_through(commands: list, expected: tuple) -> None:
    from pytest_agentrace.run.machinery import command_machinery

    assert command_machinery(commands) == expected


def test_a_tasks_machinery_holds_its_commands_files(tmp_path: Path) -> None:
    from pytest_agentrace.run.machinery import DEFAULT_MACHINERY
    from pytest_agentrace.spec.task import Task

    task = Task(name="t", description="d", test_command="make test", verify_command="sh verify.sh", path=tmp_path / "t.yaml")
    assert set(DEFAULT_MACHINERY) | {"Makefile", "verify.sh"} <= set(task.machinery)
    bare = Task(name="t", description="d", test_command="make test", path=tmp_path / "t.yaml", test_machinery=(),
                test_machinery_replaces=True)
    assert bare.machinery == ()  # `test_machinery: {replace: []}` is the task's own word


@pytest.mark.parametrize(("path", "target", "inside"), [
    ("x", "y/..", False),  # y -> . makes y/.. the tree's parent: a red team's two-hop link kept before
    ("a/x", "../b", True), ("a/x", "../../b", False), ("x", "sub/file.txt", True), ("a/b/x", "../../c/./d", True),
    ("x", "sub/../sub/f", False), ("x", "/etc/passwd", False), ("x", "", False), ("x", ".", True),
])
def test_a_link_is_kept_only_when_its_text_cannot_leave_the_tree(path: str, target: str, inside: bool) -> None:
    assert cleantree._inside(path, target.encode()) is inside
