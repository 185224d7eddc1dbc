"""Workspaces: clones, template repos from plain folders, change accounting, protected files."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from helpers import git, make_repo

from pytest_agentrace.errors import WorkspaceError
from pytest_agentrace.run import snapshot, workspace


def test_change_counts_tracked_untracked_and_binary(tmp_path: Path) -> None:
    src = make_repo(tmp_path / "src", {"a.txt": "1\n2\n3\n", "gone.txt": "x\n", ".gitignore": "ignored/\n"})
    ws = tmp_path / "ws"
    workspace.create(str(src), ws, tmp_path / "cache")
    before = snapshot.snapshot_tree(ws)
    (ws / "a.txt").write_text("1\nTWO\n3\n4\n")
    (ws / "gone.txt").unlink()
    (ws / "new.txt").write_text("n\n")
    (ws / "img.bin").write_bytes(b"\x00\x01\x02" * 10)
    (ws / "ignored").mkdir()
    (ws / "ignored" / "big.txt").write_text("z\n" * 100)
    ch = workspace.change(ws, before, snapshot.snapshot_tree(ws))
    assert (ch.lines_added, ch.lines_removed, ch.files_changed, ch.binary_files) == (3, 2, 4, 1)
    assert ch.lines_changed == 5
    assert git(ws, "status", "--porcelain").count("\n") == 4  # the real index is untouched by snapshots


def test_a_binary_file_whose_name_is_no_utf8_is_recorded(tmp_path: Path) -> None:
    """``hidden\\xff.bin`` counted as a changed binary file but was left out of ``binary_files`` and of the patch's
    ``# binary`` lines: its name, decoded with a replacement character, no longer named the file for ``ls-tree``."""
    src = make_repo(tmp_path / "src", {"a.txt": "1\n"})
    ws = tmp_path / "ws"
    workspace.create(str(src), ws, tmp_path / "cache")
    before = snapshot.snapshot_tree(ws)
    (ws / "ok.bin").write_bytes(b"\x00ok")
    Path(os.fsdecode(bytes(ws) + b"/hidden\xff.bin")).write_bytes(b"\x00hidden")
    ch = workspace.change(ws, before, snapshot.snapshot_tree(ws))
    assert (ch.files_changed, ch.binary_files) == (2, 2)
    assert sorted(b["sha256"] for b in ch.binaries) == sorted(hashlib.sha256(d).hexdigest() for d in (b"\x00ok", b"\x00hidden"))
    assert ch.patch.count("# binary ") == 2


def test_plain_folder_becomes_a_cached_template(tmp_path: Path) -> None:
    src = make_repo(tmp_path / "plain", {"x.py": "x = 1\n"}, commit=False)
    sha1 = workspace.create(str(src), tmp_path / "ws1", tmp_path / "cache")
    sha2 = workspace.create(str(src), tmp_path / "ws2", tmp_path / "cache")
    assert sha1 == sha2 and (tmp_path / "ws2" / "x.py").read_text() == "x = 1\n"
    assert len([p for p in (tmp_path / "cache").iterdir() if p.is_dir()]) == 1
    assert not (src / ".git").exists()


def test_protected_state_and_tampering(tmp_path: Path) -> None:
    ws = make_repo(tmp_path / "ws", {"conftest.py": "", "pkg/conftest.py": "", "tests/test_x.py": "", "other.py": ""})
    pats = ["conftest.py", "tests/*.py"]
    before = workspace.protected_state(ws, pats)
    assert sorted(before) == ["conftest.py", "pkg/conftest.py", "tests/test_x.py"]
    (ws / "pkg" / "conftest.py").write_text("rigged")
    (ws / "deep" / "er").mkdir(parents=True)
    (ws / "deep" / "er" / "conftest.py").write_text("new")
    (ws / "tests" / "test_x.py").unlink()
    (ws / "other.py").write_text("fine")
    assert workspace.tampered(before, workspace.protected_state(ws, pats)) == ["deep/er/conftest.py", "pkg/conftest.py", "tests/test_x.py"]


def test_missing_repo_is_a_workspace_error(tmp_path: Path) -> None:
    import pytest

    with pytest.raises(workspace.WorkspaceError, match="does not exist"):
        workspace.create(str(tmp_path / "nope"), tmp_path / "ws", tmp_path / "cache")


