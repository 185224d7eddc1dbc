"""The clean tree's overlay form (run.cleanlayers, mounted by the check's box) against its checkout form: the same
paths, kinds, modes, link targets, contents and git index, for every kind of change an agent can make; a check's
writes reach neither the layers nor the next check; a tree the layers cannot reproduce is checked out instead."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from helpers import git, make_repo, write_script

from pytest_agentrace.run import cleanlayers, cleantree, machinery, snapshot, workspace
from pytest_agentrace.run.sandbox import Sandbox, overlay_bwrap, probe

pytestmark = pytest.mark.skipif(probe()[0] is None or overlay_bwrap() is None,
                                reason="needs a bwrap that mounts overlayfs without privilege")

# every path: kind, mode, link target or content digest; then the index's entries and git's own view of the files
MANIFEST = r"""set -e
find . -path ./.git/index -prune -o -printf '%y %m %p -> %l\n' | LC_ALL=C sort
find . -path ./.git -prune -o -type f -print0 | LC_ALL=C sort -z | xargs -0 -r sha256sum
git ls-files -s --debug | grep -v -E '^  (ctime|mtime|dev|uid|size)' || true
git -c core.fileMode=true status --porcelain --ignored=no
"""

BASE = {
    "a/b/c.txt": "c\n", "a/keep.txt": "keep\n", "exe.sh": "#!/bin/sh\necho hi\n", "plain.sh": "echo plain\n",
    "dirswap/x.txt": "x\n", "dirswap/y/z.txt": "z\n", "fileswap": "was a file\n", "gone/deep/f.txt": "f\n",
    "gone/g.txt": "g\n", "part/one.txt": "1\n", "part/two.txt": "2\n", "conftest.py": "# theirs\n",
    "tests/conftest.py": "# theirs\n", "tests/test_x.py": "def test_x():\n    assert True\n",
    "setup.cfg": "[metadata]\nname = x\n\n[tool:pytest]\naddopts = -q\n", "linkfile": "becomes a link\n",
    "só ünïcode.txt": "u\n", "with space.txt": "s\n", "emptied/only.txt": "o\n",
}


def agent_edit(ws: Path) -> None:
    """Every kind of change: edits, additions at depth, whole folders removed, file <-> folder swaps, links added,
    retargeted and replaced, modes flipped, machinery changed (reset by the clean tree), a link out of the tree."""
    (ws / "a/b/c.txt").write_text("changed\n")
    (ws / "new/deeper/still").mkdir(parents=True)
    (ws / "new/deeper/still/x.py").write_text("x = 1\n")
    (ws / "new/top.txt").write_text("top\n")
    for rel in ("gone/deep/f.txt", "gone/g.txt", "part/two.txt", "emptied/only.txt"):
        (ws / rel).unlink()
    for rel in ("gone/deep", "gone", "emptied"):
        (ws / rel).rmdir()
    for rel in ("dirswap/x.txt", "dirswap/y/z.txt"):
        (ws / rel).unlink()
    (ws / "dirswap/y").rmdir()
    (ws / "dirswap").rmdir()
    (ws / "dirswap").write_text("now a file\n")
    (ws / "fileswap").unlink()
    (ws / "fileswap").mkdir()
    (ws / "fileswap/inner.txt").write_text("inner\n")
    os.chmod(ws / "exe.sh", 0o755)  # was 644 in the template: 100755 now
    os.chmod(ws / "plain.sh", 0o755)
    os.symlink("a/keep.txt", ws / "newlink")
    os.symlink("/etc/passwd", ws / "escape")  # dropped
    (ws / "linkfile").unlink()
    os.symlink("exe.sh", ws / "linkfile")
    (ws / "conftest.py").write_text("# mine\n")  # reset
    (ws / "tests/conftest.py").unlink()  # reset: the base's stays
    (ws / "setup.cfg").write_text("[metadata]\nname = y\n\n[tool:pytest]\naddopts = -p mine\n")  # merged
    (ws / "só ünïcode.txt").write_text("ü\n")
    (ws / "big.bin").write_bytes(bytes(range(256)) * 12289)  # 3 MiB + 256 bytes: more than one streamed chunk
    for name in ("dup1.txt", "new/dup2.txt"):  # one blob, two files
        (ws / name).write_text("same\n")
    (ws / "with space.txt").unlink()


def two_forms(tmp_path: Path, files: dict[str, str], edit, template: bool = True):
    """``(checkout form, overlay form)`` of one run's clean tree, the run made as the pipeline makes it."""
    repo = make_repo(tmp_path / "repo", files)
    git(repo, "update-index", "--chmod=+x", "exe.sh")
    git(repo, "commit", "-q", "-m", "exe")
    run = tmp_path / "run"
    run.mkdir()
    ws = run / "ws"
    made = workspace.clone(str(repo), ws, tmp_path / "cache")
    desk = workspace.desk_dir(ws)
    before = made.tree if template else snapshot.snapshot_tree(ws, desk)
    base = cleantree.prepare(run / "check.git", ws, made.tree if template else None, workspace.borrowed_objects(ws))
    edit(ws)
    after = snapshot.snapshot_tree(ws, desk)
    args = (base, desk / "objects", before, after, machinery.DEFAULT_MACHINERY)
    plain = cleantree.build(*args, run / "clean")
    layered = cleantree.build(*args, run / "clean2", layers=run / "clean.layers", shared=tmp_path)
    return plain, layered