def test_excluded_tool_caches_are_not_changes(tmp_path: Path) -> None:
    src = make_repo(tmp_path / "src", {"a.txt": "1\n"})
    ws = tmp_path / "ws"
    workspace.create(str(src), ws, tmp_path / "cache")
    before = snapshot.snapshot_tree(ws)
    workspace.exclude(ws, [".aider*"])
    (ws / ".aider.tags.cache.v4").mkdir()
    (ws / ".aider.tags.cache.v4" / "cache.db").write_text("x\n" * 50)
    (ws / "a.txt").write_text("2\n")
    ch = workspace.change(ws, before, snapshot.snapshot_tree(ws))
    assert (ch.lines_added, ch.lines_removed, ch.files_changed) == (1, 1, 1)
    assert ".aider" not in git(ws, "ls-files")


def test_same_size_edit_right_after_checkout_is_seen(tmp_path: Path) -> None:
    """Racy git: an edit of equal size in the checkout's second, snapshotted a second later, must still count
    (the temporary index keeps the real index's mtime, so git re-hashes entries as new as the index)."""
    import time

    src = make_repo(tmp_path / "src", {"calc.py": "def add(a, b):\n    return a - b\n"})
    for i in range(3):
        ws = tmp_path / f"ws{i}"
        workspace.create(str(src), ws, tmp_path / "cache")
        before = snapshot.snapshot_tree(ws)
        p = ws / "calc.py"
        p.write_text(p.read_text().replace("a - b", "a + b"))
        time.sleep(1.1)  # the after-snapshot happens in a later second than checkout and edit
        ch = workspace.change(ws, before, snapshot.snapshot_tree(ws))
        assert (ch.lines_added, ch.lines_removed) == (1, 1), i


def test_clone_tree_is_the_snapshot_of_the_fresh_workspace(tmp_path: Path) -> None:
    """The "before" snapshot taken from the clone's commit equals hashing the fresh workspace's files, also for
    committed files a .gitignore names, executables, symlinks, nested folders and a plain-folder source."""
    import os

    src = make_repo(tmp_path / "src", {".gitignore": "*.log\nbuild/\n", "a.py": "A = 1\n", "deep/er/b.txt": "b\n",
                                        "run.sh": "#!/bin/sh\necho hi\n"})
    (src / "run.sh").chmod(0o755)
    os.symlink("a.py", src / "link.py")
    (src / "kept.log").write_text("tracked although ignored\n")
    git(src, "add", "-A", "--force")
    git(src, "commit", "-q", "-m", "more")
    plain = make_repo(tmp_path / "plain", {"x.py": "x = 1\n", ".gitignore": "x.py\n"}, commit=False)
    for i, source in enumerate((src, plain)):
        ws = tmp_path / f"ws{i}"
        made = workspace.clone(str(source), ws, tmp_path / "cache")
        assert made.tree is not None and made.tree == snapshot.snapshot_tree(ws), source
        assert made.commit == workspace.create(str(source), tmp_path / f"again{i}", tmp_path / "cache")
    assert workspace.clone(None, tmp_path / "empty", tmp_path / "cache").tree is None  # no template: hashed


def test_a_removed_git_folder_changes_nothing_recorded(tmp_path: Path) -> None:
    """The harness records through its own git folder beside the workspace: an agent that deletes the workspace's
    ``.git`` (or replaces it with a file) still has its change measured, against the right "before"."""
    import shutil

    ws = tmp_path / "ws"
    made = workspace.clone(str(make_repo(tmp_path / "src", {"a.txt": "1\n"})), ws, tmp_path / "cache")
    assert workspace.git_dir(ws) == (ws / ".git").absolute()
    assert workspace.desk_dir(ws) == (tmp_path / "ws.git") and (tmp_path / "ws.git" / "index").is_file()
    shutil.rmtree(ws / ".git")
    (ws / ".git").write_text("gitdir: /nowhere\n")
    (ws / "a.txt").write_text("2\n")
    ch = workspace.change(ws, made.tree, snapshot.snapshot_tree(ws, workspace.desk_dir(ws)))
    assert (ch.lines_added, ch.lines_removed, ch.files_changed) == (1, 1, 1)


def test_change_reads_numstat_and_patch_from_one_diff(tmp_path: Path) -> None:
    """``change`` splits one ``git diff -z --numstat -p`` into counts and patch: the patch is byte for byte
    ``git diff --binary``, names with tabs and newlines included."""
    src = make_repo(tmp_path / "src", {"a.txt": "1\n2\n", "bin.dat": "x"})
    ws = tmp_path / "ws"
    workspace.create(str(src), ws, tmp_path / "cache")
    before = snapshot.snapshot_tree(ws)
    (ws / "a.txt").write_text("1\nTWO\nthree\n")
    (ws / "bin.dat").write_bytes(b"\x00\x01")
    (ws / "odd\tna\nme.txt").write_text("o\n")
    after = snapshot.snapshot_tree(ws)
    ch = workspace.change(ws, before, after)
    assert (ch.lines_added, ch.lines_removed, ch.files_changed, ch.binary_files) == (3, 1, 3, 1)
    assert ch.binaries == ({"path": "bin.dat", "size": 2, "sha256": hashlib.sha256(b"\x00\x01").hexdigest()},)
    desk = str(workspace.desk_dir(ws))  # the trees live in the harness git folder, not in the agent's
    plain = git(ws, "--git-dir", desk, "diff", "--no-renames", before, after)
    note = f"# binary bin.dat: 2 bytes, sha256 {ch.binaries[0]['sha256']}\n"
    assert ch.patch == plain.replace("and b/bin.dat differ\n", "and b/bin.dat differ\n" + note)
    assert "GIT binary patch" not in ch.patch
    opted = workspace.change(ws, before, after, binary=True)  # a task's binary_diffs: true
    assert opted.patch == git(ws, "--git-dir", desk, "diff", "--binary", "--no-renames", before, after)


def test_a_clone_has_no_remote_as_after_git_remote_remove(tmp_path: Path) -> None:
    """``drop_origin`` leaves the fresh clone as ``git remote remove origin`` would: no remote, no remote-tracking
    ref (loose or packed), no reflog of one, the branch and its files untouched; git reads the result cleanly."""
    src = make_repo(tmp_path / "src", {"a.py": "A = 1\n"})
    ours = tmp_path / "ours"
    workspace.clone(str(src), ours, tmp_path / "cache")
    theirs = tmp_path / "theirs"
    git(tmp_path, "clone", "-q", "--shared", str(ours), str(theirs))
    git(theirs, "remote", "remove", "origin")
    for ws in (ours, theirs):
        assert git(ws, "remote") == ""
        assert git(ws, "for-each-ref", "--format=%(refname)") == "refs/heads/main\n"
        for folder in (ws / ".git" / "refs" / "remotes", ws / ".git" / "logs" / "refs" / "remotes"):
            assert [p for p in folder.rglob("*") if not p.is_dir()] == []
        assert "origin" not in (ws / ".git" / "config").read_text()
        assert git(ws, "status", "--porcelain") == ""
    assert git(ours, "config", "--local", "--list") == git(theirs, "config", "--local", "--list")


def test_a_checkout_is_what_a_shared_clone_makes_in_one_git_process(tmp_path: Path) -> None:
    """``checkout`` gives what ``git clone --shared`` then ``git remote remove origin`` give: the same files, branch,
    commit, local config and a clean status, reading the template's objects through ``alternates``."""
    src = make_repo(tmp_path / "src", {"a.py": "A = 1\n", "pkg/b.py": "B = 2\n"})
    template, _ = workspace.template_repo(src, tmp_path / "cache")
    head, tree = workspace.template_head(template)
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    workspace.checkout(ours, [template / ".git" / "objects"], head)
    git(tmp_path, "clone", "-q", "--shared", str(template), str(theirs))
    git(theirs, "remote", "remove", "origin")
    assert workspace.folder_hash(ours) == workspace.folder_hash(theirs)
    for ws in (ours, theirs):
        assert git(ws, "rev-parse", "HEAD", "HEAD^{tree}").split() == [head, tree]
        assert git(ws, "for-each-ref", "--format=%(refname)") == "refs/heads/main\n"
        assert git(ws, "status", "--porcelain") == ""
    assert git(ours, "config", "--local", "--list") == git(theirs, "config", "--local", "--list")
    assert list((template / ".git" / "objects").glob("??/*")) == []  # the template is one pack: no loose object