def in_box(tree: cleantree.CleanTree, script: str) -> subprocess.CompletedProcess:
    """``script`` run by ``/bin/sh`` in the tree's fresh root, in a box that mounts its overlay there when it has
    one (the check's box, ``run.pipeline``), else binds the checkout."""
    tree.fresh()
    return _run_as_is(tree, script)


def manifest(tree: cleantree.CleanTree) -> str:
    res = in_box(tree, MANIFEST)
    assert res.returncode == 0, res.stderr
    return res.stdout


@pytest.mark.parametrize("template", [True, False], ids=["template-base", "snapshot-base"])
def test_overlay_form_is_the_checkout_byte_for_byte(tmp_path: Path, template: bool) -> None:
    plain, layered = two_forms(tmp_path, BASE, agent_edit, template)
    assert plain.layers == () and len(layered.layers) == 2
    assert layered.commit == plain.commit and layered.machinery == plain.machinery
    want, got = manifest(plain), manifest(layered)
    assert got.replace("/clean2", "/clean") == want
    # the right answer, spelled out for a few paths: what a checkout of the combined commit holds
    assert "f 755 ./exe.sh" in want and "f 755 ./plain.sh" in want and "l 777 ./linkfile -> exe.sh" in want
    assert "f 644 ./dirswap ->" in want and "d 755 ./fileswap ->" in want and "./fileswap/inner.txt" in want
    assert "./gone" not in want and "./emptied" not in want and "./part/two.txt" not in want
    assert "./escape" not in want and "./new/deeper/still/x.py" in want and "./tests/conftest.py" in want
    assert "./with space.txt" not in want and "f 644 ./new/dup2.txt" in want and "./big.bin" in want
    # the layers hold the change only: whiteouts where the base's entries went, the base layer untouched
    changes = layered.layers[1]
    whiteouts = sorted(str(p.relative_to(changes)) for p in changes.rglob("*") if stat.S_ISCHR(p.lstat().st_mode))
    assert whiteouts == ["emptied", "gone", "part/two.txt", "with space.txt"]
    assert not (changes / "a/keep.txt").exists() and (layered.layers[0] / "gone/deep/f.txt").read_text() == "f\n"
    assert not (layered.layers[0] / ".git").exists()