def test_a_checkout_never_writes_through_a_link_or_into_a_full_folder(tmp_path: Path) -> None:
    src = make_repo(tmp_path / "src", {"a.py": "A = 1\n"})
    template, _ = workspace.template_repo(src, tmp_path / "cache")
    head, _tree = workspace.template_head(template)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "link").symlink_to(elsewhere)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x\n")
    for dest in (tmp_path / "link", tmp_path / "full"):
        try:
            workspace.checkout(dest, [template / ".git" / "objects"], head)
        except workspace.WorkspaceError as exc:
            assert "not an empty folder" in str(exc)
        else:
            raise AssertionError(f"checked out into {dest}")
    assert list(elsewhere.iterdir()) == [] and sorted(p.name for p in (tmp_path / "full").iterdir()) == ["x"]


def tree_files(ws: Path, tree: str) -> dict[str, str]:
    """``{path: mode}`` of every entry of ``tree`` (read through the desk)."""
    listed = workspace.desk_git(["ls-tree", "-r", "-z", tree], ws).split("\0")
    return {line.split("\t", 1)[1]: line.split()[0] for line in listed if line}


def test_a_repository_the_agent_made_inside_is_recorded_as_its_files(tmp_path: Path) -> None:
    """``git init sub`` (no commit: git add refuses it) and ``cargo new lib`` (a commit: git add would record one
    gitlink, and the checks' clean tree would lack its files): the snapshot records their files as ordinary
    folders', keeps each nested ``.gitignore``'s rules, leaves out every ``.git`` entry and a FIFO, keeps a link as a
    link, and records what was deleted under a nested folder that had tracked files."""
    src = make_repo(tmp_path / "src", {"a.txt": "1\n", "lib/old.txt": "tracked\n", "odd [x]*/keep.txt": "k\n"})
    ws = tmp_path / "ws"
    workspace.create(str(src), ws, tmp_path / "cache")
    before = snapshot.snapshot_tree(ws)
    git(ws, "init", "-q", "sub")
    (ws / "sub" / "util.py").write_text("def f():\n    return 1\n")
    (ws / "sub" / "deep").mkdir()
    (ws / "sub" / "deep" / "x.txt").write_text("x\n")
    (ws / "sub" / "link").symlink_to("deep")
    os.mkfifo(ws / "sub" / "pipe")
    (ws / "lib" / "old.txt").unlink()
    git(ws, "init", "-q", "lib")
    (ws / "lib" / ".gitignore").write_text("/target\n")
    (ws / "lib" / "target").mkdir()
    (ws / "lib" / "target" / "build.o").write_text("object\n")
    (ws / "lib" / "main.rs").write_text("fn main() {}\n")
    git(ws / "lib", "add", "-A")
    git(ws / "lib", "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "new crate")
    git(ws / "odd [x]*", "init", "-q")
    (ws / "odd [x]*" / "new.txt").write_text("n\n")
    after = snapshot.snapshot_tree(ws)
    files = tree_files(ws, after)
    assert files == {
        "a.txt": "100644", "sub/util.py": "100644", "sub/deep/x.txt": "100644", "sub/link": "120000",
        "lib/.gitignore": "100644", "lib/main.rs": "100644", "odd [x]*/keep.txt": "100644", "odd [x]*/new.txt": "100644",
    }
    ch = workspace.change(ws, before, after)
    assert ch.files_changed == 7  # 6 new files and a link, old.txt gone
    assert not (workspace.desk_dir(ws) / "info" / "exclude").exists()  # the harness's exclusions are gone again


def test_a_snapshot_without_nested_repositories_stays_one_git_add(tmp_path: Path) -> None:
    """The nested-repository path is taken only when git says so: a folder named ``.git``-like or a file named
    ``.git`` at the top changes nothing, and git's other failures are still errors."""
    src = make_repo(tmp_path / "src", {"a.txt": "1\n"})
    ws = tmp_path / "ws"
    workspace.create(str(src), ws, tmp_path / "cache")
    (ws / "x.git").mkdir()
    (ws / "x.git" / "f").write_text("f\n")
    assert set(tree_files(ws, snapshot.snapshot_tree(ws))) == {"a.txt", "x.git/f"}
    (ws / "locked").mkdir()
    (ws / "locked" / "secret.txt").write_text("s\n")
    (ws / "locked" / "secret.txt").chmod(0)
    if os.geteuid() != 0:  # root reads a mode-000 file anyway
        with pytest.raises(WorkspaceError):
            snapshot.snapshot_tree(ws)


def test_uncommitted_changes_of_a_local_repo_are_named_and_the_rest_left_out(tmp_path: Path) -> None:
    """What a workspace (its source's HEAD) does not hold: changed, deleted and untracked files, not the excluded
    paths (the task file, the results folder) nor ignored ones; asked once per process and session."""
    from helpers import make_repo

    from pytest_agentrace.run import workspace

    repo = make_repo(tmp_path / "app", {"a.py": "x = 1\n", "b.py": "y = 2\n", ".gitignore": "*.log\n"})
    assert workspace.uncommitted(repo) == ()
    (repo / "a.py").write_text("x = 3\n")
    (repo / "b.py").unlink()
    (repo / "new dir").mkdir()
    (repo / "new dir" / "c.py").write_text("")
    (repo / "run.log").write_text("ignored\n")
    (repo / "tasks").mkdir()
    (repo / "tasks" / "t.yaml").write_text("name: t\n")
    (repo / ".agentrace").mkdir()
    (repo / ".agentrace" / "x").write_text("")
    got = workspace.uncommitted(repo, ["tasks/t.yaml", ".agentrace"])
    assert got == ("a.py", "b.py", "new dir/c.py")
    (repo / "more.py").write_text("")
    assert workspace.uncommitted(repo, [".agentrace", "tasks/t.yaml"]) == got  # once per process, repository, session
    assert workspace.uncommitted(repo, [".agentrace", "tasks/t.yaml"], "s2") == (*got[:2], "more.py", got[2])
    assert workspace.uncommitted(tmp_path) == ()  # no repository: git cannot tell


def test_a_session_notes_uncommitted_changes_of_the_repo_it_clones(pytester: pytest.Pytester, xdist: list[str]) -> None:
    from helpers import git, make_repo

    make_repo(pytester.path / "app", {"calc.py": "def add(a, b):\n    return a + b\n"})
    pytester.makefile(".yaml", t='name: t\ndescription: hi\nrepo: app\ntest_command: "true"\nagents: [noop]\n')
    res = pytester.runpytest("--agentrace", "--agentrace-out", "out", "--agentrace-reps", "2", *xdist)
    assert "uncommitted change" not in res.stdout.str()
    (pytester.path / "app" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    res = pytester.runpytest("--agentrace", "--agentrace-out", "out2", "--agentrace-reps", "2", *xdist)
    head = git(pytester.path / "app", "rev-parse", "HEAD").strip()[:12]
    res.stdout.fnmatch_lines([f"*app has 1 uncommitted change(s) (calc.py): runs start from its last commit {head};"
                              " commit them to include them (2 runs: *"])


def test_an_arms_overlay_inside_the_repo_is_in_its_own_arms_workspace_only(pytester: pytest.Pytester,
                                                                             xdist: list[str]) -> None:
    """A trial committed inside the project it evaluates (``source = ".."``): the plain arm's workspace does not hold
    the instruction-file arm's overlay folder, and that arm sees its file once, at the top."""
    import json

    from helpers import make_repo

    make_repo(pytester.path, {
        "src/app.py": "PORT = 8451\n",
        "evals/overlay-instr/AGENTS.md": "The port is 8451.\n",
        "evals/trial.toml": '[defaults]\nreps = 1\nbaseline = "plain"\n[[repos]]\nname = "proj"\nsource = ".."\n'
                            '[[arms]]\nname = "plain"\n[[arms]]\nname = "instr"\noverlay = "overlay-instr"\n'
                            '[[agents]]\nname = "lister"\ncommand = ["sh", "-c", "find . -name AGENTS.md", "{prompt_file}"]\n'
                            '[[questions]]\nid = "files"\nrepo = "proj"\nprompt = "list"\nexpect = ["AGENTS"]\n'})
    pytester.runpytest("--agentrace", "evals/trial.toml", "--agentrace-out", "out", *xdist)
    seen = {arm: (pytester.path / "out/runs/files" / arm / "lister/1/raw.out").read_text().split()
            for arm in ("plain", "instr")}
    assert seen == {"plain": [], "instr": ["./AGENTS.md"]}, json.dumps(seen)