def test_template_base_layer_is_shared_and_pristine_after_a_hostile_check(tmp_path: Path) -> None:
    plain, layered = two_forms(tmp_path, BASE, agent_edit)
    base_layer, changes = layered.layers
    assert base_layer.parent.parent == tmp_path  # under the shared root, not the run's scratch folder
    assert cleanlayers.BASES.get(cleantree._git, layered.git_dir, base_layer.name, tmp_path) == base_layer  # once
    again = cleantree.build(cleantree.Base(layered.git_dir, base_layer.name, template=True), layered.git_dir / "objects",
                            base_layer.name, base_layer.name, (), tmp_path / "run" / "clean3",
                            layers=tmp_path / "run" / "layers3", shared=tmp_path)
    assert again.layers[0] == base_layer
    before = manifest(layered)
    hostile = ("set -e; echo evil > a/keep.txt; echo evil > a/b/c.txt; rm -rf new part; chmod 777 exe.sh; "
               "echo x > gone; mkdir -p part/two.txt; ln -sf /etc/shadow tests/test_x.py; rm -rf .git; "
               "touch conftest.py; echo pwned > newfile")
    res = in_box(layered, hostile)
    assert res.returncode == 0, res.stderr
    written = layered.scratch / "upper"
    assert (written / "newfile").read_text() == "pwned\n"  # the check's writes land in its own upper folder
    assert (base_layer / "a/keep.txt").read_text() == "keep\n" and not (base_layer / "newfile").exists()
    assert (changes / "a/b/c.txt").read_text() == "changed\n" and (changes / ".git").is_dir()
    assert manifest(layered) == before  # the next check starts pristine (fresh: new, empty upper folder)
    assert not (layered.scratch / "upper" / "newfile").exists()


DISPLACED = {"exe.sh": "#!/bin/sh\n", "conftest.py": "# root\n", "tests/conftest.py": "# tests\n",
             "tests/test_x.py": "x\n", "_pytest/__init__.py": "# vendored\n", "pkg/sub/conftest.py": "# deep\n",
             "pkg/mod.py": "m\n", "out/conftest.py": "# out\n"}


def displace(ws: Path) -> None:
    """Machinery of the source displaced every way at once: ``tests/`` a file, ``conftest.py`` a folder, ``_pytest/``
    a file, ``pkg`` (two folders above a conftest) a link inside the tree, ``out`` a link out of it."""
    for folder in ("tests", "_pytest", "pkg", "out"):
        shutil.rmtree(ws / folder)
    (ws / "tests").write_text("not a folder\n")
    (ws / "_pytest").write_text("a file\n")
    (ws / "conftest.py").unlink()
    (ws / "conftest.py").mkdir()
    (ws / "conftest.py/helper.py").write_text("h\n")
    (ws / "lib").mkdir()
    (ws / "lib/mod.py").write_text("lib\n")
    os.symlink("lib", ws / "pkg")
    os.symlink("/etc", ws / "out")


def test_displaced_machinery_is_the_sources_in_both_forms(tmp_path: Path) -> None:
    plain, layered = two_forms(tmp_path, DISPLACED, displace)
    assert len(layered.layers) == 2 and layered.machinery == plain.machinery
    assert {(m["path"], m["verdict"]) for m in plain.machinery} == {
        ("tests", "dropped"), ("tests/conftest.py", "reset"), ("_pytest", "dropped"), ("_pytest/__init__.py", "reset"),
        ("conftest.py", "reset"), ("conftest.py/helper.py", "dropped"), ("pkg", "dropped"),
        ("pkg/sub/conftest.py", "reset"), ("out", "dropped"), ("out/conftest.py", "reset")}
    want = manifest(plain)
    assert manifest(layered).replace("/clean2", "/clean") == want
    for line in ("d 755 ./tests ->", "f 644 ./tests/conftest.py ->", "f 644 ./conftest.py ->", "d 755 ./_pytest ->",
                 "f 644 ./_pytest/__init__.py ->", "d 755 ./pkg ->", "f 644 ./pkg/sub/conftest.py ->",
                 "d 755 ./out ->", "f 644 ./out/conftest.py ->", "f 644 ./lib/mod.py ->"):
        assert line in want, line
    assert "./tests/test_x.py" not in want and "./pkg/mod.py" not in want and "./conftest.py/" not in want
    digest = subprocess.run(["sha256sum"], input=b"# tests\n", capture_output=True, check=True).stdout.split()[0]
    assert f"{digest.decode()}  ./tests/conftest.py" in want


def test_a_tree_with_gitattributes_is_checked_out(tmp_path: Path) -> None:
    files = {**BASE, ".gitattributes": "*.txt text eol=crlf\n"}
    plain, layered = two_forms(tmp_path, files, agent_edit)
    assert layered.layers == () and layered.overlay() is None
    assert not (tmp_path / "run" / "clean.layers").exists()
    assert manifest(layered).replace("/clean2", "/clean") == manifest(plain)

    def add_attributes(ws: Path) -> None:
        (ws / "sub").mkdir()
        (ws / "sub" / ".gitattributes").write_text("* ident\n")

    other = tmp_path / "other"
    other.mkdir()
    _, layered = two_forms(other, BASE, add_attributes)
    assert layered.layers == ()


def test_unchanged_tree_is_the_base_layer_and_git_folder(tmp_path: Path) -> None:
    plain, layered = two_forms(tmp_path, BASE, lambda ws: None)
    changes = layered.layers[1]
    assert sorted(p.name for p in changes.iterdir()) == [".git"]
    assert manifest(layered).replace("/clean2", "/clean") == manifest(plain)


def test_whiteout_is_made_by_an_unprivileged_process(tmp_path: Path) -> None:
    """overlayfs's whiteout is a character device 0/0, which Linux >= 5.8 lets any process make."""
    script = ("import os, stat, sys; os.mknod(sys.argv[1], stat.S_IFCHR | 0o000, os.makedev(0, 0)); "
              "print(stat.S_ISCHR(os.lstat(sys.argv[1]).st_mode), os.lstat(sys.argv[1]).st_rdev)")
    folder = Path(tempfile.mkdtemp(dir="/tmp"))  # pytest's own folders are closed to other users
    os.chmod(folder, 0o777)
    argv = [sys.executable, "-c", script, str(folder / "wh")]
    if os.geteuid() == 0:
        argv = ["setpriv", "--reuid=4242", "--regid=4242", "--clear-groups", "--inh-caps=-all", "/usr/bin/python3",
                *argv[1:]]
    try:
        res = subprocess.run(argv, capture_output=True, text=True, check=False)
    finally:
        shutil.rmtree(folder)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["True", "0"]


HIDDEN = {"linkdir/hidden.py": "no\n", "blocker/hidden.py": "h1\n", "a/b": "h2\n", "gone/x/hidden.py": "h3\n",
          "tests/test_hidden.py": "h4\n", "newlink": "h5\n", "fileswap/inner.txt/deeper.py": "h6\n"}


def test_hidden_files_are_written_alike_and_never_through_a_link(tmp_path: Path) -> None:
    """A check's hidden files (verify_files) land where the checkout form puts them: over a file, a folder, a link
    and a removed folder; a path with a link on its way is refused by both forms, nothing written for it."""

    def edit(ws: Path) -> None:
        agent_edit(ws)
        os.symlink("a", ws / "linkdir")  # inside the tree: kept as a link
        (ws / "blocker").write_text("a file where a hidden folder goes\n")

    plain, layered = two_forms(tmp_path, BASE, edit)
    refused = []
    for tree in (plain, layered):
        tree.fresh()
        with pytest.raises(workspace.Tampered) as caught:
            tree.write_files(HIDDEN)
        refused.append(caught.value.paths)
    assert refused == [["linkdir/hidden.py"], ["linkdir/hidden.py"]]
    script = MANIFEST.replace("status", "status --untracked-files=all")
    got, want = (_manifest_as_is(t, script) for t in (layered, plain))
    assert got.replace("/clean2", "/clean") == want
    assert "f 644 ./blocker/hidden.py" in want and "f 644 ./a/b ->" in want and "./gone/x/hidden.py" in want
    assert "f 644 ./newlink ->" in want and "./a/hidden.py" not in want and "l 777 ./linkdir -> a" in want
    assert not (layered.layers[1] / "blocker" / "hidden.py").exists()  # the changes layer is never written


def _manifest_as_is(tree: cleantree.CleanTree, script: str) -> str:
    """``script``'s output in the tree as it stands (no ``fresh``)."""
    res = _run_as_is(tree, script)
    assert res.returncode == 0, res.stderr
    return res.stdout


def _run_as_is(tree: cleantree.CleanTree, script: str) -> subprocess.CompletedProcess:
    """``script`` in a box that mounts the tree's overlay (the check's box, ``run.pipeline``) or binds its checkout;
    the objects its git folder borrows shown read-only, as the pipeline's check box shows them."""
    overlay = tree.overlay()
    borrowed = (tree.git_dir / "objects/info/alternates").read_text().split()
    box = Sandbox(bwrap=overlay_bwrap() or "", visible=(tree.git_dir, *map(Path, borrowed)),
                  overlays=(overlay,) if overlay else ())
    env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8", "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
           "GIT_OPTIONAL_LOCKS": "0"}
    argv, env = box.wrap(["/bin/sh", "-c", script], writable=[] if overlay else [tree.root], home=None, env=env)
    return subprocess.run(argv, cwd=tree.root, env=env, capture_output=True, text=True, check=False)


def test_shared_base_layer_is_made_again_when_its_folder_is_gone(tmp_path: Path) -> None:
    """A later session of the same process (pytest's in-process runs) may have removed the scratch root."""
    _, layered = two_forms(tmp_path, BASE, agent_edit)
    base_layer = layered.layers[0]
    shutil.rmtree(base_layer.parent)
    again = cleanlayers.BASES.get(cleantree._git, layered.git_dir, base_layer.name, tmp_path)
    assert again != base_layer and (again / "a/keep.txt").read_text() == "keep\n"
    assert cleanlayers.BASES.get(cleantree._git, layered.git_dir, base_layer.name, tmp_path) == again


def test_a_session_runs_its_checks_in_the_overlay_and_each_starts_pristine(pytester: pytest.Pytester,
                                                                          bin_dir: Path) -> None:
    """The pipeline's check box mounts the layers: the tests check's writes (a new file, an edit, a removal) are
    gone for the lint and verify checks, which see the agent's change, and the hidden file is there for verify."""
    write_script(bin_dir / "bot", """\
        import pathlib
        pathlib.Path("calc.py").write_text("def add(a, b):\\n    return a + b\\n")
        pathlib.Path("old.txt").unlink()
        """)
    make_repo(pytester.path / "repo", {"calc.py": "def add(a, b):\n    return a - b\n", "old.txt": "old\n",
                                       "keep.txt": "keep\n"})
    pristine = ("test ! -e leaked && test ! -e old.txt && test -f keep.txt && grep -q 'a + b' calc.py && "
                "! grep -q tests calc.py")
    (pytester.path / "t.yaml").write_text(
        "name: t\ndescription: fix add\nrepo: repo\n"
        f"test_command: \"{pristine} && echo x > leaked && echo '# tests' >> calc.py && rm keep.txt\"\n"
        f"lint_command: \"{pristine} && echo y > leaked\"\n"
        f"verify_command: \"{pristine} && test -f hidden/h.txt\"\n"
        "verify_files:\n  hidden/h.txt: hidden\ntimeout: 60\nagents:\n  - {name: bot, command: [bot]}\n")
    pytester.runpytest("--agentrace", "--agentrace-out", "out", "--agentrace-sandbox=bwrap")
    run = json.loads(next((pytester.path / "out").glob("runs/**/run.json")).read_text())
    assert run["extra"]["clean_tree"] == "overlay"
    assert {name: c["exit_code"] for name, c in run["checks"].items()} == {"tests": 0, "lint": 0, "verify": 0}
    assert run["status"] == "passed", run["reason"]
